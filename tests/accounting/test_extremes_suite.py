"""Extremes suite of the accounting core (issue 17): every constructor, conversion and order
check over the legal range, against closed forms evaluated with mpmath (40 digits).

Edges are drawn explicitly (hypothesis ``sampled_from`` of the boundary values, mixed with
log-uniform draws): sensitivity/scale 1e-6 .. 1e3, eps 0 .. 700 (and beyond, where the
result must be +inf or a clear refusal), delta down to 1e-300, sigma 1e-3 .. 1e5,
compositions up to 1e6 (the long ones in the slow suite). The certified value is never
below the truth; where it cannot be certified it is +inf (never a smaller number).
Closed forms used: Laplace delta(t) = 1 - e^{(t - a)/2} on [0, a]; G_mu and R_{eps,0} below.
"""

from __future__ import annotations

import math

import mpmath as mp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsieve.accounting import order
from dpsieve.accounting.gdp import gdp_delta_err, gdp_epsilon, gdp_mu_for
from dpsieve.accounting.pld import PLD

mp.mp.dps = 40
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def edge_or_log(edges: list[float], lo: float, hi: float) -> st.SearchStrategy[float]:
    logs = st.floats(math.log10(lo), math.log10(hi)).map(lambda v: 10.0**v)
    return st.one_of(st.sampled_from(edges), logs)


A_RATIO = edge_or_log([1e-6, 1e-3, 0.5, 1.0, 39.9, 40.0, 40.1, 50.0, 120.0, 699.0, 1e3], 1e-6, 1e3)
EPS = edge_or_log([0.0, 1e-9, 0.1, 1.0, 39.99, 40.0, 41.0, 100.0, 699.5, 700.0], 1e-9, 700.0)
DELTA = edge_or_log([1e-300, 1e-200, 1e-100, 1e-15, 1e-6, 0.1, 0.5], 1e-300, 0.5)
SIGMA = edge_or_log([1e-3, 0.01, 0.5, 1.0, 10.0, 1e3, 1e5], 1e-3, 1e5)


def laplace_delta(a: float, t: float) -> mp.mpf:
    return mp.mpf(1) - mp.e ** ((mp.mpf(t) - mp.mpf(a)) / 2) if t < a else mp.mpf(0)


def gdp_delta(mu: float, t: float) -> mp.mpf:
    if mu == 0:
        return mp.mpf(0) if t >= 0 else 1 - mp.e ** mp.mpf(t)
    m, e = mp.mpf(mu), mp.mpf(t)
    return mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2)


def rr_delta(eps: float, t: float) -> mp.mpf:
    e = mp.mpf(eps)
    return (1 - mp.e ** (mp.mpf(t) - e)) / (1 + mp.e**-e) if t < eps else mp.mpf(0)


# ---------------------------------------------------------------- Laplace
@SETTINGS
@given(a=A_RATIO, t=EPS, delta=DELTA)
def test_laplace_delta_and_epsilon_never_below_exact(a: float, t: float, delta: float) -> None:
    grid = 1e-2 if a > 5 else 1e-3
    pld = PLD.laplace(1.0, a, grid=grid)  # scale 1, sensitivity a
    assert pld.delta(t) >= laplace_delta(a, t)
    e = pld.epsilon(delta)
    # exact: the smallest t with 1 - e^{(t - a)/2} <= delta
    exact = max(mp.mpf(0), mp.mpf(a) + 2 * mp.log(1 - mp.mpf(delta)))
    assert e >= exact
    if a <= 600:  # inside the window the certified value is also useful
        assert math.isfinite(e)
        assert e <= exact + 2 * grid + 1e-9


@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1.0])
def test_laplace_sensitivity_over_scale_beyond_window_is_all_infinite(scale: float) -> None:
    pld = PLD.laplace(scale, 1e3 * scale, grid=1.0)  # a = 1000 > 700
    assert pld.delta(699.0) >= laplace_delta(1e3, 699.0)
    assert pld.epsilon(1e-6) == math.inf  # cannot be certified on the grid: +inf, not a number


# ---------------------------------------------------------------- RR / pure DP
@SETTINGS
@given(eps=EPS, t=EPS)
def test_pure_and_rr_delta_never_below_exact(eps: float, t: float) -> None:
    for pld in (PLD.pure_dp(eps, grid=1e-2), PLD.randomized_response(eps, grid=1e-2)):
        assert pld.delta(t) >= rr_delta(eps, t)
        assert pld.epsilon(0.0) >= eps
        assert pld.epsilon(0.0) <= eps + 1e-2  # finite up to 700 (issue 18.9)
        assert order.smallest_pure_eps(pld) >= eps


@pytest.mark.parametrize("eps", [700.5, 710.0, 1e4, 1e300])
def test_pure_beyond_700_is_infinite_not_a_crash(eps: float) -> None:
    for pld in (PLD.pure_dp(eps, grid=1.0), PLD.randomized_response(eps, grid=1.0)):
        assert pld.epsilon(0.5) == math.inf
        assert pld.delta(600.0) == 1.0


# ---------------------------------------------------------------- Gaussian / GDP
@SETTINGS
@given(sigma=SIGMA, t=EPS, delta=DELTA)
def test_gaussian_delta_and_epsilon_never_below_exact(sigma: float, t: float, delta: float) -> None:
    pld = PLD.gaussian(sigma)
    mu = pld.mu
    assert mu >= 1.0 / sigma
    assert pld.delta(t) >= gdp_delta(1.0 / sigma, t)
    h, err = gdp_delta_err(mu, t)
    assert float(h) - float(err) <= gdp_delta(mu, t) <= float(h) + float(err)
    e = gdp_epsilon(mu, delta)
    if math.isfinite(e):
        assert gdp_delta(mu, e) <= delta


@SETTINGS
@given(t=EPS, delta=DELTA)
def test_gdp_mu_for_is_a_budget_never_above_exact(t: float, delta: float) -> None:
    mu = gdp_mu_for(t, delta)
    assert gdp_delta(mu, t) <= delta
    if t >= 0.1 or delta >= 1e-12:  # at t ~ 0 h is a difference of two ~1/2 terms: mu = 0
        assert mu > 0  # (exact ~ 2.5 delta there), the only budget certifiable in floats
        assert gdp_delta(mu * 1.01, t) > delta or mu * 1.01 - mu < 1e-300  # and tight


@pytest.mark.parametrize(("mu", "grid"), [(1e-5, 1e-4), (1e-3, 1e-2), (0.2, 0.5), (5.0, 1e-2),
                                          (30.0, 1e-2), (100.0, 1e-2), (1e3, 1.0)])
def test_discretized_gaussian_never_below_exact(mu: float, grid: float) -> None:
    d = PLD.gdp(mu, grid=grid).discretize()
    for t in (0.0, 0.5, 3.0, 40.0, 300.0, 699.0):
        assert d.delta(t) >= gdp_delta(mu, t), t


# ---------------------------------------------------------------- order checks
@pytest.mark.parametrize("a", [0.5, 39.0, 41.0, 50.0, 300.0])
def test_order_checks_at_large_losses(a: float) -> None:
    lap = PLD.laplace(1.0, a, grid=1e-2)
    assert order.smallest_pure_eps(lap) >= a
    assert not order.leq_approx(lap, 0.99 * a, 0.0)  # not (0.99 a)-DP
    mu = order.smallest_gdp_mu(lap)
    if math.isfinite(mu):
        for t in (0.0, a / 2, 0.9 * a):
            assert laplace_delta(a, t) <= gdp_delta(mu, t)


# ---------------------------------------------------------------- compositions
@pytest.mark.parametrize("k", [1, 10, 1000, 10**6])
def test_gaussian_compositions_closed_form(k: int) -> None:
    c = PLD.gaussian(10.0).self_compose(k)
    assert c.mu >= math.sqrt(k) / 10.0
    assert c.delta(1.0) >= gdp_delta(math.sqrt(k) / 10.0, 1.0)


@pytest.mark.slow
@pytest.mark.parametrize(("eps", "k"), [(0.01, 10**4), (1e-3, 10**6)])
def test_rr_compositions_up_to_a_million(eps: float, k: int) -> None:
    grid = eps  # RR atoms on the grid: the composition is exact up to rounding
    c = PLD.randomized_response(eps, grid=grid).self_compose(k)
    for delta in (1e-3, 1e-6, 1e-12, 1e-15):
        e = c.epsilon(delta)
        # finite and within 1 % down to 1e-15 since the tilted FFTs (issue 18.7): the FFT's
        # absolute bound made 1e-12 +inf at k = 1e6
        assert math.isfinite(e)
        assert rr_k_delta(eps, k, e) <= delta
        assert rr_k_delta(eps, k, e / 1.01) > delta


def rr_k_delta(eps: float, k: int, t: float) -> mp.mpf:
    """Exact delta(t) of k-fold RR(eps): sum over j (number of +eps) from the first loss above
    t upward while the terms matter (they decrease beyond the mode)."""
    ep, tt = mp.mpf(eps), mp.mpf(t)
    p = 1 / (1 + mp.e**-ep)
    j = max(0, math.floor((k + t / eps) / 2))
    total = mp.mpf(0)
    while j <= k:
        z = (2 * j - k) * ep
        if z > tt:
            term = mp.binomial(k, j) * p**j * (1 - p) ** (k - j) * (1 - mp.e ** (tt - z))
            total += term
            if j > k * p and term < total * mp.mpf("1e-30"):
                break
        j += 1
    return total


@pytest.mark.slow
@pytest.mark.parametrize("k", [10**4, 10**5])
def test_long_subsampled_gaussian_small_delta(k: int) -> None:
    # dense long compositions (issue 18.7): finite down to 1e-15 (the FFT's absolute bound made
    # 1e-10 +inf); no closed form, so dp_accounting at the same grid is the oracle where its
    # noise and truncation are negligible: within 0.1 % of its pessimistic value at 1e-6 and
    # 1e-10 (measured: 1.2e-4 / 5.7e-4 above it at 1e-10), never below its optimistic one
    import warnings

    from dpsieve.mechanisms.subsampled import subsampled_gaussian_pld

    pldm = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    c = subsampled_gaussian_pld(1.0, 0.01).self_compose(k)
    assert math.isfinite(c.epsilon(1e-15))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pess, opt = (
            pldm.from_gaussian_mechanism(
                1.0, sampling_prob=0.01, value_discretization_interval=1e-4,
                pessimistic_estimate=p,
            ).self_compose(k)
            for p in (True, False)
        )
    for delta in (1e-6, 1e-10):
        e = c.epsilon(delta)
        assert abs(e - pess.get_epsilon_for_delta(delta)) <= 1e-3 * e
        assert e >= opt.get_epsilon_for_delta(delta)
