"""Exact privacy audits on small data sets: Filter-then-Release (docs/proofs/pfr.md §8) and
the row-wise means (docs/proofs/robust_mean.md §4, at the end of this module).

For a dataset ``D`` and a neighbour ``D'`` (record ``k`` replaced) the filter keeps record
``i`` independently with probability ``p_i``. :func:`core_distribution` enumerates all
``2^m`` keep patterns of the ``m`` records with ``0 < p_i < 1`` and groups them by the kept
multiset; :func:`pipeline_pmf` mixes a release's exact probability mass function over them.
:func:`hockey_stick` and :func:`realised_epsilon` then give the exact privacy loss of the
pair. Everything is exact up to float summation (relative error ~1e-15 per term), far
below the margins the tests use; a release whose output space is infinite must return a
truncated pmf plus the truncated mass, which :func:`hockey_stick` adds to ``delta``
(an upper bound: the audit errs towards reporting *more* loss).

No samplers are used: this module computes distributions, it never draws from them.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_nonnegative, fail

__all__ = [
    "ReleasePMF",
    "core_count_sum_distribution",
    "core_distribution",
    "grid_quantile_logpmf",
    "hockey_stick",
    "pipeline_pmf",
    "realised_epsilon",
    "rowwise_mean_realised_epsilon",
]

ReleasePMF = Callable[[tuple[Any, ...]], tuple[npt.NDArray[np.float64], float]]
"""Kept multiset (sorted tuple of records) -> (pmf on a fixed finite grid, mass outside it)."""


def core_distribution(
    records: Sequence[Hashable], probs: Sequence[float]
) -> dict[tuple[Any, ...], float]:
    """Exact law of the kept multiset when record ``i`` is kept with probability ``probs[i]``.

    Keys are sorted tuples of kept records. Records with ``p = 1`` are always in, ``p = 0``
    never; only the ``m`` uncertain ones are enumerated (``2^m`` patterns, ``m <= 20``).
    """
    if len(records) != len(probs):
        raise fail("probs", "core_distribution", f"a sequence of length {len(records)}", probs)
    fixed = [x for x, p in zip(records, probs, strict=True) if p >= 1.0]
    unsure = [(x, float(p)) for x, p in zip(records, probs, strict=True) if 0.0 < p < 1.0]
    if len(unsure) > 20:
        raise fail("probs", "core_distribution", "at most 20 entries strictly in (0, 1)",
                   len(unsure))
    out: dict[tuple[Any, ...], float] = {}
    for bits in itertools.product((False, True), repeat=len(unsure)):
        w = 1.0
        kept = list(fixed)
        for b, (x, p) in zip(bits, unsure, strict=True):
            w *= p if b else 1.0 - p
            if b:
                kept.append(x)
        key = tuple(sorted(kept))  # type: ignore[type-var]
        out[key] = out.get(key, 0.0) + w
    return out


def core_count_sum_distribution(
    values: Sequence[int], probs: Sequence[float]
) -> npt.NDArray[np.float64]:
    """Exact law of ``(|S|, sum(S))`` of the kept set for non-negative integer records.

    ``out[c, s] = P[|S| = c, sum(S) = s]``, by dynamic programming over the records (each
    kept independently): polynomial, so it handles ``n`` in the hundreds, where the
    ``2^m`` enumeration of :func:`core_distribution` cannot. Releases that depend on the
    core only through its size and sum (counts, means) are audited with it.
    """
    v = [int(a) for a in values]
    if len(v) != len(probs) or any(a < 0 for a in v):
        raise fail("values", "core_count_sum_distribution",
                   "non-negative integers, one per probability", values)
    dp = np.zeros((len(v) + 1, sum(v) + 1))
    dp[0, 0] = 1.0
    for a, p in zip(v, probs, strict=True):
        p = float(p)
        if p <= 0.0:
            continue
        shifted = np.zeros_like(dp)
        shifted[1:, a:] = dp[:-1, : dp.shape[1] - a]
        dp = shifted if p >= 1.0 else (1.0 - p) * dp + p * shifted
    return dp


def pipeline_pmf(
    cores: dict[tuple[Any, ...], float], release: ReleasePMF
) -> tuple[npt.NDArray[np.float64], float]:
    """``sum_S P(S) release(S)``: the exact output law of Filter-then-Release, and its tail."""
    total: npt.NDArray[np.float64] | None = None
    tail = 0.0
    for core, w in cores.items():
        pmf, t = release(core)
        total = w * pmf if total is None else total + w * pmf
        tail += w * t
    if total is None:
        raise fail("cores", "pipeline_pmf", "a non-empty distribution", cores)
    return total, tail


def hockey_stick(
    p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], eps: float, tail: float = 0.0
) -> float:
    """``max(E_{e^eps}(P||Q), E_{e^eps}(Q||P)) + tail``: the smallest delta for ``eps``.

    ``tail`` is an upper bound on the mass either law puts outside the grid; adding it
    makes the result an upper bound of the exact delta.
    """
    check_nonnegative("eps", eps, "hockey_stick")
    check_nonnegative("tail", tail, "hockey_stick")
    a = math.exp(eps)
    d1 = float(np.sum(np.maximum(p - a * q, 0.0)))
    d2 = float(np.sum(np.maximum(q - a * p, 0.0)))
    return max(d1, d2) + tail


def realised_epsilon(
    p: npt.NDArray[np.float64], q: npt.NDArray[np.float64], delta: float = 0.0,
    tail: float = 0.0,
) -> float:
    """Smallest ``eps`` with ``hockey_stick(p, q, eps, tail) <= delta`` (bisection, 60 steps).

    Returns ``inf`` when even ``eps = 700`` does not reach ``delta``. The returned value is
    the upper end of the final bisection bracket, so it never under-reports the loss.
    """
    if hockey_stick(p, q, 700.0, tail) > delta:
        return math.inf
    if hockey_stick(p, q, 0.0, tail) <= delta:
        return 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        mask = (p > 0) & (q > 0)
        hi = float(np.max(np.abs(np.log(p[mask] / q[mask])))) if np.any(mask) else 700.0
    hi = min(max(hi, 1e-12), 700.0)
    while hockey_stick(p, q, hi, tail) > delta:
        hi = min(2 * hi, 700.0)
    lo = 0.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if hockey_stick(p, q, mid, tail) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


# ------------------------------------------------ row-wise means (docs/proofs/robust_mean.md)
def grid_quantile_logpmf(index: npt.ArrayLike, size: int, level: float,
                         eps: float) -> npt.NDArray[np.float64]:
    """Exact log-probabilities of every grid index under the ideal law of
    :func:`dpsieve.robust.quantile.grid_quantile` (``size`` small enough to list)."""
    v = np.sort(np.clip(np.asarray(index, dtype=np.int64), 0, size))
    j = np.arange(size)
    mid = (np.searchsorted(v, j, side="left") + np.searchsorted(v, j, side="right")) / 2.0
    logit = -eps * np.abs(mid - level * v.size) / 2.0
    m = float(logit.max())
    out: npt.NDArray[np.float64] = logit - (m + math.log(float(np.exp(logit - m).sum())))
    return out


def rowwise_mean_realised_epsilon(
    x: npt.ArrayLike, y: npt.ArrayLike, *, bound: float, grid_points: int,
    split: Sequence[float], width: float = 3.0, trim: bool = True,
) -> float:
    """Exact pure privacy loss ``max_o |log P_x(o) / P_y(o)|`` of the row-wise mean of
    scalars (``trim=True``: :func:`~dpsieve.robust.rowwise.rowwise_pfr_mean`; ``False``:
    :func:`~dpsieve.robust.rowwise.mad_clipped_mean`) on two data sets of equal size, with
    small public grids of ``grid_points`` points.

    The output is (centre index, scale index, noisy integer sum[, noisy count]). Given the
    two indices, the sum and count are integers plus discrete Laplace noise, whose largest
    log-ratio is ``|S_x - S_y| / t`` (attained: the laws are shifts of one another), so the
    loss is the maximum over the listed (centre, scale) pairs of the sum of the four stages'
    log-ratios, for both signs. Exact up to float summation.
    """
    from dpsieve.robust.rowwise import (
        centre_scale_grids,
        lattice,
        noise_scale,
        snap,
        window_radius,
    )

    a = np.asarray(x, dtype=np.float64).reshape(-1)
    b = np.asarray(y, dtype=np.float64).reshape(-1)
    if a.size != b.size:
        raise fail("y", "rowwise_mean_realised_epsilon", f"{a.size} records", b.size)
    ec, es, esum = float(split[0]), float(split[1]), float(split[2])
    ecount = float(split[3]) if trim else 0.0
    lin, geo = centre_scale_grids(bound, grid_points)
    lc_a = grid_quantile_logpmf(lin.index(a), lin.size, 0.5, ec)
    lc_b = grid_quantile_logpmf(lin.index(b), lin.size, 0.5, ec)
    t_count = noise_scale(1, ecount) if trim else 0.0
    worst = 0.0
    for i in range(lin.size):
        m = lin.value(i)
        ls_a = grid_quantile_logpmf(geo.index(np.abs(a - m)), geo.size, 0.5, es)
        ls_b = grid_quantile_logpmf(geo.index(np.abs(b - m)), geo.size, 0.5, es)
        for j in range(geo.size):
            r = window_radius(geo.value(j), width, bound)
            g, k = lattice(r)
            t = noise_scale(k, esum)
            if trim:
                ka, kb = np.abs(a - m) <= r, np.abs(b - m) <= r
                sa, sb = int(snap(a[ka] - m, g).sum()), int(snap(b[kb] - m, g).sum())
                tail = abs(sa - sb) / t + abs(int(ka.sum()) - int(kb.sum())) / t_count
            else:
                sa = int(snap(np.clip(a - m, -r, r), g).sum())
                sb = int(snap(np.clip(b - m, -r, r), g).sum())
                tail = abs(sa - sb) / t
            head = lc_a[i] - lc_b[i] + ls_a[j] - ls_b[j]
            worst = max(worst, abs(head) + tail)
    return worst
