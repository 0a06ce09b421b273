"""Blocks, quotas, groups and the queue under the PostgreSQL service role of docs/service.md
(the narrowed grants): every block route works as the service role, none answers 5xx."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv
from test_system_audit_role import OWNER, _url, roles  # noqa: F401 (the fixture)

from dpsieve.ledger.postgres import PostgresStore
from dpsieve.service import Settings, create_app

pytestmark = pytest.mark.postgres


def _count(eps: float) -> dict[str, object]:
    return {"type": "query", "privacy": {"type": "pure", "eps": eps},
            "aggregations": [{"type": "count"}]}


def test_blocks_under_the_service_role(roles: dict[str, str], tmp_path: Path) -> None:  # noqa: F811
    store = PostgresStore(_url(roles["service"]), schema=roles["schema"])
    own = {"Authorization": f"Bearer {OWNER}"}
    try:
        app = create_app(Settings(owner_key=OWNER), store=store)
        with TestClient(app, raise_server_exceptions=False) as c:
            r = c.post("/v1/datasets", headers=own, json={
                "name": "d", "path": str(write_csv(tmp_path / "d.csv")), "infer_types": True,
                "blocks": {"column": "city", "budget": {"type": "pure", "eps": 1.0},
                           "unlock": {"type": "arrivals", "n": 4, "by": "analyst"}}})
            assert r.status_code == 201, r.text
            for city in ("a", "b"):
                assert c.post("/v1/datasets/d/blocks", headers=own,
                              json={"block": city}).status_code == 201
            r = c.post("/v1/analysts", headers=own, json={"name": "ana"})
            ana = {"X-API-Key": r.json()["api_key"]}
            assert c.post("/v1/datasets/d/grants", headers=own,
                          json={"analyst": "ana"}).status_code == 201
            assert c.put("/v1/groups/team", headers=own,
                         json={"members": ["ana"]}).status_code == 200
            assert c.put("/v1/groups/team", headers=own,
                         json={"members": ["ana"]}).status_code == 200  # replaced
            assert c.put("/v1/datasets/d/quotas", headers=own, json={
                "scope": "group", "name": "team", "budget": {"type": "pure", "eps": 0.9}}
            ).status_code == 200
            r = c.post("/v1/datasets/d/queries", headers=ana, json=_count(0.2))
            assert r.status_code == 200, r.text
            assert c.post("/v1/datasets/d/queries", headers=ana,
                          json=_count(0.2)).status_code == 409  # locked
            r = c.post("/v1/datasets/d/queue", headers={**ana, "Idempotency-Key": "q"},
                       json=_count(0.1), params={"wait": 60})
            assert r.status_code == 202, r.text
            assert c.get("/v1/datasets/d/queue/q", headers=ana).status_code == 200
            assert c.post("/v1/datasets/d/schedule", headers=own).status_code == 200
            assert c.delete("/v1/datasets/d/queue/q", headers=ana).status_code == 200
            assert c.get("/v1/datasets/d/blocks", headers=own).status_code == 200
            for who in (own, ana):  # the list's and the budget's block summaries
                r = c.get("/v1/datasets", headers=who)
                assert r.status_code == 200, r.text
                assert [d["blocks"]["column"] for d in r.json()] == ["city"]
                r = c.get("/v1/datasets/d/budget", headers=who)
                assert r.status_code == 200, r.text
                assert len(r.json()["history"]) == 1
            r = c.post("/v1/datasets/d/children", headers=ana, json={
                "child": "sv", "kind": "sparse_vector", "spec": {"eps": 0.1}})
            assert r.status_code == 422, r.text
            assert c.put("/v1/datasets/d/blocks", headers=own, json={
                "column": "city", "budget": {"type": "pure", "eps": 1.0},
                "scheduler": "dpack"}).status_code == 200
        assert all(ch.ok for ch in store.verify())
    finally:
        store.close()
