"""Interactive children in the ledger: opened with their charge, questioned durably.

A child (:mod:`dpsieve.interactive`) is a ledger row under a budget: its owner, its kind,
its declared privacy, its public view and its whole state (secrets included). The ledger
keeps the promises of spends for it:

* **Charged once, in the transaction that creates it.** :meth:`open_child` is a spend of
  the child's declared privacy (the same rows in the budget's audit chain, the same
  filter decision and idempotency) and, in the same transaction, the child's row and a
  ``child_open`` audit row. Refused: no child exists, nothing is charged.
* **Durable before released.** :meth:`child_act` locks the budget (the chain's lock),
  checks that the principal owns the child or was granted it, rebuilds the state, runs the
  caller's ``act`` (which asks the child and returns its new state, its public view and
  the answer), writes the state, the answer (by idempotency key) and a ``child_answer``
  audit row, and commits before returning the answer. A crash before the commit loses the
  answer and the state change together; the stored secret is never re-drawn.
* **A key is answered once.** ``child_act`` with a key already answered for that child
  returns the stored answer (the same request) or raises
  :class:`~dpsieve.ledger.base.IdempotencyKeyReuseError` (another request): a retried
  counter step never appends its data twice.

Each ``child_open`` and ``child_answer`` row carries, in the chain, the SHA-256 of the
child's state it left (and its version): the chain binds every state a child went through.
(The replay does not yet compare the stored child states with these hashes: a writer of
the database who resets a child's counters is not detected by ``verify``.)

Only the owner and granted principals may question a child; ``principal == ""`` (library
use, no authentication) may question any. The stored ``state`` holds the child's secret
(docs/interactive.md, "What the state reveals"): :meth:`child` returns it to the caller
that runs the child; :meth:`children` and every audit row carry the public view only.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

from dpsieve.errors import LedgerError
from dpsieve.filters.charge import Charge
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    IdempotencyKeyReuseError,
    SpendOutcome,
    _json_safe,
    canonical_json,
    utcnow,
)
from dpsieve.ledger.chain import state_sha
from dpsieve.ledger.cursor import Cursor
from dpsieve.ledger.sql_registry import Head

__all__ = ["Act", "ChildAccessError", "ChildRecord", "MemoryChildren", "SQLChildren"]

#: ``act(state) -> (new_state, public, answer)``: runs the child on its stored state.
Act = Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]


class ChildAccessError(LedgerError, PermissionError):
    """The principal neither owns the child nor was granted it; nothing was asked."""


@dataclass(frozen=True, slots=True)
class ChildRecord:
    """A child as an analyst may see it (no secret): ``public`` is the child's public view."""

    budget_id: str
    child_id: str
    owner: str
    kind: str
    declared: dict[str, Any]
    public: dict[str, Any]
    version: int
    created_at: str


class _Store(Protocol):
    def _tx(self, *, write: bool) -> AbstractContextManager[Cursor]: ...

    def _locked_budget(self, cur: Cursor, budget_id: str) -> tuple[Any, ...]: ...

    def _check(self, cur: Cursor, budget_id: str, row: tuple[Any, ...]) -> Head: ...

    def _write(self, cur: Cursor, head: Head, chain: str, principal: str, event: str,
               key: str, payload: str, data: str | None = None) -> int: ...

    def _advance(self, budget_id: str, before: Head, after: Head, state: str | None = None,
                 initial: str | None = None, spent: int = 0) -> None: ...

    def _spend(self, budget_id: str, query: Charge, *, key: str, principal: str = "",
               request: dict[str, Any] | None = None,
               then: Callable[[Cursor, Head, SpendOutcome], None] | None = None
               ) -> SpendOutcome: ...


def _may(cur: Cursor, budget_id: str, child_id: str, owner: str, principal: str) -> bool:
    if principal in ("", owner):
        return True
    return cur.run("SELECT 1 FROM child_grants WHERE budget_id = ? AND child_id = ? AND"
                   " principal = ?", (budget_id, child_id, principal)).one() is not None


class SQLChildren:
    """Children over the SQL ledger (mixed into :class:`dpsieve.ledger.sql.SQLStore`)."""

    def open_child(self: _Store, budget_id: str, child_id: str, charge: Charge,
                   state: dict[str, Any], public: dict[str, Any], *, key: str,
                   principal: str = "", request: dict[str, Any] | None = None
                   ) -> SpendOutcome:
        """Charge ``charge`` (the child's declared privacy) and create the child with
        ``state`` in one transaction (module docstring). A replay of the same key returns
        the stored decision and creates nothing new."""
        kind = str(state.get("kind", ""))
        req = request if request is not None else {"open_child": child_id, "kind": kind}
        state_text = canonical_json(_json_safe(state))
        public_text = canonical_json(_json_safe(public))
        declared = canonical_json(_json_safe(public.get("declared", {})))

        def create(cur: Cursor, head: Head, out: SpendOutcome) -> None:
            if out.replayed or not out.decision.admitted:
                return
            if cur.run("SELECT 1 FROM children WHERE budget_id = ? AND child_id = ?",
                       (budget_id, child_id)).one() is not None:
                raise LedgerError(f"A child named {child_id!r} exists on {budget_id!r}; "
                                  "nothing was spent.")
            now = utcnow()
            cur.run("INSERT INTO children VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)",
                    (budget_id, child_id, principal, kind, declared, public_text, state_text,
                     key, now, now))
            self._write(cur, head, budget_id, principal, "child_open", key,
                        canonical_json({"child": child_id, "kind": kind,
                                        "declared": json.loads(declared)}),
                        canonical_json({"state_sha256": state_sha(state_text)}))

        return self._spend(budget_id, charge, key=key, principal=principal, request=req,
                           then=create)

    def child_act(self: _Store, budget_id: str, child_id: str, act: Act, *, key: str,
                  principal: str = "", request: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
        """Run ``act`` on the child's stored state and store what it returns, durably,
        before returning the answer (module docstring)."""
        req_text = canonical_json(_json_safe(request or {}))
        fp = hashlib.sha256(req_text.encode()).hexdigest()
        with self._tx(write=True) as cur:
            brow = self._locked_budget(cur, budget_id)
            row = cur.run("SELECT owner, state, version FROM children WHERE budget_id = ? AND"
                          " child_id = ?", (budget_id, child_id)).one()
            if row is None:
                raise BudgetNotFoundError(f"No child named {child_id!r} on {budget_id!r}.")
            if not _may(cur, budget_id, child_id, str(row[0]), principal):
                raise ChildAccessError(f"{principal!r} may not question the child "
                                       f"{child_id!r}; nothing was asked.")
            old = cur.run("SELECT fingerprint, answer FROM child_answers WHERE budget_id = ?"
                          " AND child_id = ? AND key = ?", (budget_id, child_id, key)).one()
            if old is not None:
                if old[0] != fp:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different "
                        "question to this child.")
                stored: dict[str, Any] = json.loads(old[1])
                return stored
            head = self._check(cur, budget_id, brow)
            before = Head(head.seq, head.n, head.hash)
            new_state, public, answer = act(json.loads(str(row[1])))
            answer_text = canonical_json(_json_safe(answer))
            now = utcnow()
            new_text = canonical_json(_json_safe(new_state))
            cur.run("UPDATE children SET state = ?, public = ?, version = ?, updated_at = ?"
                    " WHERE budget_id = ? AND child_id = ?",
                    (new_text, canonical_json(_json_safe(public)), int(row[2]) + 1, now,
                     budget_id, child_id))
            cur.run("INSERT INTO child_answers VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (budget_id, child_id, key, principal, fp, answer_text, now))
            self._write(cur, head, budget_id, principal, "child_answer", key,
                        canonical_json({"child": child_id, "answer": json.loads(answer_text)}),
                        canonical_json({"state_sha256": state_sha(new_text),
                                        "version": int(row[2]) + 1}))
        self._advance(budget_id, before, head)
        out: dict[str, Any] = json.loads(answer_text)
        return out

    def child_state(self: _Store, budget_id: str, child_id: str) -> dict[str, Any]:
        """The child's whole stored state, secrets included (for the process running it)."""
        with self._tx(write=False) as cur:
            row = cur.run("SELECT state FROM children WHERE budget_id = ? AND child_id = ?",
                          (budget_id, child_id)).one()
        if row is None:
            raise BudgetNotFoundError(f"No child named {child_id!r} on {budget_id!r}.")
        out: dict[str, Any] = json.loads(str(row[0]))
        return out

    def grant_child(self: _Store, budget_id: str, child_id: str, principal: str, *,
                    by: str = "") -> None:
        """Let ``principal`` question the child (only its owner, or ``by == ""``)."""
        with self._tx(write=True) as cur:
            row = cur.run("SELECT owner FROM children WHERE budget_id = ? AND child_id = ?",
                          (budget_id, child_id)).one()
            if row is None:
                raise BudgetNotFoundError(f"No child named {child_id!r} on {budget_id!r}.")
            if by not in ("", str(row[0])):
                raise ChildAccessError(f"Only the owner of {child_id!r} may grant it.")
            if cur.run("SELECT 1 FROM child_grants WHERE budget_id = ? AND child_id = ? AND"
                       " principal = ?", (budget_id, child_id, principal)).one() is None:
                cur.run("INSERT INTO child_grants VALUES (?, ?, ?, ?)",
                        (budget_id, child_id, principal, utcnow()))

    def children(self: _Store, budget_id: str, principal: str = "") -> list[ChildRecord]:
        """The children of a budget the principal may question (all for ``""``), public."""
        with self._tx(write=False) as cur:
            rows = cur.run("SELECT child_id, owner, kind, declared, public, version, created_at"
                           " FROM children WHERE budget_id = ? ORDER BY child_id",
                           (budget_id,)).all()
            return [ChildRecord(budget_id, str(r[0]), str(r[1]), str(r[2]), json.loads(r[3]),
                                json.loads(r[4]), int(r[5]), str(r[6]))
                    for r in rows if _may(cur, budget_id, str(r[0]), str(r[1]), principal)]


@dataclass(slots=True)
class _MemChild:
    owner: str
    kind: str
    declared: dict[str, Any]
    public: dict[str, Any]
    state: str
    created_at: str
    version: int = 1
    grants: set[str] | None = None
    answers: dict[str, tuple[str, str]] | None = None  # key -> (fingerprint, answer text)


class MemoryChildren:
    """Children in process memory (mixed into :class:`dpsieve.ledger.memory.MemoryStore`):
    the same semantics as :class:`SQLChildren` under the store's one lock."""

    _lock: Any
    _children: dict[tuple[str, str], _MemChild]
    _budgets: dict[str, Any]
    spend: Callable[..., SpendOutcome]
    _log: Callable[..., None]

    def _spend_then(self, budget_id: str, charge: Charge, key: str, principal: str,
                    request: dict[str, Any]) -> SpendOutcome:
        spend: Callable[..., SpendOutcome] = self.spend
        return spend(budget_id, charge, key=key, principal=principal, request=request)

    def _log_child(self, budget_id: str, principal: str, event: str, key: str,
                   payload: dict[str, Any]) -> None:
        log: Callable[..., None] = self._log
        log(budget_id, principal, event, key, payload)

    def open_child(self, budget_id: str, child_id: str, charge: Charge,
                   state: dict[str, Any], public: dict[str, Any], *, key: str,
                   principal: str = "", request: dict[str, Any] | None = None
                   ) -> SpendOutcome:
        kind = str(state.get("kind", ""))
        req = request if request is not None else {"open_child": child_id, "kind": kind}
        with self._lock:
            if (budget_id, child_id) in self._children and not self._replay_of(
                    budget_id, child_id, key):
                raise LedgerError(f"A child named {child_id!r} exists on {budget_id!r}; "
                                  "nothing was spent.")
            out = self._spend_then(budget_id, charge, key, principal, req)
            if out.decision.admitted and not out.replayed:
                declared = json.loads(canonical_json(_json_safe(public.get("declared", {}))))
                self._children[(budget_id, child_id)] = _MemChild(
                    principal, kind, declared, json.loads(canonical_json(_json_safe(public))),
                    canonical_json(_json_safe(state)), utcnow(), 1, set(), {})
                self._log_child(budget_id, principal, "child_open", key,
                                {"child": child_id, "kind": kind, "declared": declared})
            return out

    def _replay_of(self, budget_id: str, child_id: str, key: str) -> bool:
        spends = self._budgets[budget_id].spends if budget_id in self._budgets else {}
        return key in spends

    def _child(self, budget_id: str, child_id: str) -> _MemChild:
        c = self._children.get((budget_id, child_id))
        if c is None:
            raise BudgetNotFoundError(f"No child named {child_id!r} on {budget_id!r}.")
        return c

    def child_act(self, budget_id: str, child_id: str, act: Act, *, key: str,
                  principal: str = "", request: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
        req_text = canonical_json(_json_safe(request or {}))
        fp = hashlib.sha256(req_text.encode()).hexdigest()
        with self._lock:
            c = self._child(budget_id, child_id)
            if principal not in ("", c.owner) and principal not in (c.grants or set()):
                raise ChildAccessError(f"{principal!r} may not question the child "
                                       f"{child_id!r}; nothing was asked.")
            answers = c.answers if c.answers is not None else {}
            if key in answers:
                if answers[key][0] != fp:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different "
                        "question to this child.")
                stored: dict[str, Any] = json.loads(answers[key][1])
                return stored
            new_state, public, answer = act(json.loads(c.state))
            text = canonical_json(_json_safe(answer))
            c.state = canonical_json(_json_safe(new_state))
            c.public = json.loads(canonical_json(_json_safe(public)))
            c.version += 1
            answers[key] = (fp, text)
            c.answers = answers
            self._log_child(budget_id, principal, "child_answer", key,
                            {"child": child_id, "answer": json.loads(text)})
            out: dict[str, Any] = json.loads(text)
            return out

    def child_state(self, budget_id: str, child_id: str) -> dict[str, Any]:
        with self._lock:
            out: dict[str, Any] = json.loads(self._child(budget_id, child_id).state)
            return out

    def grant_child(self, budget_id: str, child_id: str, principal: str, *,
                    by: str = "") -> None:
        with self._lock:
            c = self._child(budget_id, child_id)
            if by not in ("", c.owner):
                raise ChildAccessError(f"Only the owner of {child_id!r} may grant it.")
            c.grants = (c.grants or set()) | {principal}

    def children(self, budget_id: str, principal: str = "") -> list[ChildRecord]:
        with self._lock:
            return [ChildRecord(b, cid, c.owner, c.kind, c.declared, c.public, c.version,
                                c.created_at)
                    for (b, cid), c in sorted(self._children.items())
                    if b == budget_id and (principal in ("", c.owner)
                                           or principal in (c.grants or set()))]
