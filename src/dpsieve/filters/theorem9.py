"""Theorem 9 of the paper: what the natural (eps, delta) filter really guarantees.

The natural (eps, delta)-DP filter over symmetric PLDs with k rounds is not free, but the
interaction is (chi (eps + 1), chi delta)-DP. The proof (Sec. 7) fixes, with
c = ceil(ln(1/delta)) (natural log, see docs/filters.md)::

    n       = 1 + ceil(log2(k (eps + 2) / eps))
    eps_i   = (eps + 2) / 2^(n-1-i)        for i = 1..n-1,  eps_0 = 0, eps_n = inf
    l*_1    = k,   l*_n = 4 delta,
    l*_i    = 8 max{ l in N : H_{e^eps}(RR_{eps_{i-1}}^(l-1)) <= 2 delta }   (1 < i < n)
    b*_i    = 2 c l*_i  (i < n),  b*_n = 0
    eps'    = n 2 c (9 eps + 2),   delta' = n (32 c + 4) delta,   chi = n (32 c + 4)

:func:`theorem9` returns these constants and the paper's (eps', delta').

Because the text's Case III mixes eps_{i-1} and eps_i (see docs/filters.md), we also
compute a guarantee that does not use that step (:func:`certified_guarantee`): the proof's
post-processing argument (Algorithm 4, the triangle-inequality lemma and multiplicative
Azuma) shows that the additive filter with budgets l and sample budgets b is
(sum_i e_i, sum_i H_{e^{e_i}}(RR_{eps_i}^(b_i)) + P_fail)-DP for any split e_i, with
P_fail <= sum_{i<n} exp(-z_i^2 l_i / (2 + z_i)) + l_n, (1 + z_i) l_i = b_i + 1. Each
H(RR^(b)) is computed exactly from the binomial law (tails beyond 40 standard deviations
dropped, < 1e-300) and rounded up.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from dpsieve._rounding import rel_up
from dpsieve._validation import check_in_open, check_int, check_positive

__all__ = [
    "Theorem9",
    "certified_epsilon",
    "certified_guarantee",
    "composition_delta",
    "composition_epsilon",
    "rr_compose_delta",
    "theorem9",
]


def rr_compose_delta(e: float, count: int, eps: float) -> float:
    """H_{e^eps}(RR_e^(count)), rounded up: the loss is e (2B - count), B ~ Bin(count, p)."""
    if count <= 0 or e <= 0.0:
        return 0.0
    p = 1.0 / (1.0 + math.exp(-e))
    # losses above eps need 2B - count > eps / e
    b0 = max(0, math.floor((count + eps / e) / 2.0) + 1)
    if b0 > count:
        return 0.0
    sd = math.sqrt(count * p * (1 - p))
    b1 = min(count, math.ceil(count * p + 40.0 * sd + 40.0))
    if b0 > b1:
        return 1e-300
    from scipy import stats  # imported here: scipy.stats costs ~1 s to import, and every
    # ledger import reaches this module

    bs = np.arange(b0, b1 + 1, dtype=np.float64)
    logpmf = stats.binom.logpmf(bs, count, p)
    loss = e * (2.0 * bs - count)
    val = float(np.sum(np.exp(logpmf) * -np.expm1(eps - loss)))
    return min(1.0, val * (1.0 + 1e-9) + 1e-300)


def _max_ell(e: float, eps: float, two_delta: float) -> int:
    """max{ l : H_{e^eps}(RR_e^(l-1)) <= 2 delta } (the delta grows with l)."""

    def ok(j: int) -> bool:
        return rr_compose_delta(e, j, eps) <= two_delta

    lo, hi = 0, 1
    while ok(hi):
        lo, hi = hi, hi * 2
        if hi > 10**9:
            raise ArithmeticError("l* exceeds 1e9 compositions; parameters out of range")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo + 1


@dataclass(frozen=True, slots=True)
class Theorem9:
    """The constants of Theorem 9 (Sec. 7) for (eps, delta, k)."""

    eps: float
    delta: float
    k: int
    c: int
    n: int
    eps_grid: tuple[float, ...]
    ell: tuple[float, ...]
    b: tuple[int, ...]
    eps_prime: float
    delta_prime: float
    chi: float

    def to_dict(self) -> dict[str, object]:
        return {
            "eps": self.eps,
            "delta": self.delta,
            "k": self.k,
            "c": self.c,
            "n": self.n,
            "eps_grid": list(self.eps_grid),
            "ell": list(self.ell),
            "b": list(self.b),
            "eps_prime": self.eps_prime,
            "delta_prime": self.delta_prime,
            "chi": self.chi,
        }


def theorem9(eps: float, delta: float, k: int) -> Theorem9:
    """Theorem 9's constants and guarantee (eps', delta') for the natural filter."""
    eps = check_positive("eps", eps, "theorem9")
    delta = check_in_open("delta", delta, 0.0, 1.0, "theorem9")
    k = check_int("k", k, "theorem9", minimum=1)
    c = math.ceil(math.log(1.0 / delta))
    n = 1 + math.ceil(math.log2(k * (eps + 2.0) / eps))
    grid = [0.0] + [(eps + 2.0) / 2.0 ** (n - 1 - i) for i in range(1, n)] + [math.inf]
    ell: list[float] = []
    for i in range(1, n + 1):
        if i == 1:
            ell.append(float(k))
        elif i == n:
            ell.append(4.0 * delta)
        else:
            ell.append(float(8 * _max_ell(grid[i - 1], eps, 2.0 * delta)))
    b = [2 * c * int(v) for v in ell[:-1]] + [0]
    eps_p = n * 2 * c * (9.0 * eps + 2.0)
    chi = n * (32.0 * c + 4.0)
    return Theorem9(eps, delta, k, c, n, tuple(grid), tuple(ell), tuple(b), eps_p, chi * delta, chi)


def _azuma(mean_bound: float, b: int) -> float:
    """P[W >= b + 1] for an adaptive sum of [0,1] variables with means summing <= mean_bound."""
    if mean_bound <= 0.0:
        return 0.0
    zeta = (b + 1) / mean_bound - 1.0
    if zeta <= 0:
        return 1.0
    return math.exp(-zeta * zeta * mean_bound / (2.0 + zeta))


def certified_guarantee(
    grid: tuple[float, ...],
    ell: tuple[float, ...],
    b: tuple[int, ...],
    eps_split: tuple[float, ...],
) -> tuple[float, float]:
    """(eps'', delta'') of the additive profile filter (Algorithm 3), see module docstring.

    ``grid`` = (eps_0, ..., eps_n); ``ell``, ``b`` and ``eps_split`` have one entry per
    bucket (the last bucket, eps_n = inf, must have b = 0 and its split is ignored).
    """
    n = len(ell)
    p_fail = sum(_azuma(ell[i], b[i]) for i in range(n - 1)) + ell[n - 1]
    d = sum(rr_compose_delta(grid[i + 1], b[i], eps_split[i]) for i in range(n - 1))
    e_total = math.fsum(eps_split[: n - 1])
    return e_total, min(1.0, (d + p_fail) * (1.0 + 1e-12))


def certified_epsilon(t9: Theorem9, delta_target: float | None = None) -> tuple[float, float]:
    """The smallest (eps'', delta'') found with delta'' <= delta_target (default: the
    paper's delta') by the certified bound, splitting eps'' across buckets as
    e_i = mean_i + s * sd_i of each bucket's RR loss (any split is valid; s by bisection).
    Returns (inf, 1.0) if no split reaches the target."""
    target = t9.delta_prime if delta_target is None else delta_target
    n = t9.n
    es = t9.eps_grid[1:n]
    bs = t9.b[: n - 1]
    means = [b * e * math.tanh(e / 2.0) for e, b in zip(es, bs, strict=True)]
    # the loss e (2B - b) has variance 4 e^2 b p (1 - p), p (1 - p) = 1 / (2 + 2 cosh e)
    sds = [2.0 * e * math.sqrt(b / (2.0 + 2.0 * math.cosh(e))) for e, b in zip(es, bs, strict=True)]

    def at(s: float) -> tuple[float, float]:
        split = (*tuple(max(0.0, m + s * d) for m, d in zip(means, sds, strict=True)), 0.0)
        return certified_guarantee(t9.eps_grid, t9.ell, t9.b, split)

    lo, hi = 0.0, 1.0
    while at(hi)[1] > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e4:
            return math.inf, 1.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        if at(mid)[1] <= target:
            hi = mid
        else:
            lo = mid
    return at(hi)


def composition_delta(eps: float, delta: float, k: int, eps_prime: float) -> float:
    """delta(eps') of R_{eps,delta}^(+k), rounded up.

    R_{eps,delta} = R_{0,delta} (+) RR_eps (the delta part told apart), so the k-fold
    composition is R_{0,d} (+) RR_eps^(k) with d = 1 - (1 - delta)^k, and its hockey-stick
    curve is d + (1 - d) H(RR_eps^(k)); that is increasing in d, so an upper bound on d and
    one on H give one on the whole. H is :func:`rr_compose_delta` (binomial, rounded up).
    """
    d = rel_up(-math.expm1(k * math.log1p(-delta)), 1e-12) if delta > 0.0 else 0.0
    d = min(1.0, d)
    h = rr_compose_delta(eps, k, eps_prime)
    return min(1.0, rel_up(d + (1.0 - d) * h, 1e-12))


def composition_epsilon(eps: float, delta: float, k: int, delta_prime: float) -> float:
    """The smallest eps' (rounded up, to 1e-9 relative) with R_{eps,delta}^(+k) being
    (eps', delta')-DP; ``inf`` if delta' is below the delta part 1 - (1 - delta)^k.

    This bounds the natural (eps, delta) filter for k rounds (docs/filters.md): every query
    it admits has L_1 (+) ... (+) L_t <= R_{eps,delta}, so L_t <= R_{eps,delta} (composing
    with a PLD never lowers it), and k adaptively chosen queries each below R_{eps,delta}
    compose to at most R_{eps,delta}^(+k) (paper, Prop. 3).
    """
    eps = check_positive("eps", eps, "composition_epsilon")
    delta = check_in_open("delta", delta, 0.0, 1.0, "composition_epsilon")
    k = check_int("k", k, "composition_epsilon", minimum=1)
    delta_prime = check_positive("delta_prime", delta_prime, "composition_epsilon")
    if delta_prime >= 1.0:
        return 0.0  # every pair is (0, 1)-DP
    hi = eps * k  # every loss of RR_eps^(k) is at most k eps: H = 0 there
    if composition_delta(eps, delta, k, hi) > delta_prime:
        return math.inf
    lo = 0.0
    if composition_delta(eps, delta, k, lo) <= delta_prime:
        return 0.0
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        if composition_delta(eps, delta, k, mid) <= delta_prime:
            hi = mid
        else:
            lo = mid
    return hi
