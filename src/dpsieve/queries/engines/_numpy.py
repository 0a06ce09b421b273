"""The vectorised core behind the pandas and polars engines: a BoundingSpec on numpy arrays.

A frame engine supplies each needed column as a :class:`Col` (values with missing entries
filled, and the missing mask; a string column dictionary-encoded, :func:`string_col`, so
no step sorts or hashes Python strings row by row); everything else -- predicates,
groups, the L0 and L-inf choices with the keyed mixer, exact integer sums -- is done here
with numpy, following docs/queries-engines.md step by step. Sums are exact: int64
reductions guarded against overflow (:class:`NumericalError` rather than a wrap-around).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.errors import NumericalError
from dpsieve.queries._mix import NULL_CODE, encode, mix, mix_array, sampling_keys
from dpsieve.queries.engine import (
    Aggregates,
    Bins,
    BoundingSpec,
    BucketCount,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
)
from dpsieve.queries.engines._dictionary import (
    Dictionary,
    coded_strings,
    string_codes,
    unique_inverse,
)
from dpsieve.queries.schema import ColumnType, KeyValue

__all__ = ["Col", "aggregate_columns", "coded_string_col", "string_col"]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
B = npt.NDArray[np.bool_]


@dataclass(frozen=True, slots=True)
class Col:
    """One column: ``values`` (missing entries filled with a harmless value of the type:
    0, 0.0, False or ""), ``missing`` (NULL, or NaN for floats) and the public type.

    A string column made by :func:`string_col` holds ``values`` as int64 codes into
    ``dictionary`` (:class:`~dpsieve.queries.engines._dictionary.Dictionary`: its distinct
    strings, the filled "" included, sorted): code order is string order, so every step
    gives what it gives on the strings themselves."""

    values: npt.NDArray[Any]
    missing: B
    type: ColumnType
    dictionary: Dictionary | None = None

    def take(self, idx: I64) -> Col:
        return Col(self.values[idx], self.missing[idx], self.type, self.dictionary)

    def distinct(self) -> tuple[list[Any], I64]:
        """(the distinct values in sorted order, each row's index among them)."""
        uniq, inv = unique_inverse(self.values)
        if self.dictionary is None:
            return [_py(u) for u in uniq.tolist()], inv
        d = self.dictionary.strings
        return [d[u] for u in uniq.tolist()], inv


def string_col(values: Any, missing: B) -> Col:
    """A string column from its values (a sequence of ``str``, missing entries filled
    with ""), dictionary-encoded once (:func:`~dpsieve.queries.engines._dictionary.
    string_codes`)."""
    codes, d = string_codes(values)
    return Col(codes, missing, ColumnType.STRING, d)


def coded_string_col(codes: I64, seen: Sequence[str], missing: B) -> Col:
    """A string column from codes into ``seen`` (strings in any order, repeats allowed),
    e.g. a frame library's own factorization (:func:`~dpsieve.queries.engines.
    _dictionary.coded_strings`)."""
    values, d = coded_strings(codes, seen)
    return Col(values, missing, ColumnType.STRING, d)


def _codes(col: Col, table: Sequence[Any]) -> I64:
    """Index of each value in ``table`` (-1 if absent or missing), by the distinct values."""
    out = np.full(col.values.shape[0], -1, dtype=np.int64)
    if col.values.shape[0] == 0:
        return out
    pos: dict[Any, int] = {}
    for i, v in enumerate(table):
        pos.setdefault((isinstance(v, str), v), i)
    if col.dictionary is not None:  # the dictionary's codes: no per-row work but a take
        dcode = np.asarray([pos.get((True, u), -1) for u in col.dictionary.strings],
                           dtype=np.int64)
        out = dcode[col.values]
    else:
        uniq, inv = unique_inverse(col.values)
        ucode = np.asarray([pos.get((isinstance(u, str), _py(u)), -1)
                            for u in uniq.tolist()], dtype=np.int64)
        out = ucode[inv]
    out[col.missing] = -1
    return out


def _py(v: Any) -> Any:
    return v.item() if isinstance(v, np.generic) else v


def _holds(col: Col, p: Predicate) -> B:
    if p.op == Op.IS_NULL:
        return col.missing.copy()
    if p.op == Op.NOT_NULL:
        return ~col.missing
    if p.op in (Op.IN, Op.NOT_IN):
        vals = p.value if isinstance(p.value, tuple) else (p.value,)
        inside = _codes(col, vals) >= 0
        return ~col.missing & (inside if p.op == Op.IN else ~inside)
    v: Any = p.value
    # a dictionary-encoded column is compared once per distinct string, then taken by code
    x = col.values if col.dictionary is None else np.asarray(col.dictionary.strings,
                                                             dtype=object)
    with np.errstate(invalid="ignore"):
        if p.op == Op.EQ:
            r = x == v
        elif p.op == Op.NE:
            r = x != v
        elif p.op == Op.LT:
            r = x < v
        elif p.op == Op.LE:
            r = x <= v
        elif p.op == Op.GT:
            r = x > v
        else:
            r = x >= v
    hold = np.asarray(r, dtype=bool)
    if col.dictionary is not None:
        hold = hold[col.values]
    out: B = ~col.missing & hold
    return out


def _lattice(col: Col, g: float, lo: float, hi: float, rlo: int, rhi: int) -> I64:
    x = np.where(col.missing, 0.0, col.values.astype(np.float64))
    x = np.minimum(np.maximum(x, lo), hi)
    a = x / g
    f = np.floor(a)
    r = f.astype(np.int64) + (a - f >= 0.5).astype(np.int64)
    return np.minimum(np.maximum(r, rlo), rhi)


def _row_ints(m: ValueSum | BucketCount, col: Col) -> I64:
    if isinstance(m, ValueSum):
        r = _lattice(col, m.granularity, m.lower, m.upper, m.row_lower, m.row_upper)
        s = m.square_shift
        if s is None:
            return r
        return (r * r + (1 << (s - 1))) >> s if s > 0 else r * r
    if m.categories is not None:
        return _codes(col, m.categories)
    b: Bins | None = m.bins
    assert b is not None
    r = _lattice(col, b.granularity, b.lower, b.upper, b.row_lower, b.row_upper)
    return ((r - b.row_lower) * b.count) // (b.row_upper - b.row_lower + 1)


def _encode(col: Col) -> U64:
    """``_mix.encode`` of every value (integers vectorised; strings by distinct value)."""
    if col.type == ColumnType.INTEGER:
        out = col.values.astype(np.int64).view(np.uint64).copy()
    elif col.type == ColumnType.BOOLEAN:
        out = col.values.astype(np.uint64)
    elif col.dictionary is not None:  # each distinct string hashed once, kept with it
        words = col.dictionary.words()
        out = words[col.values] if col.values.shape[0] else np.zeros(0, dtype=np.uint64)
    else:
        uniq, inv = np.unique(col.values.astype(object), return_inverse=True)
        codes = np.asarray([encode(str(u)) for u in uniq.tolist()], dtype=np.uint64)
        out = codes[inv.reshape(-1)] if len(uniq) else np.zeros(0, dtype=np.uint64)
    out[col.missing] = np.uint64(NULL_CODE)
    return out


def _starts(sorted_keys: I64) -> I64:
    """For a sorted key array, the index where each element's run begins."""
    n = sorted_keys.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    new = np.ones(n, dtype=bool)
    new[1:] = sorted_keys[1:] != sorted_keys[:-1]
    first = np.nonzero(new)[0]
    return np.asarray(first[np.cumsum(new) - 1], dtype=np.int64)


def _sum_by(idx: I64, vals: I64, size: int) -> I64:
    """Exact per-index sums of int64 values (refuses what could overflow)."""
    out = np.zeros(size, dtype=np.int64)
    if vals.shape[0] == 0:
        return out
    bound = int(np.max(np.abs(vals))) * int(vals.shape[0])
    if bound >= 2**63:
        raise NumericalError("a per-group sum could exceed 64 bits; use the DuckDB engine")
    np.add.at(out, idx, vals)  # int64 adds, no partial sum beyond the bound: exact
    return out


def _group_ids(spec: BoundingSpec, cols: dict[str, Col], n: int
               ) -> tuple[I64, list[tuple[KeyValue, ...]], U64]:
    """(group index per row, -1 = dropped; the groups' keys; h(g) per group)."""
    if spec.keys is not None:
        keys = list(spec.keys)
        if not spec.group_by:
            return np.zeros(n, dtype=np.int64), keys, np.zeros(1, dtype=np.uint64)
        combined = np.zeros(n, dtype=np.int64)
        radix = 1
        tables: list[list[Any]] = []
        ok = np.ones(n, dtype=bool)
        for j, c in enumerate(spec.group_by):
            table = list(dict.fromkeys(k[j] for k in keys))
            tables.append(table)
            code = _codes(cols[c], table)
            ok &= code >= 0
            combined = combined * len(table) + np.maximum(code, 0)
            radix *= len(table)
        key_code: dict[int, int] = {}
        for gid, k in enumerate(keys):
            cc = 0
            for j, v in enumerate(k):
                cc = cc * len(tables[j]) + tables[j].index(v)
            key_code[cc] = gid
        uniq, inv = unique_inverse(combined)
        lut = np.asarray([key_code.get(int(u), -1) for u in uniq.tolist()], dtype=np.int64)
        gid_arr = lut[inv] if n else np.zeros(0, dtype=np.int64)
        gid_arr[~ok] = -1
        return gid_arr, keys, np.arange(len(keys), dtype=np.uint64)
    # observed keys: distinct tuples of (type-aware) values, missing a value of its own
    codes = []
    reps: list[list[Any]] = []
    for c in spec.group_by:
        col = cols[c]
        distinct, code = col.distinct()
        code[col.missing] = len(distinct)
        codes.append(code)
        reps.append([*distinct, None])
    if n == 0:
        return np.zeros(0, dtype=np.int64), [], np.zeros(0, dtype=np.uint64)
    ukeys, ginv = _distinct_rows(codes, [len(r) for r in reps])
    keys = [tuple(_typed(reps[j][int(ukeys[i, j])], cols[c].type)
                  for j, c in enumerate(spec.group_by)) for i in range(ukeys.shape[0])]
    hg = np.zeros(len(keys), dtype=np.uint64)
    for i, k in enumerate(keys):
        h = 0
        for v in k:
            h = mix(h ^ encode(v))
        hg[i] = h
    return ginv, keys, hg


def _distinct_rows(codes: list[I64], sizes: list[int]) -> tuple[I64, I64]:
    """``np.unique`` of the rows of the stacked ``codes`` (column j in ``[0, sizes[j])``)
    with its inverse: the codes combined into one integer, first column most significant,
    when the sizes' product fits in 62 bits (the same lexicographic order), so the rows
    are counted or sorted as integers, not compared as rows."""
    radix = 1
    for size in sizes:
        radix *= max(size, 1)
    if radix >= 2**62:
        ukeys, inv = np.unique(np.stack(codes, axis=1), axis=0, return_inverse=True)
        return np.asarray(ukeys, dtype=np.int64), inv.reshape(-1).astype(np.int64)
    combined = np.zeros(codes[0].shape[0], dtype=np.int64)
    for code, size in zip(codes, sizes, strict=True):
        combined = combined * max(size, 1) + code
    uniq, inv = unique_inverse(combined)
    cols = []
    for size in reversed(sizes):
        cols.append(uniq % max(size, 1))
        uniq = uniq // max(size, 1)
    return np.stack(cols[::-1], axis=1).astype(np.int64), inv


def _typed(v: Any, t: ColumnType) -> KeyValue:
    if v is None:
        return None
    if t == ColumnType.INTEGER:
        return int(v)
    if t == ColumnType.BOOLEAN:
        return bool(v)
    if t == ColumnType.STRING:
        return str(v)
    return float(v)


def aggregate_columns(spec: BoundingSpec, get: Callable[[str], Col], n_rows: int,
                      engine: str) -> Aggregates:
    """The aggregates of ``spec`` over columns read by ``get`` (docs/queries-engines.md)."""
    needed = {p.column for p in spec.where} | set(spec.group_by) | {
        m.column for m in spec.measures if not isinstance(m, RowCount)}
    if spec.unit is not None:
        needed.add(spec.unit)
    cols = {c: get(c) for c in sorted(needed)}
    mask = np.ones(n_rows, dtype=bool)
    for p in spec.where:
        mask &= _holds(cols[p.column], p)
    if spec.unit is not None:
        mask &= ~cols[spec.unit].missing
    sel = np.nonzero(mask)[0].astype(np.int64)
    cols = {c: col.take(sel) for c, col in cols.items()}
    n = sel.shape[0]
    gid, keys, hg = _group_ids(spec, cols, n)
    live = gid >= 0
    rows = np.nonzero(live)[0].astype(np.int64)
    gid = gid[rows]
    cols = {c: col.take(rows) for c, col in cols.items()}
    ints = {m.name: _row_ints(m, cols[m.column]) for m in spec.measures
            if isinstance(m, ValueSum | BucketCount)}
    G = len(keys)
    values: dict[str, I64] = {}
    if spec.unit is None:
        units = np.bincount(gid, minlength=G).astype(np.int64)
        for m in spec.measures:
            if isinstance(m, RowCount):
                values[m.name] = units.copy()
            elif isinstance(m, BucketCount):
                values[m.name] = _buckets(gid, ints[m.name], G, m.buckets)
            elif m.level == Level.ROW:
                values[m.name] = _sum_by(gid, ints[m.name], G)
            else:
                assert m.unit_lower is not None and m.unit_upper is not None  # noqa: PT018
                clamped = np.minimum(np.maximum(ints[m.name], m.unit_lower), m.unit_upper)
                values[m.name] = _sum_by(gid, clamped, G)
        return _finish(spec, keys, values, units, engine)
    return _with_units(spec, cols, gid, keys, hg, ints, engine)


def _with_units(spec: BoundingSpec, cols: dict[str, Col], gid: I64,
                keys: list[tuple[KeyValue, ...]], hg: U64, ints: dict[str, I64],
                engine: str) -> Aggregates:
    assert spec.unit is not None
    G = len(keys)
    k0, k1 = sampling_keys(spec.seed)
    ucol = cols[spec.unit]
    hu_row = _encode(ucol)
    _, uc = unique_inverse(ucol.values)  # a string unit's codes: in the strings' order
    # cells (unit, group)
    cell_key = uc * max(G, 1) + gid
    ucell, ci = unique_inverse(cell_key)
    C = ucell.shape[0]
    first = np.zeros(C, dtype=np.int64)
    first[ci[::-1]] = np.arange(ci.shape[0] - 1, -1, -1)
    c_unit, c_gid, c_hu = uc[first], gid[first], hu_row[first]
    c_n = np.bincount(ci, minlength=C).astype(np.int64)
    # L0: per unit keep the max_groups cells of smallest (p0, h(g))
    c_hg = hg[c_gid]
    p0 = mix_array(mix_array(c_hu ^ np.uint64(k0)) ^ c_hg)
    order = np.lexsort((c_hg, p0, c_unit))
    rank = np.arange(C) - _starts(c_unit[order])
    kept_cell = np.zeros(C, dtype=bool)
    kept_cell[order[rank < spec.max_groups]] = True
    values: dict[str, I64] = {}
    kg = c_gid[kept_cell]
    units = np.bincount(kg, minlength=G).astype(np.int64)
    L = spec.max_rows
    row_ms = spec.row_measures
    keep_row = kept_cell[ci]
    if row_ms and L is not None:
        r_idx = np.nonzero(keep_row)[0]
        r_ci = ci[r_idx]
        sort_keys = [ints[m.name][r_idx] for m in reversed(row_ms)] + [r_ci]
        o1 = np.lexsort(tuple(sort_keys))
        i = np.arange(o1.shape[0]) - _starts(r_ci[o1])
        b1 = mix_array(mix_array(c_hu ^ np.uint64(k1)) ^ c_hg)
        p1 = mix_array(b1[r_ci[o1]] ^ i.astype(np.uint64))
        o2 = np.lexsort((i, p1, r_ci[o1]))
        rank2 = np.arange(o2.shape[0]) - _starts(r_ci[o1][o2])
        keep_row = np.zeros(ci.shape[0], dtype=bool)
        keep_row[r_idx[o1[o2[rank2 < L]]]] = True
    for m in spec.measures:
        if isinstance(m, RowCount):
            if m.level == Level.UNIT:
                values[m.name] = units.copy()
            else:
                per = c_n if L is None else np.minimum(c_n, L)
                values[m.name] = _sum_by(kg, per[kept_cell], G)
        elif isinstance(m, BucketCount):
            values[m.name] = _buckets(gid[keep_row], ints[m.name][keep_row], G, m.buckets)
        elif m.level == Level.ROW:
            values[m.name] = _sum_by(gid[keep_row], ints[m.name][keep_row], G)
        else:
            assert m.unit_lower is not None and m.unit_upper is not None  # noqa: PT018
            in_kept = kept_cell[ci]
            cell_sum = _sum_by(ci[in_kept], ints[m.name][in_kept], C)
            clamped = np.minimum(np.maximum(cell_sum, m.unit_lower), m.unit_upper)
            values[m.name] = _sum_by(kg, clamped[kept_cell], G)
    return _finish(spec, keys, values, units, engine)


def _buckets(gid: I64, b: I64, G: int, nb: int) -> I64:
    ok = b >= 0
    flat = np.bincount(gid[ok] * nb + b[ok], minlength=G * nb).astype(np.int64)
    return flat.reshape(G, nb)


def _finish(spec: BoundingSpec, keys: list[tuple[KeyValue, ...]], values: dict[str, I64],
            units: I64, engine: str) -> Aggregates:
    if spec.keys is not None:
        return Aggregates(tuple(keys), values, None, engine)
    live = np.nonzero(units > 0)[0]
    return Aggregates(tuple(keys[i] for i in live), {k: v[live] for k, v in values.items()},
                      units[live], engine)
