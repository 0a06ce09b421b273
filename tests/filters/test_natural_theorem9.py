"""Natural filters (valid families enforced), Theorem 9 constants, Algorithm 3, 12-copy lemma."""

from __future__ import annotations

import math

import mpmath
import pytest

from dpsieve.accounting.events import GDP, ApproxDP, PureDP
from dpsieve.accounting.gdp import gdp_delta, gdp_mu_for
from dpsieve.filters import (
    AdditiveProfileFilter,
    NaturalApproxFilter,
    NaturalGDPFilter,
    NaturalZeroDeltaFilter,
    certified_epsilon,
    discretized_profile,
    theorem9,
)
from dpsieve.filters._budgets import approx_curve
from dpsieve.filters.theorem9 import rr_compose_delta


def test_natural_gdp_enforces_family_and_composes_exactly() -> None:
    f = NaturalGDPFilter(1.0)
    assert not f.try_spend(PureDP(0.1)).admitted
    for _ in range(4):
        assert f.try_spend(GDP(0.5)).admitted
    assert not f.try_spend(GDP(1e-9)).admitted
    g = NaturalGDPFilter(eps=1.0, delta=1e-5)
    mu = gdp_mu_for(1.0, 1e-5)
    assert g.remaining()["mu"] <= mu
    assert float(gdp_delta(g.remaining()["mu"], 1.0)) <= 1e-5


def test_natural_zero_delta() -> None:
    f = NaturalZeroDeltaFilter(0.1)
    assert not f.try_spend(ApproxDP(0.5, 0.01)).admitted  # eps > 0: not in the family
    n = sum(f.try_spend(ApproxDP(0.0, 0.01)).admitted for _ in range(20))
    # 1 - 0.99^n <= 0.1  iff  n <= 10 (0.99^10 = 0.9044, 0.99^11 = 0.8953)
    assert n == 10
    assert f.remaining()["delta_spent"] <= 0.1


def test_natural_approx_reports_theorem9_not_the_budget() -> None:
    f = NaturalApproxFilter(1.0, 1e-6, 100, allow_general=True)
    d = f.try_spend(PureDP(0.5))
    assert d.admitted
    g = d.remaining["guarantee"]
    t9 = g["theorem9"]
    assert t9["eps"] == pytest.approx(3080.0)  # eps' = n 2c (9 eps + 2), n = 10, c = 14
    assert g["eps"] > 1.0
    assert g["delta"] > 1e-6
    assert "NOT" in g["note"]
    # admission itself is the natural rule: composed delta(1) <= 1e-6
    assert not f.try_spend(PureDP(5.0)).admitted


def test_natural_approx_matches_binomial_composition() -> None:
    f = NaturalApproxFilter(2.0, 1e-3, 50, allow_general=True)
    n = 0
    while f.try_spend(PureDP(0.2)).admitted:
        n += 1
    # exact: largest n with H_{e^2}(RR_0.2^n) <= 1e-3
    assert rr_compose_delta(0.2, n, 2.0) <= 1e-3 * (1 + 1e-8)
    assert n == 50 or rr_compose_delta(0.2, n + 1, 2.0) > 1e-3


def test_theorem9_constants_example() -> None:
    t = theorem9(1.0, 1e-6, 100)
    assert t.c == 14
    assert t.n == 10
    assert t.eps_prime == 3080.0
    assert t.delta_prime == pytest.approx(10 * (32 * 14 + 4) * 1e-6)
    assert t.eps_grid[1] == pytest.approx(3.0 / 2**8)
    assert t.eps_grid[-2] == pytest.approx(3.0)
    assert t.ell[0] == 100
    assert t.ell[-1] == pytest.approx(4e-6)
    # l*_i = 8 max{l : H(RR_{eps_{i-1}}^(l-1)) <= 2 delta}
    for i in range(1, t.n - 1):
        m = int(t.ell[i]) // 8
        assert rr_compose_delta(t.eps_grid[i], m - 1, 1.0) <= 2e-6
        assert rr_compose_delta(t.eps_grid[i], m, 1.0) > 2e-6
    assert t.b[:-1] == tuple(2 * 14 * int(v) for v in t.ell[:-1])
    assert t.b[-1] == 0


def test_certified_guarantee_is_at_most_the_paper_bound() -> None:
    for eps, delta, k in ((1.0, 1e-6, 10), (0.5, 1e-5, 10)):
        t = theorem9(eps, delta, k)
        e2, d2 = certified_epsilon(t)
        assert d2 <= t.delta_prime
        assert e2 <= t.eps_prime


def test_rr_compose_delta_closed_form() -> None:
    # one RR_e: delta(eps') = (e^e - e^eps')/(1 + e^e) for eps' < e
    e, x = 1.0, 0.3
    assert rr_compose_delta(e, 1, x) == pytest.approx(
        (math.exp(e) - math.exp(x)) / (1 + math.exp(e))
    )
    # matches the exact tradeoff-curve composition
    c = approx_curve(0.3).self_compose(7)
    assert rr_compose_delta(0.3, 7, 0.5) == pytest.approx(float(c.delta(0.5)[()]), rel=1e-9)


@pytest.mark.parametrize("e", [0.01, 0.1, 0.5, 1.0, 3.0])
def test_twelve_copy_lemma(e: float) -> None:
    """RR_e^(12) dominates RR_{2e} (Sec. 7.3.2), exactly on tradeoff curves."""
    assert approx_curve(2 * e) <= approx_curve(e).self_compose(12)


def test_five_copies_do_not_suffice() -> None:
    assert not approx_curve(0.02) <= approx_curve(0.01).self_compose(5)


def test_profile_filter() -> None:
    t = theorem9(1.0, 1e-5, 5)
    prof = discretized_profile(ApproxDP(0.2, 1e-6), t.eps_grid)
    assert sum(prof) == 1
    assert float(prof[-1]) == pytest.approx(1e-6)
    g = discretized_profile(GDP(0.5), t.eps_grid)
    assert sum(g) == 1
    assert all(x >= 0 for x in g)
    f = AdditiveProfileFilter(1.0, 1e-5, 5)
    assert f.try_spend(PureDP(0.1)).admitted
    assert not f.try_spend(ApproxDP(0.1, 1e-3)).admitted  # bucket n budget is 4 delta
    for _ in range(4):
        f.try_spend(PureDP(0.01))
    assert not f.try_spend(PureDP(0.01)).admitted  # k rounds
    guar = f.guarantee()
    assert guar["certified"]["delta"] <= guar["paper_theorem9"]["delta"]


def test_natural_admits_imply_profile_admits() -> None:
    """Theorem 14: every sequence the natural filter admits passes the additive filter."""
    nat = NaturalApproxFilter(1.0, 1e-5, 8, allow_general=True)
    add = AdditiveProfileFilter(1.0, 1e-5, 8)
    for e in (0.3, 0.05, 0.6, 0.2, 0.01, 0.4, 0.1, 0.7):
        if nat.try_spend(PureDP(e)).admitted:
            assert add.try_spend(PureDP(e)).admitted


def test_profile_of_plds_moves_mass_up() -> None:
    from dpsieve.accounting.pld import PLD
    from dpsieve.errors import UnsupportedError

    t = theorem9(1.0, 1e-5, 5)
    # Laplace(10): |loss| <= 0.1; bucketed with one grid step of slack, never lower
    prof = discretized_profile(PLD.laplace(10.0), t.eps_grid)
    assert 1 <= sum(prof) <= 1 + 1e-9  # the PLD's float masses may exceed 1 by rounding
    top = max(i for i, x in enumerate(discretized_profile(PureDP(0.1001), t.eps_grid)) if x > 0)
    assert sum(prof[top + 1 :]) == 0
    assert prof[top] > 0
    g = discretized_profile(PLD.gaussian(2.0), t.eps_grid)
    assert g == discretized_profile(GDP(0.5), t.eps_grid)
    with pytest.raises(UnsupportedError):
        discretized_profile(PLD.laplace(10.0).compose(PLD.gdp(0.5)), t.eps_grid)
    with pytest.raises(UnsupportedError):
        discretized_profile(PLD.laplace(10.0, pessimistic=False), t.eps_grid)


def test_natural_gdp_accepts_gaussian_plds() -> None:
    from dpsieve.accounting.pld import PLD

    f = NaturalGDPFilter(1.0)
    assert f.try_spend(PLD.gaussian(2.0)).admitted  # exactly G_0.5
    assert not f.try_spend(PLD.laplace(2.0)).admitted  # not a GDP query


def _rr_k_delta_mp(eps: float, delta: float, k: int, eps_prime: float) -> mpmath.mpf:
    """delta(eps') of R_{eps,delta}^(+k) in mpmath: d + (1 - d) sum_B P(B) (1 - e^{eps' - loss})_+
    with B ~ Bin(k, p), loss = eps (2B - k), d = 1 - (1 - delta)^k."""
    with mpmath.workdps(40):
        e, ep = mpmath.mpf(eps), mpmath.mpf(eps_prime)
        p = 1 / (1 + mpmath.exp(-e))
        d = 1 - (1 - mpmath.mpf(delta)) ** k
        h = mpmath.fsum(
            mpmath.binomial(k, b)
            * p**b
            * (1 - p) ** (k - b)
            * (1 - mpmath.exp(ep - e * (2 * b - k)))
            for b in range(k + 1)
            if e * (2 * b - k) > ep
        )
        return d + (1 - d) * h


def test_issue18_natural_approx_guarantee_is_the_best_bound() -> None:
    """Issue 18.8: eps = 1, delta = 1e-6, k = 100 at delta' = 4.52e-3: R^(+k) gives 67.6,
    reported instead of 1,772 (our certified Theorem 15 bound) or 3,080 (Theorem 9)."""
    f = NaturalApproxFilter(1.0, 1e-6, 100, allow_general=True)
    g = f.guarantee()
    assert g["delta"] == pytest.approx(4.52e-3)
    assert g["eps"] == pytest.approx(67.6, abs=0.05)
    assert g["method"] == "composition (Prop. 3)"
    assert g["certified"]["eps"] == pytest.approx(1772.0, abs=1.0)
    assert g["theorem9"]["eps"] == 3080.0
    # independent check (mpmath): valid at the reported eps', and tight (1e-6 below fails)
    assert _rr_k_delta_mp(1.0, 1e-6, 100, g["eps"]) <= g["delta"]
    assert _rr_k_delta_mp(1.0, 1e-6, 100, g["eps"] * (1 - 1e-6)) > g["delta"]


@pytest.mark.parametrize(("eps", "delta", "k"), [(0.5, 1e-5, 10), (2.0, 1e-8, 7), (0.1, 1e-3, 40)])
def test_composition_epsilon_against_mpmath(eps: float, delta: float, k: int) -> None:
    from dpsieve.filters.theorem9 import composition_epsilon

    target = min(theorem9(eps, delta, k).delta_prime, 0.1)
    e = composition_epsilon(eps, delta, k, target)
    assert _rr_k_delta_mp(eps, delta, k, e) <= target
    if e > 0:
        assert _rr_k_delta_mp(eps, delta, k, e * (1 - 1e-6)) > target


def test_per_bucket_lemma_fails_in_the_example() -> None:
    """Sec. 7.3.2 claims RR_{eps_i}^(b*_i) is (2c(9 eps + 2), 32 c delta)-DP for every bucket;
    at eps = 1, delta = 1e-6, k = 100 buckets 8 and 9 have delta ~ 1 at eps = 308
    (docs/filters.md). Checked with mpmath's binomial law (independent of rr_compose_delta)."""
    t = theorem9(1.0, 1e-6, 100)
    eps_b = 2 * t.c * (9 * 1.0 + 2)
    assert eps_b == 308
    for i in (7, 8):  # buckets 8 and 9 (0-based 7, 8)
        e, b = t.eps_grid[i + 1], t.b[i]
        d = _rr_k_delta_mp(e, 0.0, b, eps_b) if b < 1000 else None
        assert d is not None
        assert d > 0.99
        assert rr_compose_delta(e, b, eps_b) > 0.99
    for i in range(6):  # buckets 1-6 are far inside
        assert rr_compose_delta(t.eps_grid[i + 1], t.b[i], eps_b) < 1e-60
