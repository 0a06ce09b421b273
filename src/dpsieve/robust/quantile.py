"""Private quantiles on very fine public grids (docs/proofs/robust_mean.md §1).

The exponential mechanism (McSherry & Talwar 2007) over a public grid ``y_0 < ... < y_{G-1}``
with the mid-rank utility ``u(j) = -| (#{i : x_i < y_j} + #{i : x_i <= y_j}) / 2 - level n |``
(replace-one sensitivity 1) is eps-DP. For continuous data its error depends on
``log(range / spread)``, not on the grid's resolution, so the grid can be very fine (``G``
up to ``2^52``) if we never list it:
``u`` is constant between consecutive data points, so we pick a *segment* of the grid with
probability proportional to ``(number of grid points in it) * exp(eps u / 2)`` and then a grid
point uniformly inside it, which is exactly the exponential mechanism over all ``G`` points.

Each record is first mapped, on its own, to the integer index of the first grid point at or
above it (:meth:`LinearGrid.index`, :meth:`GeometricGrid.index`); the utility is computed from
those integers, so ``#{i : index_i <= j}`` is a count of a row-wise function of the data and
its sensitivity is exactly 1 whatever rounding the map does. Floating point enters only
through the Gumbel-max selection (the convention of
:func:`dpsieve.mechanisms.exponential_mechanism`: the guarantee is for the ideal real
arithmetic law; rounding of the noise and of ``log(length)`` perturbs probabilities by a
relative ~1e-15). The uniform choice inside a segment is exact (rejection sampling on 64-bit
words). Running time depends only on ``n``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.mechanisms import RNG, as_source

__all__ = [
    "DEFAULT_GRID_POINTS",
    "SCALE_GRID_POINTS",
    "GeometricGrid",
    "LinearGrid",
    "grid_quantile",
    "private_median",
    "private_quantile_fine",
]

#: Default grid size of a linear grid: 2^24 + 1 points (resolution 2 bound / 2^24). The error
#: of continuous data does not depend on it, but a value that many records share (ties) is a
#: single grid point, which must outweigh the other ``G`` points: ``exp(-eps n / 4) G << 1``.
#: 2^24 keeps that cost at log G = 16.6 nats while resolving ``bound * 1.2e-7``.
DEFAULT_GRID_POINTS = 2**24 + 1
#: Default size of a geometric (scale) grid: 2^16 + 1 points (relative step ~3e-4 over the
#: 21 nats of ``[bound 2^-30, 2 bound]``, ample for a scale); the tie argument: log G = 11.1.
SCALE_GRID_POINTS = 2**16 + 1
_MAX_POINTS = 2**52

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LinearGrid:
    """``y_j = lo + j (hi - lo) / (size - 1)``, ``j = 0..size-1`` (public)."""

    lo: float
    hi: float
    size: int = DEFAULT_GRID_POINTS

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lo) and math.isfinite(self.hi) and self.hi > self.lo):
            raise fail("hi", "LinearGrid", f"a finite float > lo = {self.lo}", self.hi)
        check_int("size", self.size, "LinearGrid", minimum=2)
        if self.size > _MAX_POINTS:
            raise fail("size", "LinearGrid", "an int <= 2^52", self.size)

    @property
    def step(self) -> float:
        return (self.hi - self.lo) / (self.size - 1)

    def index(self, x: npt.ArrayLike) -> I64:
        """Row-wise map: the index of the first grid point ``>= x`` (``size`` if none),
        computed in floating point (any deterministic row-wise map keeps sensitivity 1)."""
        v = np.asarray(x, dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            t = np.ceil((v - self.lo) / self.step)
        out: I64 = np.clip(np.nan_to_num(t, nan=0.0, posinf=self.size, neginf=0.0),
                           0, self.size).astype(np.int64)
        return out

    def value(self, j: int) -> float:
        return self.lo + j * self.step if j < self.size - 1 else self.hi


@dataclass(frozen=True, slots=True)
class GeometricGrid:
    """``y_j = lo (hi / lo)^(j / (size - 1))`` (public), for scales and radii."""

    lo: float
    hi: float
    size: int = SCALE_GRID_POINTS

    def __post_init__(self) -> None:
        check_positive("lo", self.lo, "GeometricGrid")
        if not (math.isfinite(self.hi) and self.hi > self.lo):
            raise fail("hi", "GeometricGrid", f"a finite float > lo = {self.lo}", self.hi)
        check_int("size", self.size, "GeometricGrid", minimum=2)
        if self.size > _MAX_POINTS:
            raise fail("size", "GeometricGrid", "an int <= 2^52", self.size)

    def index(self, x: npt.ArrayLike) -> I64:
        """Row-wise map: the index of the first grid point ``>= x`` (0 for ``x <= lo``)."""
        v = np.asarray(x, dtype=np.float64)
        span = math.log(self.hi / self.lo)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            t = np.ceil(np.log(np.maximum(v, 0.0) / self.lo) / span * (self.size - 1))
        out: I64 = np.clip(np.nan_to_num(t, nan=0.0, posinf=self.size, neginf=0.0),
                           0, self.size).astype(np.int64)
        return out

    def value(self, j: int) -> float:
        if j >= self.size - 1:
            return self.hi
        return self.lo * math.exp(math.log(self.hi / self.lo) * j / (self.size - 1))


def grid_quantile(index: npt.ArrayLike, size: int, level: float, eps: float,
                  rng: RNG = None) -> int:
    """The exponential mechanism over grid indices ``0..size-1`` with the mid-rank utility
    ``u(j) = -| (#{i : index_i < j} + #{i : index_i <= j}) / 2 - level n |`` (sensitivity 1):
    an index, eps-DP.

    ``index`` holds one integer in ``[0, size]`` per record (a row-wise map of the data).
    The mid-rank (rather than ``#{index_i <= j}`` alone) credits a grid point that many
    records share: when every record maps to the same index (constant data, or data below
    the grid's first point) that index has utility 0 and every other ``-level n`` or
    ``-(1 - level) n``, where the plain count would make all candidates tie.
    """
    owner = "grid_quantile"
    lv = check_in_open("level", level, 0.0, 1.0, owner)
    e = check_positive("eps", eps, owner)
    G = check_int("size", size, owner, minimum=1)
    v = np.clip(np.asarray(index, dtype=np.int64), 0, G)
    n = v.size
    if n == 0:
        raise fail("index", owner, "at least one record", n)
    starts, length, mid = _segments(v, G)
    logit = np.log(length.astype(np.float64)) - e * np.abs(mid - lv * n) / 2.0
    src = as_source(rng, owner)
    gumbel = -np.log(-np.log(src.uniform01(logit.size)))
    s = int(np.argmax(logit + gumbel))
    off = int(src.below(np.array([length[s]], dtype=np.uint64))[0])
    return int(starts[s]) + off


def _segments(v: I64, G: int) -> tuple[I64, I64, F64]:
    """Cut ``0..G-1`` into segments on which the mid-rank is constant: each distinct data
    index ``u < G`` is a one-point segment with mid-rank ``below(u) + mult(u) / 2``, and the
    gaps between them have mid-rank ``below`` (the number of records under the gap)."""
    vals, mult = np.unique(v, return_counts=True)
    below = np.concatenate([[0], np.cumsum(mult)[:-1]])  # records with index < vals[k]
    inside = vals < G
    pts, pm, pb = vals[inside], mult[inside], below[inside]
    gap_start = np.concatenate([[0], pts + 1])
    gap_end = np.concatenate([pts, [G]])
    gap_mid = np.concatenate([pb, [int(np.sum(v < G))]]).astype(np.float64)
    starts = np.concatenate([gap_start, pts])
    length = np.concatenate([gap_end - gap_start, np.ones(pts.size, dtype=np.int64)])
    mid = np.concatenate([gap_mid, pb + pm / 2.0])
    ok = length > 0
    return starts[ok].astype(np.int64), length[ok].astype(np.int64), mid[ok]


def private_quantile_fine(values: npt.ArrayLike, level: float, grid: LinearGrid | GeometricGrid,
                          eps: float, rng: RNG = None) -> float:
    """A grid point near the ``level`` quantile of ``values`` (eps-DP, replace-one)."""
    j = grid_quantile(grid.index(values), grid.size, level, eps, rng)
    return grid.value(j)


def private_median(data: npt.ArrayLike, eps: float, *, bound: float,
                   grid_points: int = DEFAULT_GRID_POINTS, rng: RNG = None) -> float:
    """eps-DP median of scalars on the public grid of ``grid_points`` points of
    ``[-bound, bound]`` (values outside count as at the ends). Pure, replace-one.

    The strongest simple baseline for a private median: its error scales with
    ``log(bound / spread) / (eps n)`` in rank, whatever the resolution (module docstring).
    """
    x = np.asarray(data, dtype=np.float64).reshape(-1)
    b = check_positive("bound", bound, "private_median")
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise fail("data", "private_median", "a non-empty array of finite values",
                   "empty or non-finite data")
    return private_quantile_fine(x, 0.5, LinearGrid(-b, b, grid_points), eps, rng)
