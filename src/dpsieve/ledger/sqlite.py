"""The embedded ledger: SQLite in WAL mode, check-and-spend under ``BEGIN IMMEDIATE``.

``BEGIN IMMEDIATE`` takes the database's single write lock before the budget is read, so
concurrent spends (threads or processes, each with its own connection) are serialised;
``busy_timeout`` makes waiters queue instead of failing. ``synchronous=FULL`` makes a
commit durable (fsync of the WAL) before :meth:`spend` returns, so an answer is only ever
computed for a charge that survives a crash or power loss.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from dpsieve.errors import ConcurrencyError
from dpsieve.ledger.base import BudgetNotFoundError, FilterLoader, LedgerUnavailableError
from dpsieve.ledger.cursor import Cursor
from dpsieve.ledger.sql import SQLStore
from dpsieve.ledger.sql_registry import Head

__all__ = ["SQLiteStore"]

#: :meth:`SQLiteStore._budget_head_spend`'s statement, by the spend columns it reads.
_BUDGET_HEAD_SPEND: dict[str, str] = {}

_APPEND_ONLY = (
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;;"
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"
    " BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END"
)


class SQLiteStore(SQLStore):
    """A ledger in one SQLite file (``":memory:"`` is refused: use :class:`MemoryStore`).

    Each thread gets its own connection; all connections are closed by :meth:`close`.
    """

    def __init__(
        self, path: str | Path, *, loads: FilterLoader | None = None, timeout: float = 60.0
    ) -> None:
        super().__init__(loads=loads)
        self.path = str(path)
        if self.path == ":memory:" or self.path.startswith("file:"):
            raise ValueError("SQLiteStore needs a file path; use MemoryStore for memory.")
        self._timeout = timeout
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        # Writers of this process queue on a lock (FIFO-ish, no polling) before taking
        # SQLite's write lock; other processes still meet busy_timeout's back-off.
        self._write_lock = threading.Lock()
        with self._tx(write=True) as cur:
            self._migrate(cur)

    def _budget_head_spend(self, cur: Cursor, budget_id: str, key: str, cols: str
                           ) -> tuple[tuple[Any, ...], Head, tuple[Any, ...] | None]:
        # one statement: SQLite's write lock (BEGIN IMMEDIATE) is held before it runs
        sql = _BUDGET_HEAD_SPEND.get(cols)
        if sql is None:
            sql = _BUDGET_HEAD_SPEND[cols] = (
                "SELECT b.state, b.initial, b.n_spends, a.seq, a.chain_n, a.chain_hash,"
                " s.budget_id, " + ", ".join("s." + c.strip() for c in cols.split(","))
                + " FROM budgets b LEFT JOIN audit a ON a.seq = (SELECT max(seq) FROM audit"
                " WHERE budget_id = ?1) LEFT JOIN spends s ON s.budget_id = b.budget_id"
                " AND s.key = ?2 WHERE b.budget_id = ?1")
        r = cur.run(sql, (budget_id, key)).one()
        if r is None:
            raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
        return r[:3], self._head_of(budget_id, r[3:6]), None if r[6] is None else r[7:]

    def _dialect(self) -> dict[str, str]:
        return {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "append_only": _APPEND_ONLY}

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None,
                                   check_same_thread=False)
            conn.execute(f"PRAGMA busy_timeout = {int(self._timeout * 1000)}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            conn.execute("PRAGMA foreign_keys = ON")
            self._local.conn = conn
            with self._all_lock:
                self._all.append(conn)
        return conn

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Cursor]:
        if write:
            with self._write_lock, self._tx_unlocked(write=True) as cur:
                yield cur
            return
        with self._tx_unlocked(write=False) as cur:
            yield cur

    def _begin(self, write: bool) -> sqlite3.Connection:
        """This thread's connection in a new transaction. A connection that cannot begin
        (e.g. one opened read-only while the file was read-only, and the file is writable
        again) is dropped and the file reopened once: nothing ran on it, so the retry is
        safe, and the first write after a recovery succeeds instead of failing (503)."""
        for attempt in (0, 1):
            conn = None
            try:
                conn = self._conn()
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                return conn
            except sqlite3.Error as e:
                name = str(getattr(e, "sqlite_errorname", ""))
                if attempt == 0 and conn is not None and not name.startswith(
                        ("SQLITE_BUSY", "SQLITE_LOCKED")):
                    self._drop_conn()
                    continue
                raise self._fault(e, "open") from None
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def _tx_unlocked(self, *, write: bool) -> Iterator[Cursor]:
        conn = self._begin(write)
        try:
            yield Cursor(conn.cursor(), "qmark")
        except sqlite3.Error as e:
            self._rollback(conn)
            raise self._fault(e, "write") from None
        except BaseException:
            self._rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            self._rollback(conn)
            err = self._fault(e, "commit")
            if isinstance(err, LedgerUnavailableError) and write:
                err.uncertain = True  # a failed COMMIT may still have reached the WAL
            raise err from None

    @staticmethod
    def _rollback(conn: sqlite3.Connection) -> None:
        # SQLite may have rolled back already (e.g. after SQLITE_FULL)
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")

    def _fault(self, e: sqlite3.Error, what: str) -> Exception:
        """A lock timeout is 'busy' (ConcurrencyError); a read-only, full or failing file
        is LedgerUnavailableError, and this thread's connection is dropped so the next
        request reopens the file: a connection opened read-only stays read-only, so
        without this the process kept failing after the file was writable again."""
        name = str(getattr(e, "sqlite_errorname", "")) or type(e).__name__
        if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
            return ConcurrencyError(f"Could not lock the SQLite ledger {self.path!r}: {e}")
        self._drop_conn()
        return LedgerUnavailableError(
            f"The SQLite ledger {self.path!r} cannot {what} ({name}: {e}).",
            cannot_write=True)

    def check_ready(self) -> None:
        """Readiness without writing: a read, then the write lock taken and released at
        once (``BEGIN IMMEDIATE``, ``ROLLBACK``: refused on a read-only connection), the
        file writable for this process (``os.access``: an immutable or read-only file),
        and at least 1 MiB free beside the file."""
        import os
        import shutil

        super().check_ready()
        with self._write_lock:
            conn = self._begin(True)
            self._rollback(conn)
        # a file SQLite fell back to opening read-only (immutable, or its mode changed)
        # still takes BEGIN IMMEDIATE; the kernel's answer for a write decides
        if os.path.exists(self.path) and not os.access(self.path, os.W_OK):
            raise LedgerUnavailableError(f"The SQLite ledger {self.path!r} cannot take "
                                         "writes (the file is read-only).", cannot_write=True)
        where = os.path.dirname(os.path.abspath(self.path))
        if shutil.disk_usage(where).free < 1 << 20:
            raise LedgerUnavailableError(f"The SQLite ledger {self.path!r} has less than "
                                         "1 MiB of disk left.", cannot_write=True)

    def _drop_conn(self) -> None:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is None:
            return
        with self._all_lock:
            if conn in self._all:
                self._all.remove(conn)
        with suppress(sqlite3.Error):
            conn.close()

    def close(self) -> None:
        with self._all_lock:
            for c in self._all:
                c.close()
            self._all.clear()
        self._local = threading.local()
