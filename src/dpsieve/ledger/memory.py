"""An in-memory budget store: the reference semantics of :class:`BudgetStore`, no durability.

One re-entrant lock serialises every operation, so check-and-spend is atomic across threads
of one process. Nothing survives the process: use it for sessions and tests, never for a
service whose answers must outlive a crash (use :class:`~dpsieve.ledger.sqlite.SQLiteStore`).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
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
    fingerprint,
    left_json,
    note_committed,
    query_to_dict,
    refusal_record,
    spend_key,
    utcnow,
)
from dpsieve.ledger.blocks_memory import MemoryBlocks, Space
from dpsieve.ledger.children import MemoryChildren, _MemChild
from dpsieve.ledger.loaders import default_loader, parsed_initial

__all__ = ["MemoryStore"]


@dataclass(slots=True)
class _Spend:
    record: SpendRecord
    fingerprint: str
    decision: Decision
    answer: dict[str, Any] | None = None


@dataclass(slots=True)
class _Budget:
    state: str
    initial: str
    spends: dict[str, _Spend] = field(default_factory=dict)


class MemoryStore(MemoryChildren, MemoryBlocks):
    """Budgets, spends, audit log and registry in process memory (see module docstring)."""

    def __init__(self, *, loads: FilterLoader | None = None) -> None:
        self._loads: FilterLoader = loads or default_loader
        self._initials: Memo[PrivacyFilter] = Memo(64)
        self._lock = threading.RLock()
        self._budgets: dict[str, _Budget] = {}
        self._audit: list[AuditEvent] = []
        self._seq = 0
        self._principals: dict[str, Principal] = {}
        self._keys: dict[str, str] = {}
        self._datasets: dict[str, dict[str, Any]] = {}
        self._grants: set[tuple[str, str]] = set()
        self._children: dict[tuple[str, str], _MemChild] = {}
        self._space = Space()

    # -- budgets ------------------------------------------------------------------------
    def _get(self, budget_id: str) -> _Budget:
        b = self._budgets.get(budget_id)
        if b is None:
            raise BudgetNotFoundError(f"No budget named {budget_id!r}.")
        return b

    def _log(self, budget_id: str, principal: str, event: str, key: str, payload: Any) -> None:
        self._seq += 1
        self._audit.append(
            AuditEvent(self._seq, utcnow(), budget_id, principal, event, key, _json_safe(payload))
        )

    def create_budget(self, budget_id: str, flt: PrivacyFilter, *, replace: bool = False) -> None:
        state = flt.to_json()
        with self._lock:
            old = self._budgets.get(budget_id)
            if old is not None and not replace:
                raise LedgerError(f"A budget named {budget_id!r} already exists.")
            if old is not None and old.spends:
                raise LedgerError(
                    f"The budget {budget_id!r} has admitted spends and cannot be replaced; "
                    "replacing it would forget privacy loss already incurred."
                )
            self._budgets[budget_id] = _Budget(state, state)
            self._log(budget_id, "", "budget_set", "", {"filter": left_json(flt)})

    def load_filter(self, budget_id: str) -> PrivacyFilter:
        with self._lock:
            return self._loads(self._get(budget_id).state)

    def initial_filter(self, budget_id: str) -> PrivacyFilter:
        with self._lock:
            return self._loads(self._get(budget_id).initial)

    def load_filters(self, budget_id: str) -> tuple[PrivacyFilter, PrivacyFilter]:
        """(current, initial) filters, one snapshot; the initial one read-only, parsed
        once per exact text (:func:`dpsieve.ledger.loaders.parsed_initial`)."""
        with self._lock:
            b = self._get(budget_id)
            state, initial = b.state, b.initial
        return self._loads(state), parsed_initial(self._initials, self._loads, initial)

    def has_budget(self, budget_id: str) -> bool:
        """Whether a budget named ``budget_id`` exists."""
        with self._lock:
            return budget_id in self._budgets

    def budget_ids(self) -> list[str]:
        with self._lock:
            return sorted(self._budgets)

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
        fp = fingerprint(req)
        with self._lock:
            b = self._get(budget_id)
            kh = spend_key.get()
            if kh is not None and kh not in self._keys:
                raise KeyRevokedError("The API key was revoked; nothing was spent.")
            old = b.spends.get(key)
            if old is not None:
                if old.fingerprint != fp:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request."
                    )
                self._log(budget_id, principal, "replay", key, {"request_sha256": fp})
                note_committed()
                return SpendOutcome(key, old.decision, replayed=True, answer=old.answer)
            flt = self._loads(b.state)
            decision = flt.try_spend(query)  # may raise: then nothing is logged or charged
            if decision.admitted:
                self._log(budget_id, principal, "request", key, {"request": req})
            else:  # a bounded record (the request may be large)
                self._log(budget_id, principal, "request", key,
                          json.loads(refusal_record(req, canonical_json(req), fp)))
            self._log(budget_id, principal, "decision", key, decision.to_dict())
            if decision.admitted:
                b.state = flt.to_json()
                rec = SpendRecord(
                    seq=self._seq,
                    key=key,
                    principal=principal,
                    cost=Cost(_json_safe(decision.cost.to_dict())),
                    remaining=BudgetLeft(_json_safe(decision.remaining.to_dict())),
                    request=req,
                    created_at=utcnow(),
                    answered=False,
                )
                b.spends[key] = _Spend(rec, fp, decision)
            note_committed()
            return SpendOutcome(key, decision)

    def record_answer(self, budget_id: str, key: str, answer: dict[str, Any]) -> dict[str, Any]:
        with self._lock:
            sp = self._get(budget_id).spends.get(key)
            if sp is None:
                raise BudgetNotFoundError(f"No admitted spend with key {key!r} on {budget_id!r}.")
            if sp.answer is None:
                sp.answer = _json_safe(answer)
                r = sp.record
                sp.record = SpendRecord(
                    r.seq, r.key, r.principal, r.cost, r.remaining, r.request, r.created_at, True
                )
                self._log(budget_id, r.principal, "answer", key, {"released": True})
            return sp.answer

    def history(self, budget_id: str) -> list[SpendRecord]:
        with self._lock:
            recs = sorted((s.record for s in self._get(budget_id).spends.values()),
                          key=lambda r: r.seq)
        # the budget's own sequence 1, 2, ... (the stored seq is global across budgets)
        return [replace(r, seq=n) for n, r in enumerate(recs, start=1)]

    def audit(self, budget_id: str | None = None) -> list[AuditEvent]:
        with self._lock:
            return [e for e in self._audit if budget_id is None or e.budget_id == budget_id]

    # -- registry -----------------------------------------------------------------------
    def add_principal(self, name: str, role: str, key_hash: str) -> None:
        with self._lock:
            p = self._principals.get(name)
            if p is not None and p.role != role:
                raise LedgerError(f"Principal {name!r} exists with role {p.role!r}.")
            self._principals[name] = Principal(name, role)
            self._keys[key_hash] = name

    def principal_keys(self, name: str) -> list[tuple[str, str]] | None:
        """(key hash, "") of a principal's keys; None if no such principal."""
        with self._lock:
            if name not in self._principals:
                return None
            return sorted((h, "") for h, n in self._keys.items() if n == name)

    def revoke_key(self, name: str, key_id: str) -> bool:
        """Delete the principal's key whose hash starts with ``key_id``; False if none."""
        with self._lock:
            hit = [h for h, n in self._keys.items() if n == name and h.startswith(key_id)]
            if len(hit) != 1:
                return False
            del self._keys[hit[0]]
            self._log("", name, "key_revoked", "", {"key_id": key_id})
            return True

    def key_hashes(self) -> list[str]:
        """Every API-key hash."""
        with self._lock:
            return list(self._keys)

    def principal_for_key(self, key_hash: str) -> Principal | None:
        with self._lock:
            name = self._keys.get(key_hash)
            return None if name is None else self._principals[name]

    def register_dataset(self, name: str, source: dict[str, Any]) -> None:
        with self._lock:
            self._datasets[name] = dict(source)

    def dataset(self, name: str) -> dict[str, Any] | None:
        with self._lock:
            d = self._datasets.get(name)
            return None if d is None else dict(d)

    def datasets(self) -> list[str]:
        with self._lock:
            return sorted(self._datasets)

    def grant(self, principal: str, dataset: str) -> None:
        with self._lock:
            if principal not in self._principals:
                raise BudgetNotFoundError(f"No principal named {principal!r}.")
            if dataset not in self._datasets:
                raise BudgetNotFoundError(f"No data set named {dataset!r}.")
            self._grants.add((principal, dataset))

    def grants(self, principal: str) -> list[str]:
        with self._lock:
            return sorted(d for p, d in self._grants if p == principal)

    def check_ready(self) -> None:
        """Memory is always ready."""

    def close(self) -> None:
        """Nothing to release."""
