"""The service and the tamper-evident ledger: a budget whose state or log was altered is
refused (503 ``ledger_integrity``, naming it) before the service answers anything about
it, at start-up and while running; the other budgets are served; nothing is spent."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from conftest import PG_URL, pg_available, unique_schema
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


# -- every tampering, at start-up ------------------------------------------------------
# Edits to older rows, reordered rows and deleted spend rows leave the stored state as
# the replay of the log's end, so a running store (which checks the state and the chain's
# end before each spend) does not see them; the whole replay at start-up does.
def _unlock(store: Any) -> list[str]:
    """Statements that lift the append-only trigger (as the tables' owner, or anyone who
    can write the SQLite file, could)."""
    from dpsieve.ledger import SQLiteStore

    return (["DROP TRIGGER IF EXISTS audit_no_update", "DROP TRIGGER IF EXISTS audit_no_delete"]
            if isinstance(store, SQLiteStore)
            else ["ALTER TABLE audit DISABLE TRIGGER audit_no_change"])


def _delete_spend(store: Any) -> None:
    with store._tx(write=True) as cur:
        cur.run("DELETE FROM spends WHERE budget_id = 'a' AND key = (SELECT min(key) FROM"
                " spends WHERE budget_id = 'a')")


_ROW = ("ts", "principal", "event", "key", "payload", "chain_n", "chain_prev", "chain_hash",
        "chain_data")


def _reorder(store: Any) -> None:
    """The budget's first two admitted decisions swap places (every column but seq)."""
    with store._tx(write=True) as cur:
        for st in _unlock(store):
            cur.run(st)
        (s1, *v1), (s2, *v2) = cur.run(
            f"SELECT seq, {', '.join(_ROW)} FROM audit WHERE budget_id = 'a' AND event ="
            " 'decision' ORDER BY seq LIMIT 2").all()
        sets = ", ".join(f"{c} = ?" for c in _ROW)
        cur.run(f"UPDATE audit SET {sets} WHERE seq = ?", (*v2, s1))
        cur.run(f"UPDATE audit SET {sets} WHERE seq = ?", (*v1, s2))


def _edit(store: Any) -> None:
    """The first admitted decision's charge rewritten (a spend made to look cheaper)."""
    with store._tx(write=True) as cur:
        for st in _unlock(store):
            cur.run(st)
        seq, payload = cur.run("SELECT seq, payload FROM audit WHERE budget_id = 'a' AND"
                               " event = 'decision' ORDER BY seq LIMIT 1").one()
        assert '"eps": 0.1' in payload or '"eps":0.1' in payload, payload
        cur.run("UPDATE audit SET payload = ? WHERE seq = ?",
                (str(payload).replace("0.1", "0.01"), seq))


def _delete_row(store: Any) -> None:
    with store._tx(write=True) as cur:
        for st in _unlock(store):
            cur.run(st)
        cur.run("DELETE FROM audit WHERE seq = (SELECT min(seq) FROM audit WHERE"
                " budget_id = 'a' AND event = 'decision')")


@pytest.mark.parametrize("tamper", [_reset, _insert, _delete_spend, _reorder, _edit,
                                    _delete_row])
def test_every_tampering_is_refused_at_start_up_and_by_verify(
        new_store: Any, tmp_path: Path, tamper: Any, caplog: pytest.LogCaptureFixture
        ) -> None:
    """Reset a budget, insert an audit row, delete a spend, reorder, edit or delete an
    audit row, then restart: before the service answers anything, budget 'a' is refused
    naming it (503 ledger_integrity on every route of it, nothing spent), the start-up log
    names it, ``dpsieve budget verify`` exits 1 naming it; 'b' is served and verifies."""
    import logging

    from typer.testing import CliRunner

    from dpsieve.cli import app
    from dpsieve.ledger import SQLiteStore

    csv = write_csv(tmp_path / "people.csv")
    store = new_store()
    with TestClient(create_app(Settings(owner_key=OWNER), store=store),
                    raise_server_exceptions=False) as c:
        ana = _setup(c, csv)
    tamper(new_store())
    spent = len(store.history("b"))
    fresh = new_store()
    with caplog.at_level(logging.ERROR, logger="dpsieve.service"):
        app_ = create_app(Settings(owner_key=OWNER), store=fresh)
    logged = [m for m in (r.getMessage() for r in caplog.records) if "verification" in m]
    assert logged, caplog.text
    assert all(m.startswith("budget 'a' fails verification") for m in logged), logged
    with TestClient(app_, raise_server_exceptions=False) as c:
        _refused(c, ana, "a")  # the first requests it answers
        r = c.get("/v1/datasets/a/budget", headers=OWN)
        assert r.status_code == 503, r.text  # the owner too
        assert c.post("/v1/datasets/b/queries", headers=ana, json=Q).status_code == 200
    assert len(fresh.history("b")) == spent + 1
    url = f"sqlite:///{tmp_path / 'l.db'}" if isinstance(fresh, SQLiteStore) else PG_URL
    out = CliRunner().invoke(app, ["budget", "verify", "--database-url", url,
                                   "--schema", getattr(fresh, "schema", "dpsieve")])
    assert out.exit_code == 1, out.output
    assert "'a': ALTERED" in out.output
    assert "'b': ok" in out.output
