"""Blocks, quotas and the queue in process memory (mixed into
:class:`dpsieve.ledger.memory.MemoryStore`): the semantics of
:mod:`dpsieve.ledger.blocks` and :mod:`dpsieve.ledger.queue` under the store's one
lock, without durability or a hash chain."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from dpsieve.blocks.currency import used_fraction_of_states
from dpsieve.blocks.scheduler import Policy
from dpsieve.blocks.unlock import Unlock
from dpsieve.errors import LedgerError
from dpsieve.filters.base import BudgetLeft, Cost, Decision, PrivacyFilter
from dpsieve.filters.charge import Charge, check_charge
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    IdempotencyKeyReuseError,
    KeyRevokedError,
    SpendRecord,
    _json_safe,
    canonical_json,
    fingerprint,
    note_committed,
    query_to_dict,
    refusal_record,
    spend_key,
    utcnow,
)
from dpsieve.ledger.blockset import (
    BlockRecord,
    Gate,
    MultiOutcome,
    PendingRecord,
    QuotaRecord,
    block_budget_id,
    check_frozen,
    epoch,
    locked_decision,
    quota_budget_id,
)
from dpsieve.ledger.passes import key_used, plan_pass

__all__ = ["MemoryBlocks", "Space"]


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds")


@dataclass(slots=True)
class _Txn:
    fingerprint: str
    budgets: tuple[str, ...]
    decision: Decision
    principal: str
    answer: dict[str, Any] | None = None


@dataclass(slots=True)
class _Queued:
    record: PendingRecord
    charge: Charge


@dataclass(slots=True)
class Space:
    """One process's blocks, quotas, groups, transactions and queue."""

    specs: dict[str, dict[str, Any]] = field(default_factory=dict)
    blocks: dict[str, list[BlockRecord]] = field(default_factory=dict)
    arrivals: dict[str, set[str]] = field(default_factory=dict)
    quotas: dict[str, list[QuotaRecord]] = field(default_factory=dict)
    members: dict[str, set[str]] = field(default_factory=dict)
    txns: dict[tuple[str, str], _Txn] = field(default_factory=dict)
    queue: dict[str, dict[str, _Queued]] = field(default_factory=dict)


class MemoryBlocks:
    """Blocks, quotas and the queue in memory (module docstring)."""

    _lock: Any
    _budgets: dict[str, Any]
    _keys: dict[str, str]
    _principals: dict[str, Any]
    _loads: Callable[[str], PrivacyFilter]
    _log: Callable[..., None]
    _seq: int
    _space: Space

    def _new_budget(self, bid: str, flt: PrivacyFilter, payload: dict[str, Any]) -> None:
        from dpsieve.ledger.memory import _Budget

        state = flt.to_json()
        self._budgets[bid] = _Budget(state, state)
        self._log(bid, "", "budget_set", "", payload)

    # -- declarations -------------------------------------------------------------------
    def declare_blocks(self, dataset: str, spec: dict[str, Any]) -> None:
        with self._lock:
            if dataset in self._budgets:
                raise LedgerError(f"The data set {dataset!r} has a budget of its own; a data "
                                  "set with blocks has a budget per block instead.")
            old = self._space.specs.get(dataset)
            if old is not None and self._space.blocks.get(dataset):
                check_frozen(dataset, old, spec)
            self._space.specs[dataset] = json.loads(canonical_json(spec))

    def block_spec(self, dataset: str) -> dict[str, Any] | None:
        with self._lock:
            s = self._space.specs.get(dataset)
            return None if s is None else dict(s)

    def set_unlock(self, dataset: str, unlock: Unlock) -> None:
        with self._lock:
            if dataset not in self._space.specs:
                raise BudgetNotFoundError(f"The data set {dataset!r} declares no blocks.")
            self._space.specs[dataset] = {**self._space.specs[dataset],
                                          "unlock": unlock.to_dict()}

    def add_block(self, dataset: str, value: Any, flt: PrivacyFilter, unlock: Unlock
                  ) -> BlockRecord:
        bid = block_budget_id(dataset, value)
        with self._lock:
            if dataset not in self._space.specs:
                raise BudgetNotFoundError(f"The data set {dataset!r} declares no blocks.")
            if bid in self._budgets:
                raise LedgerError(f"The block {canonical_json(value)} of {dataset!r} exists.")
            self._new_budget(bid, flt, {"block": value})
            rec = BlockRecord(dataset, value, bid, unlock, utcnow())
            self._space.blocks.setdefault(dataset, []).append(rec)
            return rec

    def blocks(self, dataset: str) -> list[BlockRecord]:
        with self._lock:
            return [replace(b, arrivals=len(self._space.arrivals.get(b.budget_id, ())))
                    for b in self._space.blocks.get(dataset, [])]

    # -- quotas and groups --------------------------------------------------------------
    def set_quota(self, dataset: str, scope: str, name: str, flt: PrivacyFilter
                  ) -> QuotaRecord:
        if scope not in ("analyst", "group"):
            raise LedgerError(f"A quota's scope is one of ('analyst', 'group'), not {scope!r}.")
        bid = quota_budget_id(dataset, scope, name)
        with self._lock:
            old = self._budgets.get(bid)
            if old is not None and old.spends:
                raise LedgerError(f"The quota {bid!r} has admitted spends and cannot be "
                                  "replaced.")
            self._new_budget(bid, flt, {"quota": {"scope": scope, "name": name}})
            rec = QuotaRecord(dataset, scope, name, bid)
            qs = [q for q in self._space.quotas.get(dataset, []) if q.budget_id != bid]
            self._space.quotas[dataset] = sorted([*qs, rec], key=lambda q: (q.scope, q.name))
            return rec

    def quotas(self, dataset: str) -> list[QuotaRecord]:
        with self._lock:
            return list(self._space.quotas.get(dataset, []))

    def set_group(self, group: str, members: Sequence[str]) -> None:
        with self._lock:
            for m in members:
                if m not in self._principals:
                    raise BudgetNotFoundError(f"No principal named {m!r}.")
            self._space.members[group] = set(members)

    def groups(self) -> dict[str, list[str]]:
        with self._lock:
            return {g: sorted(m) for g, m in sorted(self._space.members.items()) if m}

    def quota_budgets(self, dataset: str, principal: str) -> list[str]:
        if not principal:
            return []
        with self._lock:
            return sorted(q.budget_id for q in self._space.quotas.get(dataset, [])
                          if (q.scope == "analyst" and q.name == principal) or (
                              q.scope == "group"
                              and principal in self._space.members.get(q.name, set())))

    # -- spending -----------------------------------------------------------------------
    def _gates(self, budgets: Sequence[str], now: float) -> dict[str, Gate]:
        out = {}
        for recs in self._space.blocks.values():
            for b in recs:
                if b.budget_id in budgets and b.unlock.kind != "none":
                    out[b.budget_id] = Gate(b.unlock, epoch(b.created_at),
                                            len(self._space.arrivals.get(b.budget_id, ())),
                                            now)
        return out

    def _arrive(self, gates: dict[str, Gate], principal: str, key: str, now: float
                ) -> dict[str, Gate]:
        out = dict(gates)
        for b, g in gates.items():
            if g.unlock.counts_arrivals:
                seen = self._space.arrivals.setdefault(b, set())
                who = principal if g.unlock.by == "analyst" else key
                if who not in seen:
                    seen.add(who)
                    self._log(b, principal, "arrival", key, {"who": who})
                    out[b] = Gate(g.unlock, g.created, len(seen), now)
        return out

    def _charge_all(self, scope: str, budgets: Sequence[str], charge: Charge, key: str,
                    principal: str, req: Any, gates: dict[str, Gate], record: bool = True
                    ) -> MultiOutcome:
        from dpsieve.ledger.memory import _Spend

        decisions: dict[str, Decision] = {}
        after: dict[str, str] = {}
        used: dict[str, Fraction] = {}
        refused: tuple[str, Decision, str] | None = None
        for b in sorted(budgets):
            bud = self._budgets.get(b)
            if bud is None:
                raise BudgetNotFoundError(f"No budget named {b!r}.")
            flt = self._loads(bud.state)
            d = flt.try_spend(charge)
            decisions[b] = d
            if not d.admitted:
                refused = refused or (b, d, "budget")
                continue
            after[b] = flt.to_json()
            used[b] = used_fraction_of_states(after[b], bud.initial)
            g = gates.get(b)
            if g is not None and used[b] > g.unlocked and refused is None:
                refused = (b, locked_decision(d, self._loads(bud.state).remaining(), used[b],
                                              g.unlocked, b.rsplit("/block:", 1)[-1]),
                           "locked")
        fp = fingerprint(req)
        if refused is not None:
            b, d, why = refused
            if record:
                self._log(b, principal, "request", key, json.loads(
                    refusal_record(req, canonical_json(req), fp)))
                self._log(b, principal, "decision", key, d.to_dict())
            return MultiOutcome(key, d, tuple(budgets), decisions, refused_by=b, why=why)
        for b in budgets:
            d, bud = decisions[b], self._budgets[b]
            self._log(b, principal, "request", key, {"request": req})
            self._log(b, principal, "decision", key, d.to_dict())
            bud.state = after[b]
            rec = SpendRecord(self._seq, key, principal, Cost(_json_safe(d.cost.to_dict())),
                              BudgetLeft(_json_safe(d.remaining.to_dict())), req, utcnow(),
                              False)
            bud.spends[key] = _Spend(rec, fp, d)
        dec = decisions[max(budgets, key=lambda b: used[b])]
        self._space.txns[(scope, key)] = _Txn(fp, tuple(budgets), dec, principal)
        return MultiOutcome(key, dec, tuple(budgets), decisions)

    def spend_all(self, scope: str, budgets: Sequence[str], charge: Charge, *, key: str,
                  principal: str = "", request: dict[str, Any] | None = None,
                  now: float | None = None) -> MultiOutcome:
        charge = check_charge(charge, "query", f"{type(self).__name__}.spend_all")
        budgets = list(dict.fromkeys(budgets))
        if not budgets:
            raise LedgerError("A spend needs at least one budget.")
        req = _json_safe(request if request is not None else {"query": query_to_dict(charge)})
        t = time.time() if now is None else now
        with self._lock:
            kh = spend_key.get()
            if kh is not None and kh not in self._keys:
                raise KeyRevokedError("The API key was revoked; nothing was spent.")
            old = self._space.txns.get((scope, key))
            if old is not None:
                if old.fingerprint != fingerprint(req):
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request.")
                self._log(old.budgets[0], principal, "replay", key,
                          {"request_sha256": old.fingerprint})
                note_committed()
                return MultiOutcome(key, old.decision, old.budgets, replayed=True,
                                    answer=old.answer)
            gates = self._arrive(self._gates(budgets, t), principal, key, t)
            out = self._charge_all(scope, budgets, charge, key, principal, req, gates)
            if out.admitted:
                note_committed()
            return out

    def record_txn_answer(self, scope: str, key: str, answer: dict[str, Any]
                          ) -> dict[str, Any]:
        with self._lock:
            txn = self._space.txns.get((scope, key))
            if txn is None:
                raise BudgetNotFoundError(f"No admitted spend with key {key!r} on {scope!r}.")
            if txn.answer is None:
                txn.answer = json.loads(canonical_json(_json_safe(answer)))
                self._log(txn.budgets[0], txn.principal, "answer", key, {"released": True})
            return dict(txn.answer)

    # -- the queue ----------------------------------------------------------------------
    def enqueue(self, scope: str, key: str, charge: Charge, budgets: Sequence[str],
                demands: Sequence[float], *, principal: str = "",
                request: dict[str, Any] | None = None, wait: float = 0.0,
                now: float | None = None) -> PendingRecord:
        charge = check_charge(charge, "query", "enqueue")
        req = _json_safe(request if request is not None else {"query": query_to_dict(charge)})
        t = time.time() if now is None else now
        with self._lock:
            if scope not in self._space.specs:
                raise BudgetNotFoundError(f"The data set {scope!r} declares no blocks.")
            q = self._space.queue.setdefault(scope, {})
            txn = self._space.txns.get((scope, key))
            if txn is not None and txn.fingerprint != fingerprint(req):
                raise IdempotencyKeyReuseError(
                    f"The idempotency key {key!r} was used before for a different request.")
            if key in q:
                if canonical_json(q[key].record.request) != canonical_json(req):
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request.")
                return q[key].record
            self._arrive(self._gates(budgets, t), principal, key, t)
            rec = PendingRecord(scope, key, principal, json.loads(canonical_json(req)),
                                tuple(budgets), tuple(float(d) for d in demands), "waiting",
                                "queued", None, _iso(t), _iso(t + max(0.0, wait)))
            q[key] = _Queued(rec, charge)
            return rec

    def schedule_pass(self, scope: str, *, now: float | None = None) -> dict[str, str]:
        t = time.time() if now is None else now
        out: dict[str, str] = {}
        with self._lock:
            spec = self._space.specs.get(scope)
            if spec is None:
                raise BudgetNotFoundError(f"The data set {scope!r} declares no blocks.")
            q = self._space.queue.get(scope, {})
            waiting = sorted((x.record for x in q.values() if x.record.status == "waiting"),
                             key=lambda r: (r.created_at, r.key))
            if not waiting:
                return out
            stamp = _iso(t)

            def settle(key: str, status: str, reason: str) -> None:
                q[key].record = replace(q[key].record, status=status, reason=reason,
                                        position=None, decided_at=stamp)
                self._log(scope, q[key].record.principal, status, key, {"reason": reason})
                out[key] = status

            for r in waiting:  # its key charged meanwhile (a direct query): never recharged
                used = self._space.txns.get((scope, r.key))
                if used is not None:
                    status, why, _ = key_used(used.fingerprint == fingerprint(r.request))
                    settle(r.key, status, why)
            waiting = [r for r in waiting if r.key not in out]
            if not waiting:
                return out
            budgets = sorted({b for r in waiting for b in r.budgets})
            for b in budgets:
                if b not in self._budgets:
                    raise BudgetNotFoundError(f"No budget named {b!r}.")
            gates = self._gates(budgets, t)
            plan = plan_pass(Policy(spec.get("scheduler", "dpf")), waiting,
                             {b: (self._budgets[b].state, self._budgets[b].initial)
                              for b in budgets}, gates, t,
                             recompute=int(spec.get("recompute", 0)))

            for key in plan.timed_out:
                settle(key, "timed_out", "timed out: its deadline passed before the budget "
                       "it needs was unlocked; nothing was spent.")
            for key, why in plan.never.items():
                settle(key, "refused", why)
            for key in plan.attempt:
                r = q[key].record
                res = self._charge_all(scope, r.budgets, q[key].charge, key, r.principal,
                                       r.request, gates, record=False)
                if res.admitted:
                    settle(key, "admitted", "admitted by the scheduler")
                elif res.why == "budget":
                    settle(key, "refused", res.decision.reason)
            for key, (pos, why) in plan.waiting.items():
                q[key].record = replace(q[key].record, position=pos, reason=why)
            return out

    def withdraw(self, scope: str, key: str, reason: str) -> PendingRecord:
        with self._lock:
            x = self._space.queue.get(scope, {}).get(key)
            if x is None:
                raise BudgetNotFoundError(f"No queued request {key!r} on {scope!r}.")
            if x.record.status == "waiting":
                x.record = replace(x.record, status="refused", reason=reason, position=None,
                                   decided_at=utcnow())
            return x.record

    def pending(self, scope: str, key: str) -> PendingRecord | None:
        with self._lock:
            x = self._space.queue.get(scope, {}).get(key)
            return None if x is None else x.record

    def queue(self, scope: str, *, limit: int = 100) -> list[PendingRecord]:
        with self._lock:
            recs = [x.record for x in self._space.queue.get(scope, {}).values()]
        wait = sorted((r for r in recs if r.status == "waiting"),
                      key=lambda r: (r.position is None, r.position or 0, r.created_at))
        done = sorted((r for r in recs if r.status != "waiting"),
                      key=lambda r: r.decided_at or "", reverse=True)
        return [*wait[:limit], *done[:limit]]
