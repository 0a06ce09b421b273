"""Children over HTTP (routes/children.py): an analyst opens a child under a data set's
budget (charged once, with the child), questions it one at a time with plans, windows or
weights the service evaluates on the data, grants it to another analyst; a refused
request charges and writes nothing; a key that may not ask a child gets the 404 of one
that does not exist; the data owner alone appends a steward's counts."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "owner-" + "c" * 40
TABLES = ("budgets", "spends", "children", "child_grants", "child_answers", "audit")


class Env:
    def __init__(self, tmp: Path, budget: dict[str, Any]) -> None:
        self.db = tmp / "ledger.db"
        self.store = SQLiteStore(self.db)
        self.client = TestClient(create_app(Settings(owner_key=OWNER), store=self.store),
                                 raise_server_exceptions=False)
        self.owner = {"Authorization": f"Bearer {OWNER}"}
        self.csv = write_csv(tmp / "people.csv")
        r = self.post("/v1/datasets", self.owner, {"name": "people", "path": str(self.csv),
                                                   "infer_types": True, "budget": budget})
        assert r.status_code == 201, r.text
        self.keys: dict[str, dict[str, str]] = {"owner": self.owner}
        for name in ("ana", "bob", "eve"):
            r = self.post("/v1/analysts", self.owner, {"name": name})
            self.keys[name] = {"X-API-Key": r.json()["api_key"]}
            if name != "eve":
                self.post("/v1/datasets/people/grants", self.owner, {"analyst": name})

    def post(self, url: str, who: dict[str, str], body: Any, **kw: Any) -> Any:
        return self.client.post(url, headers={**who, **kw.pop("headers", {})}, json=body)

    def ask(self, who: str, child: str, body: Any, key: str | None = None) -> Any:
        h = {"Idempotency-Key": key} if key else {}
        return self.post(f"/v1/datasets/people/children/{child}/questions", self.keys[who],
                         body, headers=h)

    def open(self, who: str, child: str, kind: str, spec: Any, key: str | None = None
             ) -> Any:
        h = {"Idempotency-Key": key} if key else {}
        return self.post("/v1/datasets/people/children", self.keys[who],
                         {"child": child, "kind": kind, "spec": spec}, headers=h)

    def snapshot(self) -> dict[str, list[Any]]:
        with sqlite3.connect(self.db) as con:
            return {t: con.execute(f"SELECT * FROM {t}").fetchall() for t in TABLES}

    def eps_left(self) -> float:
        return float(self.store.load_filter("people").remaining()["eps"])


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    e = Env(tmp_path, {"type": "pure", "eps": 2.0})
    yield e
    e.store.close()


def test_an_analyst_opens_questions_and_grants_a_sparse_vector(env: Env) -> None:
    r = env.open("ana", "sv", "sparse_vector", {"eps": 0.5, "positives": 2}, key="o1")
    assert r.status_code == 201, r.text
    assert r.json()["owner"] == "ana"
    assert r.headers["Idempotency-Key"] == "o1"
    assert env.eps_left() == 1.5
    again = env.open("ana", "sv", "sparse_vector", {"eps": 0.5, "positives": 2}, key="o1")
    assert again.status_code == 201
    assert again.json()["replayed"]
    assert env.eps_left() == 1.5  # a retried open is charged once
    q = {"question": {"type": "count", "where": [{"column": "age", "op": ">=",
                                                  "value": 40}]}, "threshold": -1e6}
    r = env.ask("ana", "sv", q, key="q1")
    assert r.status_code == 200, r.text
    assert r.json()["above"] is True
    assert env.ask("ana", "sv", q, key="q1").json() == r.json()  # answered once
    assert env.ask("bob", "sv", q).status_code == 404  # not granted: as if absent
    r = env.client.get("/v1/datasets/people/children", headers=env.keys["bob"])
    assert r.json()["children"] == []
    r = env.post("/v1/datasets/people/children/sv/grants", env.keys["bob"],
                 {"analyst": "bob"})
    assert r.status_code == 404  # bob may not see the child: as if absent
    r = env.post("/v1/datasets/people/children/sv/grants", env.keys["ana"],
                 {"analyst": "eve"})
    assert r.status_code == 404  # eve may not see the data set
    r = env.post("/v1/datasets/people/children/sv/grants", env.keys["ana"],
                 {"analyst": "bob"})
    assert r.status_code == 201, r.text
    assert env.ask("bob", "sv", q).json()["positives_left"] == 0
    r = env.ask("bob", "sv", q)
    assert r.status_code == 409
    assert r.json()["error"] == "child_exhausted"
    r = env.client.get("/v1/datasets/people/children/sv", headers=env.keys["bob"])
    assert r.status_code == 200
    assert r.json()["public"]["exhausted"] is True
    assert "threshold_noise" not in r.text
    audit = env.client.get("/v1/datasets/people/audit", headers=env.owner).json()
    assert [e["event"] for e in audit].count("child_answer") == 2
    assert env.eps_left() == 1.5  # questions are free
    page = env.client.get("/v1/datasets/people/budget", headers=env.keys["ana"]).json()
    assert [h["description"] for h in page["history"]] == [
        "opening the sparse vector child 'sv'"]


def test_counter_by_windows_and_the_owners_counts(tmp_path: Path) -> None:
    e = Env(tmp_path, {"type": "gdp", "mu": 2.0})
    try:
        r = e.open("ana", "ctr", "counter", {"mu": 1.0, "time_column": "age"})
        assert r.status_code == 201, r.text
        for u in (30, 45, 70):
            r = e.ask("ana", "ctr", {"until": u})
            assert r.status_code == 200, r.text
            assert r.json()["until"] == u
        assert e.ask("ana", "ctr", {"until": 70}).status_code == 422
        assert e.store.child_state("people", "ctr")["total"] == 200  # ages 20..69
        assert e.ask("ana", "ctr", {"count": 5}).status_code == 403  # the owner's only
        r = e.ask("owner", "ctr", {"count": 5})
        assert r.status_code == 200, r.text
        assert e.store.child_state("people", "ctr")["total"] == 205
    finally:
        e.store.close()


def test_cache_over_a_column(env: Env) -> None:
    r = env.open("ana", "cache", "cache", {"eps": 0.5, "column": "city", "categories":
                                           ["a", "b", "c"], "updates": 3,
                                           "tolerance": 5.0, "expected_rows": 200.0})
    assert r.status_code == 201, r.text
    r = env.ask("ana", "cache", {"weights": [1, 1, 1]})
    assert r.status_code == 200
    assert set(r.json()) >= {"value", "updated", "updates_left"}
    assert env.ask("ana", "cache", {"weights": [1, 1]}).status_code == 422
    assert env.ask("ana", "cache", {"until": 3}).status_code == 422


@pytest.mark.parametrize(("body", "status"), [
    ({"child": "x", "kind": "sparse_vector", "spec": {"eps": 5.0}}, 409),  # over budget
    ({"child": "x", "kind": "counter", "spec": {"mu": 1.0}}, 422),  # GDP on a pure budget
    ({"child": "x", "kind": "sparse_vector", "spec": {"eps": "a"}}, 422),
    ({"child": "x", "kind": "sparse_vector", "spec": {"eps": 0.1, "extra": 1}}, 422),
    ({"child": "x", "kind": "cache", "spec": {"eps": 0.1, "column": "nope",
                                              "categories": [1], "updates": 1,
                                              "tolerance": 1, "expected_rows": 1}}, 422),
    ({"child": "x", "kind": "counter", "spec": {"mu": 1.0, "time_column": "city"}}, 422),
    ({"child": "x", "kind": "nope", "spec": {}}, 422),
    ({"child": "", "kind": "sparse_vector", "spec": {"eps": 0.1}}, 422),
    ({"child": "x\x00", "kind": "sparse_vector", "spec": {"eps": 0.1}}, 422),
    ({"child": "x", "kind": "sparse_vector", "spec": [1]}, 422),
])
def test_refused_opens_charge_and_write_nothing(env: Env, body: Any, status: int) -> None:
    before = env.snapshot()
    r = env.post("/v1/datasets/people/children", env.keys["ana"], body)
    assert r.status_code == status, r.text
    assert "Traceback" not in r.text
    after = env.snapshot()
    assert after["children"] == before["children"]
    assert after["spends"] == before["spends"]
    assert after["budgets"] == before["budgets"]
    new = [row for row in after["audit"] if row not in before["audit"]]
    assert all(row[4] in ("request", "decision") for row in new), new  # refusal records


@pytest.mark.parametrize("body", [
    {}, {"threshold": 1.0}, {"question": {"type": "count"}},
    {"question": {"type": "count"}, "threshold": 1.0, "until": 3},
    {"question": {"type": "nope"}, "threshold": 1.0},
    {"question": {"type": "sum", "column": "income", "lower": 0, "upper": 1e9},
     "threshold": 1.0},
    {"weights": [0.5]}, {"until": 1}, {"count": -1}, {"threshold": "x", "question": {}},
])
def test_refused_questions_write_nothing(env: Env, body: Any) -> None:
    assert env.open("ana", "sv", "sparse_vector", {"eps": 0.5}).status_code == 201
    before = env.snapshot()
    r = env.ask("ana", "sv", body)
    assert 400 <= r.status_code < 500, r.text
    assert env.snapshot() == before


def test_unknown_data_set_child_and_keys(env: Env) -> None:
    q = {"question": {"type": "count"}, "threshold": 0.0}
    assert env.ask("eve", "sv", q).status_code == 404  # data set not granted
    assert env.ask("ana", "absent", q).status_code == 404
    r = env.client.get("/v1/datasets/people/children/absent", headers=env.keys["ana"])
    assert r.status_code == 404
    r = env.client.post("/v1/datasets/people/children/sv/questions", json=q)
    assert r.status_code == 401
