"""Issue 18, item 5, end to end: a stored filter state that violates an invariant is not
served. The ledger rebuilds the filter with ``filter_from_json`` on every read and spend;
a tampered state (``pure_dp`` spent -5, which used to read as 6 eps left) is refused by a
read naming the field, and by a spend as an altered budget (its state is not the replay
of its audit log), and nothing is spent."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Pg7RmZ2vK9pLw4sN8bYc3FhJ6t"
Q = {"type": "count", "privacy": {"type": "pure", "eps": 0.2}}


def _tamper(db: Path, **state: object) -> None:
    con = sqlite3.connect(db)
    try:
        rows = list(con.execute("SELECT rowid, state FROM budgets"))
        assert rows
        for rowid, text in rows:
            d = json.loads(text)
            d["state"].update(state)
            con.execute("UPDATE budgets SET state = ? WHERE rowid = ?", (json.dumps(d), rowid))
        con.commit()
    finally:
        con.close()


def _spends(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return int(con.execute("SELECT count(*) FROM spends").fetchone()[0])
    finally:
        con.close()


def test_a_tampered_state_is_refused_naming_the_field(tmp_path: Path) -> None:
    db = tmp_path / "ledger.db"
    app = create_app(Settings(owner_key=OWNER), store=SQLiteStore(db))
    with TestClient(app, raise_server_exceptions=False) as c:
        own = {"Authorization": f"Bearer {OWNER}"}
        r = c.post("/v1/datasets", headers=own, json={
            "name": "people", "path": str(write_csv(tmp_path / "people.csv")), "infer_types": True,
            "budget": {"type": "pure", "eps": 1.0}})
        assert r.status_code == 201, r.text
        key = c.post("/v1/analysts", json={"name": "ana"}, headers=own).json()["api_key"]
        ana = {"X-API-Key": key}
        c.post("/v1/datasets/people/grants", json={"analyst": "ana"}, headers=own)
        assert c.post("/v1/datasets/people/queries", json=Q, headers=ana).status_code == 200
        spent = _spends(db)
        _tamper(db, spent="-5/1")
        # a read: the state is parsed and refused, naming the field
        r = c.get("/v1/datasets/people/budget", headers=ana)
        assert 400 <= r.status_code < 500, (r.status_code, r.text)
        body = r.json()
        assert body["parameter"] == "spent", body
        assert "'spent'" in body["message"], body
        assert "stored state" in body["message"], body
        # a spend: the state is not the replay of the audit log, so the budget is refused
        # as altered before the filter reads it (and from then on, reads too)
        for method, path in (("post", "/v1/datasets/people/queries"),
                             ("get", "/v1/datasets/people/budget")):
            r = c.request(method.upper(), path, headers=ana,
                          json=Q if method == "post" else None)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert r.json()["error"] == "ledger_integrity"
            assert r.json()["dataset"] == "people"
            assert "'people'" in r.json()["message"]
        assert _spends(db) == spent  # the refused query spent nothing
