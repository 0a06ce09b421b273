"""The DuckDB engine agrees with the reference engine, from tables, Parquet and CSV files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from engine_conformance import COLUMNS, check_engine, random_spec, random_table

from dpsieve.queries import BoundingSpec, Column, ColumnType, Level, RowCount, ValueSum
from dpsieve.queries.engines import DuckDBEngine, ReferenceEngine

_SQL_TYPE = {ColumnType.INTEGER: "BIGINT", ColumnType.FLOAT: "DOUBLE",
             ColumnType.STRING: "VARCHAR", ColumnType.BOOLEAN: "BOOLEAN"}


def duckdb_table(rows: list[dict[str, Any]], columns: Sequence[Column]) -> Any:
    con = duckdb.connect()
    cols = ", ".join(f'"{c.name}" {_SQL_TYPE[c.type]}' for c in columns)
    con.execute(f"CREATE TABLE t ({cols})")
    if rows:
        marks = ", ".join("?" for _ in columns)
        con.executemany(f"INSERT INTO t VALUES ({marks})",
                        [[r[c.name] for c in columns] for r in rows])
    return con


def test_duckdb_engine_matches_the_reference_on_random_specs() -> None:
    check_engine(lambda rows, cols: DuckDBEngine(connection=duckdb_table(rows, cols),
                                                 table="t"), cases=20)


class _RankTwice(DuckDBEngine):
    """The engine on its fallback SQL only: row-level sums ranked twice (the SQL a plan
    runs again when the one-ranking SQL runs out of memory)."""

    def _attempts(self, spec: BoundingSpec) -> list[tuple[str | None, bool]]:
        return [(None, True)]


def test_both_sqls_of_row_level_sums_match_the_reference() -> None:
    """The one-ranking SQL (the cells' min_by of the kept rows) and the fallback that
    ranks the rows twice give the reference's aggregates: running the fallback after an
    out-of-memory error releases the same values."""
    check_engine(lambda rows, cols: _RankTwice(connection=duckdb_table(rows, cols),
                                               table="t"), cases=20, seed=7)
    check_engine(lambda rows, cols: DuckDBEngine(connection=duckdb_table(rows, cols),
                                                 table="t"), cases=20, seed=7)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_duckdb_engine_reads_files_without_loading_them(fmt: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = random_table(rng, 50)
    con = duckdb_table(rows, COLUMNS)
    path = tmp_path / f"t.{fmt}"
    con.execute(f"COPY t TO '{path}' (FORMAT {fmt})")
    # a CSV's types are the owner's declarations (text until declared)
    eng = DuckDBEngine(path, types={c.name: c.type for c in COLUMNS} if fmt == "csv" else None)
    types = {c.name: c.type for c in eng.columns()}
    assert types["pid"] == ColumnType.INTEGER
    assert types["city"] == ColumnType.STRING
    ref = ReferenceEngine(rows, COLUMNS)
    for _ in range(10):
        spec = random_spec(rng, rows)
        if fmt == "csv":  # CSV has no NaN/inf distinction from text: compare on y only
            spec = BoundingSpec((RowCount("n"), ValueSum("s", "y", 0.5, -3.0, 9.0, -6, 18)),
                                spec.group_by, spec.keys, (), spec.unit, spec.max_groups,
                                spec.max_rows or 2, spec.seed)
        assert eng.aggregate(spec).same_as(ref.aggregate(spec))


def test_unit_level_only_plan_has_no_row_window() -> None:
    spec = BoundingSpec((RowCount("n", Level.UNIT),
                         ValueSum("s", "x", 1.0, -4.0, 4.0, -4, 4, Level.UNIT, -6, 6)),
                        ("city",), (("a",), ("b",)), unit="pid", max_groups=2)
    sql, _ = DuckDBEngine(connection=duckdb_table([], COLUMNS), table="t").sql(spec)
    assert "_i" not in sql
    assert sql.count("row_number()") == 1


def test_row_order_does_not_change_the_aggregates() -> None:
    """Sampling keys on values and content ranks, never on file positions."""
    rng = np.random.default_rng(11)
    for _ in range(6):
        rows = random_table(rng, 40)
        shuffled = [rows[i] for i in rng.permutation(len(rows))]
        a = DuckDBEngine(connection=duckdb_table(rows, COLUMNS), table="t")
        b = DuckDBEngine(connection=duckdb_table(shuffled, COLUMNS), table="t")
        for _ in range(3):
            spec = random_spec(rng, rows)
            assert a.aggregate(spec).same_as(b.aggregate(spec))


# -- keep_open: one database per file across calls (the service's engines) ---------------

_KEPT_MODES = {  # how a kept engine holds the table
    "arrays": {},                                    # numpy columns (the four basic types)
    "copy": {"extra_column": True},                  # a DATE column: a copy in DuckDB
    "stream": {"copy_max_bytes": 0},                 # read from the file on every call
}


def _kept_engine(rows: list[dict[str, Any]], columns: Sequence[Column], path: Path,
                 mode: str) -> DuckDBEngine:
    con = duckdb_table(rows, columns)
    if _KEPT_MODES[mode].get("extra_column"):
        con.execute("ALTER TABLE t ADD COLUMN day DATE DEFAULT DATE '2026-01-02'")
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    eng = DuckDBEngine(path, keep_open=True,
                       copy_max_bytes=int(_KEPT_MODES[mode].get("copy_max_bytes", 2**26)))
    eng.columns()  # load it
    return eng


@pytest.mark.parametrize("mode", sorted(_KEPT_MODES))
def test_kept_engine_matches_the_reference_on_random_specs(mode: str, tmp_path: Path) -> None:
    counter = iter(range(10**6))

    def make(rows: list[dict[str, Any]], cols: Sequence[Column]) -> DuckDBEngine:
        return _kept_engine(rows, cols, tmp_path / f"t{next(counter)}.parquet", mode)

    check_engine(make, cases=15, seed=3)


@pytest.mark.parametrize("mode", sorted(_KEPT_MODES))
def test_kept_engine_holds_the_table_as_stated(mode: str, tmp_path: Path) -> None:
    rows = random_table(np.random.default_rng(2), 30)
    kept = _kept_engine(rows, COLUMNS, tmp_path / "t.parquet", mode)._load()
    assert (kept.arrays is not None) == (mode == "arrays")
    assert (kept.source == "_dpsieve_copy") == (mode == "copy")
    if kept.arrays is not None:  # shared by concurrent queries: read-only
        col = kept.arrays[0]["x"]
        assert not col.values.flags.writeable
        assert not col.missing.flags.writeable


def _count(eng: DuckDBEngine) -> int:
    return int(eng.aggregate(BoundingSpec((RowCount("n"),), (), ((),))).values["n"][0])


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
@pytest.mark.parametrize("mode", sorted(_KEPT_MODES))
def test_kept_engine_reads_a_changed_file_again(fmt: str, mode: str, tmp_path: Path) -> None:
    """A file rewritten in place, or replaced by another (rename), is read again by the
    next call: same size and the same second included (the stamp has nanoseconds, the
    inode and the change time)."""
    path = tmp_path / f"t.{fmt}"
    extra = ", DATE '2026-01-02' AS day" if mode == "copy" else ""

    def write(n: int, target: Path) -> None:
        con = duckdb.connect()
        con.execute(f"COPY (SELECT i AS a, i * 2 AS b{extra} FROM range({n}) r(i)) TO "
                    f"'{target}' (FORMAT {fmt})")

    write(3, path)
    eng = DuckDBEngine(path, keep_open=True,
                       copy_max_bytes=int(_KEPT_MODES[mode].get("copy_max_bytes", 2**26)))
    assert _count(eng) == 3
    assert {c.name for c in eng.columns()} >= {"a", "b"}
    write(7, path)  # in place
    assert _count(eng) == 7
    write(5, tmp_path / f"new.{fmt}")
    (tmp_path / f"new.{fmt}").replace(path)  # another inode
    assert _count(eng) == 5
    con = duckdb.connect()  # another schema: the columns are read again too
    con.execute(f"COPY (SELECT 'x' AS s FROM range(4)) TO '{path}' (FORMAT {fmt})")
    assert [c.name for c in eng.columns()] == ["s"]
    assert _count(eng) == 4


def test_kept_engine_refuses_a_file_gone_since(tmp_path: Path) -> None:
    from dpsieve.errors import ValidationError

    path = tmp_path / "t.csv"
    path.write_text("a\n1\n2\n")
    eng = DuckDBEngine(path, keep_open=True)
    assert _count(eng) == 2
    path.unlink()
    with pytest.raises(ValidationError) as e:
        eng.columns()
    assert e.value.parameter == "data"


def test_kept_engine_csv_keeps_the_text_cast_semantics(tmp_path: Path) -> None:
    """A cell that does not parse as its column's declared type is missing (TRY_CAST),
    as when the file is read per call: the kept copy holds the same values."""
    path = tmp_path / "t.csv"
    lines = ["v,s"] + [f"{i % 100},{'ab'[i % 2]}" for i in range(60000)] + ["oops,a", ",b"]
    path.write_text("\n".join(lines) + "\n")
    types = {"v": "integer"}
    fresh, kept = DuckDBEngine(path, types=types), DuckDBEngine(path, keep_open=True,
                                                                types=types)
    assert {c.name: c.type for c in kept.columns()}["v"] == ColumnType.INTEGER
    assert kept._load().arrays is not None
    spec = BoundingSpec((RowCount("n"), ValueSum("t", "v", 1.0, 0.0, 50.0, 0, 50)),
                        ("s",), (("a",), ("b",)), ())
    assert kept.columns() == fresh.columns()
    got = kept.aggregate(spec)
    assert got.same_as(fresh.aggregate(spec))
    assert list(got.values["n"]) == [30001, 30001]
    # 0..49 summed in full, 50..99 clipped to 50, per 100 rows; half of them per city
    assert sum(got.values["t"]) == 600 * (sum(range(50)) + 50 * 50)


def test_kept_engine_is_thread_safe(tmp_path: Path) -> None:
    """Concurrent calls on one kept engine (arrays, and the DuckDB copy through cursors)."""
    from concurrent.futures import ThreadPoolExecutor

    rng = np.random.default_rng(8)
    rows = random_table(rng, 60)
    ref = ReferenceEngine(rows, COLUMNS)
    specs = [random_spec(rng, rows) for _ in range(8)]
    want = [ref.aggregate(s) for s in specs]
    for mode in ("arrays", "copy"):
        eng = _kept_engine(rows, COLUMNS, tmp_path / f"{mode}.parquet", mode)

        def same(i: int, eng: DuckDBEngine = eng) -> bool:
            return eng.aggregate(specs[i % 8]).same_as(want[i % 8])
        with ThreadPoolExecutor(8) as pool:
            got = list(pool.map(same, range(64)))
        assert all(got)


@pytest.mark.parametrize("keys", [(-2, -1, 0, 1), (0,), (1, 0, -1), (-2, 0, 1)])
def test_integer_key_ranges_match_the_reference(keys: tuple[int, ...]) -> None:
    """Keys lo, lo + 1, ... (in order) compile to a range test instead of a join with the
    key list; other orders and gaps keep the join. Both give the reference's aggregates,
    with rows outside the range, NULL keys and a privacy unit."""
    rng = np.random.default_rng(7)
    cols = (Column("u", ColumnType.INTEGER), Column("k", ColumnType.INTEGER),
            Column("x", ColumnType.FLOAT))
    rows = [{"u": int(rng.integers(0, 6)), "k": None if rng.random() < 0.1 else
             int(rng.integers(-4, 4)), "x": float(np.round(rng.normal(1, 2), 2))}
            for _ in range(200)]
    spec = BoundingSpec((RowCount("n", Level.ROW),
                         ValueSum("s", "x", 0.25, -3.0, 3.0, -12, 12, Level.UNIT, -16, 16)),
                        ("k",), tuple((k,) for k in keys), (), "u", 2, 3, 12345)
    eng = DuckDBEngine(connection=duckdb_table(rows, cols), table="t")
    sql, _ = eng.sql(spec)
    contiguous = all(k == keys[0] + i for i, k in enumerate(keys))
    assert ("_dps_keys" in sql) != contiguous  # the join lists the key ids
    want = ReferenceEngine(rows, cols).aggregate(spec)
    got = eng.aggregate(spec)
    assert got.same_as(want), (want.sorted(), got.sorted())


@pytest.mark.parametrize("sql_type", ["UBIGINT", "HUGEINT", "INTEGER"])
def test_integer_key_range_on_wide_columns(sql_type: str) -> None:
    """The range test runs before the key's cast to BIGINT: values outside BIGINT (an
    unsigned or 128-bit column) are dropped, never an error after the spend."""
    con = duckdb.connect()
    con.execute(f'CREATE TABLE t ("u" BIGINT, "k" {sql_type})')
    big = {"UBIGINT": 2**64 - 1, "HUGEINT": 2**100, "INTEGER": 2**31 - 1}[sql_type]
    con.executemany("INSERT INTO t VALUES (?, ?)",
                    [[1, 0], [1, 1], [2, big], [3, 2], [3, None], [4, 1]])
    for lo in (0, 1):
        spec = BoundingSpec((RowCount("n", Level.ROW),), ("k",),
                            tuple((k,) for k in range(lo, 3)), (), "u", 2, 3, 9)
        got = DuckDBEngine(connection=con, table="t").aggregate(spec)
        rows = [{"u": u, "k": k} for u, k in [(1, 0), (1, 1), (3, 2), (4, 1)]]
        cols = (Column("u", ColumnType.INTEGER), Column("k", ColumnType.INTEGER))
        assert got.same_as(ReferenceEngine(rows, cols).aggregate(spec))


@pytest.mark.parametrize("max_rows", [1, 1000, 1001, 10**6, 2**40])
def test_row_level_sums_run_for_any_max_rows(max_rows: int) -> None:
    """The SQL is total for every public max_rows: up to TOP_MAX_ROWS a cell's chosen rows
    are held by its aggregate (DuckDB refuses min_by's n >= 10^6), above it the rows are
    ranked twice; the reference's aggregates either way (cells of up to 1,500 rows)."""
    rows = [{"u": i % 3, "g": i % 2, "v": float((i * 7919) % 101)} for i in range(4500)]
    cols = [Column("u", ColumnType.INTEGER), Column("g", ColumnType.INTEGER),
            Column("v", ColumnType.FLOAT)]
    spec = BoundingSpec((RowCount("n", Level.ROW), ValueSum("s", "v", 1.0, 0.0, 100.0, 0, 100)),
                        group_by=("g",), keys=((0,), (1,)), unit="u", max_groups=2,
                        max_rows=max_rows, seed=11)
    got = DuckDBEngine(connection=duckdb_table(rows, cols), table="t").aggregate(spec)
    want = ReferenceEngine(rows, cols).aggregate(spec)
    assert got.same_as(want)
    assert int(got.values["n"].sum()) == min(max_rows, 750) * 6


@pytest.mark.parametrize(("row_lower", "row_upper"),
                         [(-(2**31), 2**31 - 1), (-(2**31) - 1, 2**31), (0, 2**40)])
def test_row_integers_at_the_int32_edge_match_the_reference(row_lower: int,
                                                            row_upper: int) -> None:
    """Row integers whose range fits INTEGER are held as INTEGER (a narrower sort and
    spill), the others as BIGINT; both, at the range's ends and beyond them, give the
    reference's aggregates on both SQLs (public keys and observed keys)."""
    rng = np.random.default_rng(3)
    rows = random_table(rng, 60)
    edge = [float(row_lower), float(row_upper), float(row_lower) - 5.0, float(row_upper) + 5.0,
            3e12, -3e12]
    for i, r in enumerate(rows):
        if i % 3 == 0:
            r["x"] = edge[i % len(edge)]
    g = 1.0
    for keys in ((("a",), ("b",), ("c",), ("é",)), None):
        spec = BoundingSpec(
            (RowCount("n"), ValueSum("s", "x", g, float(row_lower) - 10, float(row_upper) + 10,
                                     row_lower, row_upper)),
            ("city",), keys, unit="pid", max_groups=2, max_rows=2, seed=5)
        ref = ReferenceEngine(rows, COLUMNS).aggregate(spec)
        for eng in (DuckDBEngine, _RankTwice):
            got = eng(connection=duckdb_table(rows, COLUMNS), table="t").aggregate(spec)
            assert got.same_as(ref)
        sql, _ = DuckDBEngine(connection=duckdb_table([], COLUMNS), table="t").sql(spec)
        assert ("AS INTEGER) AS _m1" in sql) == (row_lower >= -(2**31) and row_upper < 2**31)


@pytest.mark.parametrize("keys", [(("a",), ("b",)), None])
def test_cells_at_the_row_bound_keep_the_reference_rows_on_every_seed(
        keys: tuple[tuple[str], ...] | None) -> None:
    """Both SQLs at the boundary between cells kept whole and cells sampled (cells of
    L-inf, L-inf + 1 and 2 L-inf + 3 rows, tied values, a NULL observed key, a unit of one
    row): each of 12 seeds keeps exactly the reference's rows, and the kept sums vary with
    the seed (a sample, not a fixed choice)."""
    L = 3
    cells = [(1, "a", L), (1, None, L + 1), (2, "a", 2 * L + 3), (2, "b", L + 1), (3, "b", 1)]
    rows = [{"u": u, "c": c, "v": float((7 * i) % 5 + 10 * j)}
            for j, (u, c, n) in enumerate(cells) for i in range(n)]
    cols = [Column("u", ColumnType.INTEGER), Column("c", ColumnType.STRING),
            Column("v", ColumnType.FLOAT)]
    ref = ReferenceEngine(rows, cols)
    for make in (DuckDBEngine, _RankTwice):
        eng = make(connection=duckdb_table(rows, cols), table="t")
        sums: set[float] = set()
        for seed in range(12):
            spec = BoundingSpec((RowCount("n"), ValueSum("s", "v", 1.0, 0.0, 100.0, 0, 100)),
                                ("c",), keys, unit="u", max_groups=2, max_rows=L, seed=seed)
            got = eng.aggregate(spec)
            assert got.same_as(ref.aggregate(spec)), (make, seed)
            sums.add(float(got.values["s"].sum()))
        assert len(sums) > 1
