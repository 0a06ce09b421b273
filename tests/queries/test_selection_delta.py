"""DP key selection's (eps, delta) as proved in docs/proofs/queries.md §5, checked in
closed form (mpmath) and by summing the noise's probability mass: a group that only the
added unit creates is released with probability at most delta / L0 (so at most delta over
its <= L0 new groups), and the unit counts of existing groups are released with the eps
share the selection is calibrated to. The charge is exactly ApproxDP(eps, delta)
(ApproxZCDP(rho, delta))."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest

from dpsieve.accounting.events import ZCDP, ApproxDP, ApproxZCDP, Neighbouring, PureDP
from dpsieve.mechanisms import DiscreteGaussianMechanism, DiscreteLaplaceMechanism
from dpsieve.queries import Schema
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare

mpmath.mp.dps = 50
SCHEMA = Schema.of([("pid", "integer"), ("city", "string")], "pid")
AR = Neighbouring.ADD_REMOVE


def _prepared(privacy: dict[str, object], delta: float, l0: int) -> object:
    spec = {"type": "query", "privacy": privacy, "aggregations": [{"type": "count"}],
            "group_by": ["city"], "select": {"delta": delta},
            "contribution": {"max_groups": l0, "max_rows": 3}}
    return prepare(from_spec(spec), SCHEMA, AR)


def _dlap_tail(t: Fraction, m: int) -> mpmath.mpf:
    """P[Z >= m] for DLap(t): q^m / (1 + q), q = e^(-1/t), m >= 1."""
    q = mpmath.e ** (-1 / (mpmath.mpf(t.numerator) / t.denominator))
    return q**m / (1 + q)


def _dlap_tail_summed(t: Fraction, m: int) -> mpmath.mpf:
    q = mpmath.e ** (-1 / (mpmath.mpf(t.numerator) / t.denominator))
    c = (1 - q) / (1 + q)
    return mpmath.nsum(lambda z: c * q**z, [m, mpmath.inf])


def _dgauss_tail(s2: Fraction, m: int) -> mpmath.mpf:
    """P[Z >= m] for N_Z(0, s2), by summing the mass (normaliser summed too)."""
    v = mpmath.mpf(s2.numerator) / s2.denominator
    w = lambda z: mpmath.e ** (-(mpmath.mpf(z) ** 2) / (2 * v))  # noqa: E731
    total = 1 + 2 * mpmath.nsum(w, [1, mpmath.inf])
    return mpmath.nsum(w, [m, mpmath.inf]) / total


@pytest.mark.parametrize(("eps", "delta", "l0"), [(1.0, 1e-6, 1), (0.5, 1e-9, 4),
                                                  (3.0, 1e-3, 2), (0.05, 1e-6, 8)])
def test_pure_selection_is_eps_delta_as_proved(eps: float, delta: float, l0: int) -> None:
    p = _prepared({"type": "pure", "eps": eps}, delta, l0)
    sel = p.charge.selection  # type: ignore[attr-defined]
    assert p.charge.description == ApproxDP(eps, delta)  # type: ignore[attr-defined]
    m = sel.mechanism
    assert isinstance(m, DiscreteLaplaceMechanism)
    assert m.sensitivity == l0  # unit counts move by <= 1 in <= L0 groups (L1 = L0)
    t = Fraction(m.scale)
    # (a) existing groups: eps_sel = L0 / t, at most the selection's share of eps
    assert Fraction(l0) / t <= Fraction(sel.charge.eps)
    assert Fraction(sel.charge.eps) <= Fraction(eps)
    # (b) new groups: L0 P[1 + Z >= tau] <= delta, closed form and summed mass agree
    tail = _dlap_tail(t, sel.threshold - 1)
    assert abs(tail - _dlap_tail_summed(t, sel.threshold - 1)) <= tail * mpmath.mpf(1e-30)
    assert l0 * tail <= mpmath.mpf(delta)
    # it errs high (the bound e^(-m/t) for q^m/(1+q), and a step of margin), but not by
    # more than t ln 2 + 2 steps: there the exact tail already exceeds delta / L0
    lower = sel.threshold - 1 - math.ceil(float(t) * math.log(2)) - 2
    assert l0 * _dlap_tail(t, lower) > mpmath.mpf(delta)


@pytest.mark.parametrize(("rho", "delta", "l0"), [(0.5, 1e-6, 1), (0.1, 1e-9, 3)])
def test_zcdp_selection_is_approx_zcdp_as_proved(rho: float, delta: float, l0: int) -> None:
    p = _prepared({"type": "zcdp", "rho": rho}, delta, l0)
    sel = p.charge.selection  # type: ignore[attr-defined]
    assert p.charge.description == ApproxZCDP(rho, delta)  # type: ignore[attr-defined]
    m = sel.mechanism
    assert isinstance(m, DiscreteGaussianMechanism)
    s2 = m.sampled_sigma2
    # (a) existing groups: L2^2 = L0, rho_sel = L0 / (2 s2) <= the selection's share
    assert Fraction(l0) / (2 * s2) <= Fraction(sel.charge.rho)
    assert Fraction(sel.charge.rho) <= Fraction(rho)
    # (b) new groups, by summing the discrete Gaussian's mass
    assert l0 * _dgauss_tail(s2, sel.threshold - 1) <= mpmath.mpf(delta)


def test_the_charge_is_what_each_budget_kind_is_asked_to_hold() -> None:
    assert _prepared(PureDP(2.0).to_dict(), 1e-7, 2).charge.description == ApproxDP(  # type: ignore[attr-defined]
        2.0, 1e-7)
    assert _prepared(ZCDP(0.2).to_dict(), 1e-7, 2).charge.description == ApproxZCDP(  # type: ignore[attr-defined]
        0.2, 1e-7)
