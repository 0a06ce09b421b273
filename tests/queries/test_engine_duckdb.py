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


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_duckdb_engine_reads_files_without_loading_them(fmt: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    rows = random_table(rng, 50)
    con = duckdb_table(rows, COLUMNS)
    path = tmp_path / f"t.{fmt}"
    con.execute(f"COPY t TO '{path}' (FORMAT {fmt})")
    eng = DuckDBEngine(path)
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
