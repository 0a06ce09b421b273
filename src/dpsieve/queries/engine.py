"""The engine interface: what an engine computes for a query, and what it hands back.

An engine (DuckDB, pandas, polars, Spark, ...) sees only a :class:`BoundingSpec` -- which
rows, which privacy unit, which groups, which contribution bounds, which per-row integer
measures -- and returns :class:`Aggregates`: one small integer vector per measure and
group. It never sees a privacy parameter, never adds noise, and nothing but the
per-group aggregates leaves it. Everything about privacy (sensitivities, noise, charges)
is decided above it, from the spec's public parameters, before the engine runs.

An engine implements two methods (:class:`Engine`), and may stream observed groups
(:class:`StreamingEngine`, used by DP key selection through :func:`aggregate_batches`):

* ``columns()`` -- the table's column names and public types, from its metadata (never
  from values);
* ``aggregate(spec)`` -- the bounded aggregates, computed exactly as specified in
  docs/queries-engines.md ("The semantics of a BoundingSpec"); the pure-Python reference
  :class:`dpsieve.queries.engines.reference.ReferenceEngine` is the executable statement of
  that definition, and the conformance suite ``tests/queries/engine_conformance.py`` checks
  an engine against it on random specs and tables;
* optionally ``aggregate_batches(spec, size)`` -- the same aggregates of an observed-keys
  spec, as batches of at most ``size`` groups, fetched one at a time, so that DP key
  selection holds one batch and the groups it kept, not every observed group.

All arithmetic is on integers (per-row values are snapped to a power-of-two lattice
before they are summed), so engines agree bit for bit whatever their summation order; the
random choices of contribution bounding come from the keyed mixer of
:mod:`dpsieve.queries._mix`, so they agree too, and do not depend on row order.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol, TypeAlias, runtime_checkable

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, fail
from dpsieve.errors import UnsupportedError
from dpsieve.queries.schema import Column, KeyValue

__all__ = [
    "SELECTION_BATCH",
    "Aggregates",
    "Bins",
    "BoundingSpec",
    "BucketCount",
    "Engine",
    "GroupBatch",
    "Level",
    "Measure",
    "Op",
    "Predicate",
    "RowCount",
    "StreamingEngine",
    "ValueSum",
    "aggregate_batches",
    "snap",
]

I64 = npt.NDArray[np.int64]

#: Observed groups per batch when DP key selection streams them from an engine
#: (:func:`aggregate_batches`): Python holds at most one batch plus the groups kept.
SELECTION_BATCH = 1 << 16


class Level(StrEnum):
    """What a measure adds up: the unit's kept rows (``ROW``) or one value per (unit, group)
    (``UNIT``)."""

    ROW = "row"
    UNIT = "unit"


class Op(StrEnum):
    """Comparison operators of a :class:`Predicate`."""

    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="
    IN = "in"
    NOT_IN = "not_in"
    IS_NULL = "is_null"
    NOT_NULL = "not_null"


@dataclass(frozen=True, slots=True)
class Predicate:
    """``column op value`` with a public constant (canonical for the column's type; a tuple
    for ``in``/``not_in``; ``None`` for the null tests). A missing value (NULL, or NaN in a
    float column) makes every comparison false, ``not_in`` and ``!=`` included; only
    ``is_null`` is true for it."""

    column: str
    op: Op
    value: KeyValue | tuple[KeyValue, ...] = None


def snap(x: float, g: float) -> int:
    """``floor(x / g + 1/2)`` computed as ``floor(a) + [a - floor(a) >= 1/2]``, ``a = x / g``
    (every step exact in IEEE doubles for |a| < 2^52; the engines evaluate the same
    formula). ``g`` is a power of two."""
    a = x / g
    f = math.floor(a)
    return int(f) + (1 if a - f >= 0.5 else 0)


@dataclass(frozen=True, slots=True)
class RowCount:
    """``ROW``: kept rows per group (at most L-inf per unit and group). ``UNIT``: units per
    group (one per kept (unit, group))."""

    name: str
    level: Level = Level.ROW


@dataclass(frozen=True, slots=True)
class ValueSum:
    """Sum of the per-row lattice integers of ``column``.

    Per row: ``x`` = the value, or 0 when missing (NULL/NaN); ``x`` clipped to
    ``[lower, upper]`` (floats; infinities clip); ``r = snap(x, granularity)`` clamped to
    ``[row_lower, row_upper]``; with ``square_shift = s`` the row integer is
    ``(r * r + 2^(s-1)) >> s`` (``r * r`` if s = 0) instead. ``ROW`` level: the sum over the
    unit's kept rows. ``UNIT`` level: per (unit, group) the sum over all its rows clamped to
    ``[unit_lower, unit_upper]``; then the sum over units.
    """

    name: str
    column: str
    granularity: float
    lower: float
    upper: float
    row_lower: int
    row_upper: int
    level: Level = Level.ROW
    unit_lower: int | None = None
    unit_upper: int | None = None
    square_shift: int | None = None

    def __post_init__(self) -> None:
        g = self.granularity
        if not (g > 0) or math.frexp(g)[0] != 0.5:
            raise fail("granularity", "ValueSum", "a power of two", g)
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)
                and self.lower <= self.upper):
            raise fail("upper", "ValueSum", "finite bounds lower <= upper", self.upper)
        if not self.row_lower <= self.row_upper:
            raise fail("row_upper", "ValueSum", "an int >= row_lower", self.row_upper)
        if not max(abs(self.lower), abs(self.upper)) / g < 2.0**52:
            raise fail("granularity", "ValueSum", "coarse enough that |bound| / granularity "
                       "< 2^52 (snapping is exact)", g)
        if self.level == Level.UNIT and (self.unit_lower is None or self.unit_upper is None
                                         or not self.unit_lower <= self.unit_upper):
            raise fail("unit_upper", "ValueSum", "unit bounds lower <= upper at UNIT level",
                       self.unit_upper)
        if self.square_shift is not None:
            check_int("square_shift", self.square_shift, "ValueSum", minimum=0)


@dataclass(frozen=True, slots=True)
class Bins:
    """Numeric buckets: ``r`` as in :class:`ValueSum` (no square), bucket
    ``((r - row_lower) * count) // (row_upper - row_lower + 1)``."""

    granularity: float
    lower: float
    upper: float
    row_lower: int
    row_upper: int
    count: int


@dataclass(frozen=True, slots=True)
class BucketCount:
    """Kept rows per group and bucket (always ``ROW`` level). Buckets are either the
    public ``categories`` (a row whose value is none of them is in no bucket; a missing
    value is in none) or numeric ``bins`` (a missing value is treated as 0)."""

    name: str
    column: str
    categories: tuple[KeyValue, ...] | None = None
    bins: Bins | None = None

    def __post_init__(self) -> None:
        if (self.categories is None) == (self.bins is None):
            raise fail("categories", "BucketCount", "exactly one of categories or bins",
                       self.categories)

    @property
    def buckets(self) -> int:
        return len(self.categories) if self.categories is not None else (
            self.bins.count if self.bins is not None else 0)


Measure: TypeAlias = RowCount | ValueSum | BucketCount


@dataclass(frozen=True, slots=True)
class BoundingSpec:
    """Everything an engine needs (docs/queries-engines.md has the exact semantics).

    ``keys``: the public group keys (tuples aligned with ``group_by``; ``((),)`` for one
    global group), or ``None`` for observed groups (DP key selection: ``Aggregates.units``
    then counts the units of each group). ``unit``: the privacy-unit column (``None``: every
    row is its own unit). ``max_groups`` (L0) and ``max_rows`` (L-inf, ``None`` = no row
    bound, allowed only without ``ROW``-level sums and buckets) bound each unit's
    contribution; ``seed`` keys the sampling.
    """

    measures: tuple[Measure, ...]
    group_by: tuple[str, ...] = ()
    keys: tuple[tuple[KeyValue, ...], ...] | None = ((),)
    where: tuple[Predicate, ...] = ()
    unit: str | None = None
    max_groups: int = 1
    max_rows: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        names = [m.name for m in self.measures]
        if len(set(names)) != len(names):
            raise fail("measures", "BoundingSpec", "measures with distinct names", names)
        check_int("max_groups", self.max_groups, "BoundingSpec", minimum=1)
        if self.max_rows is not None:
            check_int("max_rows", self.max_rows, "BoundingSpec", minimum=1)
        if self.keys is None and not self.group_by:
            raise fail("group_by", "BoundingSpec", "at least one column when keys are "
                       "observed (keys=None)", self.group_by)
        if self.keys is not None and any(len(k) != len(self.group_by) for k in self.keys):
            raise fail("keys", "BoundingSpec", "tuples as long as group_by", self.keys)
        if self.unit is not None and self.max_rows is None and self.needs_row_sampling_bound:
            raise fail("max_rows", "BoundingSpec", "an int >= 1 when ROW-level sums or "
                       "buckets are measured per unit", None)

    @property
    def needs_row_sampling_bound(self) -> bool:
        """True if some measure depends on *which* rows are kept (not only how many)."""
        return any(isinstance(m, BucketCount) or (isinstance(m, ValueSum)
                   and m.level == Level.ROW) for m in self.measures)

    @property
    def row_measures(self) -> tuple[ValueSum | BucketCount, ...]:
        """Measures whose per-row integers order a unit's rows for row sampling."""
        return tuple(m for m in self.measures if isinstance(m, BucketCount)
                     or (isinstance(m, ValueSum) and m.level == Level.ROW))


@dataclass(frozen=True, slots=True)
class Aggregates:
    """What leaves an engine: per group, one integer per scalar measure, one integer
    vector per bucket measure, and (observed keys only) the number of units.

    ``keys[i]`` is the key of group ``i``: the spec's public keys in their order (absent
    groups have zeros), or the observed groups in any order. ``values[name]`` is an int64
    array of shape ``(groups,)`` or ``(groups, buckets)``.
    """

    keys: tuple[tuple[KeyValue, ...], ...]
    values: Mapping[str, I64]
    units: I64 | None = None
    engine: str = field(default="", compare=False)

    def sorted(self) -> Aggregates:
        """The same aggregates with groups in a canonical order (for comparisons)."""
        order = sorted(range(len(self.keys)), key=lambda i: _sort_key(self.keys[i]))
        idx = np.asarray(order, dtype=np.int64)
        return Aggregates(tuple(self.keys[i] for i in order),
                          {k: np.asarray(v)[idx] for k, v in self.values.items()},
                          None if self.units is None else np.asarray(self.units)[idx],
                          self.engine)

    @property
    def n_groups(self) -> int:
        """The number of groups."""
        return len(self.keys)

    def take(self, idx: I64) -> Aggregates:
        """The groups ``idx`` (in that order), as new arrays (a batch taken from is not
        kept alive by the result; its keys are shared, being immutable tuples)."""
        idx = np.asarray(idx, dtype=np.int64)
        return Aggregates(tuple(self.keys[i] for i in idx.tolist()),
                          {k: np.array(np.asarray(v)[idx]) for k, v in self.values.items()},
                          None if self.units is None else np.array(np.asarray(self.units)[idx]),
                          self.engine)

    def slices(self, size: int) -> Iterator[Aggregates]:
        """Consecutive batches of at most ``size`` groups (every group in one batch, in
        order); none for zero groups."""
        check_int("size", size, "Aggregates.slices", minimum=1)
        for lo in range(0, len(self.keys), size):
            yield self.take(np.arange(lo, min(lo + size, len(self.keys)), dtype=np.int64))

    @staticmethod
    def concat(spec: BoundingSpec, parts: Sequence[Aggregates], engine: str = ""
               ) -> Aggregates:
        """The groups of ``parts`` in order, as one :class:`Aggregates` of ``spec``'s
        measures (zero groups, with arrays of the right shapes, when there are none)."""
        if not parts:
            values = {m.name: np.zeros((0, m.buckets) if isinstance(m, BucketCount) else 0,
                                       dtype=np.int64) for m in spec.measures}
            units = None if spec.keys is not None else np.zeros(0, dtype=np.int64)
            return Aggregates((), values, units, engine)
        keys = tuple(k for p in parts for k in p.keys)
        values = {m.name: np.concatenate([np.asarray(p.values[m.name]) for p in parts])
                  for m in spec.measures}
        us = [p.units for p in parts]
        units = None if any(u is None for u in us) else np.concatenate(
            [np.asarray(u, dtype=np.int64) for u in us if u is not None])
        return Aggregates(keys, values, units, engine or parts[0].engine)

    def same_as(self, other: Aggregates) -> bool:
        """Identical groups (in canonical order), measures and unit counts."""
        a, b = self.sorted(), other.sorted()
        return (a.keys == b.keys and set(a.values) == set(b.values)
                and all(np.array_equal(a.values[k], b.values[k]) for k in a.values)
                and _same_units(a.units, b.units))


def _same_units(a: I64 | None, b: I64 | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(np.array_equal(a, b))


def _sort_key(key: tuple[KeyValue, ...]) -> tuple[tuple[int, str], ...]:
    return tuple((0, "") if v is None else (1, f"{type(v).__name__}:{v!r}") for v in key)


@runtime_checkable
class Engine(Protocol):
    """An engine bound to one table (see the module docstring for the contract)."""

    @property
    def name(self) -> str:
        """A short identifier, e.g. ``"duckdb"``."""
        ...

    def columns(self) -> tuple[Column, ...]:
        """Column names and public types from the table's metadata (no values read)."""
        ...

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        """The bounded per-group aggregates of ``spec`` (docs/queries-engines.md)."""
        ...


class GroupBatch(Protocol):
    """A batch of observed groups as DP key selection reads it: the unit counts of all its
    groups, and the full aggregates only of the groups it keeps (:meth:`take`). An
    :class:`Aggregates` is one; an engine may hand back a lighter one, whose keys and
    measures stay engine side until taken (DuckDB: nothing of a dropped group but its
    unit count reaches Python)."""

    @property
    def engine(self) -> str:
        """The engine's name."""
        ...

    @property
    def units(self) -> I64 | None:
        """The unit count of each group, in the batch's order."""
        ...

    @property
    def n_groups(self) -> int:
        """The number of groups in the batch."""
        ...

    def take(self, idx: I64) -> Aggregates:
        """The groups ``idx`` (positions in the batch, in that order) as new arrays. Valid
        until the next batch is asked for."""
        ...


@runtime_checkable
class StreamingEngine(Engine, Protocol):
    """An engine that can hand back observed groups in batches (DP key selection)."""

    def aggregate_batches(self, spec: BoundingSpec, size: int) -> Iterator[GroupBatch]:
        """The aggregates of an observed-keys ``spec`` (``keys=None``) as batches of at
        most ``size`` groups: every group in exactly one batch, with the values
        :meth:`Engine.aggregate` gives it; the next batch is fetched only when asked for,
        so the caller holds one batch at a time."""
        ...


def aggregate_batches(engine: Engine, spec: BoundingSpec, size: int = SELECTION_BATCH
                      ) -> Iterator[GroupBatch]:
    """The aggregates of ``spec`` in batches of at most ``size`` groups: the engine's own
    stream when it has one (:class:`StreamingEngine`), else its :meth:`Engine.aggregate`
    cut into slices (the same groups and values; memory as for ``aggregate``)."""
    check_int("size", size, "aggregate_batches", minimum=1)
    if isinstance(engine, StreamingEngine):
        for batch in engine.aggregate_batches(spec, size):
            if batch.n_groups > size:  # an engine's bug; the count is private: not said
                raise UnsupportedError(
                    f"The {engine.name!r} engine's aggregate_batches returned a batch of "
                    f"more than the {size} groups asked for (its contract: at most size).")
            yield batch
            del batch  # not held while the next batch is fetched
        return
    yield from engine.aggregate(spec).slices(size)
