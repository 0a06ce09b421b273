"""Issue 18 (accounting side): regression tests with the issue's exact inputs.

References: mpmath (40+ digits) closed forms of G_mu, R_{eps,delta} and randomized response.
"""

from __future__ import annotations

import math
import warnings

import mpmath as mp
import numpy as np
import pytest

from dpsieve.accounting.gdp import gdp_delta, gdp_delta_err, gdp_epsilon, gdp_mu_for

mp.mp.dps = 40


def gdp_exact(mu: float, eps: float) -> mp.mpf:
    m, e = mp.mpf(mu), mp.mpf(eps)
    return mp.ncdf(-e / m + m / 2) - mp.e**e * mp.ncdf(-e / m - m / 2)


# ---------------------------------------------------------------- 18.9 GDP at the extremes
def test_gdp_mu_for_tiny_delta_is_not_zero() -> None:
    mu = gdp_mu_for(1.0, 1e-15)  # was 0.0: the flat 1e-14 margin swallowed delta
    exact = mp.findroot(lambda m: gdp_exact(m, 1.0) - mp.mpf("1e-15"), 0.13)
    assert mu <= exact  # a budget: never above the exact mu
    assert float(exact) - mu < 1e-9
    assert abs(mu - 0.13356) < 1e-5


@pytest.mark.parametrize(("mu", "eps"), [(1.0, 709.78), (1.0, 800.0), (30.0, 709.9),
                                         (40.0, 1000.0), (60.0, 2000.0), (1e3, 5e5)])
def test_gdp_delta_beyond_exp_range_no_overflow_not_below_exact(mu: float, eps: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the service runs with warnings as errors in places
        h, err = gdp_delta_err(mu, eps)
        d = float(gdp_delta(mu, eps))
    exact = gdp_exact(mu, eps)
    assert float(h) - float(err) <= exact <= float(h) + float(err)
    assert abs(d - float(exact)) <= float(err)
    if exact > mp.mpf("1e-300"):
        assert float(err) <= 1e-3 * float(exact)  # relative, not a flat 1e-14


def test_gdp_epsilon_tiny_delta_certified() -> None:
    for mu, delta in [(1.0, 1e-15), (0.5, 1e-100), (3.0, 1e-300)]:
        e = gdp_epsilon(mu, delta)
        assert math.isfinite(e)
        assert gdp_exact(mu, e) <= delta
        lo = gdp_epsilon(mu, delta, upper=False)
        assert gdp_exact(mu, lo) >= delta
        assert e - lo <= 1e-6 * max(1.0, e)


def test_gdp_delta_err_is_vectorized() -> None:
    h, err = gdp_delta_err(2.0, np.array([0.0, 1.0, 800.0, math.inf, -math.inf]))
    assert h.shape == err.shape == (5,)
    assert h[3] == 0.0
    assert h[4] == 1.0


# ---------------------------------------------------------------- 18.2 coarse-grid Gaussian
@pytest.mark.parametrize(("mu", "grid"), [(0.2, 0.5), (0.05, 0.5), (0.01, 1.0), (1.0, 2.0),
                                          (0.2, 1e-3), (3.0, 0.1)])
def test_pessimistic_gaussian_on_coarse_grid_not_below_exact(mu: float, grid: float) -> None:
    from dpsieve.accounting.pld import PLD

    d = PLD.gdp(mu, grid=grid).discretize()
    assert float(np.sum(d.probs)) + d.inf_mass >= 1.0  # was 0.99999999998564 at (0.2, 0.5)
    for eps in (0.0, 0.1, 0.5, 1.0, 2.0, 5.0):
        assert d.delta(eps) >= gdp_exact(mu, eps), eps  # was 1.8e-12 under at (0.2, 0.5)


# ---------------------------------------------------------------- 18.1 / 18.7 compositions
def rr_exact_delta(eps: float, k: int, e: mp.mpf) -> mp.mpf:
    """delta(e) of k-fold binary RR(eps), exact (binomial enumeration, mpmath)."""
    ep = mp.mpf(eps)
    p = mp.e**ep / (1 + mp.e**ep)
    total = mp.mpf(0)
    for j in range(k, -1, -1):
        z = (2 * j - k) * ep
        if z <= e:
            break
        total += mp.binomial(k, j) * p**j * (1 - p) ** (k - j) * (1 - mp.e ** (e - z))
    return total


def rr_exact_eps(eps: float, k: int, delta: float) -> mp.mpf:
    lo, hi = mp.mpf(0), mp.mpf(k * eps)
    for _ in range(80):
        mid = (lo + hi) / 2
        if rr_exact_delta(eps, k, mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


@pytest.mark.parametrize("delta", [1e-6, 1e-10, 1e-15])
def test_rr_500_small_delta_within_one_percent(delta: float) -> None:
    from dpsieve.accounting.pld import PLD

    got = PLD.randomized_response(0.1).self_compose(500).epsilon(delta)
    exact = rr_exact_eps(0.1, 500, delta)
    assert got >= exact  # certified
    assert got <= 1.01 * exact  # was 49.99 against 19.54 at 1e-15


def test_supremum_of_gaussian_and_coarse_rr_does_not_raise() -> None:
    from dpsieve.accounting import order
    from dpsieve.accounting.pld import PLD

    g, r = PLD.gaussian(50), PLD.randomized_response(0.3, grid=0.1)
    s = order.supremum([g, r])  # raised "Got 1.0000013887" (mass past the tolerance)
    for eps in (0.0, 0.1, 0.2, 0.3):
        assert s.delta(eps) >= max(g.delta(eps), r.delta(eps))


def test_fft_bound_mass_is_shed_not_accumulated() -> None:
    from dpsieve.accounting import _convolve

    probs = np.full(1000, 1.0 / 1000)
    probs[:10] += 1e-7  # 1e-6 of excess at the bottom
    before_top = probs[500:].copy()
    _convolve.shed_excess(probs, 0.0)
    total = math.fsum(probs.tolist())
    assert 1.0 <= total <= 1.0 + 1e-12  # never below 1: still dominates
    assert np.array_equal(probs[500:], before_top)  # only the bottom moved


@pytest.mark.slow
def test_rr_20000_compositions_cli() -> None:
    from typer.testing import CliRunner

    from dpsieve.cli import app

    res = CliRunner().invoke(
        app, ["account", "epsilon", "-m", "rr:eps=0.1", "--compose", "20000", "--delta", "1e-6",
              "--grid", "1e-3", "--json"]
    )
    assert res.exit_code == 0, res.output  # exited with "Got 1.0000012322"
    import json

    eps = json.loads(res.output)["epsilon"]
    # certified (exact delta at eps within target) and within 1% (not at eps / 1.01)
    assert rr_exact_delta(0.1, 20000, mp.mpf(eps)) <= 1e-6
    assert rr_exact_delta(0.1, 20000, mp.mpf(eps) / mp.mpf("1.01")) > 1e-6


@pytest.mark.slow
def test_subsampled_gaussian_1000_steps_does_not_raise() -> None:
    from dpsieve.mechanisms import PoissonSubsampledGaussian

    c = PoissonSubsampledGaussian(1, 0.01).pld().self_compose(1000)  # raised before
    eps = c.epsilon(1e-6)
    assert math.isfinite(eps)
    assert eps >= 2.12  # dp_accounting (both directions, optimistic FFT) gives 2.1245


def test_restore_optimistic_degenerate_hull_is_not_above_one() -> None:
    # reported by the filters work: the optimistic dual of a subsampled-Gaussian direction
    # had total mass 1.0000000001478 (+ inf 1.48e-13), growing to 1.0000012 over 2^13 steps
    from dpsieve.accounting.pld import PLD
    from dpsieve.mechanisms.subsampled import subsampled_gaussian_pld

    r = subsampled_gaussian_pld(50.0, 1e-3, grid=5e-4).remove
    opt = PLD(r.grid, r.offset, r.probs, r.inf_mass, 0.0, "optimistic", False)
    d = opt.dual()
    assert float(np.sum(d.probs)) + d.inf_mass <= 1.0 + 1e-15
    c = d.self_compose(2**13)
    assert float(np.sum(c.probs)) + c.inf_mass <= 1.0 + 1e-12


@pytest.mark.parametrize("eps", [0.1, 0.3, 0.5, 1.0, 2.0])
def test_atoms_on_knots_stay_on_their_knot(eps: float) -> None:
    # the hat split computed z - (knot below) in float, not exactly the grid step: pure_dp(0.5)
    # put 7e-14 on the knot below +0.5, so its support left the lattice (no exact composition)
    from dpsieve.accounting.pld import PLD

    p = PLD.pure_dp(eps)
    n = round(eps / 1e-4)
    assert list(p.offset + np.flatnonzero(p.probs)) == [-n, n]
    assert p.delta(0.0) >= math.tanh(eps / 2)  # delta(0) of R_{eps,0}: still dominates
    assert p.delta(0.0) <= math.tanh(eps / 2) + 1e-12


def test_lattice_composition_counts_lattice_points() -> None:
    """Issue 18: the issue's own command was refused at the default grid (4e7 grid points);
    RR(0.1) has every loss on multiples of 1000 grid steps, so its composition is exact on the
    lattice 0.1 and counts 40,001 points. Certified against the exact binomial enumeration."""
    import json

    from typer.testing import CliRunner

    from dpsieve.cli.account import app

    r = CliRunner().invoke(app, ["epsilon", "-m", "rr:eps=0.1", "--compose", "20000", "--delta",
                                 "1e-6", "--json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["grid"] == 0.1  # the lattice step
    eps = mp.mpf(out["epsilon"])
    assert rr_exact_delta(0.1, 20000, eps) <= 1e-6  # certified
    assert rr_exact_delta(0.1, 20000, eps / mp.mpf("1.001")) > 1e-6  # within 0.1 %
