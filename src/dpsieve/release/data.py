"""Data model for statistical-query release: universe, dataset, workload.

A finite universe D of size T (optionally a product of categorical attributes, see
:class:`Domain`), a dataset of n rows of D kept as its histogram, and a workload of k
queries q: D -> [-1, 1] kept as a k x T matrix. The answer vector is
F(x) = W h_x / n (Fitzsimons 2026, section 1, F_q(x) = (1/n) sum_i q(x_i)).

Neighbouring relation: replace-one (fixed n, Hamming distance one), as in the paper.
No I/O happens here; parsing files is the CLI's job.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, fail, fail_private

__all__ = ["Dataset", "Domain", "Workload"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Domain:
    """A product of categorical attributes; element index is mixed radix, first most significant.

    The domain is public: it must not be derived from the private data (the CLI flags it
    when it is).
    """

    names: tuple[str, ...]
    levels: tuple[tuple[str, ...], ...]

    def __post_init__(self) -> None:
        if len(self.names) == 0 or len(self.names) != len(self.levels):
            raise fail("levels", "Domain", "one non-empty level tuple per attribute name",
                       self.levels)
        if len(set(self.names)) != len(self.names):
            raise fail("names", "Domain", "distinct attribute names", self.names)
        for lv in self.levels:
            if len(lv) == 0 or len(set(lv)) != len(lv):
                raise fail("levels", "Domain", "non-empty tuples of distinct levels", lv)

    @classmethod
    def from_sizes(cls, sizes: Sequence[int]) -> Domain:
        """Attributes ``a0, a1, ...`` with levels ``"0", "1", ...``."""
        for s in sizes:
            check_int("sizes", s, "Domain.from_sizes", minimum=1)
        return cls(tuple(f"a{i}" for i in range(len(sizes))),
                   tuple(tuple(str(v) for v in range(s)) for s in sizes))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(lv) for lv in self.levels)

    @property
    def size(self) -> int:
        """T = product of the attribute sizes."""
        return math.prod(self.shape)

    def index(self, row: Sequence[str]) -> int:
        """Universe index of one categorical row. A row outside the domain raises naming the
        attribute and its public levels, never the row's value (it is private data)."""
        if len(row) != len(self.names):
            raise fail_private("row", "Domain.index", f"a row of {len(self.names)} values",
                               tuple(row))
        idx = 0
        for name, lv, v in zip(self.names, self.levels, row, strict=True):
            try:
                pos = lv.index(v)
            except ValueError:
                raise fail_private(name, "Domain.index", f"one of the public levels {lv}",
                                   v) from None
            idx = idx * len(lv) + pos
        return idx

    def decode(self, index: int) -> tuple[str, ...]:
        """Inverse of :meth:`index`."""
        check_int("index", index, "Domain.decode", minimum=0)
        if index >= self.size:
            raise fail("index", "Domain.decode", f"an int < {self.size}", index)
        coords = np.unravel_index(index, self.shape)
        return tuple(lv[int(c)] for lv, c in zip(self.levels, coords, strict=True))


@dataclass(frozen=True, slots=True, eq=False)
class Dataset:
    """n rows over a universe of size T, kept as a histogram (counts sum to n >= 1)."""

    counts: IntArray

    def __post_init__(self) -> None:
        c = np.asarray(self.counts)
        if c.ndim != 1 or c.size == 0 or not np.issubdtype(c.dtype, np.integer) \
                or np.any(c < 0) or int(c.sum()) < 1:
            raise fail_private("counts", "Dataset",
                               "a 1-D non-negative integer histogram with n >= 1", self.counts)
        c = c.astype(np.int64, copy=True)
        c.setflags(write=False)
        object.__setattr__(self, "counts", c)

    @classmethod
    def from_rows(cls, rows: Iterable[int], universe_size: int) -> Dataset:
        """Histogram of row indices in ``range(universe_size)``."""
        T = check_int("universe_size", universe_size, "Dataset.from_rows", minimum=1)
        r = np.asarray(list(rows), dtype=np.int64)
        if r.size == 0 or np.any(r < 0) or np.any(r >= T):
            raise fail_private("rows", "Dataset.from_rows",
                               f"a non-empty sequence of ints in [0, {T})", r)
        return cls(np.bincount(r, minlength=T).astype(np.int64))

    @classmethod
    def from_histogram(cls, counts: Sequence[int] | IntArray) -> Dataset:
        return cls(np.asarray(counts))

    @classmethod
    def from_table(cls, domain: Domain, rows: Iterable[Sequence[str]]) -> Dataset:
        """Histogram of categorical rows under a public ``domain``."""
        return cls.from_rows((domain.index(r) for r in rows), domain.size)

    @property
    def n(self) -> int:
        return int(self.counts.sum())

    @property
    def universe_size(self) -> int:
        return int(self.counts.size)

    def rows(self) -> IntArray:
        """The rows as sorted universe indices."""
        out: IntArray = np.repeat(np.arange(self.counts.size, dtype=np.int64), self.counts)
        return out


@dataclass(frozen=True, slots=True, eq=False)
class Workload:
    """k queries q: D -> [-1, 1] as a k x T matrix, with names."""

    matrix: FloatArray
    names: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        m = np.asarray(self.matrix, dtype=np.float64)
        if m.ndim != 2 or m.shape[0] == 0 or m.shape[1] == 0 or not np.all(np.isfinite(m)) \
                or np.any(np.abs(m) > 1.0):
            raise fail("matrix", "Workload", "a non-empty k x T matrix with entries in [-1, 1]",
                       f"array of shape {m.shape}")
        m = m.copy()
        m.setflags(write=False)
        object.__setattr__(self, "matrix", m)
        names = self.names or tuple(f"q{i}" for i in range(m.shape[0]))
        if len(names) != m.shape[0]:
            raise fail("names", "Workload", f"{m.shape[0]} names", len(names))
        object.__setattr__(self, "names", tuple(names))

    @property
    def k(self) -> int:
        return int(self.matrix.shape[0])

    @property
    def universe_size(self) -> int:
        return int(self.matrix.shape[1])

    @property
    def query_range(self) -> float:
        """max_q (max_d q(d) - min_d q(d)): one replaced row moves any answer by <= this / n."""
        m = self.matrix
        return float(np.max(m.max(axis=1) - m.min(axis=1)))

    def l1_sensitivity(self, n: int) -> float:
        """Exact replace-one L1 sensitivity of F: max_{d,d'} ||W[:,d] - W[:,d']||_1 / n.

        Exact for T <= 2048 (pairwise maximum over distinct columns); above that the
        upper bound sum_q range(q) / n is returned, which over-states the sensitivity
        (more noise, never less privacy).
        """
        check_int("n", n, "Workload.l1_sensitivity", minimum=1)
        cols = np.unique(self.matrix.T, axis=0)
        if cols.shape[0] <= 2048:
            best = 0.0
            for i in range(cols.shape[0]):
                best = max(best, float(np.abs(cols - cols[i]).sum(axis=1).max()))
            return best / n
        m = self.matrix
        return float((m.max(axis=1) - m.min(axis=1)).sum()) / n

    def answers(self, data: Dataset) -> FloatArray:
        """F(x) = W h_x / n."""
        if data.universe_size != self.universe_size:
            raise fail("data", "Workload.answers",
                       f"a dataset over a universe of size {self.universe_size}",
                       data.universe_size)
        out: FloatArray = self.matrix @ data.counts.astype(np.float64) / data.n
        return out

