"""A session's data access, in one place: rows loaded as a frame (:func:`load_frame`,
after an admitted spend), public metadata read without loading (:func:`data_columns`,
:func:`data_column_kinds`, :func:`data_row_count`), the refusal of a source whose rows
cannot be loaded (:func:`rows_loadable`, from its type only), and what the service keeps
across queries (:class:`Frames`, :class:`FileEngines`). Plans never load rows: they run on
the data set's engine (:func:`dpsieve.queries.engines.resolve.engine_for`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpsieve._validation import fail, fail_private

__all__ = ["FileEngines", "Frame", "Frames", "data_column_kinds", "data_columns",
           "data_row_count", "file_columns", "load_frame", "rows_loadable"]

#: A pandas DataFrame (pandas ships no type stubs here).
Frame = Any

_ROWS = (".parquet", ".pq", ".csv", ".csv.gz", ".tsv")


def load_frame(data: Any, types: Mapping[str, Any] | None = None) -> Frame:
    """A pandas frame from a pandas/polars frame or a CSV/Parquet path, read as the
    engines read it (:mod:`dpsieve.queries.engines.files`: a CSV's columns are text
    unless declared in ``types``, a cell that does not cast to its declared type is
    missing; no DuckDB message, which may quote a cell, is passed on)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    if callable(data) and not isinstance(data, str | Path | pd.DataFrame):
        data = data()  # a lazy loader
    if isinstance(data, pd.DataFrame):
        return data
    if hasattr(data, "to_pandas"):  # polars and pyarrow tables
        frame: Frame = data.to_pandas()
        return frame
    if isinstance(data, str | Path):
        import duckdb

        from dpsieve.queries.engines.files import read_frame

        path = str(data)
        if not path.lower().endswith(_ROWS):
            raise fail("data", "load_frame", "a .csv or .parquet path", path)
        if not Path(path).is_file():
            raise fail("data", "load_frame", "an existing file", path)
        try:
            out: Frame = read_frame(path, types)
        except duckdb.Error:
            raise fail("data", "load_frame", "a file DuckDB can read (its message is "
                       "withheld because it may quote data values)", path) from None
        return out
    rows_loadable(data, "load_frame")
    raise fail_private("data", "load_frame", "a pandas/polars DataFrame or a CSV/Parquet path",
                       data)  # the message shows the type, never the data


def rows_loadable(data: Any, owner: str) -> None:
    """Refuse, from public facts alone, a query shape whose rows cannot be loaded: a path
    that is not an existing CSV/Parquet file, or a source that only answers query plans (a
    Spark DataFrame is never collected to the driver; an engine object exposes aggregates
    only). Called before any spend."""
    if isinstance(data, str | Path):  # the path is the steward's public configuration
        if not str(data).lower().endswith(_ROWS):
            raise fail("data", owner, "a .csv or .parquet path", str(data))
        if not Path(data).is_file():
            raise fail("data", owner, "an existing file", str(data))
    plans_only(data, owner)


def plans_only(data: Any, owner: str) -> None:
    """Refuse rows of a source that only answers query plans (public: its type)."""
    from dpsieve.queries.engines.resolve import is_engine, is_spark_frame

    if is_spark_frame(data) or is_engine(data):
        raise fail("data", owner, "a pandas/polars DataFrame or a CSV/Parquet path for this "
                   "query type (a Spark DataFrame or an engine answers query plans: "
                   "{'type': 'query', ...})", f"<{type(data).__name__}>")


def data_columns(data: Any) -> list[str]:
    """Column names only (the public schema): a frame's names, or a file's (a CSV's
    header line, a Parquet file's metadata).

    No value of the data is released or used in a decision; a lazy loader (a callable)
    has no schema of its own and is loaded.
    """
    if isinstance(data, str | Path):
        return list(data_column_kinds(data))
    return [str(c) for c in load_frame(data).columns]


def data_column_kinds(data: Any, types: Mapping[str, Any] | None = None) -> dict[str, str]:
    """The kind of each column (public schema: a :class:`dpsieve.queries.schema.
    ColumnType` value, as the engine that runs the data set's plans reports it): a frame's
    dtypes (a polars frame's own, never those of a pandas copy, in which a null would turn
    an integer column into floats), or a file's column types from its metadata and the
    declared ``types`` (a CSV's undeclared columns are text). No value is released or
    read."""
    from dpsieve.queries.engines.resolve import engine_for

    if isinstance(data, str | Path):
        from dpsieve.queries.engines import files

        path = str(data)
        if not Path(path).is_file():
            raise fail("data", "data_column_kinds", "an existing .csv or .parquet file", path)
        return {c.name: c.type.value for c in files.file_columns(path, types)}
    return {c.name: c.type.value for c in engine_for(data, owner="data_column_kinds").columns()}


def data_row_count(path: str | Path) -> int:
    """The number of rows of a CSV/Parquet file as the engines read it, without loading
    it."""
    from dpsieve.queries.engines.files import count_rows

    return count_rows(str(path))


def _key(path: str, types: Mapping[str, Any] | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    return path, tuple(sorted((str(n), str(getattr(t, "value", t)))
                              for n, t in (types or {}).items()))


class Frames:
    """Data frames loaded on first admitted use, reloaded when the file changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, Any]] = {}

    def get(self, path: str, types: Mapping[str, Any] | None = None) -> Any:
        """The frame of ``path`` read with the declared ``types``."""
        mtime = Path(path).stat().st_mtime
        key = _key(path, types)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] == mtime:
                return hit[1]
        frame = load_frame(path, types)
        with self._lock:
            self._cache[key] = (mtime, frame)
        return frame


class FileEngines:
    """DuckDB engines kept open across queries, one per registered file path (at most
    ``size``, the least recently used dropped first), so a query neither opens a database
    nor parses the file again (:class:`~dpsieve.queries.engines.duckdb.DuckDBEngine` with
    ``keep_open``: files of at most ``copy_max_bytes`` are copied into it once). Keyed on
    the registered path only (public registration data); the engine itself notices a
    changed file (its stamp, checked on every call) and reads it again, and a data set
    registered again with another path gets that path's engine. Thread-safe."""

    def __init__(self, size: int = 8, copy_max_bytes: int = 16 * 2**20) -> None:
        self._lock = threading.Lock()
        self._size = size
        self._copy_max_bytes = copy_max_bytes
        self._engines: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], Any] = (
            OrderedDict())

    def get(self, path: str, types: Mapping[str, Any] | None = None) -> Any:
        """The kept engine of ``path`` reading its columns as the declared ``types``
        (made on first use; ``None`` for a path DuckDB cannot open, e.g. a file gone since
        its registration: the session then refuses it before any spend)."""
        from dpsieve.errors import ValidationError
        from dpsieve.queries.engines.resolve import engine_for

        key = _key(path, types)
        with self._lock:
            engine = self._engines.get(key)
            if engine is not None:
                self._engines.move_to_end(key)
                return engine
        try:
            engine = engine_for(path, keep_open=True, copy_max_bytes=self._copy_max_bytes,
                                types=types)
        except ValidationError:
            return None
        with self._lock:
            engine = self._engines.setdefault(key, engine)
            self._engines.move_to_end(key)
            while len(self._engines) > self._size:
                self._engines.popitem(last=False)
        return engine


def file_columns(path: str | Path, types: Mapping[str, Any] | None = None) -> Any:
    """The columns of a data set's file and their types as its engine reads them (from the
    file's metadata and the owner's declared ``types``, as a session over it would: no
    value is read)."""
    from dpsieve.queries.engines.resolve import engine_for

    return engine_for(str(path), name="data", owner="Session", types=types).columns()
