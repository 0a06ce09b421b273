"""The SQL side of the DuckDB engine: a :class:`BoundingSpec` compiled to one DuckDB SQL
statement (:func:`compile_sql`), and DuckDB's column types mapped to the schema's.

Every constant from a query (bounds, categories, keys, the sampling key) is a bound
parameter, never text in the SQL; identifiers are quoted. The engine that runs the SQL
(memory limits, kept tables, batches) is :mod:`dpsieve.queries.engines.duckdb`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dpsieve.queries._mix import C1, C2, MASK64, NULL_CODE, sampling_keys
from dpsieve.queries.engine import (
    BoundingSpec,
    BucketCount,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
)
from dpsieve.queries.schema import Column, ColumnType

__all__ = ["compile_sql", "duckdb_column_type"]


_INT = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
        "UINTEGER", "UBIGINT", "UHUGEINT")
_FLOAT = ("FLOAT", "DOUBLE", "REAL")
_LIST_TYPE = {ColumnType.INTEGER: "BIGINT[]", ColumnType.FLOAT: "DOUBLE[]",
              ColumnType.STRING: "VARCHAR[]", ColumnType.BOOLEAN: "BOOLEAN[]"}
_SCALAR_TYPE = {ColumnType.INTEGER: "BIGINT", ColumnType.FLOAT: "DOUBLE",
                ColumnType.STRING: "VARCHAR", ColumnType.BOOLEAN: "BOOLEAN"}


def duckdb_column_type(sql_type: str) -> ColumnType:
    """The public type of a DuckDB column type name."""
    t = sql_type.upper()
    if t in _INT:
        return ColumnType.INTEGER
    if t in _FLOAT or t.startswith("DECIMAL"):
        return ColumnType.FLOAT
    if t == "VARCHAR":
        return ColumnType.STRING
    if t == "BOOLEAN":
        return ColumnType.BOOLEAN
    return ColumnType.OTHER


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


class _Params:
    """Named parameters ``$p0, $p1, ...`` with their SQL type casts."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any, sql_type: str) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f"CAST(${name} AS {sql_type})"


def _mix(x: str) -> str:
    """The mixer of :mod:`dpsieve.queries._mix` on a UBIGINT expression (inlined; DuckDB
    computes the products in UHUGEINT, masked back to 64 bits)."""
    def mul(e: str, c: int) -> str:
        return f"CAST((CAST({e} AS UHUGEINT) * {c}) & {MASK64} AS UBIGINT)"

    def xs(e: str, s: int) -> str:
        return f"xor({e}, ({e}) >> {s})"

    return xs(mul(xs(mul(xs(x, 27), C1), 33), C2), 27)


def _encode(col: str, ctype: ColumnType) -> str:
    """The 64-bit encoding of a unit or key value (``_mix.encode``) as UBIGINT SQL."""
    if ctype == ColumnType.STRING:
        e = f"md5_number_lower({col})"
    elif ctype == ColumnType.BOOLEAN:
        e = f"CAST({col} AS UBIGINT)"
    else:
        e = f"CAST(CAST({col} AS HUGEINT) & {MASK64} AS UBIGINT)"
    return f"(CASE WHEN {col} IS NULL THEN CAST({NULL_CODE} AS UBIGINT) ELSE {e} END)"


def _missing(col: str, ctype: ColumnType) -> str:
    return f"({col} IS NULL OR isnan({col}))" if ctype == ColumnType.FLOAT else (
        f"({col} IS NULL)")


def _predicate(p: Predicate, types: dict[str, ColumnType], prm: _Params) -> str:
    c, t = _q(p.column), types[p.column]
    miss = _missing(c, t)
    if p.op == Op.IS_NULL:
        return miss
    if p.op == Op.NOT_NULL:
        return f"(NOT {miss})"
    if p.op in (Op.IN, Op.NOT_IN):
        vals = p.value if isinstance(p.value, tuple) else (p.value,)
        lst = prm.add(list(vals), _LIST_TYPE[t])
        neg = "NOT " if p.op == Op.NOT_IN else ""
        return f"(NOT {miss} AND {neg}list_contains({lst}, {c}))"
    op = {"==": "=", "!=": "<>"}.get(p.op.value, p.op.value)
    return f"(NOT {miss} AND {c} {op} {prm.add(p.value, _SCALAR_TYPE[t])})"


def _lattice(col: str, ctype: ColumnType, g: float, lo: float, hi: float, rlo: int, rhi: int,
             prm: _Params) -> str:
    """The clamped lattice integer of one row, as BIGINT SQL (``engine.snap``)."""
    x = (f"(CASE WHEN {_missing(col, ctype)} THEN CAST(0 AS DOUBLE) "
         f"ELSE CAST({col} AS DOUBLE) END)")
    xc = f"least(greatest({x}, {prm.add(lo, 'DOUBLE')}), {prm.add(hi, 'DOUBLE')})"
    a = f"({xc} / {prm.add(g, 'DOUBLE')})"
    r = (f"(CAST(floor({a}) AS BIGINT) + CASE WHEN {a} - floor({a}) >= 0.5 THEN 1 ELSE 0 "
         "END)")
    return f"least(greatest({r}, {prm.add(rlo, 'BIGINT')}), {prm.add(rhi, 'BIGINT')})"


def _row_expr(m: ValueSum | BucketCount, types: dict[str, ColumnType], prm: _Params,
              joins: list[str], n: int) -> str:
    col, t = _q(m.column), types[m.column]
    if isinstance(m, ValueSum):
        r = _lattice(col, t, m.granularity, m.lower, m.upper, m.row_lower, m.row_upper, prm)
        s = m.square_shift
        if s is None:
            return r
        return f"(({r}) * ({r}) + {1 << (s - 1)}) >> {s}" if s > 0 else f"({r}) * ({r})"
    if m.categories is not None:
        alias = f"_c{n}"
        lst = prm.add(list(m.categories), _LIST_TYPE[t])
        joins.append(f"LEFT JOIN (SELECT unnest({lst}) AS v, unnest(range(len({lst}))) AS b)"
                     f" AS {alias} ON {col} = {alias}.v")
        return f"COALESCE({alias}.b, -1)"
    b = m.bins
    assert b is not None
    r = _lattice(col, t, b.granularity, b.lower, b.upper, b.row_lower, b.row_upper, prm)
    return f"((({r}) - {b.row_lower}) * {b.count}) // {b.row_upper - b.row_lower + 1}"


def compile_sql(spec: BoundingSpec, columns: Sequence[Column], source: str
                ) -> tuple[str, dict[str, Any]]:
    """(SQL, parameters) computing ``spec`` over ``source`` (a FROM clause item).

    Result columns: the group (``_g`` for public keys, else the key columns ``k0..``),
    ``_units``, then one column per measure (a MAP bucket -> count for buckets). Each
    mixer application reads column references only (one layer per step), so the SQL stays
    linear in the size of the spec.
    """
    types = {c.name: c.type for c in columns}
    prm = _Params()
    k0, k1 = sampling_keys(spec.seed)
    joins: list[str] = []
    sel: list[str] = []
    where = [_predicate(p, types, prm) for p in spec.where]
    public = spec.keys is not None
    if spec.unit is not None:
        uc = _q(spec.unit)
        sel.append(f"{uc} AS _u")
        where.append(f"{uc} IS NOT NULL")
    lo = _key_range(spec, types)
    if lo is not None:  # keys lo, lo + 1, ...: a range test, not a join (same rows, same ids)
        assert spec.keys is not None
        c = _q(spec.group_by[0])
        where.append(f"{c} BETWEEN {prm.add(lo, 'BIGINT')} AND "
                     f"{prm.add(lo + len(spec.keys) - 1, 'BIGINT')}")
        # the range test runs before the projection, so the value fits BIGINT here
        sel.append(f"CAST({c} AS BIGINT) AS _g" if lo == 0 else
                   f"(CAST({c} AS BIGINT) - {prm.add(lo, 'BIGINT')}) AS _g")
        gcols = ["_g"]
    elif public and spec.group_by:
        assert spec.keys is not None
        kcols = []
        for j, c in enumerate(spec.group_by):
            vals = [k[j] for k in spec.keys]
            kcols.append(f"unnest({prm.add(vals, _LIST_TYPE[types[c]])}) AS k{j}")
        kcols.append(f"unnest(range({len(spec.keys)})) AS gid")
        joins.insert(0, f"JOIN (SELECT {', '.join(kcols)}) AS _keys ON " + " AND ".join(
            f"{_q(c)} = _keys.k{j}" for j, c in enumerate(spec.group_by)))
        sel.append("_keys.gid AS _g")
        gcols = ["_g"]
    elif public:
        sel.append("0 AS _g")
        gcols = ["_g"]
    else:
        sel += [f"{_q(c)} AS k{j}" for j, c in enumerate(spec.group_by)]
        gcols = [f"k{j}" for j in range(len(spec.group_by))]
    for n, m in enumerate(spec.measures):
        if isinstance(m, ValueSum | BucketCount):
            sel.append(f"{_row_expr(m, types, prm, joins, n)} AS _m{n}")
    base = (f"SELECT {', '.join(sel)} FROM {source} {' '.join(joins)}"
            + (f" WHERE {' AND '.join(where)}" if where else ""))
    g = ", ".join(gcols)
    idx = {m.name: n for n, m in enumerate(spec.measures)}
    out_cols: list[str] = []
    if spec.unit is None:
        for n, m in enumerate(spec.measures):
            if isinstance(m, RowCount):
                out_cols.append(f"count(*) AS _o{n}")
            elif isinstance(m, BucketCount):
                out_cols.append(f"histogram(_m{n}) FILTER (WHERE _m{n} >= 0) AS _o{n}")
            elif m.level == Level.ROW:
                out_cols.append(f"sum(_m{n}) AS _o{n}")
            else:
                out_cols.append(f"sum(least(greatest(_m{n}, {m.unit_lower}), {m.unit_upper}))"
                                f" AS _o{n}")
        sql = (f"WITH _b AS ({base}) SELECT {', '.join([g, 'count(*) AS _units', *out_cols])}"
               f" FROM _b GROUP BY {g}")
        return sql, prm.values
    # per (unit, group) cells, then the L0 choice of each unit's groups
    cell_cols = ["count(*) AS _n"]
    for n, m in enumerate(spec.measures):
        if isinstance(m, ValueSum) and m.level == Level.UNIT:
            cell_cols.append(f"least(greatest(sum(_m{n}), {m.unit_lower}), {m.unit_upper}) "
                             f"AS _s{n}")
    # the cells are grouped on the raw unit and group; their 64-bit encodings h(u), h(g)
    # are functions of them, computed once per cell rather than once per row
    cells = f"SELECT _u, {g}, {', '.join(cell_cols)} FROM _b GROUP BY _u, {g}"
    cells = (f"SELECT *, {_encode('_u', types[spec.unit])} AS _hu, "
             f"{_group_hash(spec, types)} FROM ({cells})")
    for j in range(0 if public else len(spec.group_by)):  # h(g): one mixer layer per key
        cells = (f"SELECT * EXCLUDE (_e{j}) REPLACE ({_mix(f'xor(_hg, _e{j})')} AS _hg) "
                 f"FROM ({cells})")
    a0 = _mix("xor(_hu, " + prm.add(k0, "UBIGINT") + ")")
    # the window spills under a small memory limit: it carries only what later steps read
    # (h(u) for the L-inf priorities, h(g) unless it is the public key's index _g)
    row_ms = spec.row_measures
    drop = ["_a0"] + ([] if row_ms else ["_hu"]) + (["_hg"] if public and not row_ms else [])
    tie = "_g" if "_hg" in drop else "_hg"  # _hg = CAST(_g AS UBIGINT), _g >= 0: same order
    cells = (f"SELECT * EXCLUDE ({', '.join(drop)}), {_mix('xor(_a0, _hg)')} AS _p0 FROM "
             f"(SELECT *, {a0} AS _a0 FROM ({cells}))")
    kept = (f"SELECT * FROM _c QUALIFY row_number() OVER (PARTITION BY _u ORDER BY _p0, {tie})"
            f" <= {spec.max_groups}")
    L = spec.max_rows
    for n, m in enumerate(spec.measures):
        if isinstance(m, RowCount):
            out_cols.append(f"sum({'_n' if L is None else f'least(_n, {L})'}) AS _o{n}"
                            if m.level == Level.ROW else f"count(*) AS _o{n}")
        elif isinstance(m, ValueSum) and m.level == Level.UNIT:
            out_cols.append(f"sum(_s{n}) AS _o{n}")
    main = f"SELECT {', '.join([g, 'count(*) AS _units', *out_cols])} FROM _k GROUP BY {g}"
    ctes = [f"_b AS ({base})", f"_c AS ({cells})", f"_k AS ({kept})"]
    if not row_ms:
        return f"WITH {', '.join(ctes)} {main}", prm.values
    # L-inf: rank each kept cell's rows by content, keep the L-inf smallest priorities
    order = ", ".join(f"_m{idx[m.name]}" for m in row_ms)
    a1 = _mix("xor(_k._hu, " + prm.add(k1, "UBIGINT") + ")")
    on = " AND ".join(f"_b.{c} IS NOT DISTINCT FROM _k.{c}" for c in ["_u", *gcols])
    part = ", ".join(f"_b.{c}" for c in ["_u", *gcols])
    ranked = (f"SELECT _b.*, _k._hg AS _hg, {a1} AS _a1, row_number() OVER (PARTITION BY "
              f"{part} ORDER BY {order}) - 1 AS _i FROM _b JOIN _k ON {on}")
    ranked = f"SELECT *, {_mix('xor(_a1, _hg)')} AS _b1 FROM ({ranked})"
    rows = (f"SELECT * FROM _r QUALIFY row_number() OVER (PARTITION BY _u, {g} "
            f"ORDER BY {_mix('xor(_b1, CAST(_i AS UBIGINT))')}, _i) <= {L}")
    row_cols = []
    for m in row_ms:
        n = idx[m.name]
        row_cols.append(f"histogram(_m{n}) FILTER (WHERE _m{n} >= 0) AS _o{n}"
                        if isinstance(m, BucketCount) else f"sum(_m{n}) AS _o{n}")
    ctes += [f"_r AS ({ranked})", f"_rk AS ({rows})",
             f"_rs AS (SELECT {g}, {', '.join(row_cols)} FROM _rk GROUP BY {g})",
             f"_m AS ({main})"]
    gj = " AND ".join(f"_m.{c} IS NOT DISTINCT FROM _rs.{c}" for c in gcols)
    pick = [f"_m.{c}" for c in gcols] + ["_m._units"] + [
        f"{'_rs' if m in row_ms else '_m'}._o{n}" for n, m in enumerate(spec.measures)]
    sql = f"WITH {', '.join(ctes)} SELECT {', '.join(pick)} FROM _m LEFT JOIN _rs ON {gj}"
    return sql, prm.values


def _key_range(spec: BoundingSpec, types: dict[str, ColumnType]) -> int | None:
    """``lo`` when the public keys are one integer column's values ``lo, lo + 1, ...`` in
    this order (key ``i`` is ``lo + i``, so its id is the value minus ``lo``), else None."""
    if spec.keys is None or len(spec.group_by) != 1 or not spec.keys:
        return None
    if types[spec.group_by[0]] != ColumnType.INTEGER:
        return None
    vals = [v for k in spec.keys if type(v := k[0]) is int]
    if len(vals) != len(spec.keys):
        return None
    lo = vals[0]
    if lo < -(2**63) or lo + len(vals) - 1 >= 2**63:
        return None
    return lo if all(v == lo + i for i, v in enumerate(vals)) else None


def _group_hash(spec: BoundingSpec, types: dict[str, ColumnType]) -> str:
    """``_hg`` of a cell (public keys: the key's index; observed keys: 0, and the key
    encodings ``_e<j>`` that the mixer layers fold into it), as select items."""
    if spec.keys is not None:
        return "CAST(_g AS UBIGINT) AS _hg"
    enc = [f"{_encode(f'k{j}', types[c])} AS _e{j}" for j, c in enumerate(spec.group_by)]
    return ", ".join([*enc, "CAST(0 AS UBIGINT) AS _hg"])
