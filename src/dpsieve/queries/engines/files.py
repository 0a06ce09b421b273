"""How a data file is read: a CSV's format fixed by contract, types by declaration.

A CSV file carries no types. DuckDB's reader would guess them from a sample of the values
(one row holding ``30.5`` turns an integer column into a float one; ``maybe`` a boolean
into text; a ragged row can make the whole file one column), so a schema read that way is
a function of the rows -- and the analyst reads the schema for free. Here nothing about
the table an analyst sees depends on a value:

* **The format is fixed**: the first line is the header (its fields, parsed as CSV, are
  the column names; BOM stripped, an empty name becomes ``column<i>``, a repeated one
  ``<name>_<k>``); fields are separated by ``,`` (``\\t`` for ``.tsv``), quoted with
  ``"``. Nothing is sniffed.
* **Every row is read as text, or skipped**: a row with more fields than the header is
  cut to the header's width; a row with fewer, or one DuckDB cannot read at all (invalid
  UTF-8), is skipped -- a row only ever affects itself (except an unclosed quote, which
  runs to the next quote: CSV's own rule). (Padding short rows instead would make
  DuckDB's parallel reader fail on a quoted line break: a failure a row could cause.)
* **Types are the owner's declarations** (:data:`SQL_TYPES`): a declared column is cast
  with ``TRY_CAST`` (a cell that does not cast is missing, as an empty cell is); an
  undeclared column is text (``string``). The owner may declare any type on any column.

:func:`csv_columns` is the public table (names, declared types, storage types);
:func:`csv_source` the SQL that reads it. A Parquet or DuckDB table keeps its stored
types, a column declared with another type cast to it (:func:`typed_source`). The engine
(:mod:`~dpsieve.queries.engines.duckdb`), the frame loader (:func:`read_frame`) and the
row count (:func:`count_rows`) all read through :func:`table_of`, so they agree row for
row.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Mapping
from typing import Any

from dpsieve._validation import fail
from dpsieve.queries.schema import Column, ColumnType

__all__ = ["CSV_SUFFIXES", "SQL_TYPES", "count_rows", "csv_columns", "csv_header",
           "csv_reader", "csv_source", "file_columns", "infer_types", "is_csv", "read_frame",
           "table_of", "typed_source", "unit_nulls"]

CSV_SUFFIXES = (".csv", ".csv.gz", ".tsv")
#: The SQL type a declared type is cast to (``other``: kept as text).
SQL_TYPES = {ColumnType.INTEGER: "BIGINT", ColumnType.FLOAT: "DOUBLE",
             ColumnType.BOOLEAN: "BOOLEAN", ColumnType.STRING: "VARCHAR",
             ColumnType.OTHER: "VARCHAR"}
#: The header is read from at most this many bytes (a header line longer than this is
#: refused: no real header is).
MAX_HEADER_BYTES = 1 << 20


def is_csv(path: str) -> bool:
    return path.lower().endswith(CSV_SUFFIXES)


def _delimiter(path: str) -> str:
    return "\t" if path.lower().endswith(".tsv") else ","


def csv_header(path: str) -> tuple[str, ...]:
    """The column names: the fields of the file's first record (module docstring). A
    ValidationError naming ``data`` (with the path: the owner's configuration) if the
    file has no header line or cannot be read."""
    try:
        opener: Any = gzip.open if path.lower().endswith(".gz") else open
        with opener(path, "rb") as f:
            head = f.read(MAX_HEADER_BYTES)
    except OSError:
        raise fail("data", "csv_header", "a readable CSV file", path) from None
    text = head.decode("utf-8", errors="replace")
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        first = next(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(path),
                                quotechar='"', doublequote=True, strict=False), None)
    except csv.Error:
        first = None
    if not first or (len(head) == MAX_HEADER_BYTES and "\n" not in text):
        raise fail("data", "csv_header", "a CSV file whose first line is its header",
                   path)
    names: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(first):
        name = raw.strip() or f"column{i}"
        base, k = name, 0
        while name in seen:
            k += 1
            name = f"{base}_{k}"
        seen.add(name)
        names.append(name)
    return tuple(names)


def _literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def csv_reader(path_sql: str, path: str, names: tuple[str, ...]) -> str:
    """The table function reading the file as text with the fixed format (``path_sql``:
    the SQL naming the file, e.g. ``$path``)."""
    cols = ", ".join(f"{_literal(n)}: 'VARCHAR'" for n in names)
    return (f"read_csv({path_sql}, header = true, delim = {_literal(_delimiter(path))}, "
            "quote = '\"', escape = '\"', auto_detect = false, ignore_errors = true, "
            f"null_padding = false, strict_mode = false, columns = {{{cols}}})")


def _declared(types: Mapping[str, Any] | None) -> dict[str, ColumnType]:
    return {str(n): ColumnType(str(getattr(t, "value", t))) for n, t in (types or {}).items()}


def csv_columns(names: tuple[str, ...], types: Mapping[str, Any] | None) -> tuple[Column, ...]:
    """The public table: each column's declared type (undeclared: ``string``) and the
    storage type it is cast to."""
    d = _declared(types)
    return tuple(Column(n, d.get(n, ColumnType.STRING),
                        storage=SQL_TYPES[d.get(n, ColumnType.STRING)]) for n in names)


def csv_source(path_sql: str, path: str, names: tuple[str, ...],
               types: Mapping[str, Any] | None) -> str:
    """A subquery reading the file with each declared column cast by ``TRY_CAST``. The
    cast goes through ``nullif(cell, chr(0))``: without it DuckDB pushes the cast into
    the reader, where ``ignore_errors`` would drop the whole row instead of making the
    cell missing (tested: tests/privacy_edges/test_edges_outcomes.py)."""
    d = _declared(types)
    cols = []
    for n in names:
        t = SQL_TYPES[d.get(n, ColumnType.STRING)]
        cols.append(_q(n) if t == "VARCHAR" else
                    f"TRY_CAST(nullif({_q(n)}, chr(0)) AS {t}) AS {_q(n)}")
    return f"(SELECT {', '.join(cols)} FROM {csv_reader(path_sql, path, names)})"


def _duckdb_type(sql_type: str) -> ColumnType:
    from dpsieve.queries.engines.duckdb_sql import duckdb_column_type

    return duckdb_column_type(sql_type)


def typed_source(physical: list[tuple[Any, ...]], reader: str,
                 types: Mapping[str, Any] | None) -> tuple[list[tuple[Any, ...]], str]:
    """(the table's columns as ``(name, SQL type, public type)``, the FROM item reading
    it) for a table with stored types (``physical``: DuckDB's DESCRIBE of ``reader``): a
    column declared with another type is cast to it with ``TRY_CAST`` (``other``: kept as
    stored, it is not queried)."""
    d = _declared(types)
    out: list[tuple[Any, ...]] = []
    sel: list[str] = []
    for r in physical:
        name, sql_type = str(r[0]), str(r[1])
        have, want = _duckdb_type(sql_type), d.get(name)
        if want is None or want == have or want == ColumnType.OTHER:
            out.append((name, sql_type, have if want is None else want))
            sel.append(_q(name))
        else:
            out.append((name, SQL_TYPES[want], want))
            sel.append(f"TRY_CAST({_q(name)} AS {SQL_TYPES[want]}) AS {_q(name)}")
    if all(o[1] == str(r[1]) for o, r in zip(out, physical, strict=True)):
        return out, reader
    return out, f"(SELECT {', '.join(sel)} FROM {reader})"


def table_of(con: Any, path: str, types: Mapping[str, Any] | None
             ) -> tuple[list[tuple[Any, ...]], str]:
    """(columns, FROM item) of a CSV or Parquet file on an open DuckDB connection; the
    FROM item reads the path bound as ``$path``."""
    if is_csv(path):
        names = csv_header(path)
        cols = csv_columns(names, types)
        return ([(c.name, c.storage, c.type) for c in cols],
                csv_source("$path", path, names, types))
    reader = "read_parquet($path)"
    physical = con.execute(f"DESCRIBE SELECT * FROM {reader}", {"path": path}).fetchall()
    return typed_source(physical, reader, types)


def _connect() -> Any:
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    return con


def file_columns(path: str, types: Mapping[str, Any] | None = None) -> tuple[Column, ...]:
    """The public table of a CSV or Parquet file (metadata and declarations only)."""
    con = _connect()
    try:
        described, _ = table_of(con, path, types)
    finally:
        con.close()
    return tuple(Column(str(r[0]), r[2], storage=str(r[1])) for r in described)


def read_frame(path: str, types: Mapping[str, Any] | None = None) -> Any:
    """The whole file as a pandas frame, read as :func:`table_of` reads it (a CSV cell
    that does not cast to its declared type is missing)."""
    con = _connect()
    try:
        _, source = table_of(con, path, types)
        return con.execute(f"SELECT * FROM {source}", {"path": path}).df()
    finally:
        con.close()


def unit_nulls(path: str, types: Mapping[str, Any] | None, unit: str) -> tuple[int, int]:
    """(rows, rows whose ``unit`` is missing) as the engines read the file: a count for
    the data owner at registration (a diagnostic, never shown to an analyst)."""
    con = _connect()
    try:
        _, source = table_of(con, path, types)
        row = con.execute(f"SELECT count(*), count(*) - count({_q(unit)}) FROM {source}",
                          {"path": path}).fetchone()
    finally:
        con.close()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def infer_types(path: str) -> dict[str, str]:
    """The types DuckDB's reader guesses for a CSV file's columns from its values
    (``{"age": "integer", ...}``, every header column): a **proposal for the data owner**,
    never applied by itself. The owner may declare it (``infer_types`` at registration
    stores it as the owner's declaration, fixed from then on); it is a function of the
    values, so it is the owner's to publish, not an analyst's to read. Parquet and
    DuckDB files have stored types: ``{}``."""
    if not is_csv(path):
        return {}
    names = csv_header(path)
    con = _connect()
    try:
        got = con.execute("DESCRIBE SELECT * FROM read_csv_auto($path, header = true)",
                          {"path": path}).fetchall()
    finally:
        con.close()
    kinds = [_duckdb_type(str(r[1])).value for r in got]
    if len(kinds) != len(names):  # the sniffer split the lines otherwise: no proposal
        return {}
    return dict(zip(names, kinds, strict=True))


def count_rows(path: str) -> int:
    """The number of rows :func:`table_of` reads (the types do not change it)."""
    con = _connect()
    try:
        _, source = table_of(con, path, None)
        row = con.execute(f"SELECT count(*) FROM {source}", {"path": path}).fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0
