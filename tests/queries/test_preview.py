"""Session.preview: the charge a query will be charged, the budget after it and each
released number's noise, for free (nothing spent or logged); the noise it predicts is the
noise the answers carry (closed form, and the spread of repeated answers)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.queries import Schema
from dpsieve.queries.engines.frames import PandasEngine
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare
from dpsieve.queries.preview import preview


def _frame(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"pid": rng.integers(0, 300, n), "city": rng.choice(list("abc"), n),
                         "x": rng.uniform(0, 10, n)})


PLAN: dict[str, Any] = {
    "type": "query", "privacy": {"type": "pure", "eps": 0.5},
    "aggregations": [{"type": "count"}, {"type": "mean", "column": "x", "lower": 0,
                                         "upper": 10}],
    "group_by": ["city"], "keys": [["a"], ["b"], ["c"]],
    "contribution": {"max_groups": 2, "max_rows": 3}}


def test_preview_is_free_and_states_the_charge_and_the_budget_after() -> None:
    s = Session(_frame(), budget=PureDP(2.0), privacy_unit="pid")
    before = s.remaining()
    p = s.preview(PLAN)
    p2 = s.preview(PLAN)
    assert s.remaining() == before  # nothing spent
    assert p == p2
    assert p["admitted"] is True
    assert p["charge"] == PureDP(0.5).to_dict()
    r = s.query(PLAN)
    assert r.cost.to_dict()["query"] == p["charge"]
    assert s.remaining().to_dict() == p["budget_after"]
    # the noise the answer carries is the preview's
    for label, parts in r.noise.items():
        for name, n in parts.items():
            want = p["noise"][label][name]
            assert (n["std"], n["ci95"]) == (want["std"], want["ci95"])
    too_big = {**PLAN, "privacy": {"type": "pure", "eps": 5.0}}
    q = s.preview(too_big)
    assert q["admitted"] is False
    assert q["budget_after"] is None
    assert s.remaining().to_dict() == p["budget_after"]


def test_the_predicted_std_is_the_spread_of_the_answers() -> None:
    """Laplace noise on a count: std = sqrt(2q)/(1-q), q = e^(-1/t); the raw answers of a
    fixed bounding (seed) spread by it (400 runs: the sample std within 15 %, ~4 standard
    errors)."""
    schema = Schema.of([("pid", "integer"), ("city", "string"), ("x", "float")], "pid")
    plan = {**PLAN, "raw": True}
    p = prepare(from_spec(plan), schema, Neighbouring.ADD_REMOVE)
    figures = preview(p)
    count = figures["noise"]["count"]["a0.count"]
    t = count["scale"]
    q = math.exp(-1 / t)
    assert count["std"] == pytest.approx(math.sqrt(2 * q) / (1 - q), rel=1e-12)
    engine = PandasEngine(_frame())
    rng = np.random.default_rng(5)
    got = np.array([[g.estimates[0].value for g in p.run(engine, rng, seed=9).groups]
                    for _ in range(400)])
    realized = got.std(axis=0, ddof=1)
    assert np.all(np.abs(realized / count["std"] - 1) < 0.15), realized


def test_selection_preview_says_threshold_and_units_needed() -> None:
    schema = Schema.of([("pid", "integer"), ("city", "string")], "pid")
    spec = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
            "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["city"],
            "select": {"delta": 1e-6}, "contribution": {"max_groups": 1}}
    p = prepare(from_spec(spec), schema, Neighbouring.ADD_REMOVE)
    sel = preview(p)["selection"]
    assert preview(p)["charge"] == ApproxDP(1.0, 1e-6).to_dict()
    assert sel["threshold"] > 0
    assert 1 < sel["units_50"] <= sel["units_95"]
    # a group of units_50 units is released about half the time or more; one fewer less
    n = sel["units_50"]
    frame = pd.DataFrame({"pid": np.arange(n), "city": ["a"] * n})
    rng = np.random.default_rng(1)
    kept = np.mean([len(p.run(PandasEngine(frame), rng).groups) for _ in range(400)])
    assert kept >= 0.5 - 4 * 0.025
