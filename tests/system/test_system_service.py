"""The HTTP service in process: auth, grants, queries, idempotency and clean 4xx errors."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "owner-secret-key"


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "svc.db")
    app = create_app(Settings(owner_key=OWNER, max_body_bytes=20_000), store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        own = {"Authorization": f"Bearer {OWNER}"}
        csv = write_csv(tmp_path / "people.csv")
        for name in ("people", "secret"):
            r = client.post("/v1/datasets", headers=own, json={
                "name": name, "path": str(csv), "infer_types": True,
                    "budget": {"type": "pure", "eps": 1.0}})
            assert r.status_code == 201, r.text
        keys = {}
        for who in ("ana", "bob"):
            r = client.post("/v1/analysts", json={"name": who}, headers=own)
            assert r.status_code == 201
            keys[who] = {"X-API-Key": r.json()["api_key"]}
        assert client.post("/v1/datasets/people/grants", json={"analyst": "ana"},
                           headers=own).status_code == 201
        assert client.post("/v1/datasets/secret/grants", json={"analyst": "bob"},
                           headers=own).status_code == 201
        yield {"client": client, "store": store, "owner": own, **keys}


COUNT = {"type": "count", "privacy": {"type": "pure", "eps": 0.25}}


def test_query_admitted_carries_noise_cost_and_remaining(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.post("/v1/datasets/people/queries", json=COUNT, headers=env["ana"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["noise"]["mechanism"] == "discrete_laplace"
    assert body["noise"]["scale"] == pytest.approx(4.0)
    assert body["remaining"]["exact"] == "3/4"
    assert abs(body["value"] - 200) < 200  # noisy, but a count near 200
    r = c.post("/v1/datasets/people/queries", headers=env["ana"], json={
        "type": "mean", "column": "age", "lower": 0, "upper": 100,
        "privacy": {"type": "pure", "eps": 0.5}})
    assert r.status_code == 200, r.text
    assert 0 <= r.json()["value"] <= 100
    r = c.post("/v1/datasets/people/queries", headers=env["ana"], json={
        "type": "histogram", "column": "city", "categories": ["a", "b", "c"],
        "privacy": {"type": "pure", "eps": 0.25}})
    assert r.status_code == 200, r.text
    assert r.json()["remaining"]["exact"] == "0/1"
    r = c.post("/v1/datasets/people/queries", json=COUNT, headers=env["ana"])
    assert r.status_code == 409
    assert r.json()["error"] == "budget_exceeded"
    b = c.get("/v1/datasets/people/budget", headers=env["ana"]).json()
    assert b["admitted"] == 3
    assert sum(Fraction(h["cost"]["eps"]) for h in b["history"]) == 1


def test_query_on_a_data_set_without_budget_is_409_and_writes_nothing(
        env: dict[str, Any], tmp_path: Path) -> None:
    c, st = env["client"], env["store"]
    r = c.post("/v1/datasets", headers=env["owner"], json={
        "name": "nobudget", "path": str(write_csv(tmp_path / "nb.csv")), "infer_types": True})
    assert r.status_code == 201, r.text
    c.post("/v1/datasets/nobudget/grants", json={"analyst": "ana"}, headers=env["owner"])
    before = len(st.audit())
    r = c.post("/v1/datasets/nobudget/queries", json=COUNT, headers=env["ana"])
    assert r.status_code == 409, r.text
    assert "has no budget yet" in r.text
    assert len(st.audit()) == before
    assert st.budget_ids() == ["people", "secret"]


def test_keys_see_only_granted_datasets(env: dict[str, Any]) -> None:
    c = env["client"]
    assert c.get("/v1/datasets", headers=env["ana"]).json() == [
        {"dataset": "people", "remaining": {"eps": 1.0, "exact": "1/1"},
         "budget_left": "eps 1 of 1 left, 0% used"}]
    for path in ("/v1/datasets/secret/budget", "/v1/datasets/secret/curves"):
        r = c.get(path, headers=env["ana"])
        assert r.status_code == 404
        assert "secret" in r.json()["message"]
    r = c.post("/v1/datasets/secret/queries", json=COUNT, headers=env["ana"])
    assert r.status_code == 404
    assert c.get("/v1/datasets/secret/audit", headers=env["ana"]).status_code == 403
    assert c.post("/v1/analysts", json={"name": "eve"}, headers=env["ana"]).status_code == 403
    assert c.get("/v1/datasets", headers={"X-API-Key": "dps_wrong"}).status_code == 401
    assert c.get("/v1/datasets").status_code == 401
    assert env["store"].history("secret") == []


BAD = [
    ("malformed", b'{"type": "count", "privacy": ', 400),
    ("nan", b'{"type": "count", "privacy": {"type": "pure", "eps": NaN}}', 422),
    ("inf", b'{"type": "count", "privacy": {"type": "pure", "eps": Infinity}}', 422),
    ("negative", b'{"type": "count", "privacy": {"type": "pure", "eps": -1}}', 422),
    ("zero", b'{"type": "count", "privacy": {"type": "pure", "eps": 0}}', 422),
    ("missing eps", b'{"type": "count", "privacy": {"type": "pure"}}', 422),
    ("unknown type", b'{"type": "drop_table", "privacy": {"type": "pure", "eps": 1}}', 422),
    ("unknown field", b'{"type": "count", "x": 1, "privacy": {"type": "pure", "eps": 1}}', 422),
    ("bad column", b'{"type": "sum", "column": "nope", "lower": 0, "upper": 1,'
                   b' "privacy": {"type": "pure", "eps": 0.1}}', 422),
    ("bounds", b'{"type": "sum", "column": "age", "lower": 5, "upper": 1,'
               b' "privacy": {"type": "pure", "eps": 0.1}}', 422),
    ("huge", b'{"type": "count", "pad": "' + b"x" * 50_000 + b'"}', 413),
    ("not an object", b"[1, 2, 3]", 422),
]


@pytest.mark.parametrize(("name", "body", "status"), BAD, ids=[b[0] for b in BAD])
def test_bad_requests_are_clean_4xx_and_write_nothing(
    env: dict[str, Any], name: str, body: bytes, status: int
) -> None:
    c, store = env["client"], env["store"]
    before = (len(store.audit()), store.load_filter("people").to_json())
    r = c.post("/v1/datasets/people/queries", content=body,
               headers={**env["ana"], "Content-Type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()
    assert err["message"]
    assert "Traceback" not in r.text
    assert (len(store.audit()), store.load_filter("people").to_json()) == before


def test_unknown_dataset_and_bad_budget(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.post("/v1/datasets/nowhere/queries", json=COUNT, headers=env["ana"])
    assert r.status_code == 404
    assert "nowhere" in r.json()["message"]
    r = c.put("/v1/datasets/people/budget", headers=env["owner"],
              content=b'{"type": "gdp", "mu": NaN}')
    assert r.status_code == 422
    r = c.put("/v1/datasets/people/budget", headers=env["owner"], json={"type": "gdp", "mu": -1})
    assert r.status_code == 422
    assert "'mu'" in r.json()["message"]
    r = c.post("/v1/datasets", headers=env["owner"], json={"name": "x", "path": "/etc/passwd"})
    assert r.status_code == 422


def test_idempotency_key_replays_without_charge(env: dict[str, Any]) -> None:
    c = env["client"]
    h = {**env["ana"], "Idempotency-Key": "req-1"}
    a = c.post("/v1/datasets/people/queries", json=COUNT, headers=h).json()
    b = c.post("/v1/datasets/people/queries", json=COUNT, headers=h).json()
    assert a["value"] == b["value"]
    assert b["replayed"] is True
    assert env["store"].load_filter("people").remaining()["exact"] == "3/4"
    other = {**COUNT, "privacy": {"type": "pure", "eps": 0.5}}
    r = c.post("/v1/datasets/people/queries", json=other, headers=h)
    assert r.status_code == 409
    assert r.json()["error"] == "idempotency_key_reused"
    # the same key from another analyst is another request (keys are per analyst)
    env["store"].grant("bob", "people")
    r = c.post("/v1/datasets/people/queries", json=COUNT,
               headers={**env["bob"], "Idempotency-Key": "req-1"})
    assert r.json()["replayed"] is False


def test_openapi_and_page_and_curves(env: dict[str, Any]) -> None:
    c = env["client"]
    spec = c.get("/openapi.json").json()
    assert "/v1/datasets/{name}/queries" in spec["paths"]
    assert c.get("/ui").status_code == 200
    c.post("/v1/datasets/people/queries", json=COUNT, headers=env["ana"])
    cur = c.get("/v1/datasets/people/curves", headers=env["ana"]).json()
    assert [s["step"] for s in cur["steps"]] == [0, 1]
    f0, f1 = cur["steps"][0]["curve"], cur["steps"][1]["curve"]
    # less budget left = a curve at least as high everywhere (more privacy left to lose)
    assert all(b >= a - 1e-12 for a, b in zip(f0, f1, strict=True))
    assert json.dumps(cur)


def test_gdp_budget_admits_laplace_queries_by_residue(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.put("/v1/datasets/people/budget", headers=env["owner"], json={"type": "gdp", "mu": 1})
    assert r.status_code == 200, r.text
    mus = [1.0]
    for _ in range(3):
        r = c.post("/v1/datasets/people/queries", json=COUNT, headers=env["ana"])
        assert r.status_code == 200, r.text
        mus.append(r.json()["remaining"]["mu"])
    assert mus == sorted(mus, reverse=True)
    assert mus[-1] > 0
    cur = c.get("/v1/datasets/people/curves", headers=env["ana"]).json()
    curves = [s["curve"] for s in cur["steps"]]
    assert len(curves) == 4
    for f0, f1 in itertools.pairwise(curves):
        assert all(b >= a for a, b in zip(f0, f1, strict=True))
    # a budget with admitted spends cannot be reset
    r = c.put("/v1/datasets/people/budget", headers=env["owner"], json={"type": "gdp", "mu": 5})
    assert r.status_code == 409
    assert "cannot be replaced" in r.json()["message"]


def test_linear_workload_over_http(env: dict[str, Any]) -> None:
    c = env["client"]
    body = {"type": "linear", "column": "city", "categories": ["a", "b", "c"],
            "workload": [[1, 1, 0], [0, 1, 1]], "privacy": {"type": "pure", "eps": 0.5}}
    r = c.post("/v1/datasets/people/queries", json=body, headers=env["ana"])
    assert r.status_code == 200, r.text
    assert len(r.json()["value"]["answers"]) == 2
    r = c.post("/v1/datasets/people/queries", headers=env["ana"],
               json={**body, "workload": [[1, 1]]})
    assert r.status_code == 422
    assert "'workload'" in r.json()["message"]


def test_register_with_bad_budget_writes_nothing(env: dict[str, Any], tmp_path: Path) -> None:
    c, store = env["client"], env["store"]
    csv = write_csv(tmp_path / "n.csv")
    r = c.post("/v1/datasets", headers=env["owner"], json={
        "name": "new", "path": str(csv), "infer_types": True, "budget": {"type": "zcdp"}})
    assert r.status_code == 422
    assert "'budget'" in r.json()["message"]
    assert store.dataset("new") is None


def test_streamed_huge_body_without_length_is_413(env: dict[str, Any]) -> None:
    c, store = env["client"], env["store"]
    before = len(store.audit())

    def chunks() -> Iterator[bytes]:
        yield b'{"type": "count", "pad": "'
        for _ in range(50):
            yield b"x" * 1000
        yield b'"}'

    r = c.post("/v1/datasets/people/queries", content=chunks(),
               headers={**env["ana"], "Content-Type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"] == "payload_too_large"
    assert len(store.audit()) == before


def test_changed_registration_or_file_is_seen_by_the_next_query(env: dict[str, Any],
                                                                 tmp_path: Path) -> None:
    """The service keeps each registered file's engine open across queries (the file
    read once): a data set registered again with another file and a file rewritten in
    place are each what the next query reads; a file replaced by one with other columns
    is refused (unspent) until registered, under another name once the budget has paid.
    eps = 60 per count: the discrete Laplace noise is 0 but with probability ~1e-26."""
    c, own = env["client"], env["owner"]
    exact = {"type": "count", "privacy": {"type": "pure", "eps": 60.0}}

    def register(path: Path) -> None:  # the budget set once, kept by re-registration
        budget = {} if env["store"].dataset("moving") else {
            "budget": {"type": "pure", "eps": 1e4}}
        r = c.post("/v1/datasets", headers=own, json={
            "name": "moving", "path": str(path), "infer_types": True, **budget})
        assert r.status_code == 201, r.text

    def count() -> Any:
        r = c.post("/v1/datasets/moving/queries", headers=own, json=exact)
        assert r.status_code == 200, r.text
        return r.json()["value"]

    a, b = write_csv(tmp_path / "a.csv", 10), write_csv(tmp_path / "b.csv", 20)
    register(a)
    assert count() == 10
    assert count() == 10
    register(b)  # another file under the same name
    assert count() == 20
    write_csv(b, 30)  # rewritten in place
    assert count() == 30
    b.write_text("z\n" + "".join(f"{i}\n" for i in range(5)))  # other columns
    spent = len(env["store"].history("moving"))
    r = c.post("/v1/datasets/moving/queries", headers=own, json=exact)
    assert r.status_code == 422, r.text  # not the kept engine's 30: the file is read anew
    assert "columns changed since registration" in r.json()["message"]
    # a schema of its own: refused under the spent name (as PUT .../schema would be),
    # registered under another
    r = c.post("/v1/datasets", headers=own, json={
        "name": "moving", "path": str(b), "infer_types": True})
    assert r.status_code == 409, r.text
    assert len(env["store"].history("moving")) == spent  # nothing charged
    r = c.post("/v1/datasets", headers=own, json={
        "name": "moved", "path": str(b), "infer_types": True,
        "budget": {"type": "pure", "eps": 1e4}})
    assert r.status_code == 201, r.text
    r = c.post("/v1/datasets/moved/queries", headers=own, json=exact)
    assert r.status_code == 200, r.text
    assert r.json()["value"] == 5
    r = c.post("/v1/datasets/moved/queries", headers=own, json={
        "type": "sum", "column": "z", "lower": 0, "upper": 10,
        "privacy": {"type": "pure", "eps": 5000.0}})
    assert r.status_code == 200, r.text
    # Laplace scale <= 2 * 10 / 5000 = 0.004: |noise| > 0.1 has probability < e^-25
    # (eps = 600, scale ~0.017, against abs = 0.01 failed about 1 run in 3)
    assert r.json()["value"] == pytest.approx(0 + 1 + 2 + 3 + 4, abs=0.1)
    b.unlink()  # gone: refused before any spend, as before it was kept open
    spent = len(env["store"].history("moved"))
    r = c.post("/v1/datasets/moved/queries", headers=own, json=exact)
    assert r.status_code == 422, r.text
    assert len(env["store"].history("moved")) == spent


def test_no_two_routes_match_one_request_so_their_order_decides_nothing() -> None:
    # create_app puts the query route first (the request almost every client sends); that
    # is only harmless while every (path, method) a route serves is served by no other
    import re

    from starlette.routing import Match

    from dpsieve.ledger import MemoryStore
    from dpsieve.service.app import QUERY_PATH

    app = create_app(Settings(owner_key=OWNER), store=MemoryStore())
    routes = app.router.routes
    assert getattr(routes[0], "path", None) == QUERY_PATH
    checked = 0
    for route in routes:
        path = getattr(route, "path", None)
        if path is None:
            continue
        concrete = re.sub(r"\{[^}]+\}", "0123456789abcdef", path)
        if not getattr(route, "methods", None):  # the docs' static mount
            concrete += "/swagger-ui.css"
        for method in getattr(route, "methods", None) or {"GET"}:
            scope = {"type": "http", "path": concrete, "method": method, "root_path": "",
                     "headers": []}
            full = [r for r in routes if r.matches(scope)[0] is Match.FULL]
            assert full == [route], (method, concrete, [getattr(r, "path", r) for r in full])
            checked += 1
    assert checked >= 20
