"""The server ledger: PostgreSQL, check-and-spend under a row lock on the budget.

A spend runs in one READ COMMITTED transaction that first does
``SELECT ... FROM budgets WHERE budget_id = %s FOR UPDATE``: a concurrent spend on the same
budget blocks on the row lock until this one commits, then reads the new state, so the
filter sees every admitted query. Spends on different budgets do not wait for each other.
The commit returns after the WAL is flushed (``synchronous_commit`` default ``on``), so a
charge is durable before any answer is computed. The schema is the SQLite one (same
migrations), kept in its own PostgreSQL schema (``schema=``), created on first use under
an advisory lock so concurrent first connections do not race.
"""

from __future__ import annotations

import contextlib
import queue
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dpsieve._validation import Redacted, fail
from dpsieve.ledger.base import FilterLoader, LedgerUnavailableError
from dpsieve.ledger.cursor import Cursor
from dpsieve.ledger.location import parse_location
from dpsieve.ledger.migrations import LATEST
from dpsieve.ledger.sql import SQLStore

__all__ = ["PostgresStore", "audit_role_sql"]

_APPEND_ONLY = (
    "CREATE OR REPLACE FUNCTION audit_append_only() RETURNS trigger LANGUAGE plpgsql AS"
    " $fn$ BEGIN RAISE EXCEPTION 'the audit log is append-only'; END $fn$;;"
    "CREATE TRIGGER audit_no_change BEFORE UPDATE OR DELETE ON audit"
    " FOR EACH ROW EXECUTE FUNCTION audit_append_only()"
)
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_MIGRATION_LOCK = 0x64707369  # "dpsi": pg_advisory_xact_lock key for migrations
_CHAIN_LOCK = 0x64707372  # appends to the chain of rows of no budget (key revocations)


#: What the service does to each table, no more: budgets and spends are never deleted
#: (a reset or a deleted spend is also detected by the chain's replay), principals and
#: grants never changed, keys deleted only to revoke them, the audit log only appended
#: to, the readiness table never written (the probe reads).
_SERVICE_GRANTS = (
    ("SELECT, INSERT, UPDATE (state, initial, n_spends, updated_at)", ("budgets",)),
    ("SELECT, INSERT, UPDATE (answer, answered_at)", ("spends",)),
    ("SELECT, INSERT, UPDATE (source)", ("datasets",)),
    # DELETE to revoke; UPDATE of one harmless column because PostgreSQL requires one for
    # the spend's SELECT ... FOR SHARE of its key (which orders it with a revocation)
    ("SELECT, INSERT, DELETE, UPDATE (created_at)", ("api_keys",)),
    ("SELECT, INSERT", ("principals", "grants", "audit")),
    ("SELECT", ("schema_version",)),
    # children: their state changes with each answer; grants and answers only added
    ("SELECT, INSERT, UPDATE (public, state, version, updated_at)", ("children",)),
    ("SELECT, INSERT", ("child_grants", "child_answers")),
    # budgets over time: declarations (the row also locks a data set's queue), blocks,
    # arrivals and quotas only added, groups' members replaced, transactions answered once,
    # queued requests' status moved
    ("SELECT, INSERT, UPDATE (spec)", ("blocksets",)),
    ("SELECT, INSERT", ("blocks", "arrivals", "quotas")),
    ("SELECT, INSERT, DELETE", ("members",)),
    ("SELECT, INSERT, UPDATE (answer, answered_at)", ("txns",)),
    ("SELECT, INSERT, UPDATE (status, reason, position, decided_at)", ("pending",)),
)


def audit_role_sql(schema: str = "dpsieve", role: str = "dpsieve_service") -> list[str]:
    """The grants that let ``role`` run the service on ``schema`` and do nothing more
    (``_SERVICE_GRANTS``): it may only append to (and read) the audit log, and owns
    nothing, so it cannot drop or disable the append-only trigger either. Run them as
    the role that owns the schema (which created it, e.g. with ``dpsieve budget show
    --database-url`` under that role), after every migration (docs/service.md, "Audit log
    on PostgreSQL"; tested in tests/system/test_system_audit_role.py)."""
    for what, v in (("schema", schema), ("role", role)):
        if not _SCHEMA_RE.match(v):
            raise fail(what, "audit_role_sql", "a lower-case SQL identifier", v)
    return [f"GRANT USAGE ON SCHEMA {schema} TO {role}"] + [
        f"GRANT {privileges} ON {', '.join(f'{schema}.{t}' for t in tables)} TO {role}"
        for privileges, tables in _SERVICE_GRANTS]


class PostgresStore(SQLStore):
    """A ledger in a PostgreSQL schema, with a small connection pool (``pool_size``)."""

    _lock_suffix = " FOR UPDATE"
    _share_suffix = " FOR SHARE"

    def __init__(
        self,
        url: str,
        *,
        schema: str = "dpsieve",
        loads: FilterLoader | None = None,
        pool_size: int = 16,
        connect_timeout: float = 5.0,
    ) -> None:
        super().__init__(loads=loads)
        if not _SCHEMA_RE.match(schema):
            raise fail("schema", "PostgresStore", "a lower-case SQL identifier", schema)
        import psycopg

        self._psycopg = psycopg
        self._loc = parse_location(url)
        if self._loc.kind != "postgresql":
            raise fail("url", "PostgresStore", "a postgresql:// URL or libpq key=value pairs",
                       Redacted(self._loc.display))
        self.url = self._loc.target  # for the driver; printed only as self._loc.display
        self.schema = schema
        self._timeout = connect_timeout
        self._pool: queue.LifoQueue[Any] = queue.LifoQueue()
        self._slots = threading.BoundedSemaphore(pool_size)
        self._all: list[Any] = []
        self._all_lock = threading.Lock()
        with self._checkout() as conn, conn.transaction():
            cur = Cursor(conn.cursor(), "format")
            # An up-to-date schema is used as it is: a service role that owns nothing and
            # may only append to the audit table (docs/service.md, "Audit log") starts
            # without any CREATE privilege. Otherwise migrate under the advisory lock.
            if self._version(cur) < LATEST:
                cur.run("SELECT pg_advisory_xact_lock(?)", (_MIGRATION_LOCK,))
                cur.run(f"CREATE SCHEMA IF NOT EXISTS {schema}")
                self._migrate(cur)

    def _version(self, cur: Cursor) -> int:
        """The schema's migration version (0: no schema or no version table yet)."""
        row = cur.run("SELECT to_regclass(?)", (f"{self.schema}.schema_version",)).one()
        if row is None or row[0] is None:
            return 0
        row = cur.run(f"SELECT COALESCE(MAX(version), 0) FROM {self.schema}.schema_version"
                      ).one()
        return 0 if row is None else int(row[0])

    def _dialect(self) -> dict[str, str]:
        return {
            "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
            "append_only": _APPEND_ONLY,
        }

    def _new_conn(self) -> Any:
        try:
            conn = self._psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=max(1, int(self._timeout)),
                options=f"-c search_path={self.schema}",
            )
        except self._psycopg.OperationalError as e:
            raise LedgerUnavailableError(f"Cannot connect to the PostgreSQL ledger at "
                                         f"{self._loc.display}: {self._loc.scrub(str(e))}"
                                         ) from None
        with self._all_lock:
            self._all.append(conn)
        return conn

    @contextmanager
    def _checkout(self) -> Iterator[Any]:
        self._slots.acquire()
        try:
            try:
                conn = self._pool.get_nowait()
            except queue.Empty:
                conn = self._new_conn()
            if conn.closed or conn.broken:
                conn = self._new_conn()
            try:
                yield conn
            finally:
                if not (conn.closed or conn.broken):
                    self._pool.put(conn)
        finally:
            self._slots.release()

    @contextmanager
    def _tx(self, *, write: bool) -> Iterator[Cursor]:
        body_done = False
        try:
            with self._checkout() as conn, conn.transaction():
                yield Cursor(conn.cursor(), "format")
                body_done = True  # the transaction's exit commits
        except self._psycopg.OperationalError as e:
            # the server went away (or refuses writes): idle pooled connections are most
            # likely dead too, so they are dropped and the next request reconnects. A
            # commit cut off here may or may not have landed (uncertain); a retry with the
            # same idempotency key is charged at most once.
            self._drain()
            raise LedgerUnavailableError(f"The PostgreSQL ledger at {self._loc.display} "
                                         f"failed: {self._loc.scrub(str(e))}",
                                         uncertain=write and body_done) from None

    def _snapshot(self, cur: Cursor) -> None:
        cur.run("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

    def _chain_lock(self, cur: Cursor) -> None:
        cur.run("SELECT pg_advisory_xact_lock(?)", (_CHAIN_LOCK,))

    def check_ready(self) -> None:
        """Readiness without writing: the server answers, is not a read-only replica or
        session, and this role may append to the audit log."""
        with self._tx(write=False) as cur:
            row = cur.run("SELECT pg_is_in_recovery(), current_setting('transaction_read_only'),"
                          " has_table_privilege(current_user, 'audit', 'INSERT')").one()
        if row is None or bool(row[0]) or str(row[1]) == "on" or not bool(row[2]):
            raise LedgerUnavailableError(f"The PostgreSQL ledger at {self._loc.display} "
                                         "cannot take writes (read-only or no privilege).",
                                         cannot_write=True)

    def _drain(self) -> None:
        while True:
            try:
                conn = self._pool.get_nowait()
            except queue.Empty:
                return
            # closing a dead connection may fail; it is gone either way
            with contextlib.suppress(Exception):
                conn.close()

    def drop_schema(self) -> None:
        """Drop this store's schema and everything in it (for tests and teardown)."""
        with self._checkout() as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.schema} CASCADE")

    def close(self) -> None:
        with self._all_lock:
            for c in self._all:
                c.close()
            self._all.clear()

    def __repr__(self) -> str:
        return f"PostgresStore({self._loc.display!r}, schema={self.schema!r})"
