"""Calibration helpers: closed forms, rounding direction, certification by the PLD."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.gdp import gdp_delta
from dpsieve.errors import ValidationError
from dpsieve.mechanisms import (
    analytic_gaussian_sigma,
    discrete_gaussian_sigma_for_zcdp,
    gaussian_mechanism_for,
    gaussian_sigma_for_gdp,
    gaussian_sigma_for_zcdp,
    laplace_scale,
)

pos = st.floats(min_value=1e-3, max_value=1e3, allow_nan=False, allow_infinity=False)


@given(pos, pos)
def test_laplace_scale_rounds_up(eps: float, sens: float) -> None:
    b = laplace_scale(eps, sens)
    assert Fraction(b) >= Fraction(sens) / Fraction(eps)
    assert Fraction(math.nextafter(b, 0.0)) < Fraction(sens) / Fraction(eps)


@given(pos, pos)
def test_gdp_and_zcdp_sigmas_round_up(x: float, sens: float) -> None:
    s = gaussian_sigma_for_gdp(x, sens)
    assert Fraction(sens) / Fraction(s) <= Fraction(x)
    z = gaussian_sigma_for_zcdp(x, sens)
    assert Fraction(sens) ** 2 / (2 * Fraction(z) ** 2) <= Fraction(x)
    assert Fraction(sens) ** 2 / (2 * Fraction(math.nextafter(z, 0.0)) ** 2) > Fraction(x) * (
        1 - Fraction(1, 10**12)
    )
    assert discrete_gaussian_sigma_for_zcdp(x, 1) == gaussian_sigma_for_zcdp(x, 1)


def test_analytic_gaussian_known_value_and_tightness() -> None:
    # Balle & Wang (2018): eps = 1, delta = 1e-5, Delta = 1 gives sigma ~= 3.73
    s = analytic_gaussian_sigma(1.0, 1e-5)
    assert 3.72 < s < 3.74
    assert float(gdp_delta(1.0 / s, 1.0)) <= 1e-5
    assert float(gdp_delta(1.0 / (s * (1 - 1e-6)), 1.0)) > 1e-5 * (1 - 1e-4)
    # the classical bound sqrt(2 ln(1.25/delta)) / eps is looser
    assert s < math.sqrt(2 * math.log(1.25 / 1e-5))


@settings(max_examples=30, deadline=None)
@given(
    st.floats(min_value=0.05, max_value=5.0),
    st.floats(min_value=1e-10, max_value=0.1),
    st.floats(min_value=0.1, max_value=10.0),
)
def test_analytic_gaussian_meets_target(eps: float, delta: float, sens: float) -> None:
    s = analytic_gaussian_sigma(eps, delta, sens)
    assert float(gdp_delta(sens / s, eps)) <= delta


def test_gaussian_mechanism_for_is_certified_by_its_pld() -> None:
    m = gaussian_mechanism_for(1.0, 1e-5, 1.0)
    assert float(m.pld().epsilon(1e-5)) <= 1.0
    assert m.sigma < 1.01 * analytic_gaussian_sigma(1.0, 1e-5)


@pytest.mark.parametrize(
    ("fn", "args", "name"),
    [
        (laplace_scale, (0.0,), "eps"),
        (laplace_scale, (float("nan"),), "eps"),
        (laplace_scale, (1.0, -1.0), "sensitivity"),
        (gaussian_sigma_for_gdp, (float("inf"),), "mu"),
        (gaussian_sigma_for_zcdp, (-0.1,), "rho"),
        (analytic_gaussian_sigma, (1.0, 1.0), "delta"),
        (analytic_gaussian_sigma, (1.0, 0.0), "delta"),
        (analytic_gaussian_sigma, (float("nan"), 1e-5), "eps"),
    ],
)
def test_calibration_validation(fn, args, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match=f"'{name}'"):
        fn(*args)
