"""Post-processing of noisy query answers onto what some database could produce.

Every function here reads only a noisy release and public objects (the workload, ``n``),
so applying it never costs privacy (post-processing, Dwork & Roth 2014, Prop. 2.1). They
are deterministic functions of those inputs.

* :func:`project_simplex` - Euclidean projection onto the probability simplex (Duchi,
  Shalev-Shwartz, Singer, Chandra 2008, Fig. 1): the closest distribution to a noisy
  histogram.
* :func:`least_squares_simplex` - ``argmin_{p in simplex} ||C p - y||_2``: the consistent
  answer vector (answers of a real distribution) closest to noisy answers ``y``, by
  non-negative least squares with the sum constraint as a heavily weighted row.
* :func:`clip_to_range` - clip each answer to ``[min_d q(d), max_d q(d)]``, the range every
  true answer lies in (an average of the query's values).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from scipy.optimize import nnls

from dpsieve._validation import fail

__all__ = ["answer_range", "clip_to_range", "least_squares_simplex", "project_simplex"]

FloatArray = npt.NDArray[np.float64]


def project_simplex(v: npt.ArrayLike) -> FloatArray:
    """``argmin_{p >= 0, sum p = 1} ||p - v||_2`` (sort-based, exact up to float rounding)."""
    x = np.asarray(v, dtype=np.float64)
    if x.ndim != 1 or x.size == 0 or not np.all(np.isfinite(x)):
        raise fail("v", "project_simplex", "a non-empty 1-D array of finite floats",
                   f"array of shape {x.shape}")
    u = np.sort(x)[::-1]
    css = np.cumsum(u) - 1.0
    ind = np.arange(1, x.size + 1)
    rho = int(np.nonzero(u - css / ind > 0)[0][-1])
    theta = css[rho] / (rho + 1)
    out: FloatArray = np.maximum(x - theta, 0.0)
    return out


def least_squares_simplex(columns: npt.ArrayLike, y: npt.ArrayLike) -> FloatArray:
    """``argmin_{p in simplex} ||C p - y||_2``: ``C`` is ``k x T`` (query columns), ``y`` noisy
    answers. Returns ``p``; ``C p`` are the consistent answers (unique: the objective is
    strictly convex in ``C p``).

    Solved as non-negative least squares (Lawson-Hanson active set, :func:`scipy.optimize.nnls`)
    on ``[C; M 1^T] p ~ [y; M]`` with ``M = 1e4 (1 + ||C||_2)``, which enforces
    ``sum p = 1`` up to a relative ``~1/M^2``; ``p`` is then renormalised. Post-processing:
    how closely the optimum is reached affects accuracy only, never privacy.
    """
    C = np.asarray(columns, dtype=np.float64)
    t = np.asarray(y, dtype=np.float64)
    if C.ndim != 2 or C.size == 0 or not np.all(np.isfinite(C)):
        raise fail("columns", "least_squares_simplex", "a finite k x T matrix",
                   f"array of shape {C.shape}")
    if t.shape != (C.shape[0],) or not np.all(np.isfinite(t)):
        raise fail("y", "least_squares_simplex", f"{C.shape[0]} finite answers",
                   f"array of shape {t.shape}")
    big = 1e4 * (1.0 + float(np.linalg.norm(C, 2)))
    A = np.vstack([C, np.full((1, C.shape[1]), big)])
    p = nnls(A, np.concatenate([t, [big]]), maxiter=50 * C.shape[1] + 100)[0]
    total = float(p.sum())
    if not total > 0:  # cannot happen for the weighted system; stay on the simplex anyway
        return np.full(C.shape[1], 1.0 / C.shape[1])
    out: FloatArray = p / total
    return out


def answer_range(matrix: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """``(lo, hi)``: each query's smallest and largest value over the universe (public)."""
    m = np.asarray(matrix, dtype=np.float64)
    lo: FloatArray = m.min(axis=1)
    hi: FloatArray = m.max(axis=1)
    return lo, hi


def clip_to_range(answers: npt.ArrayLike, matrix: npt.ArrayLike) -> FloatArray:
    """Clip each answer to its query's range (every true answer is an average of the
    query's values, so it lies there; clipping never moves an answer away from the truth)."""
    lo, hi = answer_range(matrix)
    out: FloatArray = np.clip(np.asarray(answers, dtype=np.float64), lo, hi)
    return out
