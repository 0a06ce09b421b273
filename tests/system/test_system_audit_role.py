"""Issue 11, "Audit log that the service itself cannot rewrite": on PostgreSQL the service
runs under a role that may only INSERT into (and read) the audit table. Checked against a
real server: the documented set-up (docs/service.md, the SQL of ``audit_role_sql``) is
applied to fresh roles, the whole HTTP service runs under the service role, and every way
that role could rewrite the log is refused by PostgreSQL itself (not by our code)."""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from conftest import PG_URL, pg_available
from dpsieve.ledger.base import canonical_json, utcnow
from dpsieve.ledger.chain import row_hash
from dpsieve.ledger.postgres import PostgresStore, audit_role_sql
from dpsieve.service import Settings, create_app

pytestmark = pytest.mark.postgres

OWNER = "owner-" + "r" * 40
COUNT = {"type": "count", "privacy": {"type": "pure", "eps": 0.5}}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "service.md"


def _url(role: str) -> str:
    return re.sub(r"//[^@/]*@", f"//{role}@", PG_URL, count=1)


@pytest.fixture
def roles() -> Iterator[dict[str, str]]:
    """A schema owned by a fresh owner role, and a fresh service role granted per the docs."""
    reason = pg_available()
    if reason:
        pytest.skip(reason)
    import psycopg

    sfx = uuid.uuid4().hex[:10]
    schema, owner, svc = f"t_audit_{sfx}", f"t_owner_{sfx}", f"t_service_{sfx}"
    su = psycopg.connect(PG_URL, autocommit=True)
    db = su.execute("SELECT current_database()").fetchone()[0]
    su.execute(f"CREATE ROLE {owner} LOGIN")
    su.execute(f"CREATE ROLE {svc} LOGIN")
    su.execute(f'GRANT CREATE ON DATABASE "{db}" TO {owner}')
    try:
        PostgresStore(_url(owner), schema=schema).close()  # created and migrated by its owner
        with psycopg.connect(_url(owner), autocommit=True) as c:
            for stmt in audit_role_sql(schema, svc):
                c.execute(stmt)
        yield {"schema": schema, "owner": owner, "service": svc}
    finally:
        su.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        su.execute(f'REVOKE CREATE ON DATABASE "{db}" FROM {owner}')
        su.execute(f"DROP ROLE IF EXISTS {svc}")
        su.execute(f"DROP ROLE IF EXISTS {owner}")
        su.close()


def test_docs_show_the_tested_grants() -> None:
    text = DOCS.read_text()
    for stmt in audit_role_sql("dpsieve", "dpsieve_service"):
        assert stmt + ";" in text, stmt


def test_service_runs_under_a_role_that_may_only_append_to_the_audit_log(
        roles: dict[str, str], tmp_path: Path) -> None:
    import psycopg

    schema, svc = roles["schema"], roles["service"]
    store = PostgresStore(_url(svc), schema=schema)  # no CREATE privilege: starts anyway
    own = {"Authorization": f"Bearer {OWNER}"}
    try:
        app = create_app(Settings(owner_key=OWNER), store=store)
        with TestClient(app, raise_server_exceptions=False) as c:
            csv = write_csv(tmp_path / "people.csv")
            for name in ("people", "other", "forged", "clean"):
                r = c.post("/v1/datasets", headers=own, json={
                    "name": name, "path": str(csv), "infer_types": True,
                        "budget": {"type": "pure", "eps": 1.0}})
                assert r.status_code == 201, r.text
            assert c.put("/v1/datasets/other/budget", headers=own,
                         json={"type": "pure", "eps": 2.0}).status_code == 200
            r = c.post("/v1/analysts", headers=own, json={"name": "ana"})
            assert r.status_code == 201, r.text
            ana, kid = {"X-API-Key": r.json()["api_key"]}, r.json()["key_id"]
            for name in ("people", "forged"):
                assert c.post(f"/v1/datasets/{name}/grants", headers=own,
                              json={"analyst": "ana"}).status_code == 201
            assert c.post("/v1/datasets/forged/queries", headers=ana,
                          json=COUNT).status_code == 200
            assert c.post("/v1/datasets/people/queries", headers=ana,
                          json=COUNT).status_code == 200
            key = {**ana, "Idempotency-Key": "k1"}
            first = c.post("/v1/datasets/people/queries", headers=key, json=COUNT)
            assert first.status_code == 200
            again = c.post("/v1/datasets/people/queries", headers=key, json=COUNT)
            assert again.json()["replayed"] is True
            assert again.json()["value"] == first.json()["value"]  # replayed, not recharged
            assert c.post("/v1/datasets/people/queries", headers=ana,
                          json=COUNT).status_code == 409  # refused: logged, not charged
            assert c.get("/v1/datasets/people/budget", headers=ana).status_code == 200
            assert c.get("/v1/datasets/people/curves", headers=ana).status_code == 200
            assert c.get("/readyz").status_code == 200
            log = c.get("/v1/datasets/people/audit", headers=own)
            assert log.status_code == 200
            events = [e["event"] for e in log.json()]
            assert events.count("answer") == 2
            assert "replay" in events
            assert c.delete(f"/v1/analysts/ana/keys/{kid}", headers=own).status_code == 204
            assert c.get("/v1/datasets", headers=ana).status_code == 401
        rows = len(store.audit())
    finally:
        store.close()

    attempts: list[tuple[str, Any]] = [
        ("UPDATE audit SET payload = '{}'", "InsufficientPrivilege"),
        ("DELETE FROM audit", "InsufficientPrivilege"),
        ("TRUNCATE audit", "InsufficientPrivilege"),
        ("ALTER TABLE audit DISABLE TRIGGER ALL", "InsufficientPrivilege"),
        ("DROP TRIGGER audit_no_change ON audit", "InsufficientPrivilege"),
        ("DROP TABLE audit", "InsufficientPrivilege"),
        ("CREATE TABLE audit2 (x int)", "InsufficientPrivilege"),
        # the rest of the ledger: only what the service does (narrowed grants)
        ("DELETE FROM spends", "InsufficientPrivilege"),
        ("UPDATE spends SET decision = '{}'", "InsufficientPrivilege"),
        ("DELETE FROM budgets", "InsufficientPrivilege"),
        ("UPDATE budgets SET budget_id = 'x'", "InsufficientPrivilege"),
        ("UPDATE principals SET role = 'owner'", "InsufficientPrivilege"),
        ("DELETE FROM principals", "InsufficientPrivilege"),
        ("DELETE FROM grants", "InsufficientPrivilege"),
        ("DELETE FROM datasets", "InsufficientPrivilege"),
        ("UPDATE api_keys SET principal = 'ana'", "InsufficientPrivilege"),
        ("INSERT INTO ready VALUES (2, 't')", "InsufficientPrivilege"),
        ("TRUNCATE spends", "InsufficientPrivilege"),
        # appending is allowed (the service appends): a row outside the chain
        ("INSERT INTO audit (ts, budget_id, principal, event, key, payload)"
         " VALUES ('t', 'other', 'x', 'note', '', '{}')", None),
    ]
    with psycopg.connect(_url(svc), autocommit=True,
                         options=f"-c search_path={schema}") as c:
        for sql, refused in attempts:
            if refused is None:
                c.execute(sql)
                continue
            with pytest.raises(psycopg.Error) as e:
                c.execute(sql)
            assert type(e.value).__name__ == refused, (sql, e.value)
        after = c.execute("SELECT count(*) FROM audit").fetchone()[0]
    assert after == rows + 1  # every row kept; the one append added
    # What the role must be able to do (update a budget's state, append audit rows) can
    # alter a budget; each way is seen by verify and by the service at start-up, which
    # refuses that budget naming it and serves the others: a reset state ('people'), a
    # row appended outside the chain ('other'), a well-hashed budget_set appended after
    # spends with the state set back to match ('forged': SHA-256 has no secret).
    with psycopg.connect(_url(svc), autocommit=True,
                         options=f"-c search_path={schema}") as c:
        c.execute("UPDATE budgets SET state = initial WHERE budget_id = 'people'")
        c.execute("UPDATE budgets SET state = initial WHERE budget_id = 'forged'")
        # 'forged' has one admitted spend: append the reset at the chain's end
        n, prev = c.execute("SELECT chain_n, chain_hash FROM audit WHERE budget_id ="
                            " 'forged' ORDER BY seq DESC LIMIT 1").fetchone()
        initial = c.execute("SELECT initial FROM budgets WHERE budget_id = 'forged'"
                            ).fetchone()[0]
        ts, payload = utcnow(), '{"filter":{"eps":1.0}}'
        data = canonical_json({"state": str(initial)})
        h = row_hash(prev, n + 1, ts, "forged", "", "budget_set", "", payload, data)
        c.execute("INSERT INTO audit (ts, budget_id, principal, event, key, payload,"
                  " chain_n, chain_prev, chain_hash, chain_data) VALUES"
                  " (%s, 'forged', '', 'budget_set', '', %s, %s, %s, %s, %s)",
                  (ts, payload, n + 1, prev, h, data))
    store = PostgresStore(_url(svc), schema=schema)
    try:
        problems = {v.budget_id: v.problems for v in store.verify()}
        assert {b for b, p in problems.items() if p} == {"people", "other", "forged"}
        assert "not the replay" in problems["people"][0]
        assert "row inserted" in problems["other"][0]
        assert "sets the budget again after 1 admitted spends" in problems["forged"][0]
        app = create_app(Settings(owner_key=OWNER), store=store)
        own = {"Authorization": f"Bearer {OWNER}"}
        with TestClient(app, raise_server_exceptions=False) as c:
            for name in ("people", "other", "forged"):
                r = c.get(f"/v1/datasets/{name}/budget", headers=own)
                assert r.status_code == 503, r.text
                assert r.json()["error"] == "ledger_integrity"
                assert r.json()["dataset"] == name
            assert c.get("/v1/datasets/clean/budget", headers=own).status_code == 200
    finally:
        store.close()
    # the owner role can still not rewrite rows either (the trigger)
    with psycopg.connect(_url(roles["owner"]), autocommit=True,
                         options=f"-c search_path={schema}") as c, \
            pytest.raises(psycopg.Error, match="append-only"):
        c.execute("DELETE FROM audit")
