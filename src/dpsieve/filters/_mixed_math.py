"""Closed forms of the mixed budget R_a (+) G_mu (a pure part and a Gaussian part).

h_B(e^t) = p H_mu(t - a) + q H_mu(t + a), p = 1/(1 + e^{-a}), q = 1/(1 + e^{a}),
H_mu(s) = Phi(-s/mu + mu/2) - e^s Phi(-s/mu - mu/2)  (H_0(s) = (1 - e^s)_+),

by Prop. 2 of the filters paper (h_{A (+) S}(x) = E_{Z~A}[h_S(x e^{-Z})]) with A = R_a,
whose losses are +a w.p. p and -a w.p. q. Every function here returns a bound in a stated
direction (docs/proofs/mixed.md, §3): :func:`delta_upper` is never below the exact
h_B(e^t); :func:`mu_for` never above the largest mu whose budget meets the target;
:func:`epsilon_upper` never below the exact eps(delta) of the budget.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from scipy import special

from dpsieve._rounding import add_down, div_up, exp_down, round_up
from dpsieve.accounting.gdp import H_ABS_ERR

__all__ = ["delta_upper", "epsilon_upper", "h_gauss", "mu_for"]

_SQRT_HALF = math.sqrt(0.5)
_MU_MAX = 1e4


def h_gauss(mu: float, s: float) -> float:
    """H_mu(s) = h_{G_mu}(e^s) in floating point (absolute error below H_ABS_ERR (1 + mu)).

    Phi(x) = erfc(-x/sqrt 2)/2 (relative accuracy for x < 0); for s > 700 the product
    e^s Phi(b) is formed as exp(s + log Phi(b)) so nothing overflows.
    """
    if mu == 0.0:
        return max(0.0, -math.expm1(s)) if s < 0 else 0.0
    a = -s / mu + mu / 2.0
    b = -s / mu - mu / 2.0
    first = 0.5 * math.erfc(-a * _SQRT_HALF)
    if s <= 700.0:
        second = math.exp(s) * 0.5 * math.erfc(-b * _SQRT_HALF)
    else:
        second = math.exp(min(700.0, s + float(special.log_ndtr(b))))
    return min(1.0, max(0.0, first - second))


@functools.lru_cache(maxsize=4096)
def _weights(a: float) -> tuple[float, float]:
    """(p, q) = (1/(1 + e^{-a}), 1/(1 + e^{a})), each rounded up (dpsieve._rounding)."""
    p = div_up(1, add_down(1, exp_down(-a)))
    q = div_up(1, add_down(1, exp_down(a)))
    return p, q


def delta_upper(a: float | Fraction, mu: float, t: float) -> float:
    """An upper bound on h_B(e^t) for B = R_a (+) G_mu (a >= 0 the pure part, mu >= 0).

    Each H term carries an absolute allowance of H_ABS_ERR (1 + mu) and the weights a
    relative one, so the result is >= the exact value (docs/proofs/mixed.md, §3). ``a`` may be an
    exact ``Fraction``: it is read as the float at or above it (R_a grows with a).
    """
    af = round_up(a)
    return _delta(af, _weights(af), mu, t)


def _delta(af: float, w: tuple[float, float], mu: float, t: float) -> float:
    err = H_ABS_ERR * (1.0 + mu)  # allowance on each H_mu value (docs/proofs/mixed.md §3)
    if af == 0.0:
        return min(1.0, h_gauss(mu, t) + err)
    p, q = w
    val = p * (h_gauss(mu, t - af) + err) + q * (h_gauss(mu, t + af) + err)
    return min(1.0, val)


def mu_for(a: float | Fraction, eps: float, delta: float) -> float:
    """The largest mu (rounded down) with delta_upper(a, mu, eps) <= delta, or 0 when only
    mu = 0 passes (exact for a <= eps); -1.0 if a > eps.

    R_a (+) G_mu is then (eps, delta)-DP, i.e. inside the target R_{eps,delta}.
    """
    af = round_up(a)
    w = _weights(af)
    if Fraction(a) > Fraction(eps):
        return -1.0  # R_a alone is not (eps, delta)-DP for a > eps (h = p(1 - e^{eps-a}) > 0)
    # mu = 0 is exact for a <= eps: R_a is a-DP, so h_{R_a}(e^eps) = 0 <= delta; the float
    # test below only decides how far above 0 mu may go.

    def ok(m: float) -> bool:
        return _delta(af, w, m, eps) <= delta

    lo, hi = 0.0, 1.0
    while ok(hi):
        lo, hi = hi, 2.0 * hi
        if hi > _MU_MAX:
            return lo
    for _ in range(200):
        if hi - lo <= 1e-13 * max(1.0, hi):
            break
        mid = 0.5 * (lo + hi)
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo


def epsilon_upper(a: float | Fraction, mu: float, delta: float) -> float:
    """The smallest eps >= 0 (rounded up) with delta_upper(a, mu, eps) <= delta.

    Never below the exact eps(delta) of R_a (+) G_mu (the returned value always passes the
    certified test); ``inf`` if no finite eps is found. Regula falsi (Illinois) on
    log delta_upper, keeping a bracket [lo, hi] with hi passing and lo failing.
    """
    af = round_up(a)
    if mu == 0.0:  # R_a is a-DP: af bounds its eps at any delta exactly, even where the
        return min(af, _epsilon_search(af, mu, delta))  # float allowance exceeds delta
    return _epsilon_search(af, mu, delta)


def _epsilon_search(af: float, mu: float, delta: float) -> float:
    w = _weights(af)
    if _delta(af, w, mu, 0.0) <= delta:
        return 0.0

    def g(e: float) -> float:
        return math.log(max(_delta(af, w, mu, e), 1e-300)) - math.log(delta)

    lo, hi = 0.0, max(1.0, 2.0 * af)
    while not g(hi) <= 0.0:
        lo, hi = hi, 2.0 * hi
        if hi > 1e7:
            return math.inf
    glo, ghi = g(lo), g(hi)
    side = 0
    for _ in range(200):
        if hi - lo <= 1e-10 * max(1.0, hi):
            break
        mid = hi - ghi * (hi - lo) / (ghi - glo) if ghi != glo else 0.5 * (lo + hi)
        if not lo < mid < hi:
            mid = 0.5 * (lo + hi)
        gm = g(mid)
        if gm <= 0.0:
            hi, ghi = mid, gm
            if side == 1:
                glo *= 0.5
            side = 1
        else:
            lo, glo = mid, gm
            if side == -1:
                ghi *= 0.5
            side = -1
    return hi
