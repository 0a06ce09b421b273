"""DP key selection's (eps, delta) as proved in docs/proofs/queries.md §5, each construction
checked against an independent computation: closed forms and summed noise mass (mpmath),
the exact privacy profile of one group's output by enumeration, and the truncated geometric
against Google's implementation (pydp, the library PipelineDP runs). The charge is exactly
ApproxDP(eps, delta) (ApproxZCDP(rho, delta)) whatever the construction."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest

from dpsieve.accounting.events import ZCDP, ApproxDP, ApproxZCDP, Neighbouring, PureDP
from dpsieve.mechanisms import DiscreteGaussianMechanism, DiscreteLaplaceMechanism
from dpsieve.queries import Schema
from dpsieve.queries._selection_math import (
    ONE,
    dgauss_tail_up,
    geometric_table,
    zcdp_delta_up,
)
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import Prepared, prepare
from dpsieve.queries.selection import GeometricSelection, NoisyThreshold

mpmath.mp.dps = 30
SCHEMA = Schema.of([("pid", "integer"), ("city", "string"), ("x", "float")], "pid")
AR = Neighbouring.ADD_REMOVE


def _prepared(privacy: dict[str, Any], delta: float, l0: int, *, per: str = "row",
              by: str = "auto", agg: str = "count", rows: int = 3) -> Prepared:
    a: dict[str, Any] = ({"type": "count", "per": per} if agg == "count" else
                         {"type": "sum", "column": "x", "lower": 0, "upper": 1})
    spec = {"type": "query", "privacy": privacy, "aggregations": [a],
            "group_by": ["city"], "select": {"delta": delta, "by": by},
            "contribution": {"max_groups": l0, "max_rows": rows}}
    return prepare(from_spec(spec), SCHEMA, AR)


def _mp(x: float | Fraction) -> mpmath.mpf:
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


def _dlap_tail(t: float, m: int) -> mpmath.mpf:
    q = mpmath.e ** (-1 / _mp(t))
    return q**m / (1 + q)


def _dgauss_tail(s2: Fraction, m: int) -> mpmath.mpf:
    """P[Z >= m] for N_Z(0, s2), m >= 0, by summing the mass (normaliser summed too) out
    to 40 sigma + 40 past m: the terms left out are below e^-800 of the sum."""
    v = _mp(s2)
    k = int(40 * math.sqrt(float(s2))) + 40
    w = [mpmath.e ** (-(mpmath.mpf(z) ** 2) / (2 * v)) for z in range(k + m + 1)]
    total = w[0] + 2 * mpmath.fsum(w[1:k + 1])
    return mpmath.fsum(w[m:]) / total


def _tail(mech: Any, m: int) -> mpmath.mpf:
    if isinstance(mech, DiscreteLaplaceMechanism):
        return _dlap_tail(mech.scale, m)
    return _dgauss_tail(mech.sampled_sigma2, m)


@pytest.mark.parametrize(("eps", "delta", "l0"), [(1.0, 1e-6, 1), (0.5, 1e-9, 4),
                                                  (3.0, 1e-3, 2), (0.05, 1e-6, 8)])
@pytest.mark.parametrize("by", ["auto", "count", "units"])
def test_pure_selections_are_eps_delta_as_proved(eps: float, delta: float, l0: int,
                                                 by: str) -> None:
    p = _prepared({"type": "pure", "eps": eps}, delta, l0, by=by)
    assert p.charge.description == ApproxDP(eps, delta)
    sel = p.charge.selection
    eps_parts = sum(Fraction(c.charge.eps) for c in p.charge.parts)  # type: ignore[union-attr]
    d_parts = sum(Fraction(getattr(c.charge, "delta", 0.0)) for c in p.charge.parts)
    assert sel is not None
    if isinstance(sel, GeometricSelection):
        assert sel.part is None
        assert by != "count"
        assert l0 * Fraction(sel.eps_group) <= Fraction(sel.charge.eps)  # type: ignore[union-attr]
        assert Fraction(sel.charge.eps) + eps_parts <= Fraction(eps)  # type: ignore[union-attr]
        assert l0 * Fraction(sel.delta_group) <= Fraction(delta)
        return
    assert isinstance(sel, NoisyThreshold)
    m = sel.threshold - sel.rows
    exact = l0 * _tail(sel.mechanism, m)  # the groups one unit creates, by summed mass
    assert exact <= _mp(sel.tail_delta)
    if sel.part is None:  # a separate noisy unit count on its share
        assert by != "count"
        s_eps = Fraction(sel.charge.eps)  # type: ignore[union-attr]
        assert s_eps + eps_parts <= Fraction(eps)
        if isinstance(sel.mechanism, DiscreteLaplaceMechanism):
            assert Fraction(l0) / Fraction(sel.mechanism.scale) <= s_eps
            assert exact <= mpmath.mpf(delta)
        else:  # Gaussian within (eps share, delta_g): delta_g + tail <= delta
            rho = Fraction(l0) / (2 * sel.mechanism.sampled_sigma2)
            dg = zcdp_delta_up(float(rho) * (1 + 1e-12), float(s_eps))
            assert dg + float(sel.tail_delta) <= delta * (1 + 1e-9)
        return
    assert by != "units"  # the released count thresholded: no share set aside
    assert eps_parts <= Fraction(eps)
    assert Fraction(sel.tail_delta) + d_parts <= Fraction(delta)
    # it errs high, but by little: a few steps lower the exact tail exceeds the delta
    lower = m - (math.ceil(float(sel.noise().scale) * 0.75) + 3)
    assert l0 * _tail(sel.mechanism, lower) > _mp(sel.tail_delta) / 4


@pytest.mark.parametrize(("rho", "delta", "l0", "per"), [(0.5, 1e-6, 1, "row"),
                                                         (0.1, 1e-9, 3, "unit"),
                                                         (0.02, 1e-6, 16, "row")])
def test_zcdp_selections_are_approx_zcdp_as_proved(rho: float, delta: float, l0: int,
                                                   per: str) -> None:
    for by in ("count", "units"):
        p = _prepared({"type": "zcdp", "rho": rho}, delta, l0, per=per, by=by)
        assert p.charge.description == ApproxZCDP(rho, delta)
        sel = p.charge.selection
        assert isinstance(sel, NoisyThreshold)
        m = sel.mechanism
        assert isinstance(m, DiscreteGaussianMechanism)
        rho_parts = sum(Fraction(c.charge.rho) for c in p.charge.parts)  # type: ignore[union-attr]
        if by == "units":
            assert Fraction(l0) / (2 * m.sampled_sigma2) <= Fraction(sel.charge.rho)  # type: ignore[union-attr]
            assert Fraction(sel.charge.rho) + rho_parts <= Fraction(rho)  # type: ignore[union-attr]
        else:
            assert rho_parts <= Fraction(rho)
        assert l0 * _dgauss_tail(m.sampled_sigma2, sel.threshold - sel.rows) <= delta


@pytest.mark.parametrize("s2", [0.3, 1.0, 7.5, 100.0, 2500.0])
def test_the_gaussian_tail_bound_is_above_the_summed_mass(s2: float) -> None:
    s = math.sqrt(s2)
    for m in sorted({0, 1, 2, int(s), int(2 * s), int(4 * s), int(8 * s) + 1}):
        exact = _dgauss_tail(Fraction(s2), m)
        up = dgauss_tail_up(s2, m)
        assert exact <= up
        assert up <= 1.6 * exact + 1e-300 or m == 0  # and close (the head term only)


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 1e-6), (0.125, 2.5e-7), (1.0, 1e-3),
                                            (0.01, 1e-8), (3.0, 1e-9)])
def test_the_truncated_geometric_meets_both_constraints_exactly(eps: float,
                                                               delta: float) -> None:
    """p_0 = 0, non-decreasing, p_n <= e^eps p_(n-1) + delta and 1 - p_(n-1) <=
    e^eps (1 - p_n) + delta in exact arithmetic (e^eps to 50 digits, from below: a
    violation would show), ending at 1; and within 1e-12 of pydp's (Google's) values."""
    import pydp.algorithms.partition_selection as ps

    table = geometric_table(Fraction(eps), Fraction(delta))
    assert table is not None
    assert table[0] == 0
    assert table[-1] == ONE
    e = mpmath.e ** _mp(eps)
    d = _mp(delta)
    for a, b in itertools.pairwise(table):
        pa, pb = mpmath.mpf(a) / ONE, mpmath.mpf(b) / ONE
        assert a <= b
        assert pb <= e * pa + d
        assert 1 - pa <= e * (1 - pb) + d
    google = ps.create_partition_strategy("truncated_geometric", eps, delta, 1)
    for n in range(0, len(table) + 3):
        ours = table[min(n, len(table) - 1)] / ONE
        assert abs(ours - google.probability_of_keep(n)) < 1e-12 + 1e-9 * ours


def _profile_one_group(sel: NoisyThreshold, n: int, eps: float) -> float:
    """The exact delta(eps) between one group's outputs at n and n + 1 units (unit
    statistic): the released noisy count v >= tau, or nothing; by enumeration of v."""
    mech = sel.mechanism
    k = 60 * int(mech.scale if isinstance(mech, DiscreteLaplaceMechanism)
                 else math.sqrt(float(mech.sampled_sigma2))) + 60
    z = np.arange(-k, k + 1)
    if isinstance(mech, DiscreteLaplaceMechanism):
        w = np.exp(-np.abs(z) / mech.scale)
    else:
        w = np.exp(-(z.astype(float) ** 2) / (2 * float(mech.sampled_sigma2)))
    w /= w.sum()
    vals = np.arange(-k + n, k + n + 2)
    p = np.zeros(vals.size)
    q = np.zeros(vals.size)
    p[:-1] += w  # n + Z
    q[1:] += w   # n + 1 + Z
    kept = vals >= sel.threshold
    po, qo = p[kept], q[kept]
    pn, qn = p[~kept].sum(), q[~kept].sum()
    e = math.exp(eps)
    return float(max(np.maximum(qo - e * po, 0).sum() + max(qn - e * pn, 0),
                     np.maximum(po - e * qo, 0).sum() + max(pn - e * qn, 0)))


@pytest.mark.parametrize("privacy", [{"type": "pure", "eps": 1.0},
                                     {"type": "zcdp", "rho": 0.1}])
def test_one_group_by_enumeration(privacy: dict[str, Any]) -> None:
    """L0 = 1, a unit count released and thresholded: a group that exists moves by one
    unit within the count's own privacy (exact profile by enumeration, for every count
    near the threshold), and a group the unit creates (0 -> 1 unit) appears with
    probability at most delta."""
    p = _prepared(privacy, 1e-4, 1, per="unit", by="count")
    sel = p.charge.selection
    assert isinstance(sel, NoisyThreshold)
    assert sel.part is not None
    part = p.charge.parts[0]
    if isinstance(part.charge, (PureDP, ApproxDP)):
        eps = float(part.charge.eps)
        allowed = float(getattr(part.charge, "delta", 0.0))
    else:
        assert isinstance(part.charge, ZCDP)
        eps = 1.0
        allowed = zcdp_delta_up(part.charge.rho, eps)
    for n in range(1, sel.threshold + 3):
        assert _profile_one_group(sel, n, eps) <= allowed + 1e-12, n
    new = float(_tail(sel.mechanism, sel.threshold - 1))
    assert new <= 1e-4


def test_the_choice_releases_more_than_the_separate_share() -> None:
    """A unit count per group at eps 1: thresholding the released count (the whole eps
    on the count) needs fewer units than PipelineDP's default (half eps, truncated
    geometric: 26 units at 1/2), and fewer than the separate-share candidates."""
    auto = _prepared({"type": "pure", "eps": 1.0}, 1e-6, 1, per="unit").charge.selection
    units = _prepared({"type": "pure", "eps": 1.0}, 1e-6, 1, per="unit",
                      by="units").charge.selection
    assert auto is not None
    assert units is not None
    assert auto.part is not None
    assert auto.info()["units_50"] < units.info()["units_50"] <= 26
    big = _prepared({"type": "pure", "eps": 1.0}, 1e-6, 16, per="unit").charge.selection
    assert isinstance(big, NoisyThreshold)  # Gaussian grows with sqrt(L0): chosen at L0 16
    assert isinstance(big.mechanism, DiscreteGaussianMechanism)


def test_share_means_units_and_count_needs_a_count() -> None:
    from dpsieve.errors import ValidationError

    with pytest.raises(ValidationError, match="'by'"):
        _prepared({"type": "pure", "eps": 1.0}, 1e-6, 1, agg="sum", by="count")
    spec = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
            "aggregations": [{"type": "count"}], "group_by": ["city"],
            "select": {"delta": 1e-6, "share": 0.25},
            "contribution": {"max_groups": 1, "max_rows": 1}}
    q = from_spec(spec)
    assert q.selection is not None
    assert q.selection.by == "units"
    with pytest.raises(ValidationError, match="'share'"):
        from_spec({**spec, "select": {"delta": 1e-6, "share": 0.25, "by": "count"}})
    with pytest.raises(ValidationError, match="'by'"):
        from_spec({**spec, "select": {"delta": 1e-6, "by": "rows"}})
