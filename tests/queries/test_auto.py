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
    units_per_step,
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
    assert auto["privacy"]["eps"] == pytest.approx(0.1)
    assert auto["main_privacy"]["eps"] == pytest.approx(0.9)
    # targets from public values: noise unit sqrt(2) 2 / 0.9 (two aggregations), 5 keys
    unit = 2 ** 0.5 * 2 / 0.9
    assert auto["each"]["max_groups"]["target"] == pytest.approx(unit * 5)
    assert auto["each"]["max_rows"]["target"] == pytest.approx(unit * 5 / 2)
    assert auto["each"]["1.upper"]["target"] == pytest.approx(unit * 5 / 2)
    assert "depends on the bounds" in auto["note"]
    # a step of each walk costs beta / eps_q units (eps_q = 0.1 / 4); max_groups capped
    # by the 5 keys has only the eps_q / 2 part of the prior: half a unit
    each = auto["each"]["max_rows"]["eps"]
    assert each == pytest.approx(0.025)
    assert auto["each"]["max_groups"]["units_per_step"] == pytest.approx(0.5)
    for f in ("max_rows", "1.lower", "1.upper"):
        assert auto["each"][f]["units_per_step"] == pytest.approx(1.5 / each)
    assert s.remaining() == before


@pytest.mark.parametrize("nb", list(Neighbouring))
@pytest.mark.parametrize("median", [True, False])
@pytest.mark.parametrize("prior", [True, False])
def test_units_per_step_is_the_prior_step_over_a_unit_of_excess_in_choose(
        monkeypatch: pytest.MonkeyPatch, nb: Neighbouring, median: bool, prior: bool) -> None:
    """The preview's figure against the scores :func:`choose` hands to permute-and-flip:
    with no values the scores are the prior alone (``-B i``); one value between the first
    two candidates (1 and 2) gives the first an excess of 1 (``-M``), so one step of the
    prior weighs ``B / M`` units of excess, under either neighbouring (the coefficient
    divides both alike)."""
    target = None if median else 0.0
    prior_only, _, _ = _captured(monkeypatch, np.zeros(0), target, True, nb, prior)
    one, _, _ = _captured(monkeypatch, np.asarray([1.5]), target, True, nb, prior)
    b = -prior_only[1]
    m = -one[0]
    assert prior_only[0] == 0.0
    assert b > 0
    assert m > 0
    got = units_per_step(0.37, median, not prior, nb)
    assert got == pytest.approx(b / m, rel=1e-5)  # B is rounded to an integer
    if prior:  # the full prior: 3/2 nats a step over eps (target) or eps / (2 s) a unit
        s = 2 if nb == Neighbouring.REPLACE_ONE else 1
        assert got == pytest.approx(1.5 / 0.37 * (2 * s if median else 1))


def test_released_bounds_where_the_data_put_them() -> None:
    """Every unit: 3 groups of 4 rows; scores uniform in [40, 90]: at a large eps each
    bound is the first candidate leaving no more units beyond it than its target (here
    below 1: none)."""
    d = _frame(units=150)
    s = Session(d, budget=PureDP(1e3), privacy_unit="pid", rng=np.random.default_rng(3))
    r = s.query(_plan({"type": "pure", "eps": 400.0}))
    b = r.answer.bounds
    assert b is not None
    assert b["contribution"] == {"max_groups": 3, "max_rows": 4}
    agg = b["aggregations"][0]
    assert agg["lower"] == 40.0  # the largest candidate with no value below it
    assert agg["upper"] == 100.0  # the smallest candidate with no value above it
    assert r.answer.groups[0].estimates[1].value is not None


def test_choose_is_the_first_candidate_within_its_target() -> None:
    rng = np.random.default_rng(0)
    v = np.arange(1, 101, dtype=np.float64)
    c = np.asarray(count_candidates(1000), dtype=np.float64)
    assert c[choose(v, c, 10, 1e3, rng)] == 100.0  # 80 leaves 20 above, 100 none
    assert c[choose(v, c, 40, 1e3, rng)] == 60.0  # 60 leaves 40 above; 50 leaves 50
    assert c[choose(v, c, None, 1e3, rng)] == 50.0  # the median: 50 <= 50, 50 above
    assert c[choose(v, c, 4, 1e3, rng, upper=False)] == 5.0  # 4 below 5; 9 below 10
    assert c[choose(np.full(7, 3.0), c, 0, 1e3, rng)] == 3.0
    for nb in Neighbouring:
        empty = choose(np.zeros(0), c, 0.5, 1.0, rng, nb=nb)  # total: some candidate
        assert 0 <= empty < c.size
        assert 0 <= choose(np.zeros(0), c, None, 1.0, rng, nb=nb) < c.size


def _captured(monkeypatch: pytest.MonkeyPatch, values: np.ndarray, target: float | None,
              upper: bool, nb: Neighbouring, prior: bool = True
              ) -> tuple[list[float], float, bool]:
    """The scores, sensitivity and monotonic flag :func:`choose` hands to permute-and-flip."""
    import dpsieve.mechanisms.select as sel

    got: list[Any] = []

    def fake(scores: list[float], eps: float, sensitivity: float, rng: Any, *,
             monotonic: bool) -> int:
        got.append((list(scores), sensitivity, monotonic, eps))
        return 0
    monkeypatch.setattr(sel, "permute_and_flip", fake)
    c = np.asarray(count_candidates(), dtype=np.float64)
    choose(values, c, target, 0.37, None, upper=upper, nb=nb, prior=prior)
    scores, sens, mono, eps = got[0]
    assert eps == 0.37
    return scores, sens, mono


@pytest.mark.parametrize("target", [None, 0.0, 3.5, 40.0])
@pytest.mark.parametrize("upper", [True, False])
def test_neighbours_scores_move_within_the_sensitivity(monkeypatch: pytest.MonkeyPatch,
                                                       target: float | None,
                                                       upper: bool) -> None:
    """The privacy of a choice is permute-and-flip's for scores of the stated sensitivity
    (and monotonic when stated): for a unit added, removed or changed, every score moves
    by at most the sensitivity, all one way when monotonic; the scores are integers (exact
    in a double); the prior is the same on both sides. A target's scores are monotonic
    with sensitivity 1 under replace-one too (docs/proofs/queries.md §7): one value
    ``v`` changed to ``v' > v`` raises the counts above (an upper walk's scores all fall)
    and lowers the counts below (a lower walk's all rise); the median's are not (s 2)."""
    rng = np.random.default_rng(7)
    sens_of: dict[Neighbouring, set[float]] = {nb: set() for nb in Neighbouring}
    moved = {True: 0, False: 0}
    for trial in range(60):
        base = rng.geometric(0.2, int(rng.integers(0, 80))).astype(np.float64)
        extra = float(rng.choice([0.5, 1, 3, 7, 50, 2e6]))
        for nb in Neighbouring:
            if nb == Neighbouring.ADD_REMOVE:
                pairs = [(base, np.append(base, extra), 0.0)]
            else:
                if base.size == 0:
                    continue
                changed = base.copy()
                at = int(rng.integers(0, base.size))
                changed[at] = extra
                pairs = [(base, changed, extra - base[at])]  # the sign of v' - v
            for d0, d1, up in pairs:
                s0, sens, mono = _captured(monkeypatch, d0, target, upper, nb)
                s1, sens1, mono1 = _captured(monkeypatch, d1, target, upper, nb)
                assert (sens, mono) == (sens1, mono1)
                assert mono == (target is not None)  # under either neighbouring
                sens_of[nb].add(sens)
                diff = np.asarray(s1) - np.asarray(s0)
                assert np.all(np.abs(diff) <= sens), (trial, nb, diff)
                if mono:
                    assert np.all(diff <= 0) or np.all(diff >= 0)
                if mono and nb == Neighbouring.REPLACE_ONE:
                    # the direction is the proof's: v' > v, upper: the excesses grow
                    falls = (up > 0) == upper
                    assert np.all(diff <= 0) if falls else np.all(diff >= 0), (up, diff)
                    moved[falls] += bool(np.any(diff != 0))
                assert all(float(x).is_integer() and abs(x) < 2**53 for x in s0 + s1)
    ar, ro = sens_of[Neighbouring.ADD_REMOVE], sens_of[Neighbouring.REPLACE_ONE]
    assert len(ar) == len(ro) == 1
    # replace-one: a target's sensitivity is add/remove's (s = 1), the median's twice it
    assert ro == ({2 * x for x in ar} if target is None else ar)
    if target is not None:  # both directions were exercised with scores that moved
        assert moved[True] > 0
        assert moved[False] > 0
    empty, sens, _ = _captured(monkeypatch, np.zeros(0), 5.0, True, Neighbouring.ADD_REMOVE)
    steps = np.diff(empty)
    assert np.all(steps == steps[0])  # the prior alone, one step each
    assert steps[0] < 0
    weak, _, _ = _captured(monkeypatch, np.zeros(0), 5.0, True, Neighbouring.ADD_REMOVE,
                           prior=False)
    assert 0 > weak[1] > empty[1]  # only the eps / 2 part: exp(-0.185) a step


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


def test_bounds_shrink_with_the_privacy_as_their_targets_say() -> None:
    """The trade-off, not a fixed quantile: a count per group at a smaller eps has a
    larger target (more units may lie beyond ``max_rows``), so it releases fewer rows per
    unit; and each release is the first candidate within its target when eps is large
    enough for the choice to be sharp (units: 3 groups of 1-40 rows, geometric)."""
    from dpsieve.queries.engines.frames import PandasEngine

    rng = np.random.default_rng(4)
    rows = []
    for u in range(3000):
        for g in rng.choice(5, 3, replace=False):
            rows += [(u, int(g))] * int(min(40, rng.geometric(0.2)))
    d = pd.DataFrame(rows, columns=["pid", "g"])
    schema = Schema.of([("pid", "integer"), ("g", "integer")], "pid")
    engine = PandasEngine(d)
    largest = d.groupby(["pid", "g"]).size().groupby(level=0).max().to_numpy()
    got = {}
    for eps in (400.0, 0.5):
        q = from_spec({"type": "query", "privacy": {"type": "pure", "eps": eps},
                       "aggregations": [{"type": "count"}], "group_by": ["g"],
                       "keys": [[i] for i in range(5)], "contribution": "auto"}, "add_remove")
        auto = plan_auto(q, schema, AR)
        t = {b.field: b.target for b in auto.bounds}
        assert t["max_groups"] == pytest.approx(2 ** 0.5 / (eps * 0.9) * 5)
        runs = [auto.release(engine, np.random.default_rng(s)) for s in range(5)]
        got[eps] = sorted(r["max_rows"] for r in runs)
        if eps == 400.0:  # sharp: the first candidate leaving <= floor(target x L0) beyond
            for r in runs:
                allowed = int(t["max_rows"] * r["max_groups"])
                first = next(c for c in count_candidates() if (largest > c).sum() <= allowed)
                assert r["max_rows"] == first
                assert r["max_groups"] == 3
    assert got[0.5][2] < got[400.0][2], got
