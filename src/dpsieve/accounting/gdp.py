"""Gaussian differential privacy (GDP) in closed form.

G_mu is the PLD of the pair (N(0,1), N(mu,1)) (Dong, Roth, Su 2022). With Phi the standard
normal CDF:

* hockey-stick curve  h_mu(x) = Phi(-log(x)/mu + mu/2) - x Phi(-log(x)/mu - mu/2),  x > 0
* delta(eps)          = h_mu(e^eps)
* tradeoff curve      tau_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)
* composition         G_a (+) G_b = G_sqrt(a^2 + b^2)

Floating-point: h = Phi(alpha) - x Phi(beta) (alpha = -log(x)/mu + mu/2, beta = alpha - mu)
is evaluated with ``scipy.special.ndtr``, the second term as exp(log x + log_ndtr(beta)) where
x or Phi(beta) would leave the float range (x = e^eps overflows for eps >= 709.78; Phi(beta)
underflows below beta ~ -37.5 while x Phi(beta) need not be small). :func:`gdp_delta_err`
returns a certified bound on the absolute error, *relative* to the two terms (so deltas down
to 1e-300 keep their precision); callers that certify round with it. :data:`H_ABS_ERR` is the
older flat allowance, valid for mu <= 10 only (the error grows like u mu for large mu).
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
    "gdp_delta_err",
    "gdp_epsilon",
    "gdp_hockey_stick",
    "gdp_mu_for",
    "gdp_tradeoff",
]

#: A bound on the absolute floating-point error of :func:`gdp_hockey_stick` for mu <= 10
#: (generous there; use :func:`gdp_delta_err` for a bound valid at every mu and delta).
H_ABS_ERR = 1e-14
#: Relative error of one scipy ndtr / log_ndtr evaluation (generous, as accounting._curves).
_TERM_REL = 1e-14
_U = 2.0**-53
#: Absolute floor of the error bound: ndtr values that leave the normal range are below this.
_TINY = 1e-306

FloatArray = npt.NDArray[np.float64]


def _terms(mu: float, lx: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(Phi(alpha), x Phi(beta), error bound) at log x = lx (mu > 0, finite lx)."""
    with np.errstate(over="ignore"):  # lx / mu beyond float range: alpha = -inf or +inf
        alpha = -lx / mu + mu / 2.0
        beta = alpha - mu
    a = special.ndtr(alpha)
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        lb = special.log_ndtr(beta)
        s = np.where(
            (lx <= 700.0) & (beta > -37.0), np.exp(lx) * special.ndtr(beta), np.exp(lx + lb)
        )
    s = np.minimum(s, 1.0)  # x Phi(beta) <= Phi(alpha) <= 1
    # argument error: alpha, beta carry 3u (|lx|/mu + mu/2) absolute; Phi's log-slope is
    # <= |arg| + 1; exp(lx + lb) adds the absolute error of its exponent, 4u (|lx| + |lb|)
    with np.errstate(over="ignore", invalid="ignore"):
        darg = 3 * _U * (np.abs(lx) / mu + mu / 2.0)
        rel_a = _TERM_REL + (np.abs(alpha) + 1.0) * darg
        rel_s = _TERM_REL + (np.abs(beta) + 1.0) * darg + 4 * _U * (np.abs(lx) + np.abs(lb))
        err = a * rel_a + s * rel_s + 2 * _U * np.abs(a - s) + _TINY
        # Deep lower tail (|lx| / mu near float range: the products above overflow): the
        # exact alpha is below alpha + darg < -38 (or alpha = -inf: lx / mu overflowed, so
        # the exact alpha < -1e308 + mu / 2), so both exact terms lie in
        # [0, Phi(-38)] = [0, 2.9e-316] and so does the exact h: the computed h = a - s
        # (0 here) is within _TINY of it.
        deep = (np.isneginf(alpha) | (alpha + darg < -38.0)) & (a == 0.0)
        err = np.where(deep, _TINY, err)
        # h and the exact value both lie in [0, 1]: an error bound above 1 (or NaN from
        # inf * 0 at the other extreme) is replaced by the always-valid 1.
        err = np.where(np.isnan(err), 1.0, np.minimum(err, 1.0))
    return a, s, err


def gdp_delta_err(mu: float, eps: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """(delta(eps), bound on its absolute floating-point error) for G_mu, eps any real.

    Never overflows: eps >= 709.78 (e^eps = inf) is evaluated in logs. The bound scales with
    Phi(alpha) + e^eps Phi(beta), so a tiny delta gets a tiny error bound.
    """
    mu = check_nonnegative("mu", mu, "gdp_delta_err")
    e = np.asarray(eps, dtype=np.float64)
    if mu == 0.0:
        with np.errstate(over="ignore"):
            v = np.where(e >= 0, 0.0, -np.expm1(np.minimum(e, 0.0)))
        return v, 2 * _U * v + np.where(e >= 0, 0.0, _TINY)
    if mu > 1e150:  # mu^2 would overflow: G_mu is +inf-like at every finite eps
        return np.ones_like(e), np.full(e.shape, _TINY)
    fin = np.isfinite(e)
    lx = np.where(fin, e, 0.0)
    a, s, err = _terms(mu, lx)
    h = np.clip(a - s, 0.0, 1.0)
    h = np.where(np.isposinf(e), 0.0, np.where(np.isneginf(e), 1.0, h))
    err = np.where(fin, err, 0.0)
    return h, err


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
            a, s, _ = _terms(mu, np.where(np.isfinite(lx), lx, 0.0))
            out[...] = a - s
            out[xs <= 0] = 1.0
            out[np.isposinf(xs)] = 0.0
    res: FloatArray = np.clip(out, 0.0, 1.0)
    return res


def gdp_delta(mu: float, eps: npt.ArrayLike) -> FloatArray:
    """delta(eps) = h_mu(e^eps) of G_mu (evaluated in logs: no overflow at any eps)."""
    return gdp_delta_err(mu, eps)[0]


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

    With ``upper=True`` (default) the returned eps satisfies h_mu(e^eps) + err <= delta
    (err: :func:`gdp_delta_err`), so it is never below the exact value; with ``upper=False``
    it is never above it. Bisection runs to a relative width of 1e-13.
    """
    mu = check_nonnegative("mu", mu, "gdp_epsilon")
    delta = check_in_open("delta", delta, 0.0, 1.0, "gdp_epsilon")
    sign = 1.0 if upper else -1.0

    def ok(e: float) -> bool:
        h, err = gdp_delta_err(mu, e)
        return float(h) + sign * float(err) <= delta

    if ok(0.0):
        return 0.0
    lo, hi = 0.0, 1.0
    while not ok(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e6:  # upper: inf is at or above the exact eps; lower: lo is below it
            return math.inf if upper else lo
    lo, hi = bracket(ok, lo, hi, 1e-13)
    return hi if upper else lo


def gdp_mu_for(eps: float, delta: float, *, upper: bool = False) -> float:
    """The mu with delta_mu(eps) = delta, bracketed by bisection.

    With ``upper=False`` (default, the safe choice for a *budget*) the returned mu satisfies
    h_mu(e^eps) + err <= delta (err: :func:`gdp_delta_err`, relative to the terms, so
    delta = 1e-15 gets mu = 0.1336 at eps = 1, not 0), so G_mu is (eps, delta)-DP, and it
    is always finite (at most 1e150, where the search stops: eps beyond ~5e299 then gets
    less than it could, the safe direction); ``upper=True`` gives a mu at or above the
    exact one (``inf`` past 1e150).
    """
    eps = check_nonnegative("eps", eps, "gdp_mu_for")
    delta = check_in_open("delta", delta, 0.0, 1.0, "gdp_mu_for")
    check_positive("delta", delta, "gdp_mu_for")
    sign = -1.0 if upper else 1.0

    def ok(m: float) -> bool:
        h, err = gdp_delta_err(m, eps)
        return float(h) + sign * float(err) <= delta

    lo, hi = 0.0, 1.0
    while ok(hi):
        lo, hi = hi, hi * 2.0
        if hi > 1e150:  # beyond, gdp_delta_err treats G_mu as +inf-like (mu^2 overflows)
            # upper: the exact mu may be larger still, inf is at or above it; lower: lo
            # passed the certified test, so G_lo is (eps, delta)-DP (a finite budget: an
            # infinite mu would make every filter built on it fail to store it)
            return math.inf if upper else lo
    lo, hi = bracket(lambda m: not ok(m), lo, hi, 1e-13)
    return hi if upper else lo
