"""Permute-and-flip's exact output law, for analysis (benchmarks, tests): never a sampler.

Permute-and-flip (McKenna & Sheldon 2020; :func:`dpsieve.mechanisms.select.
permute_and_flip`) visits the candidates in a uniformly random order and stops at the
first ``r`` whose coin of probability ``p_r = exp(-g_r)`` comes up, ``g_r = coef (max q -
q_r) >= 0`` (``coef = eps / (2 sensitivity)``, or ``eps / sensitivity`` for monotonic
scores); the best candidate's coin is sure, so it stops. Hence

    P[r] = p_r (1/n) sum_{k=0}^{n-1} e_k(1 - p_{-r}) / C(n-1, k),

the set visited before ``r`` having a size uniform on 0..n-1 and then being a uniform
subset of the others, each of which must fail (``e_k`` is the k-th elementary symmetric
polynomial of the other candidates' ``1 - p_j``). This module computes that sum; it does
not call (or share code with) the sampler it is used to check.

**How it errs.** In floats, every term is non-negative (``1 - p`` by ``expm1``, the
``e_k`` by convolving positive polynomials, ``1 / C(n-1, k)`` from ``lgamma``): no
cancellation, so each ``log P[r]`` is within ~``4 n`` ulps of 1 plus an ulp of ``g_r`` of
the exact value (``P[r]`` within that relatively), in either direction. It is a utility
and test figure: nothing is charged or certified from it. Laws are computed for at most
:data:`MAX_CANDIDATES` candidates (beyond, ``e_k`` could leave the float range).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpsieve._validation import fail

__all__ = ["MAX_CANDIDATES", "permute_and_flip_law", "permute_and_flip_log_law"]

#: The most candidates a law is computed for (``e_k <= C(n-1, k)`` stays a finite float).
MAX_CANDIDATES = 1000


def permute_and_flip_log_law(gaps: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """``log P[r]`` for gaps ``g_r = coef (max q - q_r)`` (>= 0, at least one 0: the best
    candidate; ``+inf`` a candidate never released), as the module docstring states; the
    exact law sums to 1 (the floats to within ~``4 n`` ulps). ``-inf`` where ``P[r]``
    is 0 or underflows."""
    g = np.asarray(gaps, dtype=np.float64).reshape(-1)
    n = int(g.size)
    if not 1 <= n <= MAX_CANDIDATES:
        raise fail("gaps", "permute_and_flip_log_law", f"1 to {MAX_CANDIDATES} gaps", n)
    if not (np.all(g >= 0) and np.any(g == 0)):  # NaN fails both
        raise fail("gaps", "permute_and_flip_log_law", "floats >= 0 with a 0 (the best "
                   "candidate's gap)", g.tolist())
    x = -np.expm1(-g)  # 1 - p_j, each in [0, 1)
    pre = [np.ones(1)]
    for v in x:
        pre.append(np.convolve(pre[-1], [1.0, v]))
    suf = [np.ones(1)]
    for v in x[::-1]:
        suf.append(np.convolve(suf[-1], [1.0, v]))
    suf = suf[::-1]
    lw = [-(math.lgamma(n) - math.lgamma(k + 1) - math.lgamma(n - k)) for k in range(n)]
    w = np.exp(np.asarray(lw)) / n  # 1 / (n C(n-1, k))
    out = np.empty(n)
    for r in range(n):
        e = np.convolve(pre[r], suf[r + 1])  # e_k of the others, k = 0..n-1
        s = float(np.dot(e, w))
        out[r] = -float(g[r]) + (math.log(s) if s > 0 else -math.inf)
    return out


def permute_and_flip_law(scores: npt.ArrayLike, coef: float) -> npt.NDArray[np.float64]:
    """The output law for ``scores`` at ``coef`` (gaps ``coef (max - score)``),
    normalised to sum to 1 in floats (the normalisation only corrects rounding)."""
    q = np.asarray(scores, dtype=np.float64).reshape(-1)
    if not (math.isfinite(coef) and coef > 0):
        raise fail("coef", "permute_and_flip_law", "a finite float > 0", coef)
    if q.size == 0 or not np.all(np.isfinite(q)):
        raise fail("scores", "permute_and_flip_law", "finite floats, at least one",
                   q.tolist())
    g = coef * (q.max() - q)
    g[q == q.max()] = 0.0
    p = np.exp(permute_and_flip_log_law(g))
    return np.asarray(p / p.sum(), dtype=np.float64)
