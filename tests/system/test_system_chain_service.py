"""The service and the tamper-evident ledger: a budget whose state or log was altered is
refused (503 ``ledger_integrity``, naming it) before the service answers anything about
it, at start-up and while running; the other budgets are served; nothing is spent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import PG_URL, pg_available, unique_schema
from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve.ledger.base import utcnow
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Hc8TzL2wN4cVb6mRx9Qs3Kd7Jf"
OWN = {"Authorization": f"Bearer {OWNER}"}
Q = {"type": "count", "privacy": {"type": "pure", "eps": 0.1}}


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def new_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    from dpsieve.ledger import PostgresStore, SQLiteStore

    if request.param == "postgres" and (reason := pg_available()):
        pytest.skip(reason)
    schema = unique_schema()
    made: list[Any] = []

    def make() -> Any:
        s = (SQLiteStore(tmp_path / "l.db") if request.param == "sqlite"
             else PostgresStore(PG_URL, schema=schema))
        made.append(s)
        return s

    yield make
    for s in made:
        s.close()
    if request.param == "postgres":
        s = PostgresStore(PG_URL, schema=schema)
        s.drop_schema()
        s.close()


def _setup(c: TestClient, csv: Path) -> dict[str, str]:
    for name in ("a", "b"):
        r = c.post("/v1/datasets", headers=OWN, json={
            "name": name, "path": str(csv), "infer_types": True,
                "budget": {"type": "pure", "eps": 1.0}})
        assert r.status_code == 201, r.text
    key = c.post("/v1/analysts", headers=OWN, json={"name": "ana"}).json()["api_key"]
    for name in ("a", "b"):
        c.post(f"/v1/datasets/{name}/grants", headers=OWN, json={"analyst": "ana"})
    ana = {"X-API-Key": key}
    for name in ("a", "a", "b"):
        assert c.post(f"/v1/datasets/{name}/queries", headers=ana, json=Q).status_code == 200
    return ana


def _refused(c: TestClient, ana: dict[str, str], name: str) -> None:
    for method, path, body in (("POST", f"/v1/datasets/{name}/queries", Q),
                               ("GET", f"/v1/datasets/{name}/budget", None),
                               ("GET", f"/v1/datasets/{name}/curves", None)):
        r = c.request(method, path, headers=ana, json=body)
        assert r.status_code == 503, (path, r.text)
        assert r.json()["error"] == "ledger_integrity"
        assert r.json()["dataset"] == name
        assert f"{name!r}" in r.json()["message"]


def _reset(store: Any) -> None:
    with store._tx(write=True) as cur:
        cur.run("UPDATE budgets SET state = initial, n_spends = 0 WHERE budget_id = 'a'")


def _insert(store: Any) -> None:
    with store._tx(write=True) as cur:
        cur.run("INSERT INTO audit (ts, budget_id, principal, event, key, payload)"
                " VALUES (?, 'a', 'x', 'decision', 'k', '{\"admitted\":false}')", (utcnow(),))


@pytest.mark.parametrize("tamper", [_reset, _insert])
def test_an_altered_budget_is_refused_while_running_and_at_start_up(
        new_store: Any, tmp_path: Path, tamper: Any) -> None:
    csv = write_csv(tmp_path / "people.csv")
    store = new_store()
    with TestClient(create_app(Settings(owner_key=OWNER), store=store),
                    raise_server_exceptions=False) as c:
        ana = _setup(c, csv)
        tamper(new_store())  # another process with write access to the database
        r = c.post("/v1/datasets/a/queries", headers=ana, json=Q)  # before it answers
        assert r.status_code == 503, r.text
        _refused(c, ana, "a")
        assert c.post("/v1/datasets/b/queries", headers=ana, json=Q).status_code == 200
        spent = len(store.history("b"))
    fresh = new_store()  # a restart: the whole log is replayed before the first answer
    with TestClient(create_app(Settings(owner_key=OWNER), store=fresh),
                    raise_server_exceptions=False) as c:
        _refused(c, ana, "a")
        r = c.put("/v1/datasets/a/budget", headers=OWN, json={"type": "pure", "eps": 9.0})
        assert r.status_code == 503, r.text  # an altered budget cannot be set anew either
        assert c.post("/v1/datasets/b/queries", headers=ana, json=Q).status_code == 200
        assert len(fresh.history("b")) == spent + 1
