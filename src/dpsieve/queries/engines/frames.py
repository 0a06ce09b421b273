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
from dpsieve.queries.engines._numpy import (
    Col,
    aggregate_columns,
    coded_string_col,
    string_col,
)
from dpsieve.queries.schema import Column, ColumnType

__all__ = ["PandasEngine", "PolarsEngine", "unit_key"]

_FILL: dict[ColumnType, Any] = {ColumnType.INTEGER: 0, ColumnType.FLOAT: 0.0,
                                ColumnType.BOOLEAN: False, ColumnType.STRING: ""}
_DTYPE: dict[ColumnType, Any] = {ColumnType.INTEGER: np.int64, ColumnType.FLOAT: np.float64,
                                 ColumnType.BOOLEAN: np.bool_, ColumnType.STRING: object}
#: numpy's integer and float dtypes by their storage names (DuckDB's vocabulary).
_STORAGE = {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT",
            "uint8": "UTINYINT", "uint16": "USMALLINT", "uint32": "UINTEGER",
            "uint64": "UBIGINT", "float16": "FLOAT", "float32": "FLOAT", "float64": "DOUBLE"}


def _numpy_dtype(dtype: Any) -> Any:
    """The numpy dtype behind a pandas (or numpy) dtype, or None."""
    try:
        return np.dtype(getattr(dtype, "numpy_dtype", dtype))
    except TypeError:
        return None


def _categories_dtype(dtype: Any) -> Any:
    """A pandas categorical's categories' dtype (its values' type); any other dtype as
    it is."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    return dtype.categories.dtype if isinstance(dtype, pd.CategoricalDtype) else dtype


def pandas_storage(dtype: Any) -> str | None:
    """The storage type name of a pandas dtype (``int32`` -> ``INTEGER``; a categorical's
    is its categories'; None if not a numeric one)."""
    nd = _numpy_dtype(_categories_dtype(dtype))
    return None if nd is None else _STORAGE.get(nd.name)


def _int_values(values: Any) -> Any:
    """An integer column's values in their own dtype when numpy has it (so a uint64 above
    2^63 keeps its value: comparisons and encodings read the exact integer), else int64."""
    a = np.asarray(values)
    return a if a.dtype.kind in "iu" else np.asarray(values, dtype=np.int64)


def pandas_column_type(dtype: Any) -> ColumnType:
    """The public type of a pandas dtype (``object`` columns are taken as strings; a
    categorical has its categories' type). Metadata only: never a function of values."""
    from pandas.api import types as pt  # type: ignore[import-untyped,unused-ignore]

    dtype = _categories_dtype(dtype)
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
        return tuple(Column(str(c), ct, storage=pandas_storage(t) if ct.numeric else None)
                     for c, t in self._df.dtypes.items()
                     for ct in (pandas_column_type(t),))

    def _col(self, name: str, ctype: ColumnType, unit: bool = False) -> Col:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        s = self._df[name]
        if isinstance(s.dtype, pd.CategoricalDtype):
            return _categorical_col(s, ctype, unit)
        return _series_col(s, ctype, unit)

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        types = {c.name: c.type for c in self.columns()}
        return aggregate_columns(spec, lambda c: self._col(c, types[c], c == spec.unit),
                                 len(self._df), self.name)


def _series_col(s: Any, ctype: ColumnType, unit: bool) -> Col:
    """A (non-categorical) pandas Series as a column of the public type ``ctype``."""
    missing = np.asarray(s.isna().to_numpy(), dtype=bool)
    if ctype == ColumnType.STRING and unit:  # a privacy unit: by typed value (unit_key)
        coded = _factorized_strings(s)
        if coded is not None:  # strings only: unit_key of each distinct value
            codes, uniques = coded
            seen = [*(str(unit_key(u)) for u in uniques), ""]
            return coded_string_col(np.where(codes < 0, len(seen) - 1, codes), seen, missing)
        keys = [unit_key(v) for v in s.to_numpy(dtype=object, na_value=None)]
        missing = missing | np.asarray([k is None for k in keys], dtype=bool)
        return string_col(["" if k is None else k for k in keys], missing)
    if ctype == ColumnType.STRING:
        return _pandas_strings(s, missing)
    if ctype == ColumnType.INTEGER:
        nd = _numpy_dtype(s.dtype)
        native = nd if nd is not None and nd.kind in "iu" else np.int64
        vals = _int_values(s.to_numpy(dtype=native, na_value=0))
    else:
        vals = s.to_numpy(dtype=_DTYPE[ctype], na_value=_FILL[ctype])
    if ctype == ColumnType.FLOAT:
        missing = missing | np.isnan(vals)
        vals = np.where(missing, 0.0, vals)
    return Col(np.asarray(vals), missing, ctype)


def _categorical_col(s: Any, ctype: ColumnType, unit: bool) -> Col:
    """A pandas categorical Series as a column of its categories' type: each distinct
    category read once as a column of that type (exactly as a plain column of its
    values), each row its category's entry (a missing code: missing, filled)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    codes = np.asarray(s.cat.codes.to_numpy(), dtype=np.int64)
    cats = pd.Series(s.cat.categories)
    none = codes < 0
    if ctype == ColumnType.STRING:
        key = unit_key if unit else (lambda v: v if isinstance(v, str) else str(v))
        keys = [key(v) for v in cats.tolist()]
        seen = [*("" if k is None else k for k in keys), ""]
        gone = np.asarray([k is None for k in keys] + [True], dtype=bool)
        idx = np.where(none, len(seen) - 1, codes)
        return coded_string_col(idx, seen, gone[idx])
    if len(cats) == 0:  # no category: every row missing
        return Col(np.full(len(codes), _FILL[ctype], dtype=_DTYPE[ctype]),
                   np.ones(len(codes), dtype=bool), ctype)
    base = _series_col(cats, ctype, unit)
    idx = np.where(none, 0, codes)
    vals, missing = base.values[idx].copy(), none | base.missing[idx]
    vals[missing] = _FILL[ctype]
    return Col(vals, missing, ctype)


def unit_key(v: Any) -> str | None:
    """The key a value of an ``object`` column is compared by as a privacy unit: its typed
    value, as DuckDB compares a typed column's (``1`` and ``1.0`` are one unit, ``1`` and
    ``"1"`` two, ``True`` and ``1`` two; NaN and None are missing: ``None``). A string is
    its own key (so a column of strings encodes as on every engine); any other value a
    string no string can be: a NUL, a type tag and its canonical text (a string that
    itself starts with NUL is escaped)."""
    if v is None:
        return None
    if isinstance(v, str):
        return "\x00s" + v if v.startswith("\x00") else v
    if isinstance(v, bool | np.bool_):
        return f"\x00b:{bool(v)}"
    if isinstance(v, int | np.integer):
        return f"\x00n:{int(v)}"
    if isinstance(v, float | np.floating):
        x = float(v)
        if x != x:
            return None
        return f"\x00n:{int(x)}" if x.is_integer() else f"\x00n:{x!r}"
    return f"\x00o:{type(v).__name__}:{v!r}"


def _factorized_strings(s: Any) -> tuple[Any, list[str]] | None:
    """(int64 codes, -1 where missing; the distinct strings) of a pandas column whose
    present values are all ``str`` (a string dtype, or an object column of strings:
    pandas' ``infer_dtype``), by pandas' own hashing (``factorize``: exact on strings);
    ``None`` for any other column (an object column may hold values pandas hashes alike,
    e.g. ``1`` and ``True``, which are different units and strings)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    if not (isinstance(s.dtype, pd.StringDtype) or pd.api.types.is_string_dtype(s.dtype)):
        return None
    if s.dtype == object and pd.api.types.infer_dtype(s, skipna=True) not in ("string",
                                                                               "empty"):
        return None
    codes, uniques = pd.factorize(s, use_na_sentinel=True)
    return np.asarray(codes, dtype=np.int64), [str(u) for u in uniques.tolist()]


def _pandas_strings(s: Any, missing: Any) -> Col:
    """A pandas string column dictionary-encoded: a string dtype by pandas' own hashing
    (``factorize``: each row one hash lookup, the distinct values sorted once); an object
    column value by value through ``str`` (two objects pandas hashes alike, e.g. ``1`` and
    ``1.0``, are different strings), as :func:`string_col` reads it."""

    coded = _factorized_strings(s)
    if coded is not None:
        codes, uniques = coded
        seen = [*uniques, ""]  # "": a missing entry, filled
        return coded_string_col(np.where(codes < 0, len(seen) - 1, codes), seen, missing)
    return string_col([v if isinstance(v, str) else str(v)
                       for v in s.to_numpy(dtype=object, na_value="")], missing)


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


def polars_storage(dtype: Any) -> str | None:
    """The storage type name of a polars numeric dtype (``Int32`` -> ``INTEGER``)."""
    names = {"Int8": "TINYINT", "Int16": "SMALLINT", "Int32": "INTEGER", "Int64": "BIGINT",
             "Int128": "HUGEINT", "UInt8": "UTINYINT", "UInt16": "USMALLINT",
             "UInt32": "UINTEGER", "UInt64": "UBIGINT", "UInt128": "UHUGEINT",
             "Float32": "FLOAT", "Float64": "DOUBLE"}
    return names.get(str(dtype))


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
        return tuple(Column(str(n), polars_column_type(t), storage=polars_storage(t))
                     for n, t in self._df.schema.items())

    def _col(self, name: str, ctype: ColumnType) -> Col:
        import polars as pl

        s = self._df.get_column(name)
        if ctype == ColumnType.STRING:
            s = s.cast(pl.String)
        missing = s.is_null().to_numpy()
        if ctype == ColumnType.STRING:
            return string_col(s.fill_null("").to_list(), np.asarray(missing, dtype=bool))
        if ctype == ColumnType.FLOAT:
            missing = missing | s.is_nan().fill_null(True).to_numpy()
            vals = s.fill_null(0.0).fill_nan(0.0).to_numpy()
        else:
            vals = s.fill_null(_FILL[ctype]).to_numpy()
        vals = _int_values(vals) if ctype == ColumnType.INTEGER else np.asarray(
            vals, dtype=_DTYPE[ctype])
        return Col(vals, np.asarray(missing, dtype=bool), ctype)

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        types = {c.name: c.type for c in self.columns()}
        return aggregate_columns(spec, lambda c: self._col(c, types[c]), self._df.height,
                                 self.name)
