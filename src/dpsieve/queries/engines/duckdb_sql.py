"""The SQL side of the DuckDB engine: a :class:`BoundingSpec` compiled to one DuckDB SQL
statement (:func:`compile_sql`), and DuckDB's column types mapped to the schema's.

Every constant from a query (bounds, categories, keys, the sampling key) is a bound
parameter, never text in the SQL. The statement is **total**: no value of any row can
make it fail, so a failure never tells whether a row is present.

* Constants are cast to the column's own storage type (``CAST($p AS INTEGER)`` on an
  INTEGER column): DuckDB would otherwise cast between the column's type and the
  constant's on the rows a comparison reaches, and fail on some of them. A constant
  outside the storage type's range (refused before the spend, :func:`dpsieve.queries.
  schema.integer_range`; possible here only if the table changed since) is equal to no
  value and compiled to the comparison's constant outcome, never cast.
* Data columns are always qualified with the source's alias (``"_dpsieve_src"."v"``),
  and every internal name is one of ours, so no column name can be ambiguous with an
  internal one.
* Casts of row values that could fail are replaced: a UHUGEINT unit is encoded without a
  cast to HUGEINT, the range test's projection runs under a CASE that only reads values
  inside the range.

The engine that runs the SQL (memory limits, kept tables, batches) is
:mod:`dpsieve.queries.engines.duckdb`.
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
from dpsieve.queries.schema import Column, ColumnType, KeyValue, integer_range

__all__ = ["compile_sql", "duckdb_column_type"]


_INT = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
        "UINTEGER", "UBIGINT", "UHUGEINT")
_FLOAT = ("FLOAT", "DOUBLE", "REAL")
_SCALAR_TYPE = {ColumnType.INTEGER: "BIGINT", ColumnType.FLOAT: "DOUBLE",
                ColumnType.STRING: "VARCHAR", ColumnType.BOOLEAN: "BOOLEAN"}
#: The largest ``max_rows`` whose chosen rows a cell's aggregate holds (``min_by(.., n)``:
#: DuckDB refuses n >= 10^6, and the state of a cell grows with n); above it the rows are
#: ranked twice (:func:`compile_sql`).
TOP_MAX_ROWS = 1000
#: The alias of the table the statement reads (data columns are qualified with it).
SRC = '"_dpsieve_src"'


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


def _dc(name: str) -> str:
    """A data column, qualified with the source's alias."""
    return f"{SRC}.{_q(name)}"


def _const_type(col: Column) -> str:
    """The SQL type a constant compared with ``col`` is cast to: the column's own integer
    storage type (so DuckDB never casts the column's values), else the type's scalar."""
    if col.type == ColumnType.INTEGER and (col.storage or "") in _INT:
        return str(col.storage)
    return _SCALAR_TYPE[col.type]


def _fits(v: KeyValue, col: Column) -> bool:
    """Whether ``v`` is a value of ``col``'s type that its storage type can hold."""
    t = col.type
    if t == ColumnType.INTEGER:
        if not isinstance(v, int) or isinstance(v, bool):
            return False
        lo, hi = integer_range(col.storage if (col.storage or "") in _INT else None)
        return lo <= v <= hi
    if t == ColumnType.FLOAT:
        return isinstance(v, float)
    if t == ColumnType.STRING:
        return isinstance(v, str)
    return isinstance(v, bool) and t == ColumnType.BOOLEAN


def _bindable(v: KeyValue, col: Column) -> Any:
    """``v`` as bound: integers of the 128-bit types as decimal text (DuckDB binds a
    Python int as HUGEINT at most; the cast of the text to the storage type is exact)."""
    if col.type == ColumnType.INTEGER and _const_type(col) in ("HUGEINT", "UHUGEINT"):
        return str(v)
    return v


class _Params:
    """Named parameters ``$p0, $p1, ...`` with their SQL type casts."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}

    def add(self, value: Any, sql_type: str) -> str:
        name = f"p{len(self.values)}"
        self.values[name] = value
        return f"CAST(${name} AS {sql_type})"

    def const(self, value: KeyValue, col: Column) -> str:
        """A constant of ``col`` (checked to fit by the caller)."""
        return self.add(_bindable(value, col), _const_type(col))

    def consts(self, values: Sequence[KeyValue], col: Column) -> str:
        """A list of constants of ``col`` (each checked to fit by the caller)."""
        return self.add([_bindable(v, col) for v in values], _const_type(col) + "[]")


def _mix(x: str) -> str:
    """The mixer of :mod:`dpsieve.queries._mix` on a UBIGINT expression (inlined; DuckDB
    computes the products in UHUGEINT, masked back to 64 bits)."""
    def mul(e: str, c: int) -> str:
        return f"CAST((CAST({e} AS UHUGEINT) * {c}) & {MASK64} AS UBIGINT)"

    def xs(e: str, s: int) -> str:
        return f"xor({e}, ({e}) >> {s})"

    return xs(mul(xs(mul(xs(x, 27), C1), 33), C2), 27)


def _encode(col: str, c: Column) -> str:
    """The 64-bit encoding of a unit or key value (``_mix.encode``: an integer's two's
    complement low 64 bits) as UBIGINT SQL. A UHUGEINT is masked as it is (a cast to
    HUGEINT fails above 2^127 - 1); every other integer type fits HUGEINT."""
    ctype = c.type
    if ctype == ColumnType.STRING:
        e = f"md5_number_lower({col})"
    elif ctype == ColumnType.BOOLEAN:
        e = f"CAST({col} AS UBIGINT)"
    elif c.storage == "UHUGEINT":
        e = f"CAST({col} & CAST({MASK64} AS UHUGEINT) AS UBIGINT)"
    else:
        e = f"CAST(CAST({col} AS HUGEINT) & {MASK64} AS UBIGINT)"
    return f"(CASE WHEN {col} IS NULL THEN CAST({NULL_CODE} AS UBIGINT) ELSE {e} END)"


def _missing(col: str, ctype: ColumnType) -> str:
    return f"({col} IS NULL OR isnan({col}))" if ctype == ColumnType.FLOAT else (
        f"({col} IS NULL)")


def _predicate(p: Predicate, cols: dict[str, Column], prm: _Params) -> str:
    col = cols[p.column]
    c = _dc(p.column)
    miss = _missing(c, col.type)
    present = f"(NOT {miss})"
    if p.op == Op.IS_NULL:
        return miss
    if p.op == Op.NOT_NULL:
        return present
    if p.op in (Op.IN, Op.NOT_IN):
        vals = p.value if isinstance(p.value, tuple) else (p.value,)
        fit = [v for v in vals if _fits(v, col)]  # the others are equal to no value
        if not fit:
            return "FALSE" if p.op == Op.IN else present
        neg = "NOT " if p.op == Op.NOT_IN else ""
        return f"({present} AND {neg}list_contains({prm.consts(fit, col)}, {c}))"
    v = p.value
    if isinstance(v, tuple) or not _fits(v, col):
        return _constant_outcome(p, col, present)
    op = {"==": "=", "!=": "<>"}.get(p.op.value, p.op.value)
    return f"({present} AND {c} {op} {prm.const(v, col)})"


def _constant_outcome(p: Predicate, col: Column, present: str) -> str:
    """The outcome of ``column op v`` for a ``v`` no value of the column equals: an
    integer beyond the storage type's range orders above (or below) every value; a value
    of another type (the table changed since the plan was checked) is only unequal."""
    v = p.value
    if p.op == Op.NE:
        return present
    if col.type == ColumnType.INTEGER and isinstance(v, int) and not isinstance(v, bool):
        above = v > integer_range(col.storage if (col.storage or "") in _INT else None)[1]
        if (p.op in (Op.LT, Op.LE) and above) or (p.op in (Op.GT, Op.GE) and not above):
            return present
    return "FALSE"


def _int32(lo: int, hi: int) -> bool:
    """Whether every integer of ``[lo, hi]`` fits DuckDB's INTEGER (a narrower sort key
    and row than BIGINT; sums of INTEGER are HUGEINT, exact)."""
    return lo >= -(2**31) and hi < 2**31


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


def _row_expr(m: ValueSum | BucketCount, cols: dict[str, Column], prm: _Params,
              joins: list[str], n: int) -> str:
    c = cols[m.column]
    col, t = _dc(m.column), c.type
    if isinstance(m, ValueSum):
        r = _lattice(col, t, m.granularity, m.lower, m.upper, m.row_lower, m.row_upper, prm)
        s = m.square_shift
        if s is None:  # narrowed when its range allows: the rows are sorted and held
            return f"CAST({r} AS INTEGER)" if _int32(m.row_lower, m.row_upper) else r
        return f"(({r}) * ({r}) + {1 << (s - 1)}) >> {s}" if s > 0 else f"({r}) * ({r})"
    if m.categories is not None:
        alias = f"_dps_cat{n}"
        # the categories that fit the column, with their indices (the others count no row)
        fit = [(i, v) for i, v in enumerate(m.categories) if _fits(v, c)]
        if not fit:
            return "CAST(-1 AS BIGINT)"
        vals = prm.consts([v for _, v in fit], c)
        ids = prm.add([i for i, _ in fit], "BIGINT[]")
        joins.append(f"LEFT JOIN (SELECT unnest({vals}) AS v, unnest({ids}) AS b) AS {alias}"
                     f" ON {col} = {alias}.v")
        return f"COALESCE({alias}.b, -1)"
    b = m.bins
    assert b is not None
    r = _lattice(col, t, b.granularity, b.lower, b.upper, b.row_lower, b.row_upper, prm)
    return f"((({r}) - {b.row_lower}) * {b.count}) // {b.row_upper - b.row_lower + 1}"


def compile_sql(spec: BoundingSpec, columns: Sequence[Column], source: str, *,
                rank_twice: bool = False) -> tuple[str, dict[str, Any]]:
    """(SQL, parameters) computing ``spec`` over ``source`` (a FROM clause item, read under
    the alias :data:`SRC`).

    Result columns: the group (``_g`` for public keys, else the key columns ``k0..``),
    ``_units``, then one column per measure (a MAP bucket -> count for buckets). Each
    mixer application reads column references only (one layer per step), so the SQL stays
    linear in the size of the spec. Total on every table (module docstring).

    Row-level sums under a privacy unit rank each cell's rows once and take the kept rows
    in the cells' aggregate (:func:`_top_rows`). ``rank_twice=True``, plans with buckets
    and plans with ``max_rows`` above :data:`TOP_MAX_ROWS` rank the kept cells' rows and
    then sort them again by priority: the same aggregates, in more time and less memory
    (each cell's chosen rows are never held).
    """
    cols = {c.name: c for c in columns}
    prm = _Params()
    k0, k1 = sampling_keys(spec.seed)
    joins: list[str] = []
    sel: list[str] = []
    where = [_predicate(p, cols, prm) for p in spec.where]
    public = spec.keys is not None
    if spec.unit is not None:
        uc = _dc(spec.unit)
        sel.append(f"{uc} AS _u")
        where.append(f"{uc} IS NOT NULL")
    lo = _key_range(spec, cols)
    if lo is not None:  # keys lo, lo + 1, ...: a range test, not a join (same rows, same ids)
        assert spec.keys is not None
        gc = cols[spec.group_by[0]]
        c = _dc(gc.name)
        test = (f"{c} BETWEEN {prm.const(lo, gc)} AND "
                f"{prm.const(lo + len(spec.keys) - 1, gc)}")
        where.append(test)
        # the key's index, read only inside the range (which fits BIGINT): never a failing
        # cast, whatever the order DuckDB evaluates the filter and the projection in
        # (an INTEGER when the keys' indices fit it: cells are grouped and sorted on it)
        gtype = "INTEGER" if _int32(0, len(spec.keys) - 1) else "BIGINT"
        sel.append(f"(CASE WHEN {test} THEN CAST(CAST({c} AS BIGINT) - "
                   f"{prm.add(lo, 'BIGINT')} AS {gtype}) END) AS _g")
        gcols = ["_g"]
    elif public and spec.group_by:
        assert spec.keys is not None
        # the keys every column can hold, with their ids (the others match no row)
        fit = [(i, k) for i, k in enumerate(spec.keys)
               if all(_fits(v, cols[c]) for v, c in zip(k, spec.group_by, strict=True))]
        if fit:
            kcols = [f"unnest({prm.consts([k[j] for _, k in fit], cols[c])}) AS k{j}"
                     for j, c in enumerate(spec.group_by)]
            kcols.append(f"unnest({prm.add([i for i, _ in fit], 'BIGINT[]')}) AS gid")
            joins.insert(0, f"JOIN (SELECT {', '.join(kcols)}) AS _dps_keys ON " + " AND ".join(
                f"{_dc(c)} = _dps_keys.k{j}" for j, c in enumerate(spec.group_by)))
            sel.append("_dps_keys.gid AS _g")
        else:
            where.append("FALSE")
            sel.append("CAST(0 AS BIGINT) AS _g")
        gcols = ["_g"]
    elif public:
        sel.append("0 AS _g")
        gcols = ["_g"]
    else:
        sel += [f"{_dc(c)} AS k{j}" for j, c in enumerate(spec.group_by)]
        gcols = [f"k{j}" for j in range(len(spec.group_by))]
    for n, m in enumerate(spec.measures):
        if isinstance(m, ValueSum | BucketCount):
            sel.append(f"{_row_expr(m, cols, prm, joins, n)} AS _m{n}")
    base = (f"SELECT {', '.join(sel)} FROM {source} AS {SRC} {' '.join(joins)}"
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
        sql = (f"WITH _dps_b AS ({base}) SELECT {', '.join([g, 'count(*) AS _units', *out_cols])}"
               f" FROM _dps_b GROUP BY {g}")
        return sql, prm.values
    # per (unit, group) cells, then the L0 choice of each unit's groups
    row_ms = spec.row_measures
    L = spec.max_rows
    top = (bool(row_ms) and not rank_twice and L is not None and L <= TOP_MAX_ROWS
           and not any(isinstance(m, BucketCount) for m in row_ms))
    cell_cols = ["count(*) AS _n"]
    for n, m in enumerate(spec.measures):
        if isinstance(m, ValueSum) and m.level == Level.UNIT:
            cell_cols.append(f"least(greatest(sum(_m{n}), {m.unit_lower}), {m.unit_upper}) "
                             f"AS _s{n}")
    rows_src = "_dps_b"
    if top:
        rows_src = _top_rows(spec, cols, prm, g, [idx[m.name] for m in row_ms], cell_cols)
    # the cells are grouped on the raw unit and group; their 64-bit encodings h(u), h(g)
    # are functions of them, computed once per cell rather than once per row
    cells = f"SELECT _u, {g}, {', '.join(cell_cols)} FROM {rows_src} GROUP BY _u, {g}"
    cells = (f"SELECT *, {_encode('_u', cols[spec.unit])} AS _hu, "
             f"{_group_hash(spec, cols)} FROM ({cells})")
    for j in range(0 if public else len(spec.group_by)):  # h(g): one mixer layer per key
        cells = (f"SELECT * EXCLUDE (_e{j}) REPLACE ({_mix(f'xor(_hg, _e{j})')} AS _hg) "
                 f"FROM ({cells})")
    a0 = _mix("xor(_hu, " + prm.add(k0, "UBIGINT") + ")")
    # the window spills under a small memory limit: it carries only what later steps read
    # (h(u) for the L-inf priorities, h(g) unless it is the public key's index _g)
    twice = bool(row_ms) and not top  # the rows are ranked after the L0 choice
    drop = ["_a0"] + ([] if twice else ["_hu"]) + (["_hg"] if public and not twice else [])
    tie = "_g" if "_hg" in drop else "_hg"  # _hg = CAST(_g AS UBIGINT), _g >= 0: same order
    cells = (f"SELECT * EXCLUDE ({', '.join(drop)}), {_mix('xor(_a0, _hg)')} AS _p0 FROM "
             f"(SELECT *, {a0} AS _a0 FROM ({cells}))")
    # ties of (p0, h(g)) (h collides: 128-bit keys equal modulo 2^64, hashed strings) are
    # broken by the key itself, missing last, as every engine does (the frame engines: codes
    # in value order, missing last): the choice is a function of the unit's own cells,
    # never of the scan order
    by_key = "" if tie == "_g" else "".join(f", {k} ASC NULLS LAST" for k in gcols)
    kept = (f"SELECT * FROM _dps_c QUALIFY row_number() OVER (PARTITION BY _u ORDER BY _p0, {tie}"
            f"{by_key}) <= {spec.max_groups}")
    for n, m in enumerate(spec.measures):
        if isinstance(m, RowCount):
            out_cols.append(f"sum({'_n' if L is None else f'least(_n, {L})'}) AS _o{n}"
                            if m.level == Level.ROW else f"count(*) AS _o{n}")
        elif isinstance(m, ValueSum) and m.level == Level.UNIT:
            out_cols.append(f"sum(_s{n}) AS _o{n}")
        elif top:  # the kept rows' lattice integers, summed exactly (HUGEINT)
            out_cols.append(f"sum(coalesce(list_sum(_r{n}), 0) + coalesce(_q{n}, 0)) AS _o{n}")
    main = f"SELECT {', '.join([g, 'count(*) AS _units', *out_cols])} FROM _dps_k GROUP BY {g}"
    ctes = [f"_dps_b AS ({base})", f"_dps_c AS ({cells})", f"_dps_k AS ({kept})"]
    if not twice:
        return f"WITH {', '.join(ctes)} {main}", prm.values
    # L-inf: rank each kept cell's rows by content, keep the L-inf smallest priorities
    order = ", ".join(f"_m{idx[m.name]}" for m in row_ms)
    a1 = _mix("xor(_dps_k._hu, " + prm.add(k1, "UBIGINT") + ")")
    on = " AND ".join(f"_dps_b.{c} IS NOT DISTINCT FROM _dps_k.{c}" for c in ["_u", *gcols])
    part = ", ".join(f"_dps_b.{c}" for c in ["_u", *gcols])
    ranked = (f"SELECT _dps_b.*, _dps_k._hg AS _hg, {a1} AS _a1, row_number() OVER (PARTITION BY "
              f"{part} ORDER BY {order}) - 1 AS _i FROM _dps_b JOIN _dps_k ON {on}")
    ranked = f"SELECT *, {_mix('xor(_a1, _hg)')} AS _b1 FROM ({ranked})"
    rows = (f"SELECT * FROM _dps_r QUALIFY row_number() OVER (PARTITION BY _u, {g} "
            f"ORDER BY {_mix('xor(_b1, CAST(_i AS UBIGINT))')}, _i) <= {L}")
    row_cols = []
    for m in row_ms:
        n = idx[m.name]
        row_cols.append(f"histogram(_m{n}) FILTER (WHERE _m{n} >= 0) AS _o{n}"
                        if isinstance(m, BucketCount) else f"sum(_m{n}) AS _o{n}")
    ctes += [f"_dps_r AS ({ranked})", f"_dps_rk AS ({rows})",
             f"_dps_rs AS (SELECT {g}, {', '.join(row_cols)} FROM _dps_rk GROUP BY {g})",
             f"_dps_m AS ({main})"]
    gj = " AND ".join(f"_dps_m.{c} IS NOT DISTINCT FROM _dps_rs.{c}" for c in gcols)
    pick = [f"_dps_m.{c}" for c in gcols] + ["_dps_m._units"] + [
        f"{'_dps_rs' if m in row_ms else '_dps_m'}._o{n}" for n, m in enumerate(spec.measures)]
    sql = f"WITH {', '.join(ctes)} SELECT {', '.join(pick)} FROM _dps_m LEFT JOIN _dps_rs ON {gj}"
    return sql, prm.values


def _top_rows(spec: BoundingSpec, cols: dict[str, Column], prm: _Params, g: str,
              ms: list[int], cell_cols: list[str]) -> str:
    """The rows of ``_dps_b`` ranked once, as a FROM item, and (appended to ``cell_cols``)
    the cells' aggregates of the kept rows of each row-level sum ``_m<n>`` (``n`` in ``ms``).

    L-inf keeps, of a cell's ``n`` rows ranked by content (``i = 0 .. n - 1``: one
    window), the L-inf of smallest priority ``p1(u, g, i)``. A cell's priorities are
    distinct (the mixer is a bijection of 64-bit words and ``i`` differs), so those rows
    are the cell aggregate ``min_by(_m, p1, L-inf)``: neither a second sort of the rows
    nor a join back to the cells. A cell of at most L-inf rows keeps them all: its sum is
    a plain ``sum`` (``_q<n>``) and no priority is computed for its rows; larger cells
    keep their L-inf values in a list (``_r<n>``).
    """
    L = spec.max_rows
    assert L is not None
    assert spec.unit is not None
    order = ", ".join(f"_m{n}" for n in ms)
    over = f"OVER (PARTITION BY _u, {g} ORDER BY {order} ROWS BETWEEN UNBOUNDED PRECEDING " \
           "AND UNBOUNDED FOLLOWING)"
    src = f"(SELECT *, row_number() {over} - 1 AS _i, count(*) {over} AS _nr FROM _dps_b)"
    big = f"_nr > {L}"
    # p1 of a large cell's rows, one mixer layer per step (each reads column references)
    public = spec.keys is not None
    enc = [] if public else [f"{_encode(f'k{j}', cols[c])} AS _f{j}"
                             for j, c in enumerate(spec.group_by)]
    k1 = prm.add(sampling_keys(spec.seed)[1], "UBIGINT")
    src = (f"(SELECT *, CASE WHEN {big} THEN xor({_encode('_u', cols[spec.unit])}, {k1}) END "
           "AS _x, " + ("CAST(_g AS UBIGINT)" if public else "CAST(0 AS UBIGINT)")
           + f" AS _h1{''.join(', ' + e for e in enc)} FROM {src})")
    for j in range(len(enc)):  # h(g): one mixer layer per key
        src = (f"(SELECT * EXCLUDE (_f{j}), xor(_h1, _f{j}) AS _y FROM {src})")
        src = f"(SELECT * EXCLUDE (_y) REPLACE ({_mix('_y')} AS _h1) FROM {src})"
    # each mixer reads one column (its argument is repeated within it), computed before the
    # cells' aggregate reads p1 (DuckDB does not share subexpressions of an aggregate's
    # arguments: p1 inlined there cost ~0.6 CPU s at 10M rows)
    src = f"(SELECT * EXCLUDE (_x), xor({_mix('_x')}, _h1) AS _x FROM {src})"
    src = f"(SELECT * EXCLUDE (_x), xor({_mix('_x')}, CAST(_i AS UBIGINT)) AS _x FROM {src})"
    src = f"(SELECT * EXCLUDE (_x), {_mix('_x')} AS _p1 FROM {src})"
    for n in ms:
        cell_cols += [f"min_by(_m{n}, _p1, {L}) FILTER (WHERE {big}) AS _r{n}",
                      f"sum(_m{n}) FILTER (WHERE NOT ({big})) AS _q{n}"]
    return src


def _key_range(spec: BoundingSpec, cols: dict[str, Column]) -> int | None:
    """``lo`` when the public keys are one integer column's values ``lo, lo + 1, ...`` in
    this order (key ``i`` is ``lo + i``, so its id is the value minus ``lo``), inside both
    BIGINT's range and the column's storage type's, else None."""
    if spec.keys is None or len(spec.group_by) != 1 or not spec.keys:
        return None
    col = cols[spec.group_by[0]]
    if col.type != ColumnType.INTEGER:
        return None
    vals = [v for k in spec.keys if type(v := k[0]) is int]
    if len(vals) != len(spec.keys):
        return None
    lo, hi = vals[0], vals[0] + len(vals) - 1
    if not (lo >= -(2**63) and hi < 2**63 and _fits(lo, col) and _fits(hi, col)):
        return None
    return lo if all(v == lo + i for i, v in enumerate(vals)) else None


def _group_hash(spec: BoundingSpec, cols: dict[str, Column]) -> str:
    """``_hg`` of a cell (public keys: the key's index; observed keys: 0, and the key
    encodings ``_e<j>`` that the mixer layers fold into it), as select items."""
    if spec.keys is not None:
        return "CAST(_g AS UBIGINT) AS _hg"
    enc = [f"{_encode(f'k{j}', cols[c])} AS _e{j}" for j, c in enumerate(spec.group_by)]
    return ", ".join([*enc, "CAST(0 AS UBIGINT) AS _hg"])
