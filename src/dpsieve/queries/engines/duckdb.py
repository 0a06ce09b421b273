"""The DuckDB engine: a :class:`BoundingSpec` compiled to one SQL statement
(:mod:`dpsieve.queries.engines.duckdb_sql`) and run here.

The embedded default for CSV, Parquet and DuckDB files. DuckDB streams the file, runs the
bounding and aggregation in parallel and spills to disk when memory is short; the table
is never loaded into Python: only the per-group aggregates are fetched.
:func:`compile_sql` shows the SQL a spec becomes (docs/queries-engines.md).

Every constant from a query (bounds, categories, keys, the sampling key) is a bound
parameter, never text in the SQL; identifiers are quoted.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
import uuid
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dpsieve._validation import check_int, fail
from dpsieve.errors import NumericalError
from dpsieve.queries.engine import (
    Aggregates,
    BoundingSpec,
    BucketCount,
    GroupBatch,
)
from dpsieve.queries.engines._numpy import Col, aggregate_columns, string_col
from dpsieve.queries.engines.duckdb_sql import _q, compile_sql, duckdb_column_type
from dpsieve.queries.engines.files import csv_columns, csv_header, csv_source, typed_source
from dpsieve.queries.schema import Column, ColumnType

__all__ = ["MEMORY_FLOOR_MIB", "MEMORY_LIMIT_ENV", "MEMORY_PER_THREAD_MIB",
           "RETRY_MEMORY_PER_THREAD_MIB", "DuckDBEngine", "checked_limit", "compile_sql",
           "default_memory_limit", "duckdb_column_type", "retry_memory_limit"]

MEMORY_LIMIT_ENV = "DPSIEVE_DUCKDB_MEMORY_LIMIT"
MEMORY_PER_THREAD_MIB = 32
MEMORY_FLOOR_MIB = 64
RETRY_MEMORY_PER_THREAD_MIB = 128
_SIZE = re.compile(r"\s*\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KIB|MIB|GIB|TIB)\s*", re.IGNORECASE)


def checked_limit(value: str, parameter: str) -> str:
    """``value`` if DuckDB reads it as a size (``"256MB"``, ``"1.5 GiB"``), else a
    :class:`~dpsieve.errors.ValidationError` naming ``parameter`` (checked when the engine
    is made, so before any spend, never by DuckDB after it)."""
    if not isinstance(value, str) or not _SIZE.fullmatch(value) or float(
            re.sub(r"[^\d.]", "", value)) <= 0:
        raise fail(parameter, "DuckDBEngine", "a positive size such as '256MB' or '2GB'",
                   value)
    return value.strip()


def _threads(threads: int | None) -> int:
    return max(1, threads if threads is not None else (os.cpu_count() or 1))


def default_memory_limit(threads: int | None = None) -> str:
    """DuckDB's ``memory_limit`` when none is given: ``DPSIEVE_DUCKDB_MEMORY_LIMIT`` if set,
    else ``MEMORY_PER_THREAD_MIB`` (32) MiB per thread (``threads``, or the machine's
    cores when DuckDB chooses), at least ``MEMORY_FLOOR_MIB`` (64): 64 MiB on 2 cores.
    Bounded by the machine, never by the table: DuckDB spills what does not fit to the
    engine's temporary directory, so a query's peak memory is about the same at 1M and
    50M rows (benchmarks/results/queries/memory.md). Some plans need more than this
    (DuckDB then fails with an out-of-memory error, which the engine answers by running
    the same SQL again under :func:`retry_memory_limit`, when no limit was given); plans
    that rank every row of a unit (row-level measures under a privacy unit) start there.
    """
    env = os.environ.get(MEMORY_LIMIT_ENV)
    if env is not None and env.strip():
        return checked_limit(env, MEMORY_LIMIT_ENV)
    return f"{max(MEMORY_FLOOR_MIB, MEMORY_PER_THREAD_MIB * _threads(threads))}MiB"


def retry_memory_limit(threads: int | None = None) -> str:
    """The larger default (``RETRY_MEMORY_PER_THREAD_MIB``, 128 MiB per thread: 256 MiB
    on 2 cores) under which the engine runs a query that ran out of memory under
    :func:`default_memory_limit`, and from the start a plan that ranks every row of a
    unit. Used only when neither ``memory_limit=`` nor ``DPSIEVE_DUCKDB_MEMORY_LIMIT``
    is given. The SQL is deterministic (the sampling key is part of the spec), so the
    second run computes the same aggregates: nothing is released twice or differently."""
    return f"{RETRY_MEMORY_PER_THREAD_MIB * _threads(threads)}MiB"

class _Kept(NamedTuple):
    """A kept database of :class:`DuckDBEngine` (``keep_open``) and the file version in it:
    ``arrays`` (the table's columns in memory, or ``None``) or else ``source`` (the
    table the SQL reads: the copy in the database, or the file)."""

    stamp: tuple[int, ...]
    con: Any
    tmp: tempfile.TemporaryDirectory[str]
    described: list[tuple[Any, ...]]
    columns: tuple[Column, ...]
    source: str
    params: dict[str, Any]
    arrays: tuple[dict[str, Col], int] | None


#: DuckDB types a kept table may be held in as numpy columns: the four types the engines'
#: conformance suite checks every engine on (tests/queries/engine_conformance.py).
_ARRAY_TYPES = {"BIGINT": ColumnType.INTEGER, "DOUBLE": ColumnType.FLOAT,
                "VARCHAR": ColumnType.STRING, "BOOLEAN": ColumnType.BOOLEAN}


def _arrays(con: Any, source: str, params: dict[str, Any],
            described: list[tuple[Any, ...]]) -> tuple[dict[str, Col], int] | None:
    """The table as read-only numpy columns (:class:`~dpsieve.queries.engines._numpy.Col`:
    missing entries -- NULL, and NaN in a float column -- filled and masked exactly as
    the frame engines fill them), and its row count; ``None`` if a column has another
    type than :data:`_ARRAY_TYPES`."""
    if any(str(r[1]).upper() not in _ARRAY_TYPES for r in described):
        return None
    types = {str(r[0]): _ARRAY_TYPES[str(r[1]).upper()] for r in described}
    if len(types) != len(described):
        return None
    got = con.execute(f"SELECT * FROM {source}", params).fetchnumpy()
    if set(got) != set(types):
        return None
    cols: dict[str, Col] = {}
    n = 0
    for name, ctype in types.items():
        a = got[name]
        n = len(a)
        missing = np.array(np.ma.getmaskarray(a), dtype=bool)
        data = np.ma.getdata(a)
        values: Any
        if ctype == ColumnType.STRING:  # dictionary-encoded once, here
            missing.flags.writeable = False
            strings = string_col(["" if m else v if isinstance(v, str) else str(v)
                                  for v, m in zip(data.tolist(), missing.tolist(),
                                                  strict=True)], missing)
            strings.values.flags.writeable = False
            cols[name] = strings
            continue
        if ctype == ColumnType.FLOAT:
            x = np.asarray(data, dtype=np.float64)
            missing |= np.isnan(x)
            values = np.where(missing, 0.0, x)
        elif ctype == ColumnType.INTEGER:
            values = np.where(missing, 0, np.asarray(data, dtype=np.int64)).astype(np.int64)
        else:
            values = np.where(missing, False, np.asarray(data, dtype=np.bool_))
        values = np.array(values, dtype=values.dtype)  # own, contiguous
        values.flags.writeable = False  # shared by concurrent queries: never written
        missing.flags.writeable = False
        cols[name] = Col(values, missing, ctype)
    return cols, n


class DuckDBEngine:
    """A CSV, Parquet or DuckDB table read by DuckDB (embedded, out of core).

    ``DuckDBEngine("data.parquet")``, ``DuckDBEngine("data.csv")``,
    ``DuckDBEngine("db.duckdb", table="people")``, or ``connection=`` and ``table=`` for a
    table or view of an open DuckDB connection. ``threads`` and ``memory_limit`` (e.g.
    ``"1GB"``) are passed to DuckDB; spills go to a private temporary directory, removed
    after each query (a kept database's: when it is replaced). Without ``memory_limit``,
    :func:`default_memory_limit` (64 MiB on 2 cores, or ``DPSIEVE_DUCKDB_MEMORY_LIMIT``);
    when neither is given, a query that runs out of memory under it is run again, on a
    database of its own, under :func:`retry_memory_limit` (256 MiB on 2 cores), and a
    plan that ranks every row of a unit starts there. A given limit is never raised.
    A connection given is used as it is (its own settings). ``types`` are the owner's
    declared column types (name -> :class:`~dpsieve.queries.schema.ColumnType` or its
    name): a CSV file's columns are text unless declared, and a column declared with
    another type than the table's is cast to it (:meth:`_describe`).

    By default each call opens its own in-memory database and reads the file afresh.
    ``keep_open=True`` (a CSV or Parquet file; the service keeps one such engine per
    registered file) keeps one database and the file's DESCRIBE across calls, each call
    on its own cursor (thread-safe), and reads a file of at most ``copy_max_bytes`` once
    into memory, so a query neither opens a database nor parses the file again. The copy
    holds the same rows and typed values a query would read from the file (for a CSV:
    the ``TRY_CAST`` of :meth:`_describe`). When every column is BIGINT, DOUBLE, VARCHAR or
    BOOLEAN it is held as numpy columns and aggregated by the frame engines' core
    (:mod:`dpsieve.queries.engines._numpy`; the engines agree bit for bit on a spec,
    docs/queries-engines.md, checked against the reference engine by the conformance
    suite), otherwise as a table of the kept database; a file whose copy fails is read
    per query, as without it. Every call first compares the file's stamp (device, inode,
    size, modification and change times): a changed file is read again, so a query never
    reads an older version than the file had when the call began.
    """

    name = "duckdb"

    def __init__(self, source: str | Path | None = None, *, table: str | None = None,
                 connection: Any = None, threads: int | None = None,
                 memory_limit: str | None = None, keep_open: bool = False,
                 copy_max_bytes: int = 16 * 2**20,
                 types: Mapping[str, Any] | None = None) -> None:
        self._path: str | None = None
        self._types = {str(n): ColumnType(str(getattr(t, "value", t)))
                       for n, t in (types or {}).items()}
        self._lock = threading.Lock()
        self._kept: _Kept | None = None
        self._copy_max_bytes = copy_max_bytes
        self._table = table
        self._connection = connection
        self._threads = threads
        self._memory_limit = (default_memory_limit(threads) if memory_limit is None
                              else checked_limit(memory_limit, "memory_limit"))
        env = os.environ.get(MEMORY_LIMIT_ENV)
        self._retry_limit = (retry_memory_limit(threads) if memory_limit is None and (
            env is None or not env.strip()) else None)
        self._csv = False
        if source is not None:
            path = str(source)
            low = path.lower()
            if not Path(path).is_file():
                raise fail("data", "DuckDBEngine", "an existing .csv, .parquet or .duckdb file",
                           path)
            if low.endswith((".parquet", ".pq")):
                self._reader = "read_parquet($path)"
            elif low.endswith((".csv", ".csv.gz", ".tsv")):
                self._reader = "read_csv_auto($path)"
                self._csv = True
            elif low.endswith((".duckdb", ".db")):
                if not table:
                    raise fail("table", "DuckDBEngine", "a table name for a DuckDB file", table)
                self._reader = f"_src.{_q(table)}"
            else:
                raise fail("data", "DuckDBEngine", "a .csv, .parquet or .duckdb path", path)
            self._path = path
        elif connection is None or not table:
            raise fail("source", "DuckDBEngine", "a file path, or connection= and table=",
                       source)
        else:
            self._reader = _q(table)
        # a DuckDB file is opened per call: kept attached, it would lock out its writers
        self._keep_open = (keep_open and self._path is not None
                           and not self._reader.startswith("_src."))

    def _open(self, memory_limit: str | None = None
              ) -> tuple[Any, dict[str, Any], tempfile.TemporaryDirectory[str]]:
        """A new DuckDB database for the file: (connection, parameters, spill directory),
        under ``memory_limit`` (default: the engine's)."""
        import duckdb

        tmp = tempfile.TemporaryDirectory(prefix="dpsieve-duckdb-")
        cfg: dict[str, Any] = {"temp_directory": tmp.name, "preserve_insertion_order": False}
        if self._threads is not None:
            cfg["threads"] = self._threads
        cfg["memory_limit"] = memory_limit or self._memory_limit
        con = duckdb.connect(config=cfg)
        con.execute("SET enable_progress_bar = false")  # a library prints nothing
        params: dict[str, Any] = {}
        assert self._path is not None
        if self._reader.startswith("_src."):
            con.execute(f"ATTACH '{self._path.replace(chr(39), chr(39) * 2)}' AS _src "
                        "(READ_ONLY)")
        else:
            params["path"] = self._path
        return con, params, tmp

    def _stamp(self) -> tuple[int, ...]:
        """The file's identity and version (inode, size, modification and change times)."""
        assert self._path is not None
        try:
            st = os.stat(self._path)
        except OSError:  # gone since the engine was made: refused as a new engine would be
            raise fail("data", "DuckDBEngine", "an existing .csv, .parquet or .duckdb file",
                       self._path) from None
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def _load(self) -> _Kept:
        """The kept database, (re)opened when the file changed since it was opened. The
        stamp is read before the file: a file that changes while it is read has another
        stamp by the next call, which opens it again."""
        import duckdb

        stamp = self._stamp()
        with self._lock:
            kept = self._kept
            if kept is not None and kept.stamp == stamp:
                return kept
            con, params, tmp = self._open()
            arrays = None
            try:
                described, source = self._describe(
                    lambda sql: self._run_on(con, sql, params))
                if stamp[2] <= self._copy_max_bytes:
                    try:
                        arrays = _arrays(con, source, params, described)
                        if arrays is None:
                            con.execute(f"CREATE TABLE _dpsieve_copy AS SELECT * FROM "
                                        f"{source}", params)
                            source, params = "_dpsieve_copy", {}
                    except duckdb.Error:  # e.g. a malformed CSV: read it per query, as
                        arrays = None     # without the copy (its error after the spend)
            except BaseException:
                con.close()
                tmp.cleanup()
                raise
            # the database it replaces is closed when its last running query lets go of it
            self._kept = _Kept(stamp, con, tmp, described, self._columns_of(described),
                               source, params, arrays)
            return self._kept

    @staticmethod
    def _run_on(con: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = con.execute(sql, params).fetchall()
        return rows

    @contextmanager
    def _session(self, memory_limit: str | None = None
                 ) -> Iterator[tuple[Callable[[str, dict[str, Any]], Any],
                                     list[tuple[Any, ...]], str]]:
        """``(execute(sql, params), described, source)`` on one connection: the given one,
        a cursor of the kept database (``keep_open``), or one opened for this call (always,
        under ``memory_limit``, when that is given: a file engine's larger retry limit).
        ``execute`` returns the DuckDB result (``fetchall``, ``fetchnumpy``; DuckDB runs
        the statement when executing) and binds the file's path only to SQL reading it.
        ``described`` is DuckDB's DESCRIBE of the table, ``source`` the table the SQL reads
        (:meth:`_describe`)."""
        if self._connection is not None:
            def run_given(sql: str, params: dict[str, Any]) -> Any:
                return self._connection.execute(sql, params)
            described, source = self._describe(lambda sql: run_given(sql, {}).fetchall())
            yield run_given, described, source
            return
        if self._keep_open and memory_limit is None:
            kept = self._load()
            with self._lock:  # a connection is used by one thread at a time: a cursor each
                cur = kept.con.cursor()
            try:
                def run_kept(sql: str, params: dict[str, Any]) -> Any:
                    return cur.execute(sql, _bound(sql, params, kept.params))
                yield run_kept, kept.described, kept.source
            finally:
                cur.close()
            return
        con, extra, tmp = self._open(memory_limit)
        try:
            def run(sql: str, params: dict[str, Any]) -> Any:
                return con.execute(sql, _bound(sql, params, extra))
            described, source = self._describe(lambda sql: run(sql, {}).fetchall())
            yield run, described, source
        finally:
            con.close()
            tmp.cleanup()

    @staticmethod
    def _columns_of(described: list[tuple[Any, ...]]) -> tuple[Column, ...]:
        return tuple(Column(str(r[0]), r[2] if len(r) > 2 else duckdb_column_type(str(r[1])),
                            storage=str(r[1])) for r in described)

    def columns(self) -> tuple[Column, ...]:
        if self._keep_open:
            return self._load().columns
        with self._session() as (_, described, _source):
            return self._columns_of(described)

    def _describe(self, run: Callable[[str], list[tuple[Any, ...]]]
                  ) -> tuple[list[tuple[Any, ...]], str]:
        """(the table's columns as ``(name, SQL type, public type)``, the FROM item the
        SQL reads), from metadata and the declared ``types`` only.

        A CSV file is read as :mod:`~dpsieve.queries.engines.files` says: its header
        (the first line), every cell text, each declared column cast with ``TRY_CAST``
        (a cell that does not cast is missing), undeclared columns text -- never a type
        guessed from the values. Other tables keep their stored types; a column declared
        with another type is cast to it with ``TRY_CAST``."""
        if self._csv:
            assert self._path is not None
            names = csv_header(self._path)
            cols = csv_columns(names, self._types)
            return ([(c.name, c.storage, c.type) for c in cols],
                    csv_source("$path", self._path, names, self._types))
        return typed_source(run(f"DESCRIBE SELECT * FROM {self._reader}"), self._reader,
                            self._types)

    def sql(self, spec: BoundingSpec) -> tuple[str, dict[str, Any]]:
        """The SQL and parameters :meth:`aggregate` runs (for inspection)."""
        with self._session() as (_, described, source):
            return compile_sql(spec, self._columns_of(described), source)

    def aggregate_batches(self, spec: BoundingSpec, size: int) -> Iterator[GroupBatch]:
        """The aggregates of ``spec`` as batches of at most ``size`` groups
        (:class:`~dpsieve.queries.engine.StreamingEngine`). The SQL of :meth:`aggregate`
        runs into a temporary table of the query's connection (DuckDB spills it to the
        engine's temporary directory when memory is short), under the out-of-memory retry
        of :meth:`aggregate`: that statement is where all of the query's work and memory
        are, and it completes before the first batch is handed out, so running out of
        memory there retries the whole aggregation, with nothing handed out and no noise
        drawn. The table is then read a batch at a time by row id (:class:`_TableBatch`):
        the batch's unit counts as one numpy column, and the full rows only of the groups
        the caller takes, so a dropped group never becomes Python objects. After the
        table is made, only these reads of it (one batch of rows at most) run. A kept
        table held as numpy columns (at most ``copy_max_bytes``) and public keys are
        aggregated at once and cut into batches."""
        check_int("size", size, "DuckDBEngine.aggregate_batches", minimum=1)
        if spec.keys is not None or (self._keep_open and self._load().arrays is not None):
            yield from self.aggregate(spec).slices(size)
            return
        import duckdb

        attempts = self._attempts(spec)
        while True:
            limit, twice = attempts.pop(0)
            stream = self._batches_sql(spec, limit, size, twice)
            try:
                head = next(stream, None)  # executes the query: where memory runs out
                break
            except duckdb.OutOfMemoryException:
                stream.close()
                if not attempts:
                    raise
        try:
            if head is None:
                return
            yield head
            del head
            yield from stream
        finally:
            stream.close()

    def _batches_sql(self, spec: BoundingSpec, memory_limit: str | None, size: int,
                     rank_twice: bool = False) -> Generator[GroupBatch, None, None]:
        import duckdb

        with self._session(memory_limit) as (execute, described, source):
            sql, params = compile_sql(spec, self._columns_of(described), source,
                                      rank_twice=rank_twice)
            table = f"_dpsieve_groups_{uuid.uuid4().hex}"  # private to this connection
            execute(f"CREATE TEMPORARY TABLE {table} AS {sql}", params)  # the aggregation
            try:
                ((end,),) = execute(f"SELECT coalesce(max(rowid) + 1, 0) FROM {table}",
                                    {}).fetchall()
                for lo in range(0, int(end), size):
                    got = execute(f"SELECT rowid AS _r, _units FROM {table} WHERE rowid >= "
                                  "$lo AND rowid < $hi ORDER BY rowid",
                                  {"lo": lo, "hi": lo + size}).fetchnumpy()
                    rowids = np.asarray(np.ma.getdata(got["_r"]), dtype=np.int64)
                    if rowids.size == 0:
                        continue
                    batch = _TableBatch(spec, self.name, execute, table, rowids,
                                        np.asarray(np.ma.getdata(got["_units"]),
                                                   dtype=np.int64))
                    del got
                    yield batch
                    batch.close()  # taken from only while it is the current batch
                    del batch
            finally:  # dropped with the connection anyway, but a given one is the caller's
                with suppress(duckdb.Error):
                    execute(f"DROP TABLE IF EXISTS {table}", {})

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        if self._keep_open:
            kept = self._load()
            if kept.arrays is not None:  # the table in memory: the frame engines' core
                cols, n = kept.arrays
                return aggregate_columns(spec, cols.__getitem__, n, self.name)
        import duckdb

        attempts = self._attempts(spec)
        while True:
            limit, twice = attempts.pop(0)
            try:
                return self._aggregate_sql(spec, limit, twice)
            except duckdb.OutOfMemoryException:
                if not attempts:
                    raise

    def _attempts(self, spec: BoundingSpec) -> list[tuple[str | None, bool]]:
        """The (memory limit, ``rank_twice``) of each run of a spec's SQL, in order, the
        next one tried when DuckDB runs out of memory. Each computes the same aggregates
        (the SQL is deterministic, its sampling key part of the spec), so a run again
        releases nothing more or different. Without a given limit, a plan runs under the
        default and then under :func:`retry_memory_limit`; a plan ranking every row of a
        unit starts there (measured: out of memory under 64 MiB at 10M rows). A plan
        whose row-level sums keep each cell's chosen rows in the cells' aggregate
        (:func:`~dpsieve.queries.engines.duckdb_sql.compile_sql`) needs memory for the
        cells with more than ``max_rows`` rows; if it runs out, the same limit is tried
        with the rows ranked twice (slower, less memory)."""
        retry = self._retry_limit if self._path is not None else None
        if not (spec.unit is not None and spec.row_measures):
            return [(None, False)] + ([(retry, False)] if retry is not None else [])
        return [(retry, False), (retry, True)]

    def _aggregate_sql(self, spec: BoundingSpec, memory_limit: str | None,
                       rank_twice: bool = False) -> Aggregates:
        with self._session(memory_limit) as (execute, described, source):  # one connection
            sql, params = compile_sql(spec, self._columns_of(described), source,
                                      rank_twice=rank_twice)
            rows = execute(sql, params).fetchall()
        return _collect(spec, rows, self.name)


def _bound(sql: str, params: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """The parameters of ``sql``: its own, plus the file's (``$path``) when it reads the
    file (DuckDB refuses parameters a statement does not use)."""
    return {**params, **extra} if "$path" in sql else params


class _TableBatch:
    """A batch of observed groups in a temporary table of :meth:`DuckDBEngine.
    _batches_sql` (:class:`~dpsieve.queries.engine.GroupBatch`): the row ids and unit
    counts of its groups in Python; :meth:`take` fetches the full rows of the groups
    taken (the values ``fetchall`` gives, through :func:`_collect`, as :meth:`DuckDBEngine.
    aggregate` does), while the batch is current (the table and connection are open)."""

    def __init__(self, spec: BoundingSpec, engine: str, execute: Callable[..., Any],
                 table: str, rowids: Any, units: Any) -> None:
        self._spec = spec
        self.engine = engine
        self._execute: Callable[..., Any] | None = execute
        self._table = table
        self._rowids = rowids
        self.units = units

    @property
    def n_groups(self) -> int:
        return int(self._rowids.size)

    def close(self) -> None:
        self._execute = None

    def take(self, idx: Any) -> Aggregates:
        if self._execute is None:
            raise RuntimeError("a DuckDB batch of observed groups was taken from after the "
                               "next batch was fetched (GroupBatch.take)")
        want = self._rowids[np.asarray(idx, dtype=np.int64)].tolist()
        rows: list[tuple[Any, ...]] = []
        if want:
            got = self._execute(
                f"SELECT rowid AS _r, * FROM {self._table} WHERE rowid >= $lo AND rowid <= "
                "$hi AND rowid IN (SELECT unnest(CAST($ids AS BIGINT[])))",
                {"lo": min(want), "hi": max(want), "ids": sorted(set(want))}).fetchall()
            by_id = {int(r[0]): r[1:] for r in got}
            rows = [by_id[i] for i in want]
        return _collect(self._spec, rows, self.engine)


def _collect(spec: BoundingSpec, rows: list[tuple[Any, ...]], engine: str) -> Aggregates:
    """Dense per-group arrays from the result rows of :func:`compile_sql`."""
    public = spec.keys is not None
    ng = len(spec.group_by)
    if public:
        assert spec.keys is not None
        keys = spec.keys
        pos = {int(r[0]): r for r in rows}
        ordered: list[tuple[Any, ...] | None] = [pos.get(i) for i in range(len(keys))]
        width = 1
    else:
        keys = tuple(tuple(r[:ng]) for r in rows)
        ordered = list(rows)
        width = ng
    values: dict[str, Any] = {}
    for n, m in enumerate(spec.measures):
        col = width + 1 + n
        if isinstance(m, BucketCount):
            arr = np.zeros((len(keys), m.buckets), dtype=np.int64)
            for i, r in enumerate(ordered):
                if r is not None and r[col]:
                    for b, c in dict(r[col]).items():
                        arr[i, int(b)] = int(c)
        else:
            vals = [0 if r is None or r[col] is None else int(r[col]) for r in ordered]
            if any(not -(2**63) <= v < 2**63 for v in vals):
                raise NumericalError(f"the aggregate {m.name!r} does not fit in 64 bits")
            arr = np.asarray(vals, dtype=np.int64)
        values[m.name] = arr
    units = None if public else np.asarray([int(r[width]) for r in rows], dtype=np.int64)
    return Aggregates(tuple(keys), values, units, engine)

