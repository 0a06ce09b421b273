"""Bounds that fit the data (issue 24 item 2): ``contribution="auto"`` and ``lower`` /
``upper`` ``"auto"`` on query plans -- one charge, the plan's privacy, covering the
quantile stage and the plan (docs/proofs/queries.md §7); refusals before any spend; the
released bounds where the data put them; total on empty, all-NULL and one-row data; a
preview that reads no data."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ZCDP, ApproxDP, Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries import Column, ColumnType, Schema
from dpsieve.queries.auto import (
    AutoPlan,
    _split,
    choose,
    count_candidates,
    plan_auto,
    value_candidates,
)
from dpsieve.queries.plan import from_spec

AR = Neighbouring.ADD_REMOVE


def _frame(units: int = 80, groups: int = 3, rows: int = 4, seed: int = 0) -> pd.DataFrame:
    """Each unit: ``rows`` rows in each of ``groups`` groups (of 5), scores in [40, 90]."""
    rng = np.random.default_rng(seed)
    out = []
    for u in range(units):
        gs = rng.choice(5, groups, replace=False)
        for g in gs:
            for _ in range(rows):
                out.append((u, int(g), int(rng.integers(40, 91)), float(rng.normal(10, 2))))
    return pd.DataFrame(out, columns=["pid", "g", "score", "x"])


def _plan(privacy: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": privacy or {"type": "pure", "eps": 1.0},
            "aggregations": [{"type": "count"},
                             {"type": "mean", "column": "score", "lower": "auto",
                              "upper": "auto"}],
            "group_by": ["g"], "keys": [[i] for i in range(5)], "contribution": "auto",
            **kw}


def _spent(s: Session) -> Fraction:
    return Fraction(s.remaining().to_dict()["eps"])


def test_one_charge_the_plans_privacy_compared_with_the_filter() -> None:
    s = Session(_frame(), budget=PureDP(3.0), privacy_unit="pid", rng=np.random.default_rng(1))
    before = _spent(s)
    r = s.query(_plan(auto_share=0.2))
    assert before - _spent(s) == Fraction(1.0)  # the plan's eps, once, for both stages
    b = r.answer.bounds
    assert b is not None
    assert set(b["contribution"]) == {"max_groups", "max_rows"}
    assert b["aggregations"][0]["label"] == "mean(score)"
    assert b["privacy"]["eps"] == pytest.approx(0.2, rel=1e-12)
    assert not b["fallback"]
    assert r.query["auto_share"] == 0.2
    assert r.query["contribution"] == {"max_groups": "auto", "max_rows": "auto"}


def test_zcdp_and_selection_charges_are_the_plans_description() -> None:
    s = Session(_frame(), budget=ZCDP(2.0), privacy_unit="pid", rng=np.random.default_rng(2))
    before = Fraction(s.remaining().to_dict()["rho"])
    s.query(_plan({"type": "zcdp", "rho": 0.5}))
    assert before - Fraction(s.remaining().to_dict()["rho"]) == Fraction(0.5)
    q = from_spec({**_plan(), "keys": None, "select": {"delta": 1e-6}}, "add_remove")
    schema = Schema.of([("pid", "integer"), ("g", "integer"), ("score", "integer"),
                        ("x", "float")], "pid")
    assert plan_auto(q, schema, AR).charge == ApproxDP(1.0, 1e-6, AR)


@pytest.mark.parametrize("share", [0.01, 0.15, 0.5, 0.99])
@pytest.mark.parametrize("k", [1, 2, 4])
def test_the_split_composes_within_the_plans_privacy_exactly(share: float, k: int) -> None:
    for eps in (1.0, 0.1, 1e-3, 7.3):
        main, each = _split(PureDP(eps), share, k, AR)
        assert isinstance(main, PureDP)
        assert Fraction(main.eps) + k * Fraction(each) <= Fraction(eps)
        assert Fraction(main.eps) + k * Fraction(each) >= Fraction(eps) * (1 - Fraction(1, 10**9))
        zmain, zeach = _split(ZCDP(eps), share, k, AR)
        assert isinstance(zmain, ZCDP)
        assert Fraction(zmain.rho) + k * Fraction(zeach) ** 2 / 2 <= Fraction(eps)


@pytest.mark.parametrize(("spec", "param"), [
    (_plan(contribution=None), "contribution"),
    ({**_plan(), "aggregations": [{"type": "sum", "column": "score", "lower": 0,
                                   "upper": "auto", "per": "unit"}]}, "upper"),
    ({**_plan(), "aggregations": [{"type": "mean", "column": "score", "lower": 0,
                                   "upper": "high"}]}, "upper"),
    (_plan(auto_share=1.5), "auto_share"),
    (_plan(auto_share=1e-300), "auto_share"),
    ({**_plan(), "contribution": {"max_groups": "auto", "max_rows": "lots"}}, "max_rows"),
    ({**_plan(), "group_by": ["pid"], "keys": [[1], [2]]}, "group_by"),
    ({**_plan(), "contribution": {"max_rows": "auto"}}, "max_groups"),  # grouping: no silent 1
])
def test_refused_before_any_spend_naming_the_parameter(spec: dict[str, Any], param: str
                                                        ) -> None:
    if spec.get("contribution", 0) is None:
        del spec["contribution"]
    s = Session(_frame(), budget=PureDP(3.0), privacy_unit="pid")
    before = s.remaining()
    with pytest.raises(ValidationError) as ei:
        s.query(spec)
    assert ei.value.parameter == param, str(ei.value)
    assert s.remaining() == before


def test_a_privacy_unit_without_bounds_points_to_auto_and_preview() -> None:
    s = Session(_frame(), budget=PureDP(3.0), privacy_unit="pid")
    with pytest.raises(ValidationError) as ei:
        s.query({"type": "query", "privacy": {"type": "pure", "eps": 1.0},
                 "aggregations": [{"type": "count"}]})
    msg = str(ei.value)
    assert ei.value.parameter == "contribution"
    assert "'auto'" in msg
    assert "preview" in msg
    with pytest.raises(ValidationError):  # the preview refuses it too, naming it
        s.preview({"type": "query", "privacy": {"type": "pure", "eps": 1.0},
                   "aggregations": [{"type": "count"}]})


def test_auto_bounds_without_a_privacy_unit_are_refused() -> None:
    s = Session(_frame(), budget=PureDP(3.0))
    before = s.remaining()
    with pytest.raises(ValidationError) as ei:
        s.query({"type": "query", "privacy": {"type": "pure", "eps": 1.0},
                 "aggregations": [{"type": "mean", "column": "score", "lower": 0,
                                   "upper": "auto"}]})
    assert ei.value.parameter == "lower"
    with pytest.raises(ValidationError) as ei:
        s.query(_plan())
    assert ei.value.parameter == "contribution"
    assert s.remaining() == before


def test_preview_states_the_auto_stage_and_reads_no_data(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    s = Session(_frame(), budget=PureDP(3.0), privacy_unit="pid")

    def no(*a: Any, **k: Any) -> Any:
        raise AssertionError("the preview read the data")
    monkeypatch.setattr(AutoPlan, "release", no)
    monkeypatch.setattr(AutoPlan, "_cells", no)
    monkeypatch.setattr(AutoPlan, "_values", no)
    before = s.remaining()
    p = s.preview(_plan())
    assert p["charge"] == {"type": "pure", "eps": 1.0, "neighbouring": "add_remove"}
    assert p["admitted"]
    assert p["noise"] is None
    auto = p["auto"]
    assert set(auto["each"]) == {"max_groups", "max_rows", "1.lower", "1.upper"}
    assert auto["privacy"]["eps"] == pytest.approx(0.15)
    assert auto["main_privacy"]["eps"] == pytest.approx(0.85)
    assert "depends on the bounds" in auto["note"]
    assert s.remaining() == before


def test_released_bounds_where_the_data_put_them() -> None:
    """Every unit: 3 groups of 4 rows; scores uniform in [40, 90]: at a large eps the
    scans stop at the first candidate holding the level's share."""
    d = _frame(units=150)
    s = Session(d, budget=PureDP(1e3), privacy_unit="pid", rng=np.random.default_rng(3))
    r = s.query(_plan({"type": "pure", "eps": 400.0}))
    b = r.answer.bounds
    assert b is not None
    assert b["contribution"] == {"max_groups": 3, "max_rows": 4}
    agg = b["aggregations"][0]
    assert agg["lower"] == 40.0  # the largest candidate with 90 % of the values above it
    assert agg["upper"] == 100.0  # the first candidate with 90 % of the values below it
    assert r.answer.groups[0].estimates[1].value is not None


def test_choose_is_the_first_candidate_passing_the_level() -> None:
    rng = np.random.default_rng(0)
    v = np.arange(1, 101, dtype=np.float64)
    c = np.asarray(count_candidates(1000), dtype=np.float64)
    assert c[choose(v, c, 0.9, 1e3, rng, n_hat=100)] == 100.0  # 90 of 100 values <= 100
    assert c[choose(v, c, 0.45, 1e3, rng, n_hat=100)] == 50.0  # 50 >= 45 values; 40 < 45
    assert c[choose(v, c, 0.045, 1e3, rng, n_hat=100, upper=False)] == 5.0  # 96 >= 5
    assert c[choose(np.full(7, 3.0), c, 0.9, 1e3, rng, n_hat=7)] == 3.0
    empty = choose(np.zeros(0), c, 0.9, 1.0, rng, n_hat=-3)  # total: some candidate
    assert 0 <= empty < c.size


def test_candidates_follow_declarations_and_types() -> None:
    ints = value_candidates(Column("s", ColumnType.INTEGER, storage="TINYINT"), "upper", None)
    assert ints[0] == -120.0
    assert ints[-1] == 120.0
    assert all(x.is_integer() for x in ints)
    decl = value_candidates(Column("s", ColumnType.FLOAT, bounds=(0, 250)), "upper", 0.0)
    assert decl[-1] == 250.0
    assert min(decl) > 0
    assert 100.0 in decl
    assert value_candidates(Column("b", ColumnType.BOOLEAN), "lower", None) == [0.0, 1.0]
    assert count_candidates(15)[-1] == 15
    assert count_candidates()[:10] == list(range(1, 11))


@pytest.mark.parametrize("case", ["empty", "all_null", "one_row", "neighbour"])
def test_total_after_the_spend_and_one_outcome_class(case: str) -> None:
    """Empty data, an all-NULL column, a unit with one row, and a data set without one
    unit all answer, with the same labels, groups and bounds fields (the outcome class)."""
    d = _frame(units=30)
    if case == "empty":
        d = d.iloc[:0]
    elif case == "all_null":
        d = d.assign(score=pd.array([pd.NA] * len(d), dtype="Int64"))
    elif case == "one_row":
        d = pd.concat([d, pd.DataFrame([(999, 2, 55, 1.0)], columns=d.columns)])
    elif case == "neighbour":
        d = d[d.pid != 7]
    schema = [Column("score", ColumnType.INTEGER)]
    shapes = []
    for data in (_frame(units=30), d):
        s = Session(data, budget=PureDP(3.0), privacy_unit="pid", schema=schema,
                    rng=np.random.default_rng(5))
        r = s.query(_plan({"type": "pure", "eps": 0.5}))
        a = r.answer
        assert a.bounds is not None
        shapes.append((a.labels, [g.key for g in a.groups], sorted(a.bounds),
                       sorted(a.bounds["contribution"])))
    assert shapes[0] == shapes[1]
