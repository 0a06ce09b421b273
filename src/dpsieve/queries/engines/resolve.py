"""One place that maps a user's data source to an engine (used by Session, service, CLI).

Resolution is by the source's *type*, never by its contents, so it reads no private value:

* a pandas DataFrame -> :class:`PandasEngine`; a polars DataFrame or LazyFrame ->
  :class:`PolarsEngine`;
* a Spark DataFrame (classic or Spark Connect) -> :class:`SparkEngine`; a string with
  ``spark=`` given -> the table of that name in the Spark session's catalog;
* a path or string naming a CSV, Parquet or DuckDB file -> :class:`DuckDBEngine`
  (``table=`` names the table inside a DuckDB file);
* an object whose class implements the engine protocol (``name``, ``columns`` and
  ``aggregate``) is used as it is (frames are recognised first: a DataFrame with a column
  called ``name`` is still a DataFrame).

Optional libraries are detected without importing them: a pandas, polars or pyspark frame
can only exist if its library is already loaded (``sys.modules``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dpsieve._validation import fail
from dpsieve.queries.engine import Engine


def _is_instance(obj: Any, module: str, names: tuple[str, ...]) -> bool:
    mod = sys.modules.get(module)
    return mod is not None and any(isinstance(obj, getattr(mod, n, ())) for n in names
                                   if isinstance(getattr(mod, n, None), type))


def is_spark_frame(obj: Any) -> bool:
    """True for a classic or a Spark Connect DataFrame (checked by class, not by content)."""
    return (_is_instance(obj, "pyspark.sql.dataframe", ("DataFrame",))
            or _is_instance(obj, "pyspark.sql.connect.dataframe", ("DataFrame",)))


def is_engine(obj: Any) -> bool:
    """True if ``obj``'s class implements the engine protocol (``name``, ``columns``,
    ``aggregate``). The class is inspected, never the object: a DataFrame with columns
    called ``name`` or ``aggregate`` is not an engine."""
    kind = type(obj)
    return (not _is_instance(obj, "pandas", ("DataFrame",)) and not is_spark_frame(obj)
            and isinstance(getattr(kind, "name", None), str)
            and all(callable(getattr(kind, m, None)) for m in ("aggregate", "columns")))


def engine_for(source: Any, *, table: str | None = None, spark: Any = None) -> Engine:
    """The engine that runs plans on ``source`` (see the module docstring).

    Raises :class:`~dpsieve.errors.ValidationError` naming ``source`` and the accepted
    kinds (by type name; the source's contents are never read or echoed)."""
    if spark is not None:
        if not isinstance(source, str):
            raise fail("source", "engine_for", "a table name in the Spark catalog when spark= "
                       "is given", type(source).__name__)
        from dpsieve.queries.engines.spark import SparkEngine

        return SparkEngine(source, spark=spark)
    if is_spark_frame(source):
        from dpsieve.queries.engines.spark import SparkEngine

        return SparkEngine(source)
    if _is_instance(source, "pandas", ("DataFrame",)):
        from dpsieve.queries.engines.frames import PandasEngine

        return PandasEngine(source)
    if _is_instance(source, "polars", ("DataFrame", "LazyFrame")):
        from dpsieve.queries.engines.frames import PolarsEngine

        return PolarsEngine(source)
    if isinstance(source, (str, Path)):
        from dpsieve.queries.engines.duckdb import DuckDBEngine

        return DuckDBEngine(source, table=table)
    if is_engine(source):
        engine: Engine = source
        return engine
    raise fail("source", "engine_for", "a pandas or polars DataFrame, a Spark DataFrame, a "
               "CSV/Parquet/DuckDB file path, a Spark catalog table name with spark=, or an "
               "engine", type(source).__name__)
