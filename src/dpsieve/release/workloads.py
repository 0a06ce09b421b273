"""Workload builders: k-way marginals, random counting queries, 1-D and 2-D range queries.

All builders are data-independent (public). Counting queries take values in {0, 1}, so one
replaced row moves each answer by at most 1/n.
"""

from __future__ import annotations

import itertools

import numpy as np

from dpsieve._validation import check_in_closed, check_int, fail
from dpsieve.release.data import Domain, Workload

__all__ = ["marginals", "random_counting", "range_1d", "range_2d"]


def marginals(domain: Domain, way: int) -> Workload:
    """All ``way``-way marginal cells: for each attribute subset of size ``way`` and each
    value combination, the indicator of that cell (k = sum over subsets of prod of sizes)."""
    d = len(domain.names)
    w = check_int("way", way, "marginals", minimum=1)
    if w > d:
        raise fail("way", "marginals", f"an int <= the number of attributes ({d})", way)
    grids = np.indices(domain.shape).reshape(d, -1)  # coords of every universe element
    rows: list[np.ndarray] = []
    names: list[str] = []
    for subset in itertools.combinations(range(d), w):
        for values in itertools.product(*(range(domain.shape[a]) for a in subset)):
            mask = np.ones(domain.size, dtype=bool)
            for a, v in zip(subset, values, strict=True):
                mask &= grids[a] == v
            rows.append(mask.astype(np.float64))
            names.append("&".join(f"{domain.names[a]}={domain.levels[a][v]}"
                                  for a, v in zip(subset, values, strict=True)))
    return Workload(np.vstack(rows), tuple(names))


def random_counting(universe_size: int, k: int, *, density: float = 0.5,
                    seed: int = 0) -> Workload:
    """k random counting queries: each q is the indicator of a random subset of D, each
    element included independently with probability ``density``. The seed is public."""
    T = check_int("universe_size", universe_size, "random_counting", minimum=1)
    kk = check_int("k", k, "random_counting", minimum=1)
    p = check_in_closed("density", density, 0.0, 1.0, "random_counting")
    rng = np.random.default_rng(check_int("seed", seed, "random_counting", minimum=0))
    m = (rng.random((kk, T)) < p).astype(np.float64)
    return Workload(m, tuple(f"rand{i}" for i in range(kk)))


def range_1d(universe_size: int, *, prefix_only: bool = False) -> Workload:
    """All intervals [a, b] of an ordered universe (k = T(T+1)/2), or only prefixes [0, b]."""
    T = check_int("universe_size", universe_size, "range_1d", minimum=1)
    rows, names = [], []
    for a in range(1 if prefix_only else T):
        for b in range(a, T):
            r = np.zeros(T)
            r[a:b + 1] = 1.0
            rows.append(r)
            names.append(f"[{a},{b}]")
    return Workload(np.vstack(rows), tuple(names))


def range_2d(shape: tuple[int, int]) -> Workload:
    """All axis-aligned rectangles of a T1 x T2 grid (row-major element index)."""
    t1 = check_int("shape[0]", shape[0], "range_2d", minimum=1)
    t2 = check_int("shape[1]", shape[1], "range_2d", minimum=1)
    k = (t1 * (t1 + 1) // 2) * (t2 * (t2 + 1) // 2)
    if k > 200_000:
        raise fail("shape", "range_2d", "a grid with at most 200000 rectangles", shape)
    rows, names = [], []
    for a1 in range(t1):
        for b1 in range(a1, t1):
            for a2 in range(t2):
                for b2 in range(a2, t2):
                    r = np.zeros((t1, t2))
                    r[a1:b1 + 1, a2:b2 + 1] = 1.0
                    rows.append(r.ravel())
                    names.append(f"[{a1},{b1}]x[{a2},{b2}]")
    return Workload(np.vstack(rows), tuple(names))
