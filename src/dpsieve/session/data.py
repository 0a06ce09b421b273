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
from pathlib import Path
from typing import Any

from dpsieve._validation import fail, fail_private

__all__ = ["FileEngines", "Frame", "Frames", "data_column_kinds", "data_columns",
           "data_row_count", "file_columns", "load_frame", "rows_loadable"]

#: A pandas DataFrame (pandas ships no type stubs here).
Frame = Any

_ROWS = (".parquet", ".pq", ".csv", ".csv.gz", ".tsv")


def _reader(path: str) -> str:
    return "read_parquet" if path.lower().endswith((".parquet", ".pq")) else "read_csv_auto"


def load_frame(data: Any) -> Frame:
    """A pandas frame from a pandas/polars frame or a CSV/Parquet path (read by DuckDB)."""
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

        path = str(data)
        low = path.lower()
        if low.endswith((".parquet", ".pq")):
            reader = "read_parquet"
        elif low.endswith((".csv", ".csv.gz", ".tsv")):
            reader = "read_csv_auto"
        else:
            raise fail("data", "load_frame", "a .csv or .parquet path", path)
        if not Path(path).is_file():
            raise fail("data", "load_frame", "an existing file", path)
        con = duckdb.connect()
        try:
            out: Frame = _read_file(con, reader, path)
        finally:
            con.close()
        return out
    rows_loadable(data, "load_frame")
    raise fail_private("data", "load_frame", "a pandas/polars DataFrame or a CSV/Parquet path",
                       data)  # the message shows the type, never the data


def rows_loadable(data: Any, owner: str) -> None:
    """Refuse, from public facts alone, a query shape whose rows cannot be loaded: a path
    that is not an existing CSV/Parquet file, or a source that only answers query plans (a
    Spark DataFrame is never collected to the driver; an engine object exposes aggregates
    only). Called before any spend."""
    from dpsieve.queries.engines.resolve import is_engine, is_spark_frame

    if isinstance(data, str | Path):  # the path is the steward's public configuration
        if not str(data).lower().endswith(_ROWS):
            raise fail("data", owner, "a .csv or .parquet path", str(data))
        if not Path(data).is_file():
            raise fail("data", owner, "an existing file", str(data))
    if is_spark_frame(data) or is_engine(data):
        raise fail("data", owner, "a pandas/polars DataFrame or a CSV/Parquet path for this "
                   "query type (a Spark DataFrame or an engine answers query plans: "
                   "{'type': 'query', ...})", f"<{type(data).__name__}>")


def _read_file(con: Any, reader: str, path: str) -> Frame:
    """Read a file whole; never fail on a cell (nothing data-dependent may leave).

    DuckDB types a CSV's columns from a sample of rows; a later cell that does not parse
    as its column's type would make the read fail *after* the spend, with a message quoting
    the whole line (a private record), and the failure itself would tell whether such a
    row exists. On a conversion error the file is re-read as text and each cell cast to
    its column's type with ``TRY_CAST``: a cell that does not parse becomes missing, as an
    empty cell would, so each row still maps to one row. No DuckDB message (which quotes
    cells) is passed on."""
    import duckdb

    try:
        return con.execute(f"SELECT * FROM {reader}(?)", [path]).df()
    except duckdb.Error:
        if reader != "read_csv_auto":
            raise fail("data", "load_frame", "a readable Parquet file (DuckDB could not read "
                       "it; its message is withheld because it may quote data values)",
                       path) from None
    try:
        cols = con.execute(f"DESCRIBE SELECT * FROM {reader}(?)", [path]).fetchall()
        # a table first: DuckDB pushes casts on a CSV scan into the reader, even TRY_CASTs
        con.execute("CREATE TEMP TABLE _text AS SELECT * FROM read_csv_auto(?, "
                    "all_varchar = true)", [path])
        cast = ", ".join(
            f"TRY_CAST({_quote(str(c[0]))} AS {c[1]}) AS {_quote(str(c[0]))}"
            if str(c[1]).upper() != "VARCHAR" else _quote(str(c[0])) for c in cols)
        return con.execute(f"SELECT {cast} FROM _text").df()
    except duckdb.Error:
        raise fail("data", "load_frame", "a CSV file DuckDB can read (its message is "
                   "withheld because it may quote data values)", path) from None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _describe(path: str, owner: str) -> list[tuple[str, str]]:
    """A file's (column name, DuckDB type) pairs from its metadata (no value is read)."""
    import duckdb

    if not Path(path).is_file():
        raise fail("data", owner, "an existing .csv or .parquet file", path)
    con = duckdb.connect()
    try:
        rows = con.execute(f"DESCRIBE SELECT * FROM {_reader(path)}(?)", [path]).fetchall()
    finally:
        con.close()
    return [(str(r[0]), str(r[1])) for r in rows]


def data_columns(data: Any) -> list[str]:
    """Column names only (the public schema): a frame's names, or a file's header via DuckDB.

    No value of the data is released or used in a decision; a lazy loader (a callable)
    has no schema of its own and is loaded.
    """
    if isinstance(data, str | Path):
        return [name for name, _ in _describe(str(data), "data_columns")]
    return [str(c) for c in load_frame(data).columns]


def data_column_kinds(data: Any) -> dict[str, str]:
    """The kind of each column (public schema, :mod:`dpsieve._columns`): a frame's dtypes,
    or the file's column types as DuckDB describes them. No value is released."""
    from dpsieve._columns import frame_kinds, kind_of_sql

    if isinstance(data, str | Path):
        return {name: kind_of_sql(t) for name, t in _describe(str(data), "data_column_kinds")}
    return frame_kinds(load_frame(data))


def data_row_count(path: str | Path) -> int:
    """The number of rows of a CSV/Parquet file (DuckDB), without loading it."""
    import duckdb

    p = str(path)
    con = duckdb.connect()
    try:
        row = con.execute(f"SELECT COUNT(*) FROM {_reader(p)}(?)", [p]).fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


class Frames:
    """Data frames loaded on first admitted use, reloaded when the file changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}

    def get(self, path: str) -> Any:
        mtime = Path(path).stat().st_mtime
        with self._lock:
            hit = self._cache.get(path)
            if hit is not None and hit[0] == mtime:
                return hit[1]
        frame = load_frame(path)
        with self._lock:
            self._cache[path] = (mtime, frame)
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
        self._engines: OrderedDict[str, Any] = OrderedDict()

    def get(self, path: str) -> Any:
        """The kept engine of ``path`` (made on first use; ``None`` for a path DuckDB cannot
        open, e.g. a file gone since its registration: the session then refuses it as
        before, with the error of its query type)."""
        from dpsieve.errors import ValidationError
        from dpsieve.queries.engines.resolve import engine_for

        with self._lock:
            engine = self._engines.get(path)
            if engine is not None:
                self._engines.move_to_end(path)
                return engine
        try:
            engine = engine_for(path, keep_open=True, copy_max_bytes=self._copy_max_bytes)
        except ValidationError:
            return None
        with self._lock:
            engine = self._engines.setdefault(path, engine)
            self._engines.move_to_end(path)
            while len(self._engines) > self._size:
                self._engines.popitem(last=False)
        return engine


def file_columns(path: str | Path) -> Any:
    """The columns of a data set's file and their types as its engine reads them (from the
    file's metadata, as a session over it would: no value is read)."""
    from dpsieve.queries.engines.resolve import engine_for

    return engine_for(str(path), name="data", owner="Session").columns()
