"""The one place that maps a user's data source to an engine (Session, service and CLI
resolve every source here).

Resolution is by the source's *type*, never by its contents, so it reads no private value:

* a pandas DataFrame -> :class:`PandasEngine`; a polars DataFrame or LazyFrame ->
  :class:`PolarsEngine`;
* a Spark DataFrame (classic or Spark Connect) -> :class:`SparkEngine`; a string with
  ``spark=`` given -> the table of that name in the Spark session's catalog;
* a path or string naming a CSV, Parquet or DuckDB file -> :class:`DuckDBEngine`
  (``table=`` names the table inside a DuckDB file; ``memory_limit=`` its memory limit);
* a loader (a callable returning a frame) is called, then resolved; a pyarrow table is
  read as pandas;
* an object whose class implements the engine protocol (``name``, ``columns`` and
  ``aggregate``) is used as it is (frames are recognised first: a DataFrame with a column
  called ``name`` is still a DataFrame).

Optional libraries are detected without importing them: a pandas, polars or pyspark frame
can only exist if its library is already loaded (``sys.modules``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpsieve._validation import fail, fail_private
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


#: The file suffixes a path may have (DuckDB reads them; ``table=`` names a DuckDB file's
#: table).
FILE_SUFFIXES = (".csv", ".csv.gz", ".tsv", ".parquet", ".pq", ".duckdb", ".db")


def engine_for(source: Any, *, table: str | None = None, spark: Any = None,
               memory_limit: str | None = None, name: str = "source",
               owner: str = "engine_for", keep_open: bool = False,
               copy_max_bytes: int = 16 * 2**20,
               types: Mapping[str, Any] | None = None) -> Engine:
    """The engine that runs plans on ``source`` (see the module docstring). A file runs on
    DuckDB under ``memory_limit`` (default: ``duckdb.default_memory_limit``), kept open
    across calls with ``keep_open`` (files of at most ``copy_max_bytes`` copied in once:
    :class:`~dpsieve.queries.engines.duckdb.DuckDBEngine`), its columns read as the
    owner's declared ``types`` (a CSV file's undeclared columns are text:
    :mod:`~dpsieve.queries.engines.files`); a loader (a
    callable returning a frame, as a session's lazy data) is called, only when its engine
    is needed (after the spend, or to read its column types); a pyarrow table is read as
    pandas.

    Raises :class:`~dpsieve.errors.ValidationError` naming ``name`` (of ``owner``) and the
    accepted kinds (by type name; the source's contents are never read or echoed)."""
    if spark is not None:
        if not isinstance(source, str):
            raise fail(name, owner, "a table name in the Spark catalog when spark= "
                       "is given", type(source).__name__)
        from dpsieve.queries.engines.spark import SparkEngine

        return SparkEngine(source, spark=spark)
    if is_spark_frame(source):
        from dpsieve.queries.engines.spark import SparkEngine

        return SparkEngine(source)
    if isinstance(source, (str, Path)):
        if not str(source).lower().endswith(FILE_SUFFIXES):
            raise fail(name, owner, "a .csv, .parquet or .duckdb path", str(source))
        from dpsieve.queries.engines.duckdb import DuckDBEngine

        return DuckDBEngine(source, table=table, memory_limit=memory_limit,
                            keep_open=keep_open, copy_max_bytes=copy_max_bytes, types=types)
    if callable(source) and not hasattr(source, "columns"):
        source = source()  # a lazy loader of a frame
    if _is_instance(source, "pandas", ("DataFrame",)):
        from dpsieve.queries.engines.frames import PandasEngine

        return PandasEngine(source)
    if _is_instance(source, "polars", ("DataFrame", "LazyFrame")):
        from dpsieve.queries.engines.frames import PolarsEngine

        return PolarsEngine(source)
    if is_engine(source):
        engine: Engine = source
        return engine
    if hasattr(type(source), "to_pandas"):  # pyarrow tables
        from dpsieve.queries.engines.frames import PandasEngine

        return PandasEngine(source.to_pandas())
    raise fail_private(name, owner, "a pandas or polars DataFrame, a Spark DataFrame, a "
                       "CSV/Parquet/DuckDB file path, a Spark catalog table name with spark=, "
                       "or an engine", source)
