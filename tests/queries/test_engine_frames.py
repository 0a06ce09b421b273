"""The pandas and polars engines agree with the reference engine, and ignore row order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
import polars as pl
from engine_conformance import COLUMNS, check_engine, random_spec, random_table

from dpsieve.queries import Column, ColumnType
from dpsieve.queries.engines import PandasEngine, PolarsEngine

_PD = {ColumnType.INTEGER: "Int64", ColumnType.FLOAT: "float64", ColumnType.STRING: "str",
       ColumnType.BOOLEAN: "boolean"}
_PL = {ColumnType.INTEGER: pl.Int64, ColumnType.FLOAT: pl.Float64,
       ColumnType.STRING: pl.String, ColumnType.BOOLEAN: pl.Boolean}


def pandas_frame(rows: list[dict[str, Any]], columns: Sequence[Column]) -> pd.DataFrame:
    return pd.DataFrame({c.name: pd.array([r[c.name] for r in rows], dtype=_PD[c.type])
                         for c in columns})


def polars_frame(rows: list[dict[str, Any]], columns: Sequence[Column]) -> pl.DataFrame:
    return pl.DataFrame({c.name: pl.Series(c.name, [r[c.name] for r in rows],
                                           dtype=_PL[c.type], strict=False) for c in columns})


def test_pandas_engine_matches_the_reference_on_random_specs() -> None:
    check_engine(lambda rows, cols: PandasEngine(pandas_frame(rows, cols)), cases=40, seed=1)


def test_polars_engine_matches_the_reference_on_random_specs() -> None:
    check_engine(lambda rows, cols: PolarsEngine(polars_frame(rows, cols)), cases=40, seed=2)


def test_frame_engines_report_public_types() -> None:
    df = pandas_frame(random_table(np.random.default_rng(0), 5), COLUMNS)
    assert PandasEngine(df).columns() == COLUMNS
    assert PolarsEngine(polars_frame(random_table(np.random.default_rng(0), 5),
                                     COLUMNS)).columns() == COLUMNS


def test_row_order_does_not_change_frame_aggregates() -> None:
    rng = np.random.default_rng(12)
    for _ in range(8):
        rows = random_table(rng, 40)
        shuffled = [rows[i] for i in rng.permutation(len(rows))]
        for make in (lambda r: PandasEngine(pandas_frame(r, COLUMNS)),
                     lambda r: PolarsEngine(polars_frame(r, COLUMNS))):
            spec = random_spec(rng, rows)
            assert make(rows).aggregate(spec).same_as(make(shuffled).aggregate(spec))
