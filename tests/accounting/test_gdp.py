"""G_mu closed forms against numerical integration, mpmath, dp_accounting, and the
bracketing directions of gdp_epsilon / gdp_mu_for."""

from __future__ import annotations

import math
import warnings
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from dpsieve.accounting import gdp
from dpsieve.accounting.gdp import gdp_delta_err, gdp_mu_for
from dpsieve.errors import ValidationError

mpmath.mp.dps = 40


def _h_quad(mu: float, x: float) -> float:
    """h(x) = E[(1 - x e^-Z)_+], Z ~ N(mu^2/2, mu^2) (the PLD of G_mu), by quadrature."""
    m, s = mu * mu / 2, mu

    def f(z: float) -> float:
        return (
            math.exp(-((z - m) ** 2) / (2 * s * s))
            / (s * math.sqrt(2 * math.pi))
            * (1 - x * math.exp(-z))
        )

    lo = math.log(x)  # the integrand is positive for z > log x
    val, _ = integrate.quad(f, lo, max(lo, m) + 14 * s, limit=200, epsabs=1e-14, epsrel=1e-12)
    return val


def _h_mp(mu: float, x: float) -> mpmath.mpf:
    m, lx = mpmath.mpf(mu), mpmath.log(mpmath.mpf(x))
    return mpmath.ncdf(-lx / m + m / 2) - x * mpmath.ncdf(-lx / m - m / 2)


@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 1.848, 3.0])
@pytest.mark.parametrize("x", [0.05, 0.5, 1.0, 2.0, 10.0])
def test_hockey_stick_matches_quadrature_and_mpmath(mu: float, x: float) -> None:
    got = float(gdp.gdp_hockey_stick(mu, x))
    assert abs(got - _h_quad(mu, x)) < 1e-9
    assert abs(got - float(_h_mp(mu, x))) <= gdp.H_ABS_ERR


def test_hockey_stick_edges_and_symmetry() -> None:
    assert gdp.gdp_hockey_stick(0.0, [0.5, 1.0, 2.0]).tolist() == [0.5, 0.0, 0.0]
    assert gdp.gdp_hockey_stick(1.0, [0.0, math.inf]).tolist() == [1.0, 0.0]
    xs = np.geomspace(1e-3, 1e3, 50)
    h, hinv = gdp.gdp_hockey_stick(1.3, xs), gdp.gdp_hockey_stick(1.3, 1 / xs)
    # G_mu is symmetric: h(x) = 1 - x + x h(1/x).
    assert np.allclose(h, 1 - xs + xs * hinv, atol=1e-12 * np.maximum(1, xs))


def test_tradeoff_matches_mpmath_including_tiny_alpha() -> None:
    for mu in [0.5, 2.0, 17.0]:
        for a in [0.0, 1e-30, 1e-18, 1e-6, 0.3, 0.999, 1.0]:
            am = mpmath.mpf(a)
            if a in (0.0, 1.0):
                exact = 1 - am
            else:
                exact = mpmath.ncdf(-mpmath.sqrt(2) * mpmath.erfinv(2 * am - 1) - mu)
            got = float(gdp.gdp_tradeoff(mu, a))
            assert abs(got - exact) <= 1e-10 * max(float(exact), 1e-300) + 1e-300


def test_delta_against_dp_accounting() -> None:
    from dp_accounting.pld import privacy_loss_mechanism as plm

    for mu in [0.2, 1.0, 2.5]:
        ref = plm.GaussianPrivacyLoss(standard_deviation=1.0 / mu, sensitivity=1.0)
        for eps in [0.0, 0.5, 2.0, 5.0]:
            assert math.isclose(
                float(gdp.gdp_delta(mu, eps)),
                ref.get_delta_for_epsilon(eps),
                rel_tol=1e-9,
                abs_tol=1e-15,
            )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0.0, 10.0), max_size=5))
def test_compose_is_root_sum_of_squares(mus: list[float]) -> None:
    got = gdp.gdp_compose(*mus)
    exact2 = sum(Fraction(m) ** 2 for m in mus)
    assert Fraction(got) ** 2 >= exact2  # rounded up (never below the exact composition)
    assert math.isclose(got, math.sqrt(float(exact2)), rel_tol=1e-14) or float(exact2) < 1e-300
    assert gdp.gdp_compose(*reversed(mus)) == pytest.approx(got, rel=1e-15)


@pytest.mark.parametrize(("mu", "delta"), [(0.5, 1e-5), (1.0, 1e-6), (1.848, 1e-6), (3.0, 0.01)])
def test_epsilon_brackets_the_exact_root(mu: float, delta: float) -> None:
    up = gdp.gdp_epsilon(mu, delta)
    lo = gdp.gdp_epsilon(mu, delta, upper=False)
    # width: 2 H_ABS_ERR divided by |d delta / d eps| at the root
    assert lo <= up
    assert up - lo < 1e-7
    # Exact h is decreasing in x: at up it is <= delta, at lo it is >= delta.
    assert _h_mp(mu, math.exp(up)) <= delta
    assert _h_mp(mu, math.exp(lo)) >= delta


def test_epsilon_edges() -> None:
    assert gdp.gdp_epsilon(0.0, 1e-6) == 0.0
    assert gdp.gdp_epsilon(0.1, 0.9) == 0.0


def test_mu_for_reference_budget() -> None:
    """The notes' budget: (eps, delta) = (10, 1e-6) corresponds to mu0 ~ 1.848."""
    mu0 = gdp.gdp_mu_for(10.0, 1e-6)
    assert round(mu0, 3) == 1.848
    hi = gdp.gdp_mu_for(10.0, 1e-6, upper=True)
    assert mu0 <= hi
    assert hi - mu0 < 1e-7
    # upper=False is safe for a budget: G_mu0 really is (10, 1e-6)-DP.
    assert _h_mp(mu0, math.exp(10.0)) <= 1e-6
    assert _h_mp(hi, math.exp(10.0)) >= 1e-6


@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda: gdp.gdp_hockey_stick(-1.0, 1.0), "mu"),
        (lambda: gdp.gdp_hockey_stick(float("nan"), 1.0), "mu"),
        (lambda: gdp.gdp_epsilon(1.0, 0.0), "delta"),
        (lambda: gdp.gdp_mu_for(-1.0, 0.1), "eps"),
        (lambda: gdp.gdp_mu_for(1.0, 1.0), "delta"),
        (lambda: gdp.gdp_compose(1.0, -2.0), "mu"),
    ],
)
def test_bad_input(call, param: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as ei:
        call()
    assert ei.value.parameter == param


@pytest.mark.parametrize("mu", [1e-300, 1e-10, 1.0, 1e10, 1e149])
@pytest.mark.parametrize("eps", [-1.7e308, -1e300, -800.0, 0.0, 800.0, 1e300, 1.7e308])
def test_delta_error_bound_never_overflows(mu: float, eps: float) -> None:
    """|lx| / mu near float range overflowed the error bound's products (RuntimeWarning, an
    HTTP 500 in the slow service fuzz on cb4b394); the bound stays a number in (0, 1]."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        h, err = gdp_delta_err(mu, eps)
    assert 0.0 <= float(h) <= 1.0
    assert 0.0 < float(err) <= 1.0


def test_deep_tail_error_bound_is_tiny_and_valid() -> None:
    """At eps = 1e300 every G_mu with mu <= 1e149 has delta ~ 0: the budget's mu (rounded
    down) is a certified finite value (it was inf, which no filter can store: an HTTP 500
    from MixedFilter); with delta below the absolute error floor nothing is certified, so
    the safe answer is mu = 0. A lower bound on eps is never inf (it was, past 1e6)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for d in (0.5, 1e-15):
            lo = gdp_mu_for(1e300, d)
            assert 1e149 < lo <= 1e150  # finite: a budget's mu must be storable
            h, err = gdp_delta_err(lo, 1e300)
            assert float(h) + float(err) <= d  # and certified
            assert gdp_mu_for(1e300, d, upper=True) == math.inf
        assert gdp_mu_for(1e300, 5e-324) == 0.0
        assert gdp.gdp_epsilon(5000.0, 1e-6, upper=False) <= 1e6 < math.inf
        h, err = gdp_delta_err(1.0, 1e300)
    assert float(h) == 0.0
    assert float(err) <= 1e-300
