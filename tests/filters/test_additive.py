"""Additive filters: closed forms (pure DP, zCDP, RDP), approximate zCDP sums."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, PureDP
from dpsieve.filters import ApproxZCDPFilter, PureDPFilter, RDPFilter, ZCDPFilter, zcdp_rho_for


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 2.0), min_size=1, max_size=30), st.floats(0.1, 10.0))
def test_pure_dp_exact_sum(costs: list[float], budget: float) -> None:
    from fractions import Fraction

    f = PureDPFilter(budget)
    spent = Fraction(0)
    for c in costs:
        d = f.try_spend(PureDP(c))
        assert d.admitted == (spent + Fraction(c) <= Fraction(budget))
        if d.admitted:
            spent += Fraction(c)
    assert (
        f.remaining()["exact"]
        == f"{(Fraction(budget) - spent).numerator}/{(Fraction(budget) - spent).denominator}"
    )


def test_zcdp_gaussian_queries() -> None:
    f = ZCDPFilter(0.5)
    # GDP(mu) is mu^2/2-zCDP, charged exactly: four GDP(0.5) cost exactly 0.5
    assert sum(f.try_spend(GDP(0.5)).admitted for _ in range(5)) == 4
    assert f.remaining().to_dict() == {"rho": 0.0, "exact": "0/1"}
    g = ZCDPFilter(0.5)
    assert sum(g.try_spend(ZCDP(0.125)).admitted for _ in range(5)) == 4
    assert not ZCDPFilter(1.0).try_spend(ApproxDP(0.1, 1e-9)).admitted


def test_zcdp_rho_for() -> None:
    from dpsieve.filters._zcdp_target import _bun_steinke_rho

    rho = _bun_steinke_rho(1.0, 1e-6)
    assert rho + 2 * math.sqrt(rho * math.log(1e6)) <= 1.0
    assert rho + 2 * math.sqrt(rho * math.log(1e6)) == pytest.approx(1.0, rel=1e-12)
    # the library's budget takes the better of this and Canonne-Kamath-Steinke
    # (tests/filters/test_zcdp_conversion.py)
    assert zcdp_rho_for(1.0, 1e-6) > rho


def test_rdp_filter_pure_dp_is_tight_rr_rdp() -> None:
    f = RDPFilter((2.0,), (1.0,))
    d = f.dry_run(PureDP(1.0))
    e = 1.0
    p = 1 / (1 + math.exp(-e))
    exact = math.log(p * math.exp(e) + (1 - p) * math.exp(-e))  # (a-1) = 1
    assert d.cost["rdp"][0] == pytest.approx(exact, rel=1e-11)
    assert d.cost["rdp"][0] >= exact


def test_rdp_filter_all_orders() -> None:
    f = RDPFilter((2.0, 10.0), (1.0, 1.0))
    q = RDP((2.0, 10.0), (0.1, 0.5))
    assert f.try_spend(q).admitted
    assert f.try_spend(q).admitted
    assert not f.try_spend(q).admitted  # order 10 would reach 1.5
    g = RDPFilter.for_target(10.0, 1e-6, (2.0, 4.0, 8.0, 16.0, 32.0))
    assert all(b > 0 for b in g.remaining()["rdp"])


def test_approx_zcdp_sums() -> None:
    f = ApproxZCDPFilter(1.0, 1e-5)
    n = 0
    while f.try_spend(ApproxDP(0.5, 1e-6)).admitted:
        n += 1
    # each is charged exactly (1e-6, 0.125): eight fit rho = 1 exactly; ten 1e-6 (the float
    # 1e-6 is 1e-6 + 4.5e-23) would exceed delta = 1e-5, but rho runs out first
    assert n == 8
    h = ApproxZCDPFilter.for_target(10.0, 1e-6)
    assert h.remaining()["delta"] == pytest.approx(5e-7)


def test_rdp_for_target_against_dp_accounting() -> None:
    """Each order's budget converts back to at most the target (dp_accounting's conversion)."""
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    orders = (1.5, 2.0, 4.0, 8.0, 16.0, 64.0)
    f = RDPFilter.for_target(3.0, 1e-6, orders)
    rem = f.remaining()
    for a, r in zip(rem["orders"], rem["rdp"], strict=True):
        eps, _ = compute_epsilon([a], [r], 1e-6)
        assert eps <= 3.0
        assert eps == pytest.approx(3.0, rel=1e-9)
