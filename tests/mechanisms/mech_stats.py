"""Shared statistical helpers for the sampler tests (fixed seeds, fixed thresholds)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import stats

#: Every goodness-of-fit test passes iff its p-value exceeds this (seeds are fixed, so the
#: outcome is deterministic; a correct sampler fails it with probability 1e-6 per seed).
P_MIN = 1e-6


def dlap_pmf(scale: float, z: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    a = math.exp(-1.0 / scale)
    return (1 - a) / (1 + a) * np.exp(-np.abs(z) / scale)


def dgauss_pmf(sigma2: float, z: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
    lim = int(40 * math.sqrt(sigma2)) + 50
    grid = np.arange(-lim, lim + 1)
    norm = float(np.sum(np.exp(-(grid.astype(float) ** 2) / (2 * sigma2))))
    return np.exp(-(z.astype(float) ** 2) / (2 * sigma2)) / norm


def chi2_pvalue(
    samples: npt.ArrayLike, support: npt.ArrayLike, pmf: npt.ArrayLike, min_expected: float = 20
) -> float:
    """Chi-square goodness of fit; cells with small expectation are pooled into one."""
    x = np.asarray(samples).reshape(-1)
    sup = np.asarray(support)
    p = np.asarray(pmf, dtype=float)
    n = x.size
    counts = np.array([np.sum(x == s) for s in sup], dtype=float)
    exp = p * n
    big = exp >= min_expected
    obs = [*list(counts[big]), n - counts[big].sum()]
    ex = [*list(exp[big]), n - exp[big].sum()]
    if ex[-1] < 1e-9 and obs[-1] == 0:  # nothing expected, nothing seen: drop the pool
        obs, ex = obs[:-1], ex[:-1]
    ex[-1] = max(ex[-1], 1e-12)
    return float(stats.chisquare(obs, ex).pvalue)


def freq_pvalue(samples: npt.ArrayLike, probs: npt.ArrayLike) -> float:
    """Chi-square test of categorical samples in {0..k-1} against ``probs``."""
    x = np.asarray(samples)
    p = np.asarray(probs, dtype=float)
    counts = np.bincount(x, minlength=p.size).astype(float)
    return float(stats.chisquare(counts, p * x.size).pvalue)
