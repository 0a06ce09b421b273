"""The SQL ledger shared by SQLite and PostgreSQL: one schema, one set of statements.

Backends supply a transaction (:meth:`SQLStore._tx`) and the budget lock: SQLite takes
the database write lock with ``BEGIN IMMEDIATE``; PostgreSQL locks the budget row with
``SELECT ... FOR UPDATE``. Either way, between reading a filter's state and writing the
new one no other spend on that budget can commit, so the filter decides with every
admitted query in view (check-and-spend in one transaction). The transaction commits
(``synchronous=FULL`` / WAL flush) before :meth:`spend` returns, so an answer is never
computed for a spend that is not on disk.

Statements are written with ``?`` placeholders; PostgreSQL's ``%s`` are substituted.
The schema is created by numbered migrations recorded in ``schema_version``.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager
from typing import Any

from dpsieve._memo import Memo
from dpsieve.errors import LedgerError
from dpsieve.filters.base import BudgetLeft, Cost, Decision, PrivacyFilter
from dpsieve.filters.charge import Charge, check_charge
from dpsieve.ledger.base import (
    AuditEvent,
    BudgetNotFoundError,
    FilterLoader,
    IdempotencyKeyReuseError,
    KeyRevokedError,
    Principal,
    SpendOutcome,
    SpendRecord,
    _json_safe,
    canonical_json,
    default_loader,
    left_json,
    parsed_initial,
    query_to_dict,
    spend_key,
    utcnow,
)

__all__ = ["MIGRATIONS", "Cursor", "SQLStore"]

#: Numbered migrations; ``{serial}`` is the dialect's auto-increment primary key.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            "CREATE TABLE budgets (budget_id TEXT PRIMARY KEY, state TEXT NOT NULL,"
            " initial TEXT NOT NULL, n_spends INTEGER NOT NULL DEFAULT 0,"
            " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
            "CREATE TABLE spends (budget_id TEXT NOT NULL REFERENCES budgets(budget_id),"
            " key TEXT NOT NULL, seq BIGINT NOT NULL, principal TEXT NOT NULL,"
            " fingerprint TEXT NOT NULL, decision TEXT NOT NULL, request TEXT NOT NULL,"
            " answer TEXT, created_at TEXT NOT NULL, answered_at TEXT,"
            " PRIMARY KEY (budget_id, key))",
            "CREATE TABLE audit (seq {serial}, ts TEXT NOT NULL, budget_id TEXT NOT NULL,"
            " principal TEXT NOT NULL, event TEXT NOT NULL, key TEXT NOT NULL,"
            " payload TEXT NOT NULL)",
            "CREATE INDEX audit_by_budget ON audit (budget_id, seq)",
            "CREATE TABLE principals (name TEXT PRIMARY KEY, role TEXT NOT NULL,"
            " created_at TEXT NOT NULL)",
            "CREATE TABLE api_keys (key_hash TEXT PRIMARY KEY,"
            " principal TEXT NOT NULL REFERENCES principals(name), created_at TEXT NOT NULL)",
            "CREATE TABLE datasets (name TEXT PRIMARY KEY, source TEXT NOT NULL,"
            " created_at TEXT NOT NULL)",
            "CREATE TABLE grants (principal TEXT NOT NULL REFERENCES principals(name),"
            " dataset TEXT NOT NULL REFERENCES datasets(name), created_at TEXT NOT NULL,"
            " PRIMARY KEY (principal, dataset))",
            "{append_only}",
        ),
    ),
    # the readiness probe's one row: /readyz commits a write here (issue 11 defect 3)
    (2, ("CREATE TABLE ready (id INTEGER PRIMARY KEY, ts TEXT NOT NULL)",)),
)


class Cursor:
    """A thin wrapper running ``?``-placeholder SQL on a DB-API cursor of either dialect."""

    def __init__(self, raw: Any, paramstyle: str) -> None:
        self.raw = raw
        self._pg = paramstyle == "format"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> Cursor:
        self.raw.execute(sql.replace("?", "%s") if self._pg else sql, params)
        return self

    def one(self) -> tuple[Any, ...] | None:
        row = self.raw.fetchone()
        return None if row is None else tuple(row)

    def all(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.raw.fetchall()]


class SQLStore(ABC):
    """:class:`~dpsieve.ledger.base.BudgetStore` over a SQL database (see module docstring)."""

    #: SQL suffix that row-locks the budget read in a write transaction ("" for SQLite).
    _lock_suffix = ""
    #: SQL suffix that share-locks a row read in a write transaction ("" for SQLite).
    _share_suffix = ""

    def __init__(self, *, loads: FilterLoader | None = None) -> None:
        self._loads: FilterLoader = loads or default_loader
        #: initial filters parsed, by their exact stored text (see :meth:`load_filters`)
        self._initials: Memo[PrivacyFilter] = Memo(64)

    # -- backend hooks ------------------------------------------------------------------
    @abstractmethod
    def _tx(self, *, write: bool) -> AbstractContextManager[Cursor]:
        """A transaction; ``write=True`` serialises with other writers of the same budget."""

    @abstractmethod
    def _dialect(self) -> dict[str, str]:
        """Substitutions for the migrations (``serial``, ``append_only``)."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def _migrate(self, cur: Cursor) -> None:
        cur.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY,"
                " applied_at TEXT NOT NULL)")
        done = {int(r[0]) for r in cur.run("SELECT version FROM schema_version").all()}
        sub = self._dialect()
        for version, statements in MIGRATIONS:
            if version in done:
                continue
            for st in statements:
                for part in st.format(**sub).split(";;"):
                    if part.strip():
                        cur.run(part)
            cur.run("INSERT INTO schema_version VALUES (?, ?)", (version, utcnow()))

    @staticmethod
    def _log(cur: Cursor, budget_id: str, principal: str, event: str, key: str,
             payload: Any, *, text: str | None = None) -> int:
        """Append an audit row; ``text``: the payload's canonical JSON, if already made."""
        row = cur.run(
            "INSERT INTO audit (ts, budget_id, principal, event, key, payload)"
            " VALUES (?, ?, ?, ?, ?, ?) RETURNING seq",
            (utcnow(), budget_id, principal, event, key,
             canonical_json(_json_safe(payload)) if text is None else text),
        ).one()
        if row is None:
            raise LedgerError("The audit log did not return the sequence number of a row.")
        return int(row[0])

    def _locked_budget(self, cur: Cursor, budget_id: str) -> tuple[Any, ...]:
        row = cur.run(
            "SELECT state, initial, n_spends FROM budgets WHERE budget_id = ?" + self._lock_suffix,
            (budget_id,),
        ).one()
        if row is None:
            raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
        return row

    def check_writable(self) -> None:
        """Commit a one-row write (the readiness probe); LedgerUnavailableError if not."""
        with self._tx(write=True) as cur:
            cur.run("INSERT INTO ready VALUES (1, ?) ON CONFLICT (id) DO UPDATE"
                    " SET ts = excluded.ts", (utcnow(),))

    # -- budgets ------------------------------------------------------------------------
    def create_budget(self, budget_id: str, flt: PrivacyFilter, *, replace: bool = False) -> None:
        state = flt.to_json()
        now = utcnow()
        with self._tx(write=True) as cur:
            row = cur.run(
                "SELECT n_spends FROM budgets WHERE budget_id = ?" + self._lock_suffix,
                (budget_id,),
            ).one()
            if row is not None and not replace:
                raise LedgerError(f"A budget named {budget_id!r} already exists.")
            if row is not None and int(row[0]) > 0:
                raise LedgerError(
                    f"The budget {budget_id!r} has admitted spends and cannot be replaced; "
                    "replacing it would forget privacy loss already incurred."
                )
            if row is None:
                cur.run("INSERT INTO budgets VALUES (?, ?, ?, 0, ?, ?)",
                        (budget_id, state, state, now, now))
            else:
                cur.run("UPDATE budgets SET state = ?, initial = ?, updated_at = ?"
                        " WHERE budget_id = ?", (state, state, now, budget_id))
            self._log(cur, budget_id, "", "budget_set", "", {"filter": left_json(flt)})

    def _read_state(self, budget_id: str, column: str) -> str:
        with self._tx(write=False) as cur:
            row = cur.run(f"SELECT {column} FROM budgets WHERE budget_id = ?",
                          (budget_id,)).one()
        if row is None:
            raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
        return str(row[0])

    def load_filter(self, budget_id: str) -> PrivacyFilter:
        return self._loads(self._read_state(budget_id, "state"))

    def initial_filter(self, budget_id: str) -> PrivacyFilter:
        return self._loads(self._read_state(budget_id, "initial"))

    def load_filters(self, budget_id: str) -> tuple[PrivacyFilter, PrivacyFilter]:
        """(current, initial) filters read in one transaction (one snapshot). The initial
        one is read-only and may be shared between calls: it is parsed once per exact
        stored text (:func:`dpsieve.ledger.base.load_filters`)."""
        with self._tx(write=False) as cur:
            row = cur.run("SELECT state, initial FROM budgets WHERE budget_id = ?",
                          (budget_id,)).one()
        if row is None:
            raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
        return self._loads(str(row[0])), parsed_initial(self._initials, self._loads,
                                                        str(row[1]))

    def has_budget(self, budget_id: str) -> bool:
        """Whether a budget named ``budget_id`` exists (its state is not read)."""
        with self._tx(write=False) as cur:
            return cur.run("SELECT 1 FROM budgets WHERE budget_id = ?",
                           (budget_id,)).one() is not None

    def budget_ids(self) -> list[str]:
        with self._tx(write=False) as cur:
            return sorted(str(r[0]) for r in cur.run("SELECT budget_id FROM budgets").all())

    def spend(
        self,
        budget_id: str,
        query: Charge,
        *,
        key: str,
        principal: str = "",
        request: dict[str, Any] | None = None,
    ) -> SpendOutcome:
        # typed only (a dict is a ChargeTypeError naming 'query'), before any lookup
        query = check_charge(query, "query", f"{type(self).__name__}.spend")
        req = _json_safe(request if request is not None else {"query": query_to_dict(query)})
        # each JSON text made once: req_text is canonical_json(req), so fp is
        # fingerprint(req), and {"request": req} (one key, req already JSON-safe) renders
        # as '{"request":' + req_text + '}': the rows are byte for byte what they were
        req_text = canonical_json(req)
        fp = hashlib.sha256(req_text.encode()).hexdigest()
        with self._tx(write=True) as cur:
            state = str(self._locked_budget(cur, budget_id)[0])
            kh = spend_key.get()
            # PostgreSQL: FOR SHARE makes a concurrent revocation (DELETE) wait for this
            # spend to commit, and this check wait for a pending revocation: a spend never
            # commits after the revocation of its key did. SQLite serialises all writers.
            if kh is not None and cur.run("SELECT 1 FROM api_keys WHERE key_hash = ?"
                                          + self._share_suffix, (kh,)).one() is None:
                raise KeyRevokedError("The API key was revoked; nothing was spent.")
            old = cur.run(
                "SELECT fingerprint, decision, answer FROM spends WHERE budget_id = ? AND key = ?",
                (budget_id, key),
            ).one()
            if old is not None:
                if old[0] != fp:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request."
                    )
                self._log(cur, budget_id, principal, "replay", key, None,
                          text='{"request":' + req_text + "}")
                answer = None if old[2] is None else json.loads(old[2])
                return SpendOutcome(key, _decision(old[1]), replayed=True, answer=answer)
            flt = self._loads(state)
            decision = flt.try_spend(query)  # may raise: the transaction rolls back
            self._log(cur, budget_id, principal, "request", key, None,
                      text='{"request":' + req_text + "}")
            dec_text = canonical_json(_json_safe(decision.to_dict()))
            seq = self._log(cur, budget_id, principal, "decision", key, None, text=dec_text)
            if decision.admitted:
                now = utcnow()
                cur.run("UPDATE budgets SET state = ?, n_spends = n_spends + 1, updated_at = ?"
                        " WHERE budget_id = ?", (flt.to_json(), now, budget_id))
                cur.run(
                    "INSERT INTO spends (budget_id, key, seq, principal, fingerprint, decision,"
                    " request, answer, created_at, answered_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL)",
                    (budget_id, key, seq, principal, fp, dec_text, req_text, now),
                )
        return SpendOutcome(key, decision)

    def record_answer(self, budget_id: str, key: str, answer: dict[str, Any]) -> dict[str, Any]:
        with self._tx(write=True) as cur:
            self._locked_budget(cur, budget_id)
            row = cur.run(
                "SELECT answer, principal FROM spends WHERE budget_id = ? AND key = ?",
                (budget_id, key),
            ).one()
            if row is None:
                raise BudgetNotFoundError(f"No admitted spend with key {key!r} on {budget_id!r}.")
            if row[0] is not None:
                stored: dict[str, Any] = json.loads(row[0])
                return stored
            text = canonical_json(_json_safe(answer))
            cur.run("UPDATE spends SET answer = ?, answered_at = ? WHERE budget_id = ? AND key = ?",
                    (text, utcnow(), budget_id, key))
            self._log(cur, budget_id, str(row[1]), "answer", key, {"released": True})
            out: dict[str, Any] = json.loads(text)
            return out

    def history(self, budget_id: str) -> list[SpendRecord]:
        with self._tx(write=False) as cur:
            if cur.run("SELECT 1 FROM budgets WHERE budget_id = ?", (budget_id,)).one() is None:
                raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
            rows = cur.run(
                "SELECT seq, key, principal, decision, request, created_at, answer"
                " FROM spends WHERE budget_id = ? ORDER BY seq", (budget_id,)
            ).all()
        out = []
        for n, (_, key, principal, dec, req, created, answer) in enumerate(rows, start=1):
            d = json.loads(dec)  # n: the budget's own sequence (the audit seq is global)
            out.append(SpendRecord(n, str(key), str(principal), Cost(d["cost"]),
                                   BudgetLeft(d["remaining"]),
                                   json.loads(req), str(created), answer is not None))
        return out

    def audit(self, budget_id: str | None = None) -> list[AuditEvent]:
        sql = "SELECT seq, ts, budget_id, principal, event, key, payload FROM audit"
        params: tuple[Any, ...] = ()
        if budget_id is not None:
            sql += " WHERE budget_id = ?"
            params = (budget_id,)
        with self._tx(write=False) as cur:
            rows = cur.run(sql + " ORDER BY seq", params).all()
        return [AuditEvent(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]),
                           json.loads(r[6])) for r in rows]

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
            self._log(cur, "", name, "key_revoked", "", {"key_id": key_id})
        return True

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


def _decision(text: str) -> Decision:
    d = json.loads(text)
    return Decision.from_dict(d)
