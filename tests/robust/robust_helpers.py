"""Shared helpers for the robust tests: neighbouring pairs and exact release pmfs."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.robust.friendly import FilterParams, friend_count_table, keep_probabilities, l1


def keep_probs(x: npt.NDArray[np.float64], r: float, params: FilterParams) -> np.ndarray:
    z = friend_count_table(x.reshape(len(x), -1), l1, np.array([r]))[0]
    return keep_probabilities(z, params)


def dlap_pmf(centre: int, eps: float, lo: int, hi: int) -> npt.NDArray[np.float64]:
    """Exact pmf of centre + DLap (P[z] ∝ e^{-eps|z|}) on the integers lo..hi."""
    a = math.exp(-eps)
    k = np.arange(lo, hi + 1)
    return (1 - a) / (1 + a) * a ** np.abs(k - centre)


def count_release(eps: float, n: int) -> Callable[[tuple[Any, ...]], tuple[np.ndarray, float]]:
    w = int(40 / eps) + 5
    lo, hi = -w, n + w

    def rel(core: tuple[Any, ...]) -> tuple[np.ndarray, float]:
        pm = dlap_pmf(len(core), eps, lo, hi)
        return pm, max(0.0, 1.0 - float(pm.sum()))

    return rel


def diameter_release(
    eps: float, r: int, span: int
) -> Callable[[tuple[Any, ...]], tuple[np.ndarray, float]]:
    """Diameter of the core + DLap of scale 2r/eps: eps-DP only on r-friendly pairs."""
    w = int(80 * r / eps) + 5
    lo, hi = -w, 2 * span + w

    def rel(core: tuple[Any, ...]) -> tuple[np.ndarray, float]:
        d = int(max(core) - min(core)) if core else 0
        pm = dlap_pmf(d, eps / (2 * r), lo, hi)
        return pm, max(0.0, 1.0 - float(pm.sum()))

    return rel


def neighbour_pairs(
    rng: np.random.Generator, count: int
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], int, int]]:
    """(D, D', k, r): random, outlier-swap and at-the-radius pairs on small integer data."""
    out = []
    for t in range(count):
        n = int(rng.integers(5, 11))
        r = int(rng.integers(1, 4))
        x = rng.integers(0, 10, size=n).astype(float)
        if t % 3 != 0:  # a typical cluster
            x[: n // 2 + 2] = rng.integers(4, 7, size=n // 2 + 2)
        k = int(rng.integers(n))
        y = x.copy()
        kind = t % 3
        if kind == 0:
            y[k] = float(rng.integers(-5, 15))
        elif kind == 1:  # a typical record swapped for a far outlier
            k = int(np.argmin(np.abs(x - np.median(x))))
            y[k] = 1000.0
        else:  # a record exactly at the radius of the cluster
            y[k] = float(np.max(x[: n // 2 + 2]) + r)
        out.append((x, y, k, r))
    return out
