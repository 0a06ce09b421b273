"""The smooth friendliness filter of Propose-Filter-Release (docs/proofs/pfr.md, §2–§3).

Records ``x_1..x_n`` (``n`` public, replace-one neighbours), a user-supplied pseudometric
``d`` and a radius ``r``. The friend count of record ``i`` is
``z_i = #{j : d(x_i, x_j) <= r}`` (``j = i`` included), and record ``i`` is kept
independently with the exact rational probability ``p_i = clip((z_i - t0) / W, 0, 1)``.

Public parameters: ``t0`` (integer, ``2 t0 >= n``, default ``ceil(n/2)``) and the ramp
width ``W`` (integer >= 1, default ``max(1, 2n // 5)``). Lemma 1 of the proof: every record
that can be kept under a dataset or its neighbour has at least ``t0`` friends among the
``n - 1`` shared records, so any two of them are within ``2 r`` (the core is *r-friendly*).
Lemma 2: ``kappa = p_k + p'_k + sum_{i != k} |p_i - p'_i| <= 2 + (n - 1) / W``.
Lemma 3 (hybrid): a release that is ``(eps_M, delta_M)``-DP for adding/removing one record
of an r-friendly set gives ``((e^eps_M - 1) kappa, kappa e^eps' delta_M)``-DP under
replace-one neighbours.

The keep coins are exact: record ``i`` is kept iff ``U < z_i - t0`` for ``U`` uniform on
``{0, ..., W - 1}`` drawn by :func:`secrets.randbelow` (or by a seeded numpy Generator in
simulations), so no floating-point rounding touches the keep probabilities.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_up
from dpsieve._validation import check_int, check_positive, fail
from dpsieve.errors import NumericalError

__all__ = [
    "FilterParams",
    "Metric",
    "check_distance_matrix",
    "euclidean",
    "friend_count_table",
    "hybrid_privacy",
    "keep_numerators",
    "keep_probabilities",
    "l1",
    "release_budget",
    "sample_core",
]

Metric = Callable[[npt.NDArray[np.float64], npt.NDArray[np.float64]], npt.NDArray[np.float64]]
"""A pseudometric on rows: ``metric(a, b)`` is the ``(len(a), len(b))`` matrix ``d(a_i, b_j)``.

It must be symmetric, zero on equal rows and satisfy the triangle inequality (Lemma 1 of
docs/proofs/pfr.md needs it); :func:`friend_count_table` checks what the data can show.
"""

_CHUNK_CELLS = 4_000_000
_TRIANGLE_ROWS = 60


def _rows(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    a: npt.NDArray[np.float64] = np.asarray(x, dtype=np.float64)
    return a.reshape(len(a), -1)


def euclidean(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """L2 distances between rows (matrices are flattened: Frobenius distance).

    Computed from differences, so ``d(x, y) == d(y, x)`` and ``d(x, x) == 0`` exactly in
    floating point (the Gram-matrix shortcut guarantees neither).
    """
    x, y = _rows(a), _rows(b)
    acc = np.zeros((len(x), len(y)))
    for j in range(x.shape[1]):  # same order for (a, b) and (b, a): exactly symmetric
        acc += np.square(x[:, j, None] - y[None, :, j])
    out: npt.NDArray[np.float64] = np.sqrt(acc)
    return out


def l1(a: npt.NDArray[np.float64], b: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """L1 distances between rows (flattened)."""
    x, y = _rows(a), _rows(b)
    out: npt.NDArray[np.float64] = np.zeros((len(x), len(y)))
    for j in range(x.shape[1]):
        out += np.abs(x[:, j, None] - y[None, :, j])
    return out


def check_distance_matrix(dist: npt.ArrayLike, n: int, owner: str = "friend_count_table") -> None:
    """Check the conditions a user metric must meet that a square block of data can reveal.

    Finite, non-negative, symmetric, zero diagonal, shape ``(n, n)``, and the triangle
    inequality on every triple (the proof's Lemma 1 needs it: two records with a common
    friend are within ``2 r``). Raises :class:`ValidationError` naming ``metric`` otherwise.
    """
    d = np.asarray(dist)
    constraint = f"a finite, non-negative, symmetric ({n}, {n}) matrix with zero diagonal"
    if d.shape != (n, n) or not np.issubdtype(d.dtype, np.number):
        raise fail("metric", owner, constraint, f"array of shape {d.shape}")
    d = d.astype(np.float64)
    if not np.all(np.isfinite(d)) or not np.all(d >= 0):
        raise fail("metric", owner, constraint, "a matrix with negative or non-finite entries")
    scale = 1.0 + float(d.max(initial=0.0))
    if np.any(np.abs(d - d.T) > 1e-9 * scale) or np.any(np.diag(d) > 1e-9 * scale):
        raise fail("metric", owner, constraint, "a non-symmetric matrix or non-zero diagonal")
    viol = d[:, None, :] - (d[:, :, None] + d[None, :, :]) > 1e-9 * scale
    if np.any(viol):
        raise fail("metric", owner, "a pseudometric (triangle inequality)", "a violation")


def friend_count_table(
    records: npt.NDArray[np.float64], metric: Metric, radii: npt.NDArray[np.float64]
) -> npt.NDArray[np.int64]:
    """``Z[g, i] = #{j : d(x_i, x_j) <= radii[g]}`` (the record itself included).

    The metric is first checked on the first ``min(n, 60)`` rows
    (:func:`check_distance_matrix`), then evaluated in row chunks. One-dimensional data with
    the built-in :func:`euclidean` or :func:`l1` use sorting (same counts, O(n log n)).
    """
    x = np.asarray(records, dtype=np.float64)
    n = len(x)
    r = np.asarray(radii, dtype=np.float64)
    m = min(n, _TRIANGLE_ROWS)
    check_distance_matrix(metric(x[:m], x[:m]), m)
    flat = x.reshape(n, -1)
    if flat.shape[1] == 1 and metric in (euclidean, l1):
        xs = np.sort(flat[:, 0])
        v = flat[:, 0]
        hi = np.searchsorted(xs, v[None, :] + r[:, None], side="right")
        lo = np.searchsorted(xs, v[None, :] - r[:, None], side="left")
        out1: npt.NDArray[np.int64] = (hi - lo).astype(np.int64)
        return out1
    out = np.empty((len(r), n), dtype=np.int64)
    chunk = max(1, _CHUNK_CELLS // n)
    g1 = len(r) + 1
    for s in range(0, n, chunk):
        block = np.asarray(metric(x[s : s + chunk], x), dtype=np.float64)
        c = min(chunk, n - s)
        if block.shape != (c, n) or not np.all(np.isfinite(block)):
            raise fail("metric", "friend_count_table", "finite values of shape (rows, n)",
                       f"shape {block.shape}")
        # d <= r_g  iff  (index of the first radius >= d) <= g: histogram, then cumsum
        idx = np.searchsorted(r, block, side="left") + g1 * np.arange(c)[:, None]
        hist = np.bincount(idx.ravel(), minlength=c * g1).reshape(c, g1)
        out[:, s : s + c] = np.cumsum(hist, axis=1)[:, : len(r)].T
    return out


@dataclass(frozen=True, slots=True)
class FilterParams:
    """Public filter parameters ``(n, t0, W)``; ``2 t0 >= n`` is Lemma 1's condition."""

    n: int
    t0: int
    width: int

    def __post_init__(self) -> None:
        check_int("n", self.n, "FilterParams", minimum=2)
        check_int("width", self.width, "FilterParams", minimum=1)
        check_int("t0", self.t0, "FilterParams", minimum=1)
        if not (2 * self.t0 >= self.n) or self.t0 >= self.n:
            raise fail("t0", "FilterParams", f"an int with n/2 <= t0 < n = {self.n}", self.t0)

    @classmethod
    def default(cls, n: int) -> FilterParams:
        """``t0 = ceil(n/2)``, ``W = max(1, 2n // 5)``: kappa <= 2 + (n-1)/W ~ 4.5.

        The trade-off (docs/robust.md, "Variant A: choosing t0, W, the grid"): a wider ramp
        ``W`` lowers kappa (the hybrid lemma's cost) and Propose's sensitivity
        ``1 + (n-1)/W``, but a record needs ``t0 + W`` friends to be kept surely, so the
        radius grows; ``W = 2n/5`` (kappa ~ 4.5, was n/4 and ~6) measured best on public
        tuning data. Lemmas 1-3 hold for every ``W >= 1`` and ``n/2 <= t0 < n``."""
        check_int("n", n, "FilterParams.default", minimum=2)
        return cls(n, (n + 1) // 2, max(1, (2 * n) // 5))

    @property
    def kappa(self) -> float:
        """Lemma 2's bound ``2 + (n - 1) / W``, rounded up (it multiplies a privacy loss)."""
        return next_up(2.0 + (self.n - 1) / self.width)

    @property
    def query_sensitivity(self) -> float:
        """Replace-one sensitivity of ``q(r) = sum_i p_i``: ``1 + (n - 1) / W``, rounded up."""
        return next_up(1.0 + (self.n - 1) / self.width)


def keep_numerators(z: npt.NDArray[np.int64], params: FilterParams) -> npt.NDArray[np.int64]:
    """Integer numerators ``clip(z - t0, 0, W)``; ``p_i`` is this over ``W`` exactly."""
    out: npt.NDArray[np.int64] = np.clip(np.asarray(z, np.int64) - params.t0, 0, params.width)
    return out


def keep_probabilities(z: npt.NDArray[np.int64], params: FilterParams) -> npt.NDArray[np.float64]:
    """``p_i = clip((z_i - t0) / W, 0, 1)`` as floats (for display and audits)."""
    out: npt.NDArray[np.float64] = keep_numerators(z, params) / float(params.width)
    return out


def sample_core(
    numerators: npt.NDArray[np.int64], width: int, rng: np.random.Generator | None = None
) -> npt.NDArray[np.bool_]:
    """Keep record ``i`` iff ``U_i < numerators[i]``, ``U_i`` uniform on ``{0..W-1}``.

    Exact Bernoulli(``numerators[i] / W``) coins, independent across records. ``rng=None``
    draws from the operating system's CSPRNG (:func:`secrets.randbelow`); a seeded numpy
    Generator is for simulations only.
    """
    k = np.asarray(numerators, dtype=np.int64)
    if rng is None:
        u = np.array([secrets.randbelow(width) for _ in range(k.size)], dtype=np.int64)
    else:
        u = rng.integers(0, width, size=k.size, dtype=np.int64)
    out: npt.NDArray[np.bool_] = u < k
    return out


def hybrid_privacy(eps_m: float, delta_m: float, kappa: float) -> tuple[float, float]:
    """Lemma 3: ``eps' = (e^eps_M - 1) kappa``, ``delta' = kappa e^eps' delta_M``, rounded up.

    Both outputs are privacy losses, so every operation rounds towards +inf (one ulp per
    step, which dominates the error of ``expm1``/``exp``, each accurate to < 1 ulp).
    """
    check_positive("eps_m", eps_m, "hybrid_privacy")
    check_positive("kappa", kappa, "hybrid_privacy")
    if not (0.0 <= delta_m < 1.0):
        raise fail("delta_m", "hybrid_privacy", "a float in [0, 1)", delta_m)
    eps = next_up(next_up(math.expm1(eps_m)) * kappa)
    delta = next_up(next_up(kappa * next_up(math.exp(eps))) * delta_m)
    return eps, min(delta, 1.0)


def release_budget(eps: float, delta: float, kappa: float) -> tuple[float, float]:
    """Largest ``(eps_M, delta_M)`` (rounded down) with ``hybrid_privacy(...) <= (eps, delta)``.

    ``eps_M = log1p(eps / kappa)``, ``delta_M = delta e^{-eps} / kappa``, each shrunk by a
    relative 1e-12 (far more than the few ulps of error in the forward map),
    then checked forward with :func:`hybrid_privacy` (which rounds up); raises
    :class:`NumericalError` if the forward check fails (it never should).
    """
    check_positive("eps", eps, "release_budget")
    check_positive("kappa", kappa, "release_budget")
    if not (0.0 <= delta < 1.0):
        raise fail("delta", "release_budget", "a float in [0, 1)", delta)
    eps_m = math.log1p(eps / kappa) * (1.0 - 1e-12)
    delta_m = delta * math.exp(-eps) / kappa * (1.0 - 1e-12)
    e2, d2 = hybrid_privacy(eps_m, delta_m, kappa)
    if not (e2 <= eps and d2 <= delta):
        raise NumericalError(f"release_budget could not certify eps={eps}, delta={delta}")
    return eps_m, delta_m
