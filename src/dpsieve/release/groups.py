"""Reference databases of the envelope, grouped by answer vector.

p_y depends on y only through its target a(y), i.e. through its class histogram. The least
Hamming distance from x to a database whose class histogram is h is
n - sum_c min(h_x(c), h(c)) (match rows class by class; relabelling inside a class is free
because the law only sees classes). All C(n + T' - 1, T' - 1) histograms are enumerated,
equal answer vectors are grouped, and each group keeps its least distance:

    p~_x(w) = max_y e^{-lambda d_H(x, y)} p_y(w) = max_g e^{-lambda D_g} p_{a_g}(w).

The set of groups and their targets do not depend on x; only the distances D_g do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int
from dpsieve.release.errors import InstanceTooLargeError
from dpsieve.release.transcript import CollapsedWorkload

__all__ = ["MAX_HISTOGRAMS", "Groups", "enumerate_histograms", "group_histograms",
           "histogram_count"]

MAX_HISTOGRAMS = 3_000_000

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def histogram_count(n: int, parts: int) -> int:
    """C(n + parts - 1, parts - 1): the number of histograms of n rows over ``parts`` cells."""
    return math.comb(n + parts - 1, parts - 1)


def enumerate_histograms(n: int, parts: int, *,
                         limit: int = MAX_HISTOGRAMS) -> npt.NDArray[np.int64]:
    """All histograms of n rows over ``parts`` cells, one per row (lexicographic)."""
    check_int("n", n, "enumerate_histograms", minimum=1)
    check_int("parts", parts, "enumerate_histograms", minimum=1)
    count = histogram_count(n, parts)
    if count > limit:
        raise InstanceTooLargeError(
            f"enumerating {count} histograms (n={n}, distinct columns={parts}) exceeds the "
            f"limit of {limit}", estimated_cost=float(count), limit=float(limit))
    rows = np.zeros((1, 0), dtype=np.int64)
    left = np.array([n], dtype=np.int64)
    for _ in range(parts - 1):
        reps = left + 1
        idx = np.repeat(np.arange(rows.shape[0]), reps)
        offs = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)
        rows = np.hstack([rows[idx], offs[:, None]])
        left = left[idx] - offs
    out: IntArray = np.hstack([rows, left[:, None]])
    return out


@dataclass(frozen=True, slots=True, eq=False)
class Groups:
    """Answer vectors ``answers`` (G x k), class targets ``targets`` (G x K', rows a_g),
    least distances ``distance`` (G,), and the index ``center`` of x's group (distance 0)."""

    answers: FloatArray
    targets: FloatArray
    distance: IntArray
    center: int

    @property
    def size(self) -> int:
        return int(self.targets.shape[0])


def group_histograms(cw: CollapsedWorkload, x_counts: IntArray, *,
                     limit: int = MAX_HISTOGRAMS) -> Groups:
    """Enumerate class histograms of n = sum(x_counts) rows and group them by target."""
    n = int(x_counts.sum())
    H = enumerate_histograms(n, cw.size, limit=limit)
    key = H @ cw.columns.T  # exact integer sums for counting queries
    uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    dist = n - np.minimum(H, x_counts[None, :]).sum(axis=1)
    best = np.full(uniq.shape[0], n + 1, dtype=np.int64)
    np.minimum.at(best, inverse, dist)
    F = uniq / n
    center = int(np.flatnonzero(best == 0)[0])
    return Groups(F, cw.targets_from_answers(F), best, center)
