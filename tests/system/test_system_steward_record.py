"""The record a steward audits: each admitted query named in words (budget history).

A mixed session -- query plans (public keys, a filter, several aggregations),
one-aggregation shapes, a robust estimator and a query release -- on the
service; the budget history must tell every query apart by its description alone (no
"query", no JSON), naming aggregations, columns, bounds, groups and filters, and the
budget text must say in words how the budget is held before any parameter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from dpsieve._budget_view import describe_plan, describe_request
from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Sd7RmZ2vK9pLw4sN8bYc3FhJ6t"
PURE = {"type": "pure", "eps": 0.2}


def _csv(path: Path) -> Path:
    rows = ["pid,city,age,smoker"]
    for i in range(3000):
        rows.append(f"{i % 400},{'abc'[i % 3]},{20 + i % 50},{'smoker' if i % 4 else 'never'}")
    path.write_text("\n".join(rows) + "\n")
    return path


PLANS: list[tuple[dict[str, Any], list[str]]] = [
    ({"type": "query", "privacy": PURE, "group_by": ["city"], "keys": [["a"], ["b"], ["c"]],
      "aggregations": [{"type": "count"},
                       {"type": "sum", "column": "age", "lower": 0, "upper": 90}]},
     ["count of rows", "sum of 'age' in [0, 90]", "by 'city' (3 public keys)"]),
    ({"type": "query", "privacy": PURE, "group_by": ["smoker"], "keys": [["never"], ["smoker"]],
      "aggregations": [{"type": "quantile", "column": "age", "quantiles": [0.5],
                        "lower": 0, "upper": 100}]},
     ["median of 'age' in [0, 100]", "by 'smoker' (2 public keys)"]),
    ({"type": "query", "privacy": PURE,
      "where": [{"column": "age", "op": ">=", "value": 40}],
      "aggregations": [{"type": "histogram", "column": "smoker",
                        "categories": ["never", "smoker"]}]},
     ["histogram of 'smoker' over 2 categories", "where 'age' >= 40"]),
    ({"type": "count", "privacy": PURE}, ["count of rows"]),
    ({"type": "robust_median", "column": "age", "bound": 100.0,
      "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}},
     ["robust median of 'age'", "bound 100"]),
    ({"type": "release", "mechanism": "laplace", "columns": ["city", "smoker"],
      "domain": {"city": ["a", "b", "c"], "smoker": ["never", "smoker"]}, "n": 3000,
      "workload": "marginals:1", "privacy": PURE},
     ["laplace release of 1-way marginals over 'city', 'smoker'", "n = 3000"]),
]


def test_a_mixed_session_is_told_apart_in_words(tmp_path: Path) -> None:
    app = create_app(Settings(owner_key=OWNER), store=SQLiteStore(tmp_path / "r.db"))
    own = {"Authorization": f"Bearer {OWNER}"}
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/datasets", headers=own, json={
            "name": "clinic", "path": str(_csv(tmp_path / "clinic.csv")), "infer_types": True,
            "budget": {"type": "approx", "eps": 20.0, "delta": 1e-5,
                       "neighbouring": "replace_one"}})
        assert r.status_code == 201, r.text
        for spec, _ in PLANS:
            r = c.post("/v1/datasets/clinic/queries", headers=own, json=spec)
            assert r.status_code == 200, (spec, r.text)
        b = c.get("/v1/datasets/clinic/budget", headers=own).json()
    got = [h["description"] for h in b["history"]]
    assert len(got) == len(PLANS)
    assert len(set(got)) == len(got), got  # told apart by the words alone
    for desc, (_, words) in zip(got, PLANS, strict=True):
        assert desc != "query"
        assert "{" not in desc
        assert "privacy" not in desc
        for w in words:
            assert w in desc, (w, desc)
    # the budget in words first: how it is held comes after eps left, mu only in brackets
    text = b["summary"]["text"]
    assert text.startswith("eps ")
    assert "Gaussian part:" not in text
    assert text.index("held as") < text.index("(GDP mu")


def test_plan_bounds_are_stated() -> None:
    spec = {"type": "query", "privacy": PURE, "group_by": ["city", "year"],
            "keys": [["a", 2020]],
            "aggregations": [{"type": "count", "per": "unit"},
                             {"type": "sum", "column": "x", "lower": -1, "upper": 2.5,
                              "per": "unit"},
                             {"type": "quantile", "column": "x", "quantiles": [0.1, 0.9]},
                             {"type": "variance", "column": "x"}],
            "where": [{"column": "k", "op": "in", "value": [1, 2, 3, 4, 5]},
                      {"column": "z", "op": "not_null"}],
            "contribution": {"max_groups": 3, "max_rows": 7}}
    assert describe_plan(spec) == (
        "count of units, sum of 'x' in [-1, 2.5] per unit, quantiles 0.1, 0.9 of 'x' "
        "(bounds chosen privately) and variance of 'x' (bounds chosen privately), by 'city' "
        "and 'year' (1 public key), where 'k' in [1, 2, 3, ...] and 'z' is not missing; "
        "each unit in at most 3 groups, at most 7 rows in each")
    assert describe_request({"type": "query", "privacy": PURE,
                             "aggregations": [{"type": "mean", "column": "x", "lower": 0,
                                               "upper": 1}],
                             "contribution": {"max_groups": 1, "max_rows": 1}}) == (
        "mean of 'x' in [0, 1]; at most 1 row per unit")
    assert describe_plan({"type": "query", "group_by": ["c"], "select": {"delta": 1e-8},
                          "aggregations": [{"type": "count", "per": "unit"}],
                          "contribution": {"max_groups": 2}}) == (
        "count of units, by 'c', groups selected privately (delta 1e-08); each unit in at "
        "most 2 groups")
    # a malformed stored request still reads as words, never fails the page
    assert describe_request({"type": "query", "aggregations": "?"}) == "a query"
