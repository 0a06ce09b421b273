"""The service speaks the query layer (issue 12 item 6, issue 15 answers and schema):
data sets registered with a privacy unit and a declared schema, analysts read the public
schema (never values), POST queries accept plans (one charge; refused before any spend),
group-by with public keys and DP key selection end to end."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "owner-secret-key"
PURE = {"type": "pure", "eps": 1.0}


def _visits(path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 3000
    pd.DataFrame({"pid": rng.integers(0, 400, n), "ward": rng.choice(["A", "B", "C"], n),
                  "cost": rng.gamma(2.0, 50.0, n).round(2),
                  "age": rng.integers(18, 90, n)}).to_parquet(path)
    return path


DECLARED = [{"name": "age", "type": "integer", "bounds": [0, 100]},
            {"name": "ward", "type": "string", "categories": ["A", "B", "C"]}]


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "svc.db")
    app = create_app(Settings(owner_key=OWNER), store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        own = {"Authorization": f"Bearer {OWNER}"}
        path = _visits(tmp_path / "visits.parquet")
        r = client.post("/v1/datasets", headers=own, json={
            "name": "visits", "path": str(path), "infer_types": True, "privacy_unit": "pid",
            "columns": DECLARED, "budget": {"type": "approx", "eps": 4.0, "delta": 1e-5}})
        assert r.status_code == 201, r.text
        r = client.post("/v1/analysts", json={"name": "ana"}, headers=own)
        ana = {"X-API-Key": r.json()["api_key"]}
        assert client.post("/v1/datasets/visits/grants", json={"analyst": "ana"},
                           headers=own).status_code == 201
        yield {"client": client, "store": store, "owner": own, "ana": ana, "path": path,
               "tmp": tmp_path}


def _plan(**kw: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": PURE,
            "aggregations": [{"type": "count", "per": "unit"},
                             {"type": "sum", "column": "cost", "lower": 0, "upper": 500,
                              "per": "unit"},
                             {"type": "mean", "column": "age"}],
            "group_by": ["ward"], "keys": [["A"], ["B"], ["Z"]],
            "contribution": {"max_groups": 2, "max_rows": 5}, **kw}


def test_analysts_read_the_public_schema_never_values(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.get("/v1/datasets/visits/schema", headers=env["ana"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["privacy_unit"] == "pid"
    cols = {col["name"]: col for col in body["columns"]}
    assert {n: col["type"] for n, col in cols.items()} == {
        "pid": "integer", "ward": "string", "cost": "float", "age": "integer"}
    assert cols["age"]["bounds"] == [0.0, 100.0]
    assert cols["ward"]["categories"] == ["A", "B", "C"]
    assert "bounds" not in cols["cost"]  # nothing is derived from the data
    # a key the data set is not granted to sees 404, as for a missing one
    r = c.post("/v1/analysts", json={"name": "bob"}, headers=env["owner"])
    assert c.get("/v1/datasets/visits/schema",
                 headers={"X-API-Key": r.json()["api_key"]}).status_code == 404


def test_a_plan_is_charged_once_and_answers_in_user_terms(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"], json=_plan())
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["value"]["labels"] == ["count", "sum(cost)", "mean(age)"]
    assert [g["key"] for g in body["value"]["groups"]] == [["A"], ["B"], ["Z"]]
    for g in body["value"]["groups"]:
        for e in g["estimates"]:
            lo, hi = e["interval"]
            assert lo <= e["value"] <= hi
    assert set(body["noise"]["count"]["a0.count"]) == {"mechanism", "scale", "std", "ci95"}
    assert "granularity" in body["details"]["a1.sum"]
    assert body["cost"]["query"]["type"] == "pure"
    b = c.get("/v1/datasets/visits/budget", headers=env["ana"]).json()
    assert b["admitted"] == 1  # three aggregations, one charge


def test_dp_key_selection_is_charged_eps_and_delta(env: dict[str, Any]) -> None:
    c = env["client"]
    # an approximate-zCDP budget admits the selection's ApproxDP charge (an (eps, delta)
    # budget does too when its split keeps a delta part: tests/queries/test_session_plans.py)
    r = c.put("/v1/datasets/visits/budget", headers=env["owner"],
              json={"type": "approx_zcdp", "rho": 2.0, "delta": 1e-5})
    assert r.status_code == 200, r.text
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"], json=_plan(
        keys=None, select={"delta": 1e-6},
        aggregations=[{"type": "count", "per": "unit"}]))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cost"]["query"]["type"] == "approx"
    assert body["cost"]["query"]["delta"] == 1e-6
    assert body["value"]["selection"]["threshold"] > 0
    keys = {tuple(g["key"]) for g in body["value"]["groups"]}
    assert keys <= {("A",), ("B",), ("C",)}


@pytest.mark.parametrize(("plan", "param"), [
    (_plan(aggregations=[{"type": "sum", "column": "nope", "lower": 0, "upper": 1}]),
     "column"),
    (_plan(aggregations=[{"type": "sum", "column": "ward", "lower": 0, "upper": 1}]),
     "column"),
    (_plan(aggregations=[{"type": "histogram", "column": "age", "categories": [20, 20.0]}]),
     "categories"),
    (_plan(keys=[["A"], ["A"]]), "keys"),
    (_plan(contribution={"max_groups": 0, "max_rows": 5}), "max_groups"),
    (_plan(contribution={"max_groups": 1, "max_rows": 0}), "max_rows"),
    (_plan(aggregations=[{"type": "count"}], contribution={"max_groups": 1}), "max_rows"),
])
def test_bad_plans_are_refused_before_any_spend(env: dict[str, Any], plan: dict[str, Any],
                                                param: str) -> None:
    c = env["client"]
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"], json=plan)
    assert r.status_code == 422, r.text
    assert r.json()["parameter"] == param
    assert env["store"].history("visits") == []


@pytest.mark.parametrize("plan", [
    _plan(aggregations=[{"type": "sum", "column": "cost", "lower": "nan", "upper": 1}]),
    _plan(aggregations=[{"type": "count", "colour": 1}]),
    _plan(contribution={"max_groups": 1.5}),
    _plan(aggregations=[]),
])
def test_malformed_plans_are_422_and_spend_nothing(env: dict[str, Any],
                                                   plan: dict[str, Any]) -> None:
    r = env["client"].post("/v1/datasets/visits/queries", headers=env["ana"], json=plan)
    assert r.status_code == 422, r.text
    assert env["store"].history("visits") == []


def test_registration_refuses_a_missing_privacy_unit_and_bad_declarations(
        env: dict[str, Any]) -> None:
    c, path = env["client"], str(env["path"])
    for extra, param in (({"privacy_unit": "patient"}, "privacy_unit"),
                         ({"columns": [{"name": "age", "type": "integer",
                                        "categories": ["x"]}]}, "categories"),
                         ({"columns": [{"name": "nope", "type": "integer"}]}, "schema")):
        r = c.post("/v1/datasets", headers=env["owner"],
                   json={"name": "other", "path": path, "infer_types": True, **extra})
        assert r.status_code == 422, r.text
        assert r.json()["parameter"] == param
    assert c.get("/v1/datasets/other/schema", headers=env["owner"]).status_code == 404
    # another type than the file's is the owner's to declare: the column is cast to it
    r = c.post("/v1/datasets", headers=env["owner"], json={
        "name": "other", "path": path, "columns": [{"name": "age", "type": "string"}]})
    assert r.status_code == 201, r.text
    cols = {col["name"]: col["type"] for col in r.json()["columns"]}
    assert cols["age"] == "string"


def test_the_privacy_unit_cannot_change_once_spent(env: dict[str, Any]) -> None:
    c, path = env["client"], str(env["path"])
    assert c.post("/v1/datasets/visits/queries", headers=env["ana"],
                  json=_plan()).status_code == 200
    r = c.post("/v1/datasets", headers=env["owner"], json={"name": "visits", "path": path,
                                                           "infer_types": True})
    assert r.status_code == 409, r.text
    r = c.post("/v1/datasets", headers=env["owner"],
               json={"name": "visits", "path": path, "infer_types": True, "privacy_unit": "pid"})
    assert r.status_code == 409, r.text  # the same unit, but the declarations dropped
    assert "'ward', 'age'" in r.json()["message"]
    r = c.post("/v1/datasets", headers=env["owner"],
               json={"name": "visits", "path": path, "infer_types": True, "privacy_unit": "pid",
                     "columns": DECLARED})
    assert r.status_code == 201, r.text  # the same unit and schema: re-pointing is fine


def test_old_shapes_take_contribution_bounds_and_release_is_refused_with_a_unit(
        env: dict[str, Any]) -> None:
    c = env["client"]
    mean = {"type": "mean", "column": "age", "lower": 0, "upper": 100,
            "privacy": {"type": "pure", "eps": 0.5}}
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"], json=mean)
    # a data set with a privacy unit needs contribution bounds: refused, unspent
    assert r.status_code == 422, r.text
    assert r.json()["parameter"] == "contribution"
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"],
               json={**mean, "contribution": {"max_groups": 1}})
    assert r.status_code == 422, r.text  # a per-row mean needs max_rows
    assert r.json()["parameter"] == "max_rows"
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"], json={
        "type": "robust_median", "column": "age", "bound": 100,
        "privacy": {"type": "approx", "eps": 0.5, "delta": 1e-6}})
    assert r.status_code == 422, r.text
    assert env["store"].history("visits") == []
    r = c.post("/v1/datasets/visits/queries", headers=env["ana"],
               json={**mean, "contribution": {"max_rows": 3}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert 0 <= body["value"] <= 100
    assert set(body["noise"]) == {"sum", "count"}
    assert body["interval"][0] <= body["value"] <= body["interval"][1]


def test_the_owner_edits_the_schema_in_place_until_the_first_spend(env: dict[str, Any]
                                                                   ) -> None:
    c, own, ana = env["client"], env["owner"], env["ana"]
    url = "/v1/datasets/visits/schema"
    new = {"privacy_unit": "pid",
           "columns": [{"name": "age", "type": "integer", "bounds": [10, 95]},
                       {"name": "cost", "type": "float", "bounds": [0, 400]}]}
    assert c.put(url, headers=ana, json=new).status_code == 403  # the owner only
    assert c.put("/v1/datasets/nope/schema", headers=own, json=new).status_code == 404
    # checked against the table before anything is written (422, schema unchanged)
    before = c.get(url, headers=ana).json()
    for bad in ({"columns": [{"name": "nope", "type": "integer"}]},
                {"columns": [{"name": "age", "type": "integer", "categories": [1.5]}]},
                {"privacy_unit": "nope"},
                {"columns": [{"name": "age", "type": "integer", "bounds": [5, 1]}]}):
        r = c.put(url, headers=own, json=bad)
        assert r.status_code == 422, (bad, r.text)
        assert c.get(url, headers=ana).json() == before
    r = c.put(url, headers=own, json=new)
    assert r.status_code == 200, r.text
    cols = {col["name"]: col for col in c.get(url, headers=ana).json()["columns"]}
    assert cols["age"]["bounds"] == [10.0, 95.0]
    assert cols["cost"]["bounds"] == [0.0, 400.0]
    assert "categories" not in cols["ward"]  # PUT replaces the declarations
    # the declared bounds are used by the next query; then the schema is frozen
    r = c.post("/v1/datasets/visits/queries", headers=ana, json={
        "type": "query", "privacy": PURE, "aggregations": [{"type": "mean", "column": "age"}],
        "contribution": {"max_rows": 2}})
    assert r.status_code == 200, r.text
    assert 10 <= r.json()["value"]["groups"][0]["estimates"][0]["value"] <= 95
    r = c.put(url, headers=own, json={**new, "columns": new["columns"][:1]})
    assert r.status_code == 409, r.text
    assert "already paid" in r.json()["message"]
    assert c.put(url, headers=own, json=new).status_code == 200  # no change: a safe retry
    assert {col["name"]: col for col in c.get(url, headers=ana).json()["columns"]} == cols
