"""Calibration: the noise for a target budget, rounded so the target is always met.

Every function returns a noise parameter at or above the exact solution (more noise, never
less), so a mechanism built from it has privacy at least as good as the target.

* :func:`laplace_scale` -- ``b = Delta / eps`` (Dwork, McSherry, Nissim, Smith 2006).
* :func:`gaussian_sigma_for_gdp` -- ``sigma = Delta / mu`` (Dong, Roth, Su 2022, Thm. 2.7).
* :func:`gaussian_sigma_for_zcdp` -- ``sigma = Delta / sqrt(2 rho)`` (Bun & Steinke 2016,
  Prop. 1.6); the same value serves the discrete Gaussian (CKS 2020, Thm. 4), see
  :func:`discrete_gaussian_sigma_for_zcdp`.
* :func:`analytic_gaussian_sigma` -- the analytic Gaussian mechanism of Balle & Wang (2018,
  Thm. 8): the smallest sigma with
  ``Phi(Delta/(2 sigma) - eps sigma/Delta) - e^eps Phi(-Delta/(2 sigma) - eps sigma/Delta)
  <= delta``, i.e. ``sigma = Delta / mu`` for the largest mu with ``delta_{G_mu}(eps) <=
  delta``. We solve for mu by bisection with :func:`~dpsieve.accounting.gdp.gdp_mu_for`
  (certified with its floating-point margin) instead of their Algorithm 1; the result is
  the same quantity, rounded towards more noise.
* :func:`gaussian_mechanism_for` -- a :class:`GaussianMechanism` (lattice discrete
  Gaussian) meeting ``(eps, delta)`` according to *its own* PLD: start from the analytic
  sigma and grow it until ``pld().epsilon(delta) <= eps``.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpsieve._rounding import sqrt_up
from dpsieve._validation import check_in_open, check_positive
from dpsieve.accounting.families import round_fraction
from dpsieve.accounting.gdp import gdp_mu_for
from dpsieve.errors import NumericalError
from dpsieve.mechanisms.additive import GaussianMechanism

__all__ = [
    "analytic_gaussian_sigma",
    "discrete_gaussian_sigma_for_zcdp",
    "gaussian_mechanism_for",
    "gaussian_sigma_for_gdp",
    "gaussian_sigma_for_zcdp",
    "laplace_scale",
]


def laplace_scale(eps: float, sensitivity: float = 1.0) -> float:
    """The Laplace scale ``Delta / eps`` rounded up (eps-DP, L1 sensitivity ``Delta``)."""
    e = check_positive("eps", eps, "laplace_scale")
    d = check_positive("sensitivity", sensitivity, "laplace_scale")
    return round_fraction(Fraction(d) / Fraction(e), upper=True)


def gaussian_sigma_for_gdp(mu: float, sensitivity: float = 1.0) -> float:
    """``Delta / mu`` rounded up: the Gaussian mechanism is then mu-GDP."""
    m = check_positive("mu", mu, "gaussian_sigma_for_gdp")
    d = check_positive("sensitivity", sensitivity, "gaussian_sigma_for_gdp")
    return round_fraction(Fraction(d) / Fraction(m), upper=True)


def gaussian_sigma_for_zcdp(rho: float, sensitivity: float = 1.0) -> float:
    """``Delta / sqrt(2 rho)`` rounded up: the Gaussian mechanism is then rho-zCDP."""
    r = check_positive("rho", rho, "gaussian_sigma_for_zcdp")
    d = check_positive("sensitivity", sensitivity, "gaussian_sigma_for_zcdp")
    target = Fraction(d) ** 2 / (2 * Fraction(r))  # sigma^2
    return sqrt_up(target, finite=True)


def discrete_gaussian_sigma_for_zcdp(rho: float, sensitivity: int = 1) -> float:
    """The discrete Gaussian sigma for rho-zCDP with integer sensitivity (CKS 2020, Thm. 4:
    N_Z(0, sigma^2) with sensitivity Delta is Delta^2 / (2 sigma^2)-zCDP, as continuous)."""
    return gaussian_sigma_for_zcdp(rho, sensitivity)


def analytic_gaussian_sigma(eps: float, delta: float, sensitivity: float = 1.0) -> float:
    """Balle & Wang (2018) analytic Gaussian: the smallest sigma (rounded up) with which the
    Gaussian mechanism of L2 sensitivity ``Delta`` is (eps, delta)-DP."""
    o = "analytic_gaussian_sigma"
    e = check_positive("eps", eps, o)
    dl = check_in_open("delta", delta, 0.0, 1.0, o)
    d = check_positive("sensitivity", sensitivity, o)
    mu = gdp_mu_for(e, dl, upper=False)
    if not (mu > 0) or not math.isfinite(mu):
        raise NumericalError(f"{o}: no usable mu for eps={eps!r}, delta={delta!r} (got {mu!r})")
    return round_fraction(Fraction(d) / Fraction(mu), upper=True)


def gaussian_mechanism_for(
    eps: float, delta: float, sensitivity: float = 1.0, **kw: Any
) -> GaussianMechanism:
    """A lattice :class:`GaussianMechanism` whose own PLD certifies (eps, delta).

    Starts at :func:`analytic_gaussian_sigma` and multiplies sigma by ``1 + 2^-10`` until the
    (pessimistic) PLD gives ``epsilon(delta) <= eps``; raises :class:`NumericalError` if 64
    steps do not suffice.
    """
    sigma = analytic_gaussian_sigma(eps, delta, sensitivity)
    for _ in range(64):
        m = GaussianMechanism(sigma, sensitivity, **kw)
        if m.pld().epsilon(delta) <= eps:
            return m
        sigma *= 1.0 + 2.0**-10
    raise NumericalError(f"gaussian_mechanism_for: could not certify eps={eps}, delta={delta}")
