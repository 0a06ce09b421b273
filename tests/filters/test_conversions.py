"""Conversions between privacy notions: stable, rounded up, never zero for a positive cost.

Regressions of issue 17 item 2 (a tiny pure-DP query charged 0 or less in RDP) and issue 18
item 3 (``zcdp_rho_for`` one ulp over its target), each with the issue's exact inputs, and
mpmath (50 digits) as the reference for every closed form used in a charge.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import mpmath
import pytest

from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.filters import (
    ApproxGDPResidueFilter,
    ApproxZCDPFilter,
    GDPResidueFilter,
    NaiveGDPFilter,
    PureDPFilter,
    RDPFilter,
    ZCDPFilter,
    naive_gdp_cost,
    zcdp_rho_for,
)


def _rr_rdp_mp(eps: float, alpha: float) -> mpmath.mpf:
    """D_alpha(R_eps) in mpmath: log(p e^{(a-1) eps} + q e^{-(a-1) eps}) / (a - 1).

    The log's argument is 1 + O((a-1) a eps^2): enough digits to resolve that are used.
    """
    lost = max(0.0, -math.log10(eps) * 2.0 - math.log10(alpha * (alpha - 1.0)))
    with mpmath.workdps(60 + int(lost)):
        e, a = mpmath.mpf(eps), mpmath.mpf(alpha)
        p = 1 / (1 + mpmath.exp(-e))
        q = 1 - p
        x = a - 1
        return mpmath.log(p * mpmath.exp(x * e) + q * mpmath.exp(-x * e)) / x


def _exhausted_rdp(order: float) -> RDPFilter:
    f = RDPFilter((order,), (1.0,))
    assert f.try_spend(RDP((order,), (1.0,))).admitted
    assert f.remaining()["rdp"] == [0.0]
    return f


def test_issue17_tiny_pure_dp_on_exhausted_rdp_budget_is_refused() -> None:
    """Issue 17.2: PureDP(9.85e-10) was admitted at RDP cost -1.1e-14 (the budget grew)."""
    f = _exhausted_rdp(1.01)
    before = f.to_json()
    d = f.try_spend(PureDP(9.85e-10))
    assert not d.admitted
    assert d.cost["rdp"][0] > 0.0
    assert f.to_json() == before
    assert f.remaining()["rdp"] == [0.0]


def test_issue17_thousand_tiny_queries_on_exhausted_budget_all_refused() -> None:
    """Issue 17.2: RDPFilter((1.5,), (1.0,)) exhausted admitted 1,000 of 1,000 PureDP(1e-9)."""
    f = _exhausted_rdp(1.5)
    assert sum(f.try_spend(PureDP(1e-9)).admitted for _ in range(1000)) == 0


@pytest.mark.parametrize(
    "query",
    [PureDP(1e-170), GDP(1e-170), ApproxDP(1e-170, 0.0), PureDP(5e-324), GDP(5e-324)],
    ids=repr,
)
def test_squares_that_underflow_still_cost(query: object) -> None:
    """eps^2/2 and mu^2/2 underflow to 0 in floats; the exact charges do not."""
    for f in (ZCDPFilter(1.0), ApproxZCDPFilter(1.0, 1e-6)):
        spent = ZCDP(1.0) if isinstance(f, ZCDPFilter) else ApproxZCDP(1.0, 0.0)
        assert f.try_spend(spent).admitted
        assert not f.try_spend(query).admitted, (f.kind, query)
    g = RDPFilter((2.0, 64.0), (1.0, 1.0))
    assert g.try_spend(RDP((2.0, 64.0), (1.0, 1.0))).admitted
    assert not g.try_spend(query).admitted


@pytest.mark.parametrize("eps", [5e-324, 1e-300, 1e-160, 1e-20, 9.85e-10, 1e-3, 0.1, 1.0, 5.0])
@pytest.mark.parametrize("alpha", [1.0000001, 1.01, 1.5, 2.0, 32.0, 1e4, 1e8])
def test_rr_rdp_up_brackets_mpmath(eps: float, alpha: float) -> None:
    from dpsieve.accounting.conversions import rr_rdp_up

    exact = _rr_rdp_mp(eps, alpha)
    got = rr_rdp_up(eps, alpha)
    assert got > 0
    with mpmath.workdps(800):
        g = mpmath.mpf(got.numerator) / got.denominator
        assert g >= exact
        if exact > mpmath.mpf(1e-280):
            # tight: the float form within 1e-11, or an exact bound that is itself tight
            bound = min(mpmath.mpf(eps), mpmath.mpf(alpha) * mpmath.mpf(eps) ** 2 / 2)
            assert g <= exact * (1 + mpmath.mpf(1e-11)) or g == bound


@pytest.mark.parametrize("eps", [30.0, 100.0, 700.0, 1e4, 1e308, 1.7976931348623157e308])
@pytest.mark.parametrize("alpha", [1.01, 2.0, 1e3])
def test_rr_rdp_up_large_eps(eps: float, alpha: float) -> None:
    from dpsieve.accounting.conversions import rr_rdp_up

    exact = _rr_rdp_mp(eps, alpha)
    got = rr_rdp_up(eps, alpha)
    with mpmath.workdps(60):
        g = mpmath.mpf(got.numerator) / got.denominator
        assert exact <= g <= exact * (1 + mpmath.mpf(1e-11))


def _mu_exact(eps: float) -> mpmath.mpf:
    """2 Phi^{-1}(1/(1 + e^{-eps})): the smallest mu with R_eps <= G_mu."""
    with mpmath.workdps(60):
        # Phi^{-1}(p) = sqrt(2) erfinv(2p - 1), 2p - 1 = tanh(eps/2)
        return 2 * mpmath.sqrt(2) * mpmath.erfinv(mpmath.tanh(mpmath.mpf(eps) / 2))


@pytest.mark.parametrize(
    "eps", [5e-324, 1e-310, 1e-200, 1e-20, 1e-9, 0.1, 0.5, 1.0, 2.0, 10.0, 30.0]
)
def test_smallest_gdp_mu_of_rr_is_exact_and_rounded_up(eps: float) -> None:
    from dpsieve.accounting.conversions import smallest_gdp_mu_rr_up

    exact = _mu_exact(eps)
    got = smallest_gdp_mu_rr_up(eps)
    with mpmath.workdps(60):
        assert mpmath.mpf(got) >= exact
        if eps > 1e-300:
            assert mpmath.mpf(got) <= exact * (1 + mpmath.mpf(1e-11))
    assert naive_gdp_cost(PureDP(eps)) == got


def test_smallest_gdp_mu_of_rr_certifies_dominance() -> None:
    """h_{R_eps} <= h_{G_mu} on a grid of x >= 1 (both symmetric), in mpmath."""
    from dpsieve.accounting.conversions import smallest_gdp_mu_rr_up

    for eps in (0.05, 0.5, 2.0, 8.0):
        mu = smallest_gdp_mu_rr_up(eps)
        with mpmath.workdps(40):
            e, m = mpmath.mpf(eps), mpmath.mpf(mu)
            p = 1 / (1 + mpmath.exp(-e))
            for i in range(201):
                x = mpmath.exp(e * i / 200)
                h_r = p * max(0, 1 - x * mpmath.exp(-e))
                lx = mpmath.log(x)
                h_g = mpmath.ncdf(-lx / m + m / 2) - x * mpmath.ncdf(-lx / m - m / 2)
                assert h_r <= h_g


@pytest.mark.parametrize("eps", [1, 2, 3, 30])
def test_integer_parameters_are_read_as_floats(eps: int) -> None:
    """A JSON ``{"eps": 1}`` is an int: it used to reach the atoms as int64 bytes read as
    float64 (NaN loss values) and crash the GDP filters."""
    for make in (lambda: GDPResidueFilter(3.0), lambda: NaiveGDPFilter(3.0)):
        a, b = make(), make()
        da, db = a.try_spend(PureDP(eps)), b.try_spend(PureDP(float(eps)))
        assert da.to_dict() == db.to_dict()
    assert naive_gdp_cost(GDP(2)) == 2.0
    assert ApproxGDPResidueFilter(3.0, 1e-3).dry_run(ApproxDP(eps, 0)).admitted == (eps < 3)


@pytest.mark.parametrize("eps", [700.0, 800.0, 1e308, math.inf])
def test_huge_costs_are_refused_without_error(eps: float) -> None:
    for f in (
        GDPResidueFilter(5.0),
        NaiveGDPFilter(5.0),
        ApproxGDPResidueFilter(5.0, 1e-3),
        ZCDPFilter(5.0),
        RDPFilter((2.0,), (5.0,)),
        PureDPFilter(5.0),
        ApproxZCDPFilter(5.0, 1e-3),
    ):
        assert not f.try_spend(PureDP(eps)).admitted


def _cks_log_delta(r: mpmath.mpf, eps: float, iters: int = 90) -> mpmath.mpf:
    """min over alpha > 1 of log(e^{(a-1)(a r - eps)} (1 - 1/a)^{a-1} / a) (Canonne, Kamath &
    Steinke 2020, Prop. 12 with tau = a r; convex in a: golden section on log(a - 1))."""

    def f(u: mpmath.mpf) -> mpmath.mpf:
        a = 1 + mpmath.e**u
        return (a - 1) * (a * r - eps) + (a - 1) * mpmath.log(1 - 1 / a) - mpmath.log(a)

    lo, hi = mpmath.mpf(-40), mpmath.mpf(40)
    g = (mpmath.sqrt(5) - 1) / 2
    for _ in range(iters):
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if f(x1) <= f(x2):
            hi = x2
        else:
            lo = x1
    return min(f(lo), f(hi), f((lo + hi) / 2))


def _zcdp_exceeds(rho: float, eps: float, delta: float) -> bool:
    """True if neither Bun-Steinke nor Canonne-Kamath-Steinke (at any order found) certifies
    rho-zCDP -> (eps, delta)-DP, in mpmath."""
    with mpmath.workdps(50):
        r = mpmath.mpf(rho)
        d = mpmath.mpf(delta)
        if r + 2 * mpmath.sqrt(r * mpmath.log(1 / d)) <= eps:
            return False
        return bool(_cks_log_delta(r, eps) > mpmath.log(d))


def test_issue18_zcdp_rho_for_never_over_target() -> None:
    """Issue 18.3: 7,242 of 20,000 random targets were exceeded by one ulp (e.g. (1, 1e-6))."""
    for eps, delta in (
        (1.0, 1e-6),
        (10.0, 1e-6),
        (16.676667029982784, 4.086595393913807e-05),
        (0.0355416713429349, 1.6506100142352206e-05),
        (0.1482037447214494, 3.5679407043043605e-07),
    ):
        rho = zcdp_rho_for(eps, delta)
        assert not _zcdp_exceeds(rho, eps, delta)
        assert _zcdp_exceeds(rho * (1 + 1e-9), eps, delta)  # the largest, to 1e-9


def test_zcdp_rho_for_random_targets() -> None:
    rng = random.Random(18)
    for _ in range(300):
        eps, delta = 10 ** rng.uniform(-3, 2.5), 10 ** rng.uniform(-300, -0.01)
        assert not _zcdp_exceeds(zcdp_rho_for(eps, delta), eps, delta)


def test_for_target_splits_never_exceed_delta() -> None:
    """The queries' delta share plus the conversion's is at most delta, exactly."""
    for delta in (1e-6, 3e-7, 0.3, 1e-300):
        f = ApproxZCDPFilter.for_target(1.0, delta, delta_split=0.3)
        rho, d_q = f.remaining()["rho"], f.remaining()["delta"]
        with mpmath.workdps(400):
            rest_q = Fraction(delta) - Fraction(d_q)
            rest = mpmath.mpf(rest_q.numerator) / rest_q.denominator  # mpmath 1.3: no Fraction
            r = mpmath.mpf(rho)
            bs = r + 2 * mpmath.sqrt(r * mpmath.log(1 / rest)) <= 1
            assert bs or _cks_log_delta(r, 1.0, 200) <= mpmath.log(rest)
