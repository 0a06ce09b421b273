"""Engines for frames already in memory: pandas and polars.

Both read only the columns a spec needs, with their missing masks, and hand them to the
vectorised core (:mod:`dpsieve.queries.engines._numpy`), which follows
docs/queries-engines.md exactly; only per-group aggregates come back. For tables larger
than memory use :class:`~dpsieve.queries.engines.duckdb.DuckDBEngine` on the file.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsieve._validation import fail
from dpsieve.queries.engine import Aggregates, BoundingSpec
from dpsieve.queries.engines._numpy import Col, aggregate_columns
from dpsieve.queries.schema import Column, ColumnType

__all__ = ["PandasEngine", "PolarsEngine"]

_FILL: dict[ColumnType, Any] = {ColumnType.INTEGER: 0, ColumnType.FLOAT: 0.0,
                                ColumnType.BOOLEAN: False, ColumnType.STRING: ""}
_DTYPE: dict[ColumnType, Any] = {ColumnType.INTEGER: np.int64, ColumnType.FLOAT: np.float64,
                                 ColumnType.BOOLEAN: np.bool_, ColumnType.STRING: object}


def pandas_column_type(dtype: Any) -> ColumnType:
    """The public type of a pandas dtype (``object`` columns are taken as strings)."""
    from pandas.api import types as pt  # type: ignore[import-untyped,unused-ignore]

    if pt.is_bool_dtype(dtype):
        return ColumnType.BOOLEAN
    if pt.is_integer_dtype(dtype):
        return ColumnType.INTEGER
    if pt.is_float_dtype(dtype):
        return ColumnType.FLOAT
    if pt.is_string_dtype(dtype) or pt.is_object_dtype(dtype):
        return ColumnType.STRING
    return ColumnType.OTHER


class PandasEngine:
    """A pandas DataFrame in memory."""

    name = "pandas"

    def __init__(self, frame: Any) -> None:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        if not isinstance(frame, pd.DataFrame):
            raise fail("data", "PandasEngine", "a pandas DataFrame", type(frame).__name__)
        self._df = frame

    def columns(self) -> tuple[Column, ...]:
        return tuple(Column(str(c), pandas_column_type(t))
                     for c, t in self._df.dtypes.items())

    def _col(self, name: str, ctype: ColumnType) -> Col:
        s = self._df[name]
        missing = np.asarray(s.isna().to_numpy(), dtype=bool)
        if ctype == ColumnType.STRING:
            vals = np.asarray([v if isinstance(v, str) else str(v) for v in
                               s.to_numpy(dtype=object, na_value="")], dtype=object)
        else:
            vals = s.to_numpy(dtype=_DTYPE[ctype], na_value=_FILL[ctype])
        if ctype == ColumnType.FLOAT:
            missing = missing | np.isnan(vals)
            vals = np.where(missing, 0.0, vals)
        return Col(np.asarray(vals), missing, ctype)

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        types = {c.name: c.type for c in self.columns()}
        return aggregate_columns(spec, lambda c: self._col(c, types[c]), len(self._df),
                                 self.name)


def polars_column_type(dtype: Any) -> ColumnType:
    """The public type of a polars dtype."""
    import polars as pl

    if dtype == pl.Boolean:
        return ColumnType.BOOLEAN
    if dtype.is_integer():
        return ColumnType.INTEGER
    if dtype.is_float():
        return ColumnType.FLOAT
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum):
        return ColumnType.STRING
    return ColumnType.OTHER


class PolarsEngine:
    """A polars DataFrame (or a LazyFrame, collected column by column) in memory."""

    name = "polars"

    def __init__(self, frame: Any) -> None:
        import polars as pl

        if isinstance(frame, pl.LazyFrame):
            frame = frame.collect()
        if not isinstance(frame, pl.DataFrame):
            raise fail("data", "PolarsEngine", "a polars DataFrame", type(frame).__name__)
        self._df = frame

    def columns(self) -> tuple[Column, ...]:
        return tuple(Column(str(n), polars_column_type(t)) for n, t in self._df.schema.items())

    def _col(self, name: str, ctype: ColumnType) -> Col:
        import polars as pl

        s = self._df.get_column(name)
        if ctype == ColumnType.STRING:
            s = s.cast(pl.String)
        missing = s.is_null().to_numpy()
        if ctype == ColumnType.FLOAT:
            missing = missing | s.is_nan().fill_null(True).to_numpy()
            vals = s.fill_null(0.0).fill_nan(0.0).to_numpy()
        else:
            vals = s.fill_null(_FILL[ctype]).to_numpy()
        return Col(np.asarray(vals, dtype=_DTYPE[ctype]), np.asarray(missing, dtype=bool),
                   ctype)

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        types = {c.name: c.type for c in self.columns()}
        return aggregate_columns(spec, lambda c: self._col(c, types[c]), self._df.height,
                                 self.name)
