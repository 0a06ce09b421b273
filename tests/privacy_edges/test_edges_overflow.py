"""Parameters whose arithmetic overflows are refused before the spend, alike on neighbours.

Each case once failed with an OverflowError (a 500) or answered infinity after its
charge: ``select.delta`` 5e-324 or 1e-308 with ``max_groups`` 40 (``log(40 / delta)``
overflowed), per-unit sums and means with bounds of 1e306 (the rows' pre-clip overflowed),
bounds and workloads whose noise scale overflowed (charged, then ``'-inf'`` or a value
drawn with noise of infinite scale). Now each ends as :data:`EXPECTED` says -- answered
with finite numbers (value and noise), or refused naming the parameter -- nothing spent
on a refusal, the same on a data set with and without one more unit.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ZCDP, ApproxDP, PureDP
from dpsieve.errors import DPError

P = {"type": "pure", "eps": 0.5}


def _frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    d = pd.DataFrame({"pid": [1, 1, 2, 3, 4], "x": [1.0, 2.0, 3.0, 4.0, 5.0],
                      "g": ["a", "b", "a", "c", "a"]})
    extra = pd.DataFrame({"pid": [99, 99], "x": [1.7e308, -math.inf], "g": ["z", "a"]})
    return d, pd.concat([d, extra], ignore_index=True)


def _q(agg: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": kw.pop("privacy", P), "aggregations": [agg], **kw}


CASES: dict[str, dict[str, Any]] = {
    "select delta 5e-324": _q({"type": "count", "per": "unit"}, group_by=["g"],
                              select={"delta": 5e-324}, contribution={"max_groups": 40}),
    "select delta 1e-308": _q({"type": "count", "per": "unit"}, group_by=["g"],
                              select={"delta": 1e-308}, contribution={"max_groups": 40}),
    "select zcdp delta 5e-324": _q({"type": "count", "per": "unit"}, group_by=["g"],
                                   select={"delta": 5e-324},
                                   contribution={"max_groups": 40},
                                   privacy={"type": "zcdp", "rho": 0.5}),
    "select tiny eps": _q({"type": "count", "per": "unit"}, group_by=["g"],
                          select={"delta": 1e-6}, privacy={"type": "pure", "eps": 1e-300},
                          contribution={"max_groups": 1}),
    # e^(eps / L0) as a power of two of 1e299 bits (the truncated geometric's ratio): the
    # process grew past 8 GB before the spend; now capped, refused by the budget at once
    "select huge eps": _q({"type": "quantile", "column": "x", "lower": -5e-324,
                           "upper": 5e-324, "quantiles": [0.1, 0.9]}, group_by=["g"],
                          select={"delta": 1e-308}, privacy={"type": "pure", "eps": 1e300},
                          contribution={"max_groups": 5, "max_rows": 1}),
    "select eps 800": _q({"type": "count", "per": "unit"}, group_by=["g"],
                         select={"delta": 1e-308}, privacy={"type": "pure", "eps": 800.0},
                         contribution={"max_groups": 5, "max_rows": 1}),
    "unit sum 1e306": _q({"type": "sum", "column": "x", "lower": 0, "upper": 1e306,
                          "per": "unit"}, contribution={"max_groups": 1}),
    "unit mean 1e306": _q({"type": "mean", "column": "x", "lower": -1e306, "upper": 1e306,
                           "per": "unit"}, contribution={"max_groups": 1}),
    "unit sum 1e305 keys": _q({"type": "sum", "column": "x", "lower": -1e305,
                               "upper": 1e305, "per": "unit"}, group_by=["g"],
                              keys=[["a"], ["b"]], contribution={"max_groups": 2}),
    "row sum noise 1e308": _q({"type": "sum", "column": "x", "lower": -1e306,
                               "upper": 1e306}, contribution={"max_rows": 100}),
    "row mean 1.7e308": _q({"type": "mean", "column": "x", "lower": -1.7e308,
                            "upper": 1.7e308}, contribution={"max_rows": 1}),
    "zcdp sum 1.7e308": _q({"type": "sum", "column": "x", "lower": -1.7e308,
                            "upper": 1.7e308}, contribution={"max_rows": 1},
                           privacy={"type": "zcdp", "rho": 0.01}),
    "bound 10**400": _q({"type": "sum", "column": "x", "lower": 0, "upper": 10**400},
                        contribution={"max_rows": 1}),
    "variance 1e154": _q({"type": "variance", "column": "x", "lower": -1e154,
                          "upper": 1e154}, contribution={"max_rows": 1}),
    # the one-aggregation shapes: their noise scale overflowed too (answered with noise
    # of scale inf, a huge or infinite value, after the charge)
    "linear workload 1e308": {"type": "linear", "column": "g", "categories": ["a", "b"],
                              "workload": [[1e308, 1e308]], "privacy": P,
                              "contribution": {"max_rows": 1}},
    "sum shape 1e308": {"type": "sum", "column": "x", "lower": -1e308, "upper": 1e308,
                        "privacy": P, "contribution": {"max_rows": 1}},
    "mean shape 1.7e308": {"type": "mean", "column": "x", "lower": -1.7e308,
                           "upper": 1.7e308, "privacy": P, "contribution": {"max_rows": 1}},
}
#: How each case must end: answered (finite numbers), or refused naming the parameter.
EXPECTED = {"select delta 5e-324": "ok", "select delta 1e-308": "ok",
            "select zcdp delta 5e-324": "IncompatiblePrivacyError",
            "select tiny eps": "privacy", "select huge eps": "BudgetExceededError",
            "select eps 800": "BudgetExceededError", "unit sum 1e306": "upper",
            "unit mean 1e306": "upper",
            "unit sum 1e305 keys": "upper", "row sum noise 1e308": "aggregations",
            "row mean 1.7e308": "aggregations", "zcdp sum 1.7e308": "aggregations",
            "bound 10**400": "upper", "variance 1e154": "aggregations",
            "linear workload 1e308": "aggregations", "sum shape 1e308": "aggregations",
            "mean shape 1.7e308": "aggregations"}


def _outcome(frame: pd.DataFrame, spec: dict[str, Any]) -> tuple[str, str, bool, Any]:
    zcdp = spec["privacy"]["type"] == "zcdp"
    budget = ZCDP(10.0) if zcdp else ApproxDP(10.0, 1e-3)
    s = Session(frame, budget=budget, privacy_unit="pid")
    before = s.remaining().to_dict()
    try:
        r = s.run(spec)
    except DPError as e:
        return type(e).__name__, str(e), s.remaining().to_dict() == before, None
    except Exception as e:  # the defect: anything but a refusal or an answer
        return "error " + type(e).__name__, str(e), False, None
    return "ok", "", s.remaining().to_dict() == before, (r.value, r.noise)


def _finite(v: Any) -> bool:
    """No infinity or NaN anywhere, as a float or as the JSON-ready text of one (an
    answer's value ``'-inf'``, an interval ``['-inf', 'nan']``)."""
    if isinstance(v, dict):
        return all(_finite(x) for x in v.values())
    if isinstance(v, list | tuple):
        return all(_finite(x) for x in v)
    if isinstance(v, str):
        return v.strip().lower().lstrip("+-") not in ("inf", "infinity", "nan")
    return not isinstance(v, float) or math.isfinite(v)


def test_finite_sees_infinity_as_text() -> None:
    assert _finite({"a": [1.0, "x", None, {"b": "a"}]})
    for bad in (math.inf, math.nan, "-inf", "nan", "Infinity", ["1", "+inf"]):
        assert not _finite({"v": [0.0, bad]}), bad


@pytest.mark.parametrize("name", sorted(CASES))
def test_overflowing_parameters_are_refused_alike_before_the_spend(name: str) -> None:
    d, d1 = _frames()
    a, b = _outcome(d, CASES[name]), _outcome(d1, CASES[name])
    assert a[:3] == b[:3], (a, b)
    want = EXPECTED[name]
    if want == "ok":
        assert a[0] == "ok", a
        assert _finite(a[3]), a  # answered: finite numbers only (value and noise)
        assert _finite(b[3]), b
    else:
        assert a[0] in ("ValidationError", "IncompatiblePrivacyError",
                        "BudgetExceededError"), a
        assert a[2], a  # refused: nothing spent
        if a[0] == "ValidationError":
            assert a[1].startswith(f"The '{want}' parameter"), a
        else:
            assert a[0] == want, a


def test_tiny_select_delta_is_answered_on_an_approximate_budget() -> None:
    """The threshold is computed as log(L0) - log(delta): finite for every delta."""
    d, _ = _frames()
    s = Session(d, budget=ApproxDP(10.0, 1e-3), privacy_unit="pid")
    r = s.run(CASES["select delta 5e-324"])
    sel = r.value["selection"]
    assert sel["delta"] == 5e-324
    assert sel["units_50"] > 10**4  # far above every count here
    assert sel["selected"] == 0


@pytest.mark.parametrize("eps", [800.0, 1e20, 1e300])
def test_selection_at_a_huge_eps_is_prepared_at_once(eps: float) -> None:
    """The truncated geometric's table and the Gaussian threshold's delta at eps up to
    1e300 (the ratio capped at e^700, a delta bound below the floats stated as 5e-324,
    a sigma below the sampler's least raised to it): answered on a budget that has it,
    no RuntimeWarning (an error here), finite."""
    from fractions import Fraction

    from dpsieve.queries._selection_math import geometric_table, zcdp_delta_up

    assert geometric_table(Fraction(eps), Fraction(1, 10**9)) is not None
    assert 0 < zcdp_delta_up(1.0, eps) <= 1
    d, _ = _frames()
    s = Session(d, budget=ApproxDP(1.7e308, 0.5), privacy_unit="pid")
    spec = CASES["select eps 800"]
    r = s.run({**spec, "privacy": {"type": "pure", "eps": eps}})
    assert _finite((r.value, r.noise))


def test_pure_budget_refuses_selection_before_the_spend() -> None:
    d, _ = _frames()
    s = Session(d, budget=PureDP(10.0), privacy_unit="pid")
    with pytest.raises(DPError):
        s.run(CASES["select delta 1e-308"])
    assert s.remaining().to_dict()["exact"] == "10/1"
