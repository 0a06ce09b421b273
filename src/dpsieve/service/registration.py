"""Registration bounded before it reads a file: the path resolved (a symlink loop is a 422
naming ``path``), the column count read from a CSV's first line or a Parquet footer and
capped (``max_columns``, 422 naming ``columns``), and the metadata reads that follow run
under a deadline (``registration_timeout``, 422 naming ``path``). What a registration
reads is public metadata (names and types), never a value.

A CSV's first line must end within :data:`HEADER_BYTES` bytes: a 10 GiB file of zeros
(sparse) or a file with no line breaks is refused after reading 1 MiB, not after the
type sniffer has scanned it. A metadata read past the deadline is answered 422 at the
deadline; its thread finishes on its own in the background (DuckDB cannot be stopped
from outside the connection it opened), so the deadline bounds the request, not the CPU.
"""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from dpsieve._validation import fail
from dpsieve.errors import ValidationError

__all__ = ["HEADER_BYTES", "column_count", "resolve_path", "with_deadline"]

#: A CSV's header line must end within this many bytes.
HEADER_BYTES = 1 << 20
T = TypeVar("T")


def resolve_path(text: str) -> Path:
    """The file ``text`` names, resolved; 422 naming ``path`` for a symlink loop, a path
    that cannot be resolved, or anything but an existing .csv or .parquet file."""
    try:
        path = Path(text).expanduser().resolve(strict=True)
        ok = path.suffix.lower() in (".csv", ".parquet", ".pq") and path.is_file()
    except RuntimeError:  # Python < 3.13: "Symlink loop from ..."
        raise _bad("path", "a file, not a symbolic link loop", text) from None
    except OSError as e:
        if e.errno == 40:  # ELOOP
            raise _bad("path", "a file, not a symbolic link loop", text) from None
        ok = False
    if not ok:
        raise _bad("path", "an existing .csv or .parquet file on the server", text)
    return path


def column_count(path: Path, limit: int) -> int:
    """The number of columns of ``path`` from its first line (CSV) or footer (Parquet),
    read in bounded time; 422 naming ``columns`` past ``limit``, naming ``path`` for a
    CSV whose first line does not end within :data:`HEADER_BYTES` bytes."""
    if path.suffix.lower() in (".parquet", ".pq"):
        import duckdb

        con = duckdb.connect()
        try:  # the footer's schema: one row per column (and the root)
            n = int(con.execute("SELECT count(*) - 1 FROM parquet_schema(?)",
                                [str(path)]).fetchone()[0])  # type: ignore[index]
        except duckdb.Error:
            raise _bad("path", "a readable Parquet file", str(path)) from None
        finally:
            con.close()
    else:
        with path.open("rb") as f:
            head = f.read(HEADER_BYTES + 1)
        end = head.find(b"\n")
        if end < 0 and len(head) > HEADER_BYTES:
            raise _bad("path", f"a CSV file whose first line (its header) ends within "
                       f"{HEADER_BYTES:,} bytes", str(path))
        line = head if end < 0 else head[:end]
        if b"\x00" in line:
            raise _bad("path", "a text CSV file (its header holds NUL bytes)", str(path))
        row = next(csv.reader(io.StringIO(line.decode("utf-8", errors="replace"))), [])
        n = len(row)
    if n > limit:
        raise fail("columns", "register", f"at most {limit:,} columns (setting "
                   "max_columns, DPSIEVE_MAX_COLUMNS); the file's count", n)
    return n


def with_deadline(seconds: float, what: Callable[[], T], path: str) -> T:
    """``what()`` if it returns within ``seconds``; else 422 naming ``path`` (the read
    goes on in its thread, its result dropped). Its exceptions are raised here."""
    box: list[T] = []
    err: list[BaseException] = []

    def run() -> None:
        try:
            box.append(what())
        except BaseException as e:  # handed to the request's thread
            err.append(e)

    t = threading.Thread(target=run, daemon=True, name="dpsieve-registration")
    t.start()
    t.join(seconds)
    if t.is_alive():
        raise fail("path", "register", f"a file whose metadata is read within {seconds:g} s "
                   "(setting registration_timeout, DPSIEVE_REGISTRATION_TIMEOUT; nothing "
                   "was registered)", path)
    if err:
        raise err[0]
    return box[0]


def _bad(param: str, constraint: str, value: str) -> ValidationError:
    return fail(param, "register", constraint, value)
