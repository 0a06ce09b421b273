"""The reference engine: the semantics of a :class:`BoundingSpec`, in plain Python.

Slow (a Python loop over rows) and written to be read next to docs/queries-engines.md:
it is the executable definition every engine is checked against
(``tests/queries/engine_conformance.py``) and what the brute-force sensitivity tests run
on every neighbour of a small table.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpsieve.errors import NumericalError
from dpsieve.queries._mix import encode, fold, mix, sampling_keys
from dpsieve.queries.engine import (
    Aggregates,
    BoundingSpec,
    BucketCount,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
    snap,
)
from dpsieve.queries.schema import Column, KeyValue

__all__ = ["ReferenceEngine", "row_integer"]

Row = Mapping[str, Any]
_I64 = 2**63


def _missing(v: Any) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def _holds(row: Row, p: Predicate) -> bool:
    v = row[p.column]
    if p.op == Op.IS_NULL:
        return _missing(v)
    if p.op == Op.NOT_NULL:
        return not _missing(v)
    if _missing(v):
        return False
    c: Any = p.value
    if p.op == Op.EQ:
        return bool(v == c)
    if p.op == Op.NE:
        return bool(v != c)
    if p.op == Op.LT:
        return bool(v < c)
    if p.op == Op.LE:
        return bool(v <= c)
    if p.op == Op.GT:
        return bool(v > c)
    if p.op == Op.GE:
        return bool(v >= c)
    if p.op == Op.IN:
        return any(v == x for x in c)
    return all(v != x for x in c)  # NOT_IN


def _lattice(v: Any, g: float, lo: float, hi: float, rlo: int, rhi: int) -> int:
    x = 0.0 if _missing(v) else float(v)
    x = min(max(x, lo), hi)
    return min(max(snap(x, g), rlo), rhi)


def row_integer(m: ValueSum | BucketCount, v: Any) -> int:
    """The per-row integer of a measure (a bucket index, -1 for none, for buckets)."""
    if isinstance(m, ValueSum):
        r = _lattice(v, m.granularity, m.lower, m.upper, m.row_lower, m.row_upper)
        if m.square_shift is None:
            return r
        s = m.square_shift
        return (r * r + (1 << (s - 1))) >> s if s > 0 else r * r
    if m.categories is not None:
        if _missing(v):
            return -1
        for i, c in enumerate(m.categories):
            if v == c and isinstance(v, str) == isinstance(c, str):
                return i
        return -1
    b = m.bins
    assert b is not None  # BucketCount guarantees one of the two
    r = _lattice(v, b.granularity, b.lower, b.upper, b.row_lower, b.row_upper)
    return ((r - b.row_lower) * b.count) // (b.row_upper - b.row_lower + 1)


class ReferenceEngine:
    """Rows as a sequence of dicts and the public columns (names and types)."""

    name = "reference"

    def __init__(self, rows: Sequence[Row], columns: Sequence[Column]) -> None:
        self._rows = list(rows)
        self._columns = tuple(columns)

    def columns(self) -> tuple[Column, ...]:
        return self._columns

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        k0, k1 = sampling_keys(spec.seed)
        rows = [r for r in self._rows if all(_holds(r, p) for p in spec.where)]
        if spec.unit is not None:
            rows = [r for r in rows if not _missing(r[spec.unit])]
        # groups: public keys (index = position) or observed tuples (index by first sight)
        index: dict[tuple[KeyValue, ...], int] = {}
        keys: list[tuple[KeyValue, ...]] = []
        hashes: list[int] = []
        if spec.keys is not None:
            keys = list(spec.keys)
            index = {_canon(k): i for i, k in enumerate(keys)}
            hashes = list(range(len(keys)))
        cells: list[tuple[Any, int, list[Row]]] = []  # (unit, group, rows)
        by_cell: dict[tuple[Any, int], list[Row]] = defaultdict(list)
        for n, r in enumerate(rows):
            key = tuple(None if _missing(r[c]) else r[c] for c in spec.group_by)
            if spec.keys is not None:
                gid = index.get(_canon(key)) if not any(v is None for v in key) else None
                if gid is None:
                    continue
            else:
                ck = _canon(key)
                if ck not in index:
                    index[ck] = len(keys)
                    keys.append(key)
                    hashes.append(fold(key))
                gid = index[ck]
            unit = ("row", n) if spec.unit is None else ("unit", r[spec.unit])
            by_cell[(unit, gid)].append(r)
        per_unit: dict[Any, list[int]] = defaultdict(list)
        for (u, gid) in by_cell:
            per_unit[u].append(gid)
        for u, gids in per_unit.items():
            if spec.unit is not None:
                hu = encode(u[1])
                a = mix(k0 ^ hu)
                # ties of (p0, h(g)) broken by the key, missing last (as every engine)
                gids = sorted(gids, key=lambda g: (mix(a ^ hashes[g]), hashes[g],
                                                   _key_order(keys[g])))
                gids = gids[: spec.max_groups]
            for g in gids:
                cells.append((u, g, by_cell[(u, g)]))
        return self._totals(spec, keys, hashes, cells, k1)

    def _totals(self, spec: BoundingSpec, keys: list[tuple[KeyValue, ...]],
                hashes: list[int], cells: list[tuple[Any, int, list[Row]]],
                k1: int) -> Aggregates:
        n_groups = len(keys)
        totals: dict[str, list[Any]] = {}
        for m in spec.measures:
            totals[m.name] = ([[0] * m.buckets for _ in range(n_groups)]
                              if isinstance(m, BucketCount) else [0] * n_groups)
        units = [0] * n_groups
        row_ms = spec.row_measures
        for u, g, cell in cells:
            units[g] += 1
            kept = cell
            n_kept = len(cell)
            if spec.unit is not None and spec.max_rows is not None:
                n_kept = min(len(cell), spec.max_rows)
                if row_ms and len(cell) > spec.max_rows:
                    ordered = sorted(cell, key=lambda r: tuple(
                        row_integer(m, r[m.column]) for m in row_ms))
                    b = mix(mix(k1 ^ encode(u[1])) ^ hashes[g])
                    ranks = sorted(range(len(ordered)), key=lambda i: (mix(b ^ i), i))
                    kept = [ordered[i] for i in ranks[: spec.max_rows]]
            for m in spec.measures:
                t = totals[m.name]
                if isinstance(m, RowCount):
                    t[g] += n_kept if m.level == Level.ROW else 1
                elif isinstance(m, BucketCount):
                    for r in kept:
                        b_i = row_integer(m, r[m.column])
                        if b_i >= 0:
                            t[g][b_i] += 1
                elif m.level == Level.ROW:
                    t[g] += sum(row_integer(m, r[m.column]) for r in kept)
                else:
                    s = sum(row_integer(m, r[m.column]) for r in cell)
                    assert m.unit_lower is not None
                    assert m.unit_upper is not None
                    t[g] += min(max(s, m.unit_lower), m.unit_upper)
        values = {}
        for m in spec.measures:
            t = totals[m.name]
            flat = [x for row in t for x in row] if isinstance(m, BucketCount) else t
            if any(not -_I64 <= x < _I64 for x in flat):
                raise NumericalError(f"the aggregate {m.name!r} does not fit in 64 bits")
            shape = (n_groups, m.buckets) if isinstance(m, BucketCount) else (n_groups,)
            values[m.name] = np.asarray(flat, dtype=np.int64).reshape(shape)
        if spec.keys is not None:
            return Aggregates(tuple(keys), values, None, self.name)
        # observed keys: only groups that some unit kept (after the L0 choice)
        live = [i for i in range(n_groups) if units[i] > 0]
        idx = np.asarray(live, dtype=np.int64)
        return Aggregates(tuple(keys[i] for i in live), {k: v[idx] for k, v in values.items()},
                          np.asarray([units[i] for i in live], dtype=np.int64), self.name)


def _canon(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """A dict key that keeps ``1``, ``1.0``, ``True`` and ``"1"`` apart where types differ."""
    return tuple((type(v) is str, v) for v in key)


def _key_order(key: tuple[KeyValue, ...]) -> tuple[tuple[bool, Any], ...]:
    """A group key's place in the engines' tie-break order: by value, missing last."""
    return tuple((v is None, 0 if v is None else v) for v in key)
