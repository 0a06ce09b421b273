"""Contribution bounding keeps a uniformly random subset of a unit's groups (L0) and of its
rows in a group (L-inf) on the default engines -- DuckDB (files) and pandas/polars (frames)
-- never the first rows in file order nor the first by content (issue 12 item 3). The
row-order tests show the choice does not depend on the order; this shows it is uniform: a
choice by content (the smallest values, the first groups) is order-free too, and fails
here. The same check on Spark is in the slow suite (test_engine_spark.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import polars as pl
import pytest
from scipy.stats import chisquare

from dpsieve.queries import BoundingSpec, Column, ColumnType, Level, RowCount
from dpsieve.queries.engine import Bins, BucketCount
from dpsieve.queries.engines import DuckDBEngine, PandasEngine, PolarsEngine

UNITS = 3000
GROUPS = ("a", "b", "c", "d", "e", "f")
COLS = (Column("pid", ColumnType.INTEGER), Column("g", ColumnType.STRING),
        Column("v", ColumnType.FLOAT))


def _frame() -> pd.DataFrame:
    # file order = content order: each unit's groups a..f, group a's values 0..4 ascending
    rows = [{"pid": u, "g": g, "v": float(j)} for u in range(UNITS) for g in GROUPS
            for j in (range(5) if g == "a" else range(1))]
    return pd.DataFrame(rows)


def _engine(kind: str, tmp: Path) -> Any:
    df = _frame()
    if kind == "pandas":
        return PandasEngine(df)
    if kind == "polars":
        return PolarsEngine(pl.from_pandas(df))
    path = tmp / "t.parquet"
    duckdb.from_df(df).write_parquet(str(path))
    return DuckDBEngine(path)


@pytest.mark.parametrize("kind", ["duckdb", "pandas", "polars"])
@pytest.mark.parametrize("seed", [2024, 7])
def test_kept_groups_and_rows_are_uniform(kind: str, seed: int, tmp_path: Path) -> None:
    spec = BoundingSpec((RowCount("units", Level.UNIT),
                         BucketCount("b", "v", bins=Bins(1.0, 0.0, 4.0, 0, 4, 5))),
                        ("g",), tuple((g,) for g in GROUPS), unit="pid", max_groups=2,
                        max_rows=2, seed=seed)
    out = _engine(kind, tmp_path).aggregate(spec)
    kept = out.values["units"]
    assert int(kept.sum()) == 2 * UNITS  # every unit keeps exactly L0 = 2 of its 6 groups
    assert chisquare(kept).pvalue > 1e-4, kept  # each group kept w.p. 1/3
    a_rows = out.values["b"][0]  # group a's rows in the units that kept a
    assert int(a_rows.sum()) == 2 * int(kept[0])  # L-inf = 2 of its 5 rows
    assert chisquare(a_rows).pvalue > 1e-4, a_rows  # each value kept w.p. 2/5
