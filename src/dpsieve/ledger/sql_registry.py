"""The SQL ledger's plumbing and registry: appending chained audit
rows (:mod:`dpsieve.ledger.chain`), the readiness probe, and the registry of principals,
API-key hashes, data sets and grants (used by :class:`dpsieve.ledger.sql.SQLStore`)."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from dpsieve.errors import LedgerError
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    LedgerIntegrityError,
    Principal,
    canonical_json,
    utcnow,
)
from dpsieve.ledger.chain import GENESIS, Checkpoint, row_hash
from dpsieve.ledger.cursor import Cursor

__all__ = ["Head", "SQLRegistry"]

#: A chain's last row.
_HEAD_SQL = ("SELECT seq, chain_n, chain_hash FROM audit WHERE budget_id = ?"
             " ORDER BY seq DESC LIMIT 1")


@dataclass(slots=True)
class Head:
    """A chain's last row (``seq``, position ``n``, ``hash``); advanced by each append."""

    seq: int
    n: int
    hash: str


class SQLRegistry(ABC):
    """Chained appends and the registry over :meth:`_tx` (see module docstring)."""

    _verified: dict[str, Checkpoint]
    _altered: dict[str, str]

    @abstractmethod
    def _tx(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A transaction; ``write=True`` serialises with other writers of the same budget."""

    def _chain_lock(self, cur: Cursor) -> None:
        """Serialise appends to the chain of rows of no budget (key revocations); SQLite's
        write lock does already."""
        return

    def _snapshot(self, cur: Cursor) -> None:
        """Make the read transaction ``cur`` one snapshot (SQLite's read transaction is)."""
        return

    def _altered_now(self, budget_id: str, problem: str) -> LedgerIntegrityError:
        self._altered[budget_id] = problem
        self._verified.pop(budget_id, None)
        return LedgerIntegrityError(budget_id, problem)

    def _head(self, cur: Cursor, chain: str) -> Head:
        """The last row of ``chain`` (read under the chain's lock: the budget's row lock,
        SQLite's write lock or :meth:`_chain_lock`)."""
        return self._head_of(chain, cur.run(_HEAD_SQL, (chain,)).one())

    def _head_and(self, cur: Cursor, chain: str, sql: str, params: tuple[Any, ...]
                  ) -> tuple[Head, tuple[Any, ...] | None]:
        """The chain's head and the first row of ``sql`` (None if it has none), read in
        one statement (one round trip to the server), under the chain's lock."""
        row = cur.run("SELECT h.seq, h.chain_n, h.chain_hash, x.* FROM (SELECT 1 AS one) o"
                      f" LEFT JOIN ({_HEAD_SQL}) h ON 1 = 1 LEFT JOIN (SELECT 1 AS found, q.*"
                      f" FROM ({sql}) q) x ON 1 = 1", (chain, *params)).one()
        assert row is not None  # one row always: the left joins keep (SELECT 1)
        return self._head_of(chain, row[:3]), (None if row[3] is None else row[4:])

    def _head_of(self, chain: str, row: tuple[Any, ...] | None) -> Head:
        if row is None or row[0] is None:
            return Head(0, 0, GENESIS)
        if row[1] is None or row[2] is None:
            raise self._altered_now(chain, f"its last audit row ({row[0]}) has no chain "
                                           "position (a row inserted)")
        return Head(int(row[0]), int(row[1]), str(row[2]))

    def _write(self, cur: Cursor, head: Head, chain: str, principal: str, event: str,
               key: str, payload: str, data: str | None = None) -> int:
        ts = utcnow()
        n = head.n + 1
        h = row_hash(head.hash, n, ts, chain, principal, event, key, payload, data)
        row = cur.run(
            "INSERT INTO audit (ts, budget_id, principal, event, key, payload, chain_n,"
            " chain_prev, chain_hash, chain_data) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " RETURNING seq", (ts, chain, principal, event, key, payload, n, head.hash, h, data),
        ).one()
        if row is None:
            raise LedgerError("The audit log did not return the sequence number of a row.")
        head.seq, head.n, head.hash = int(row[0]), n, h
        return head.seq

    def check_ready(self) -> None:
        """Readiness without writing: the ledger answers a read (and, where the backend can
        tell, would take a write); LedgerUnavailableError if not."""
        with self._tx(write=False) as cur:
            cur.run("SELECT 1 FROM schema_version").all()

    # -- registry -----------------------------------------------------------------------
    def add_principal(self, name: str, role: str, key_hash: str) -> None:
        now = utcnow()
        with self._tx(write=True) as cur:
            row = cur.run("SELECT role FROM principals WHERE name = ?", (name,)).one()
            if row is not None and row[0] != role:
                raise LedgerError(f"Principal {name!r} exists with role {row[0]!r}.")
            if row is None:
                cur.run("INSERT INTO principals VALUES (?, ?, ?)", (name, role, now))
            if cur.run("SELECT 1 FROM api_keys WHERE key_hash = ?", (key_hash,)).one() is None:
                cur.run("INSERT INTO api_keys VALUES (?, ?, ?)", (key_hash, name, now))

    def principal_keys(self, name: str) -> list[tuple[str, str]] | None:
        """(key hash, created_at) of a principal's keys, oldest first; None if no such one."""
        with self._tx(write=False) as cur:
            if cur.run("SELECT 1 FROM principals WHERE name = ?", (name,)).one() is None:
                return None
            rows = cur.run("SELECT key_hash, created_at FROM api_keys WHERE principal = ?"
                           " ORDER BY created_at, key_hash", (name,)).all()
        return [(str(h), str(t)) for h, t in rows]

    def revoke_key(self, name: str, key_id: str) -> bool:
        """Delete the principal's key whose hash starts with ``key_id``; False if none.
        Committed before returning: later requests with that key are refused."""
        with self._tx(write=True) as cur:
            rows = cur.run("SELECT key_hash FROM api_keys WHERE principal = ?", (name,)).all()
            hit = [str(r[0]) for r in rows if str(r[0]).startswith(key_id)]
            if len(hit) != 1:
                return False
            cur.run("DELETE FROM api_keys WHERE key_hash = ?", (hit[0],))
            self._chain_lock(cur)
            self._write(cur, self._head(cur, ""), "", name, "key_revoked", "",
                        canonical_json({"key_id": key_id}))
        return True

    def key_hashes(self) -> list[str]:
        """Every API-key hash (the service keeps them to refuse a wrong key unread)."""
        with self._tx(write=False) as cur:
            return [str(r[0]) for r in cur.run("SELECT key_hash FROM api_keys").all()]

    def principal_for_key(self, key_hash: str) -> Principal | None:
        with self._tx(write=False) as cur:
            row = cur.run(
                "SELECT p.name, p.role FROM api_keys k JOIN principals p ON p.name = k.principal"
                " WHERE k.key_hash = ?", (key_hash,)
            ).one()
        return None if row is None else Principal(str(row[0]), str(row[1]))

    def register_dataset(self, name: str, source: dict[str, Any]) -> None:
        text = canonical_json(source)
        with self._tx(write=True) as cur:
            if cur.run("SELECT 1 FROM datasets WHERE name = ?", (name,)).one() is None:
                cur.run("INSERT INTO datasets VALUES (?, ?, ?)", (name, text, utcnow()))
            else:
                cur.run("UPDATE datasets SET source = ? WHERE name = ?", (text, name))

    def dataset(self, name: str) -> dict[str, Any] | None:
        with self._tx(write=False) as cur:
            row = cur.run("SELECT source FROM datasets WHERE name = ?", (name,)).one()
        if row is None:
            return None
        out: dict[str, Any] = json.loads(row[0])
        return out

    def datasets(self) -> list[str]:
        with self._tx(write=False) as cur:
            return sorted(str(r[0]) for r in cur.run("SELECT name FROM datasets").all())

    def grant(self, principal: str, dataset: str) -> None:
        with self._tx(write=True) as cur:
            if cur.run("SELECT 1 FROM principals WHERE name = ?", (principal,)).one() is None:
                raise BudgetNotFoundError(f"No principal named {principal!r}.")
            if cur.run("SELECT 1 FROM datasets WHERE name = ?", (dataset,)).one() is None:
                raise BudgetNotFoundError(f"No data set named {dataset!r}.")
            if cur.run("SELECT 1 FROM grants WHERE principal = ? AND dataset = ?",
                       (principal, dataset)).one() is None:
                cur.run("INSERT INTO grants VALUES (?, ?, ?)", (principal, dataset, utcnow()))

    def grants(self, principal: str) -> list[str]:
        with self._tx(write=False) as cur:
            rows = cur.run("SELECT dataset FROM grants WHERE principal = ?", (principal,)).all()
        return sorted(str(r[0]) for r in rows)
