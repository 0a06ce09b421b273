"""The SQL ledger shared by SQLite and PostgreSQL: one schema, one set of statements.

Backends supply a transaction (:meth:`SQLStore._tx`) and the budget lock: SQLite takes
the database write lock with ``BEGIN IMMEDIATE``; PostgreSQL locks the budget row with
``SELECT ... FOR UPDATE``. Either way, between reading a filter's state and writing the
new one no other spend on that budget can commit, so the filter decides with every
admitted query in view (check-and-spend in one transaction). The transaction commits
(``synchronous=FULL`` / WAL flush) before :meth:`spend` returns, so an answer is never
computed for a spend that is not on disk.

The audit log is a hash chain per budget and the budget's state is a function of it
(:mod:`dpsieve.ledger.chain`). Inside each spend's transaction the store checks that the
stored state is the replay of the budget's log: from the position it verified last
(kept per budget in memory, so a spend with no other writer in between reads one more
row, the chain's last), it replays the rows written since and compares; a budget whose
state or log was altered is refused from then on (:class:`LedgerIntegrityError`), as it
is after :meth:`verify` (the service runs it at start-up) finds it altered.

Statements are written with ``?`` placeholders; PostgreSQL's ``%s`` are substituted.
The schema is created by numbered migrations (:mod:`dpsieve.ledger.migrations`).
"""

from __future__ import annotations

import hashlib
import json
from abc import abstractmethod
from collections.abc import Callable
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
    LedgerIntegrityError,
    SpendOutcome,
    SpendRecord,
    _json_safe,
    canonical_json,
    left_json,
    note_committed,
    query_to_dict,
    refusal_record,
    spend_key,
    utcnow,
)
from dpsieve.ledger.blocks import SQLBlocks
from dpsieve.ledger.chain import ChainBroken, ChainRow, Checkpoint, Replay, state_sha
from dpsieve.ledger.chain import encode_charge as _encode_charge
from dpsieve.ledger.children import SQLChildren
from dpsieve.ledger.cursor import Cursor
from dpsieve.ledger.loaders import default_loader, parsed_initial
from dpsieve.ledger.migrations import AUDIT_COLUMNS, MIGRATIONS, migrate
from dpsieve.ledger.queue import SQLQueue
from dpsieve.ledger.sql_registry import Head, SQLRegistry

__all__ = ["MIGRATIONS", "Cursor", "SQLStore"]


class SQLStore(SQLChildren, SQLBlocks, SQLQueue, SQLRegistry):
    """:class:`~dpsieve.ledger.base.BudgetStore` over a SQL database (see module docstring)."""

    #: SQL suffix that row-locks the budget read in a write transaction ("" for SQLite).
    _lock_suffix = ""
    #: SQL suffix that share-locks a row read in a write transaction ("" for SQLite).
    _share_suffix = ""

    def __init__(self, *, loads: FilterLoader | None = None) -> None:
        self._loads: FilterLoader = loads or default_loader
        #: initial filters parsed, by their exact stored text (see :meth:`load_filters`)
        self._initials: Memo[PrivacyFilter] = Memo(64)
        #: per budget, the last position of its chain verified by replay
        self._verified: dict[str, Checkpoint] = {}
        #: budgets found altered: refused (the problem, in words)
        self._altered: dict[str, str] = {}

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
        migrate(cur, self._dialect())

    # -- the chain ----------------------------------------------------------------------
    def _guard(self, budget_id: str) -> None:
        problem = self._altered.get(budget_id)
        if problem is not None:
            raise LedgerIntegrityError(budget_id, problem)

    @staticmethod
    def _rows(cur: Cursor, budget_id: str, after: int = 0) -> list[ChainRow]:
        rows = cur.run(f"SELECT {AUDIT_COLUMNS} FROM audit WHERE budget_id = ? AND seq > ?"
                       " ORDER BY seq", (budget_id, after)).all()
        return [_chain_row(r) for r in rows]

    def _check(self, cur: Cursor, budget_id: str, row: tuple[Any, ...],
               head: Head | None = None) -> Head:
        """The chain's head (read here unless given), after checking that the stored
        budget ``row`` (state, initial, n_spends) is the replay of its log (from the last
        verified position)."""
        self._guard(budget_id)
        head = self._head(cur, budget_id) if head is None else head
        state, initial, n = str(row[0]), str(row[1]), int(row[2])
        cp = self._verified.get(budget_id)
        if cp is not None and (cp.seq, cp.n, cp.head, cp.admitted) == (
                head.seq, head.n, head.hash, n) and cp.state == state and cp.initial == initial:
            return head
        rep = Replay(budget_id, self._loads, start=cp)
        try:
            for r in self._rows(cur, budget_id, cp.seq if cp else 0):
                rep.feed(r)
            rep.finish(state, initial, n)
        except ChainBroken as e:
            raise self._altered_now(budget_id, str(e)) from None
        self._verified[budget_id] = rep.checkpoint()
        return head

    def _advance(self, budget_id: str, before: Head, after: Head, state: str | None = None,
                 initial: str | None = None, spent: int = 0) -> None:
        """After a commit: move the verified position from ``before`` to ``after`` (the
        rows this store just wrote), if it was at ``before``."""
        cp = self._verified.get(budget_id)
        if cp is None or (cp.seq, cp.n, cp.head) != (before.seq, before.n, before.hash):
            return
        self._verified[budget_id] = Checkpoint(
            after.seq, after.n, after.hash, cp.state if state is None else state,
            cp.initial if initial is None else initial, cp.admitted + spent)

    def _locked_budget(self, cur: Cursor, budget_id: str) -> tuple[Any, ...]:
        row = cur.run(
            "SELECT state, initial, n_spends FROM budgets WHERE budget_id = ?" + self._lock_suffix,
            (budget_id,),
        ).one()
        if row is None:
            raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
        return row

    def _budget_head_spend(self, cur: Cursor, budget_id: str, key: str, cols: str
                           ) -> tuple[tuple[Any, ...], Head, tuple[Any, ...] | None]:
        """The budget's row (state, initial, n_spends), locked; then, under that lock, the
        chain's head and the columns ``cols`` of the key's spend (None: no spend), read
        in one statement."""
        row = self._locked_budget(cur, budget_id)
        head, spend = self._head_and(cur, budget_id, f"SELECT {cols} FROM spends WHERE"
                                     " budget_id = ? AND key = ?", (budget_id, key))
        return row, head, spend

    # -- budgets ------------------------------------------------------------------------
    def create_budget(self, budget_id: str, flt: PrivacyFilter, *, replace: bool = False) -> None:
        state = flt.to_json()
        now = utcnow()
        with self._tx(write=True) as cur:
            row = cur.run(
                "SELECT state, initial, n_spends FROM budgets WHERE budget_id = ?"
                + self._lock_suffix, (budget_id,)).one()
            if row is not None and not replace:
                raise LedgerError(f"A budget named {budget_id!r} already exists.")
            if row is not None:
                self._check(cur, budget_id, row)  # a reset n_spends is not believed
            if row is not None and int(row[2]) > 0:
                raise LedgerError(
                    f"The budget {budget_id!r} has admitted spends and cannot be replaced; "
                    "replacing it would forget privacy loss already incurred."
                )
            if row is None:
                self._guard(budget_id)
                cur.run("INSERT INTO budgets VALUES (?, ?, ?, 0, ?, ?)",
                        (budget_id, state, state, now, now))
            else:
                cur.run("UPDATE budgets SET state = ?, initial = ?, updated_at = ?"
                        " WHERE budget_id = ?", (state, state, now, budget_id))
            head = self._head(cur, budget_id)
            before = Head(head.seq, head.n, head.hash)
            self._write(cur, head, budget_id, "", "budget_set", "",
                         canonical_json(_json_safe({"filter": left_json(flt)})),
                         canonical_json({"state": state}))
        if row is None and before.n == 0:
            self._verified[budget_id] = Checkpoint(head.seq, head.n, head.hash, state, state,
                                                   0)
        else:
            self._advance(budget_id, before, head, state, state)

    def _read_state(self, budget_id: str, column: str) -> str:
        self._guard(budget_id)
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
        self._guard(budget_id)
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
        return self._spend(budget_id, query, key=key, principal=principal, request=request)

    def _spend(
        self,
        budget_id: str,
        query: Charge,
        *,
        key: str,
        principal: str = "",
        request: dict[str, Any] | None = None,
        then: Callable[[Cursor, Head, SpendOutcome], None] | None = None,
    ) -> SpendOutcome:
        """:meth:`spend`; ``then(cur, head, outcome)`` runs inside the same transaction
        after the spend's rows are written (a child opened with its charge: the rows it
        writes to the chain advance ``head``), and may raise to roll everything back."""
        # typed only (a dict is a ChargeTypeError naming 'query'), before any lookup
        query = check_charge(query, "query", f"{type(self).__name__}.spend")
        req = _json_safe(request if request is not None else {"query": query_to_dict(query)})
        # each JSON text made once: req_text is canonical_json(req), so fp is
        # fingerprint(req), and {"request": req} (one key, req already JSON-safe) renders
        # as '{"request":' + req_text + '}'
        req_text = canonical_json(req)
        fp = hashlib.sha256(req_text.encode()).hexdigest()
        new_state: str | None = None
        with self._tx(write=True) as cur:
            # the budget (locked), the chain's head and the key's earlier spend
            row, head, old = self._budget_head_spend(cur, budget_id, key,
                                                     "fingerprint, decision, answer")
            kh = spend_key.get()
            # PostgreSQL: FOR SHARE makes a concurrent revocation (DELETE) wait for this
            # spend to commit, and this check wait for a pending revocation: a spend never
            # commits after the revocation of its key did. SQLite serialises all writers.
            if kh is not None and cur.run("SELECT 1 FROM api_keys WHERE key_hash = ?"
                                          + self._share_suffix, (kh,)).one() is None:
                raise KeyRevokedError("The API key was revoked; nothing was spent.")
            head = self._check(cur, budget_id, row, head)
            before = Head(head.seq, head.n, head.hash)
            if old is not None:
                if old[0] != fp:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request."
                    )
                # bounded: the request is in the log once, with its admission
                self._write(cur, head, budget_id, principal, "replay", key,
                             '{"request_sha256":"' + fp + '"}')
                answer = None if old[2] is None else json.loads(old[2])
                out = SpendOutcome(key, _decision(old[1]), replayed=True, answer=answer)
            else:
                flt = self._loads(str(row[0]))
                decision = flt.try_spend(query)  # may raise: the transaction rolls back
                dec_text = canonical_json(_json_safe(decision.to_dict()))
                if not decision.admitted:  # a bounded record (the request may be large)
                    self._write(cur, head, budget_id, principal, "request", key,
                                 refusal_record(req, req_text, fp))
                    self._write(cur, head, budget_id, principal, "decision", key, dec_text)
                else:
                    new_state = flt.to_json()
                    self._write(cur, head, budget_id, principal, "request", key,
                                 '{"request":' + req_text + "}")
                    seq = self._write(cur, head, budget_id, principal, "decision", key, dec_text,
                                       canonical_json({"charge": _encode_charge(query),
                                                       "state_sha256": state_sha(new_state)}))
                    now = utcnow()
                    cur.run("UPDATE budgets SET state = ?, n_spends = n_spends + 1,"
                            " updated_at = ? WHERE budget_id = ?", (new_state, now, budget_id))
                    cur.run(
                        "INSERT INTO spends (budget_id, key, seq, principal, fingerprint,"
                        " decision, request, answer, created_at, answered_at)"
                        " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL)",
                        (budget_id, key, seq, principal, fp, dec_text, req_text, now),
                    )
                out = SpendOutcome(key, decision)
            if then is not None:
                then(cur, head, out)
        if out.decision.admitted:  # a charge now on disk (or one made before: a replay)
            note_committed()
        self._advance(budget_id, before, head, new_state, spent=new_state is not None)
        return out

    def record_answer(self, budget_id: str, key: str, answer: dict[str, Any]) -> dict[str, Any]:
        self._guard(budget_id)
        with self._tx(write=True) as cur:
            _, head, row = self._budget_head_spend(cur, budget_id, key, "answer, principal")
            if row is None:
                raise BudgetNotFoundError(f"No admitted spend with key {key!r} on {budget_id!r}.")
            if row[0] is not None:
                stored: dict[str, Any] = json.loads(row[0])
                return stored
            text = canonical_json(_json_safe(answer))
            cur.run("UPDATE spends SET answer = ?, answered_at = ? WHERE budget_id = ? AND key = ?",
                    (text, utcnow(), budget_id, key))
            before = Head(head.seq, head.n, head.hash)
            self._write(cur, head, budget_id, str(row[1]), "answer", key, '{"released":true}')
        self._advance(budget_id, before, head)
        out: dict[str, Any] = json.loads(text)
        return out

    def history(self, budget_id: str) -> list[SpendRecord]:
        self._guard(budget_id)
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
            self._guard(budget_id)
            sql += " WHERE budget_id = ?"
            params = (budget_id,)
        with self._tx(write=False) as cur:
            rows = cur.run(sql + " ORDER BY seq", params).all()
        return [AuditEvent(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]),
                           json.loads(r[6])) for r in rows]

    def verify(self, budget_id: str | None = None) -> list[Any]:
        """Replay and check every budget's chain (or one's) against the stored budgets and
        spends (:func:`dpsieve.ledger.verify.verify_store`): a list of
        :class:`~dpsieve.ledger.verify.BudgetCheck`. Budgets found altered are refused
        from then on; the others are marked verified."""
        from dpsieve.ledger.verify import verify_store

        checks = verify_store(self, budget_id)
        for c in checks:
            if c.problems:
                self._altered_now(c.budget_id, c.problems[0])
            else:
                self._altered.pop(c.budget_id, None)
                if c.checkpoint is not None:
                    self._verified[c.budget_id] = c.checkpoint
        return checks

    def altered(self) -> dict[str, str]:
        """The budgets refused as altered, with the first problem found in each."""
        return dict(self._altered)


def _chain_row(r: tuple[Any, ...]) -> ChainRow:
    return ChainRow(int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]), str(r[5]),
                    str(r[6]), None if r[7] is None else int(r[7]),
                    None if r[8] is None else str(r[8]), None if r[9] is None else str(r[9]),
                    None if r[10] is None else str(r[10]))


def _decision(text: str) -> Decision:
    d = json.loads(text)
    return Decision.from_dict(d)

