"""The arithmetic of DP key selection (docs/proofs/queries.md §5), every bound directed.

* Tails of the exact noises, as **upper** bounds (they size a threshold's delta):
  :func:`dlap_tail_up` (the closed form ``q^m / (1 + q)``) and :func:`dgauss_tail_up`
  (``e^(-m^2/2s^2) / (s sqrt(2 pi)) + Phi_bar(m / s)``, docs/proofs/queries.md §5.4).
* :func:`least_threshold` -- the least ``m`` whose tail, times the groups a unit creates,
  is at most a delta.
* :func:`zcdp_delta_up` -- rho-zCDP to (eps, delta): an upper bound on delta (Canonne,
  Kamath, Steinke 2020, Prop. 12 at the best of a fixed grid of orders).
* :func:`geometric_table` -- the keep probabilities of the truncated geometric partition
  selection (Desfontaines, Voss, Gipson, Mandayam 2022, Thm. 1) on the 2^-64 lattice,
  rounded *down* with ``e^eps`` and delta rounded down, so every step satisfies the two
  (eps, delta) constraints exactly (§5.3).
* :func:`dlap_sf`, :func:`dgauss_sf` -- release probabilities for previews (estimates, not
  privacy claims: float, to ~1e-12).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from dpsieve._rounding import exp_bracket_fraction, rel_up, round_down

__all__ = ["ONE", "dgauss_sf", "dgauss_tail_up", "dlap_sf", "dlap_tail_up",
           "geometric_table", "least_threshold", "log_tail_up", "zcdp_delta_up"]

#: Keep probabilities of the truncated geometric are numerators over 2^64.
ONE = 1 << 64
#: The longest truncated geometric table built (units before keeping surely); beyond it
#: the construction is not offered (a tiny eps per group).
MAX_TABLE = 1 << 16
#: Relative margin on float evaluations of tails and conversions (their error is ~1e-14).
MARGIN = 1e-9


def dlap_tail_up(t: float, m: int) -> float:
    """An upper bound on P[Z >= m] = q^m / (1 + q), q = e^(-1/t), Z ~ DLap(t), m >= 1."""
    q = math.exp(-1.0 / t)
    return rel_up(math.exp(-m / t) / (1.0 + q), MARGIN)


def dgauss_tail_up(s2: float, m: int) -> float:
    """An upper bound on P[Z >= m] for Z ~ N_Z(0, s2), m >= 0: the mass at z >= m is at
    most e^(-m^2/2s2) + the integral from m, and the normaliser is at least s sqrt(2 pi)
    (Poisson summation), docs/proofs/queries.md §5.4."""
    s = math.sqrt(s2)
    head = math.exp(-(m * m) / (2.0 * s2)) / (s * math.sqrt(2.0 * math.pi))
    return rel_up(head + 0.5 * math.erfc(m / (s * math.sqrt(2.0))), MARGIN)


def log_tail_up(family: str, param: float, m: int) -> float:
    """An upper bound on log P[Z >= m] (m >= 1), by the bounds above taken in logs so that
    no tail underflows (a delta of 5e-324 is a valid request): Laplace
    -m/t - log(1 + q); Gaussian log(e^(-m^2/2s2) / (s sqrt(2 pi)) + Phi_bar(m/s)), with
    Phi_bar(x) <= e^(-x^2/2) / (x sqrt(2 pi)) (Mills) once erfc would underflow; raised
    by a relative and an absolute 1e-12."""
    if family == "laplace":
        x = -m / param - math.log1p(math.exp(-1.0 / param))
    else:
        s = math.sqrt(param)
        z = m / s
        if z < 20.0:
            x = math.log(math.exp(-z * z / 2.0) / (s * math.sqrt(2.0 * math.pi))
                         + 0.5 * math.erfc(z / math.sqrt(2.0)))
        else:
            x = -z * z / 2.0 + math.log((1.0 / s + 1.0 / z) / math.sqrt(2.0 * math.pi))
    return x + abs(x) * 1e-12 + 1e-12


def least_threshold(family: str, param: float, groups: int, delta: float) -> int | None:
    """The least m >= 1 with ``groups * P[Z >= m] <= delta`` by :func:`log_tail_up`
    (``family`` "laplace" with scale ``param``, "gaussian" with variance ``param``): the
    chance that any of ``groups`` groups a unit creates clears ``m`` plus its count;
    ``None`` if it is beyond 2^52 (no threshold offered: the noise is too wide)."""
    bar = math.log(delta) - math.log(groups)

    def ok(m: int) -> bool:
        return log_tail_up(family, param, m) <= bar

    hi = 1
    while not ok(hi):
        hi *= 2
        if hi > 1 << 52:
            return None
    lo = hi // 2  # ok(hi); not ok(lo) unless lo == 0
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


_ORDERS = np.exp(np.linspace(math.log(1.0 + 1e-4), math.log(1e6), 4000))


def zcdp_delta_up(rho: float, eps: float) -> float:
    """An upper bound on the delta at ``eps`` of a rho-zCDP mechanism: the least over a
    fixed grid of orders a of exp((a-1)(a rho - eps)) / a * (1 - 1/a)^(a-1) (Canonne,
    Kamath, Steinke 2020, Prop. 12; every order gives a valid bound), with a relative
    margin for the floating-point evaluation. A bound below the smallest float is stated
    as that float (5e-324), never 0; a log that overflows to -inf (eps 1e300) is such a
    bound, one that overflows to +inf is 1."""
    if rho <= 0:
        return 0.0
    a = _ORDERS
    with np.errstate(over="ignore"):
        log = (a - 1.0) * (a * rho - eps) - np.log(a) + (a - 1.0) * np.log1p(-1.0 / a)
    best = float(np.min(log))
    if not best < 700:
        return 1.0
    return min(1.0, max(rel_up(math.exp(best), MARGIN), 5e-324))


#: The eps above which the truncated geometric's ratio r is taken as e^700 (a lower bound
#: of e^eps, so every step stays valid).
_EPS_CAP = Fraction(700)


def geometric_table(eps: Fraction, delta: Fraction) -> tuple[int, ...] | None:
    """Keep numerators (over 2^64) of the truncated geometric partition selection for
    n = 0, 1, ... units, ending at the first n kept surely (2^64); ``None`` if that takes
    more than :data:`MAX_TABLE` steps.

    p_0 = 0, p_n = floor_64(min(r p_(n-1) + d, 1 - (1 - p_(n-1) - d) / r, 1)) with
    r <= e^eps and d <= delta (both rounded down): each step meets p_n <= e^eps p_(n-1) +
    delta and 1 - p_(n-1) <= e^eps (1 - p_n) + delta, and p is non-decreasing
    (docs/proofs/queries.md §5.3). Any r <= e^eps meets both, so eps is first capped at
    :data:`_EPS_CAP` (e^700 is a float, and 2^64 p_1 = d rounds every later step up to
    2^64 far below it): a huge eps (1e300) would make e^eps a power of two of 1e299 bits."""
    # r <= e^round_down(min(eps, cap)) <= e^eps
    lo = exp_bracket_fraction(round_down(min(eps, _EPS_CAP)))[0]
    r_num = math.floor(lo * ONE)  # r = r_num / 2^64 <= lo <= e^eps
    d = math.floor(delta * ONE)
    if d <= 0 or r_num < ONE:
        return None
    p, out = 0, [0]
    while p < ONE:
        a = (r_num * p) // ONE + d
        x = ONE - p - d
        b = ONE if x <= 0 else ONE - -((-x * ONE) // r_num)  # 2^64 - ceil(x 2^64 / r)
        p = min(a, b, ONE)
        out.append(p)
        if len(out) > MAX_TABLE:
            return None
    return tuple(out)


def dlap_sf(t: float, m: int) -> float:
    """P[Z >= m] for Z ~ DLap(t) (a float estimate)."""
    q = math.exp(-1.0 / t)
    if m >= 1:
        return math.exp(-m / t) / (1.0 + q)
    return 1.0 - math.exp(-(1 - m) / t) / (1.0 + q)


def dgauss_sf(s2: float, m: int) -> float:
    """P[Z >= m] for Z ~ N_Z(0, s2) (a float estimate: the pmf summed over +-14 sigma, or
    the normal tail with a continuity correction beyond sigma 1e4)."""
    s = math.sqrt(s2)
    if s > 1e4:
        return 0.5 * math.erfc((m - 0.5) / (s * math.sqrt(2.0)))
    k = math.ceil(14 * s) + 2
    z = np.arange(-k, k + 1, dtype=np.float64)
    w = np.exp(-(z * z) / (2.0 * s2))
    return float(w[z >= m].sum() / w.sum())
