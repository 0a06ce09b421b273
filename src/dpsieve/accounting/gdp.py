"""Gaussian differential privacy (GDP) in closed form.

G_mu is the PLD of the pair (N(0,1), N(mu,1)) (Dong, Roth, Su 2022). With Phi the standard
normal CDF:

* hockey-stick curve  h_mu(x) = Phi(-log(x)/mu + mu/2) - x Phi(-log(x)/mu - mu/2),  x > 0
* delta(eps)          = h_mu(e^eps)
* tradeoff curve      tau_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)
* composition         G_a (+) G_b = G_sqrt(a^2 + b^2)

Floating-point: each value is computed with ``scipy.special.ndtr``; absolute error is a few
ulp of 1 (about 1e-16). Callers that certify a bound add their own margin in the safe
direction (see :data:`H_ABS_ERR`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve._rounding import hypot_up
from dpsieve._validation import check_in_open, check_nonnegative, check_positive
from dpsieve.accounting._bisect import bracket

__all__ = [
    "H_ABS_ERR",
    "gdp_compose",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_hockey_stick",
    "gdp_mu_for",
    "gdp_tradeoff",
]

#: A bound on the absolute floating-point error of :func:`gdp_hockey_stick` (generous).
H_ABS_ERR = 1e-14

FloatArray = npt.NDArray[np.float64]


def gdp_hockey_stick(mu: float, x: npt.ArrayLike) -> FloatArray:
    """h_{G_mu}(x) for x > 0 (array in, array out). mu = 0 gives (1 - x)_+."""
    mu = check_nonnegative("mu", mu, "gdp_hockey_stick")
    xs = np.asarray(x, dtype=np.float64)
    out = np.empty_like(xs)
    with np.errstate(divide="ignore", invalid="ignore"):
        if mu == 0.0:
            out[...] = np.clip(1.0 - xs, 0.0, None)
        else:
            lx = np.log(xs)
            a = special.ndtr(-lx / mu + mu / 2.0)
            b = special.ndtr(-lx / mu - mu / 2.0)
            out[...] = a - xs * b
            out[xs <= 0] = 1.0
            out[np.isposinf(xs)] = 0.0
    res: FloatArray = np.clip(out, 0.0, 1.0)
    return res


def gdp_delta(mu: float, eps: npt.ArrayLike) -> FloatArray:
    """delta(eps) = h_mu(e^eps) of G_mu."""
    return gdp_hockey_stick(mu, np.exp(np.asarray(eps, dtype=np.float64)))


def gdp_tradeoff(mu: float, alpha: npt.ArrayLike) -> FloatArray:
    """tau_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu) for alpha in [0, 1].

    Evaluated as Phi(-Phi^{-1}(alpha) - mu), which is the same function but keeps full
    precision for tiny alpha (1 - alpha would round to 1 below alpha ~ 1e-17).
    """
    mu = check_nonnegative("mu", mu, "gdp_tradeoff")
    a = np.asarray(alpha, dtype=np.float64)
    res: FloatArray = special.ndtr(-special.ndtri(a) - mu)
    return res


def gdp_compose(*mus: float) -> float:
    """G_{mu_1} (+) ... (+) G_{mu_k} = G_sqrt(sum mu_i^2) (closed under composition), rounded up."""
    return hypot_up(*(check_nonnegative("mu", m, "gdp_compose") for m in mus))


def gdp_epsilon(mu: float, delta: float, *, upper: bool = True) -> float:
    """The smallest eps >= 0 with h_mu(e^eps) <= delta, bracketed by bisection.

    With ``upper=True`` (default) the returned eps satisfies h_mu(e^eps) + H_ABS_ERR <= delta,
    so it is never below the exact value; with ``upper=False`` it is never above it.
    Bisection runs to a relative width of 1e-13.
    """
    mu = check_nonnegative("mu", mu, "gdp_epsilon")
    delta = check_in_open("delta", delta, 0.0, 1.0, "gdp_epsilon")
    slack = H_ABS_ERR if upper else -H_ABS_ERR

    def ok(e: float) -> bool:
        return float(gdp_delta(mu, e)) + slack <= delta

    if ok(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while not ok(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            return math.inf
    lo, hi = bracket(ok, lo, hi, 1e-13)
    return hi if upper else lo


def gdp_mu_for(eps: float, delta: float, *, upper: bool = False) -> float:
    """The mu with delta_mu(eps) = delta, bracketed by bisection.

    With ``upper=False`` (default, the safe choice for a *budget*) the returned mu satisfies
    h_mu(e^eps) + H_ABS_ERR <= delta, so G_mu is (eps, delta)-DP; ``upper=True`` gives a mu
    at or above the exact one.
    """
    eps = check_nonnegative("eps", eps, "gdp_mu_for")
    delta = check_in_open("delta", delta, 0.0, 1.0, "gdp_mu_for")
    check_positive("delta", delta, "gdp_mu_for")
    slack = -H_ABS_ERR if upper else H_ABS_ERR

    def ok(m: float) -> bool:
        return float(gdp_delta(m, eps)) + slack <= delta

    lo, hi = 0.0, 1.0
    while ok(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            return math.inf
    lo, hi = bracket(lambda m: not ok(m), lo, hi, 1e-13)
    return hi if upper else lo
