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

__all__ = [
    "MAX_HISTOGRAMS",
    "Groups",
    "enumerate_histograms",
    "exact_prefix_work",
    "group_by_dynamic_programme",
    "group_histograms",
    "histogram_count",
]

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
                     limit: int = MAX_HISTOGRAMS, max_work: float = math.inf) -> Groups:
    """Group all class histograms of n = sum(x_counts) rows by answer vector, with the least
    distance per group. Enumerates histograms when there are at most ``limit`` of them,
    else runs the exact dynamic programme :func:`group_by_dynamic_programme`.

    ``max_work`` bounds the total work in states (histograms enumerated, or DP states
    summed over all classes); past it :class:`InstanceTooLargeError` is raised as soon as
    the next step would cross it, so a refusal costs at most ``max_work`` states of work.
    The work depends on n and the workload only, never on the counts."""
    n = int(x_counts.sum())
    count = histogram_count(n, cw.size)
    if count > limit or count * (cw.size + cw.k) > max_work:
        return group_by_dynamic_programme(cw, x_counts, limit=limit, max_work=max_work)
    H = enumerate_histograms(n, cw.size, limit=limit)
    key = H @ cw.columns.T  # exact integer sums for counting queries
    code = _integer_code(np.full(H.shape[0], n, dtype=np.int64), key, n, cw.columns.T)
    if code is not None:
        _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
        uniq = key[first]
    else:
        uniq, inverse = np.unique(key, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    dist = n - np.minimum(H, x_counts[None, :]).sum(axis=1)
    best = np.full(uniq.shape[0], n + 1, dtype=np.int64)
    np.minimum.at(best, inverse, dist)
    F = uniq / n
    center = int(np.flatnonzero(best == 0)[0])
    return Groups(F, cw.targets_from_answers(F), best, center)


def group_by_dynamic_programme(cw: CollapsedWorkload, x_counts: IntArray, *,
                               limit: int = MAX_HISTOGRAMS,
                               max_work: float = math.inf) -> Groups:
    """Same result as histogram enumeration, without listing histograms.

    Classes are added one at a time; a state is (rows used m, partial answer sum) and keeps
    the largest matched count sum_c min(h_x(c), h(c)) over the partial histograms reaching
    it. The objective is additive over classes and the future only depends on the state, so
    the maximum is exact (optimal substructure); D_g = n - matched at m = n. The number of
    states is bounded by the number of distinct partial answer vectors, which for marginal
    workloads is far below C(n + T' - 1, T' - 1). Refuses past ``limit`` states in one
    step (4 ``limit``), or past ``max_work`` states summed over the steps (checked before
    each step's expansion, so a refusal has done at most ``max_work`` states of work).
    """
    n = int(x_counts.sum())
    known, upto = exact_prefix_work(cw, n, max_work)
    if known > max_work:  # refused before any work, from n and the workload alone
        raise InstanceTooLargeError(
            f"grouping the reference databases needs at least {known:.3g} work units (DP "
            f"states x (queries + 1) over the first {upto} of {cw.size} classes, exact; "
            f"n = {n}), over the limit {max_work:.3g}",
            estimated_cost=float(known), limit=float(max_work))
    cols = cw.columns.T  # (T', k)
    keys = np.zeros((1, cw.k))
    used = np.zeros(1, dtype=np.int64)
    matched = np.zeros(1, dtype=np.int64)
    last = cw.size - 1
    work = 0
    for c in range(cw.size):
        if c == last:  # the last class takes the remaining rows
            js = n - used
            keys = keys + js[:, None] * cols[c][None, :]
            matched = matched + np.minimum(js, x_counts[c])
            used = used + js
        else:
            reps = n - used + 1
            step = int(reps.sum())
            if step > 4 * limit:
                raise InstanceTooLargeError(
                    f"grouping needs more than {4 * limit} intermediate states",
                    estimated_cost=float(step), limit=float(4 * limit))
            work += step * (cw.k + 1)
            if work > max_work:
                raise InstanceTooLargeError(
                    f"grouping the reference databases needs more than {work:.3g} work units "
                    f"(DP states x (queries + 1), counted to class {c + 1} of {cw.size}; "
                    f"n = {n}), over the limit {max_work:.3g}",
                    estimated_cost=float(work), limit=float(max_work))
            idx = np.repeat(np.arange(used.size), reps)
            js = np.arange(idx.size) - np.repeat(np.cumsum(reps) - reps, reps)
            keys = keys[idx] + js[:, None] * cols[c][None, :]
            matched = matched[idx] + np.minimum(js, x_counts[c])
            used = used[idx] + js
        code = _integer_code(used, keys, n, cols)
        if code is not None:
            uniq_code, first, inverse = np.unique(code, return_index=True,
                                                  return_inverse=True)
            best = np.full(uniq_code.size, -1, dtype=np.int64)
            np.maximum.at(best, inverse.reshape(-1), matched)
            used, keys, matched = used[first], keys[first], best
            continue
        full = np.hstack([used[:, None].astype(np.float64), keys])
        uniq, inverse = np.unique(full, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        best = np.full(uniq.shape[0], -1, dtype=np.int64)
        np.maximum.at(best, inverse, matched)
        used, keys, matched = uniq[:, 0].astype(np.int64), uniq[:, 1:], best
    F = keys / n
    dist = n - matched
    center = int(np.flatnonzero(dist == 0)[0])
    return Groups(F, cw.targets_from_answers(F), dist.astype(np.int64), center)


#: Classes examined by :func:`exact_prefix_work` at most (each costs O(classes x queries)).
_PREFIX_CLASSES = 64


def exact_prefix_work(cw: CollapsedWorkload, n: int, cap: float = math.inf) -> tuple[int, int]:
    """``(work, classes)``: the work of :func:`group_by_dynamic_programme` over its first
    ``classes`` steps, exactly, from n and the workload alone (no data, no enumeration).

    While the leading classes' columns with a 1 prepended (rows used, then answers) are
    linearly independent, distinct partial histograms reach distinct states, so step c
    expands exactly C(n + c + 1, c + 1) states (the histograms of at most n rows over c + 1
    classes), each costing (queries + 1) units. Stops at the first dependent class, after
    :data:`_PREFIX_CLASSES` classes, or once the work exceeds ``cap``. A lower bound on the
    whole programme's work: a refusal on it is never premature.
    """
    aug = np.hstack([np.ones((cw.size, 1)), cw.columns.T])
    basis: list[FloatArray] = []
    work = 0
    c = 0
    for c in range(min(cw.size - 1, _PREFIX_CLASSES)):  # the last class is not expanded
        v = aug[c].copy()
        for q in basis:  # Gram-Schmidt against the earlier classes
            v -= (q @ v) * q
        if float(np.linalg.norm(v)) <= 1e-9 * float(np.linalg.norm(aug[c])):
            return work, c
        basis.append(v / np.linalg.norm(v))
        work += histogram_count(n, c + 2) * (cw.k + 1)
        if work > cap:
            return work, c + 1
    return work, c + 1 if cw.size > 1 else 0


def _integer_code(used: IntArray, keys: FloatArray, n: int,
                  cols: FloatArray) -> IntArray | None:
    """One int64 per state (exact mixed-radix code) when every query value is an integer
    and the radices fit in 62 bits; None otherwise (then rows are compared directly)."""
    if not np.array_equal(cols, np.round(cols)):
        return None
    lo = n * np.minimum(cols.min(axis=0), 0.0)
    radix = (n * (np.maximum(cols.max(axis=0), 0.0) - np.minimum(cols.min(axis=0), 0.0))
             + 1).astype(np.int64)
    if math.log2(n + 1) + float(np.log2(radix.astype(np.float64)).sum()) > 62:
        return None
    code = used.astype(np.int64).copy()
    mult = n + 1
    digits = np.rint(keys - lo[None, :]).astype(np.int64)
    for q in range(keys.shape[1]):
        code += digits[:, q] * mult
        mult *= int(radix[q])
    return code
