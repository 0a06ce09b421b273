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

mp.mp.dps = 50


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
