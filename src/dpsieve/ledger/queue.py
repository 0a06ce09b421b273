"""The queue of requests waiting for budget, in the SQL ledger (mixed into
:class:`dpsieve.ledger.sql.SQLStore`).

A request on a data set whose blocks unlock over time is **queued** (:meth:`enqueue`:
its charge, budgets and demands stored, its arrival counted on the blocks that unlock per
arrival), then **scheduling passes** (:meth:`schedule_pass`) admit what fits, in the
data set's policy's order (:func:`dpsieve.ledger.passes.plan_pass`), each admission a
multi-budget spend (:func:`dpsieve.ledger.blocks.charge_all`) in the pass's one
transaction. A request waits until admitted, refused (it can never fit) or timed out
(its deadline passed); nothing is charged unless it is admitted. Each change of status
is a row of the data set's own chain (``queued``, ``scheduled``, ``refused``,
``timed_out``). Passes and enqueues of one data set are serialised by its ``blocksets``
row (locked before any budget, always in that order).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime
from typing import Any, Protocol

from dpsieve.blocks.scheduler import Policy
from dpsieve.errors import LedgerError
from dpsieve.filters.charge import Charge, check_charge
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    IdempotencyKeyReuseError,
    canonical_json,
    utcnow,
)
from dpsieve.ledger.blocks import Held, arrive, charge_all, gates, request_texts
from dpsieve.ledger.blockset import PendingRecord
from dpsieve.ledger.chain import decode_charge, encode_charge
from dpsieve.ledger.cursor import Cursor
from dpsieve.ledger.passes import key_used, plan_pass
from dpsieve.ledger.sql_registry import Head

__all__ = ["PassResult", "SQLQueue"]

_COLUMNS = ("scope, key, principal, request, budgets, demands, status, reason, position,"
            " created_at, deadline, decided_at")


class _Store(Protocol):
    _lock_suffix: str

    def _tx(self, *, write: bool) -> AbstractContextManager[Cursor]: ...

    def _head(self, cur: Cursor, chain: str) -> Head: ...

    def _write(self, cur: Cursor, head: Head, chain: str, principal: str, event: str,
               key: str, payload: str, data: str | None = None) -> int: ...


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds")


def _record(r: tuple[Any, ...]) -> PendingRecord:
    return PendingRecord(str(r[0]), str(r[1]), str(r[2]), json.loads(r[3]),
                         tuple(json.loads(r[4])), tuple(float(x) for x in json.loads(r[5])),
                         str(r[6]), str(r[7]), None if r[8] is None else int(r[8]),
                         str(r[9]), str(r[10]), None if r[11] is None else str(r[11]))


class PassResult(dict[str, str]):
    """A pass's changes: each key whose status changed, with its new status."""


def _policy(cur: Cursor, scope: str, suffix: str) -> tuple[Policy, int]:
    """The data set's scheduler and its ``recompute`` (0 unless declared), read under the
    queue's lock."""
    row = cur.run("SELECT spec FROM blocksets WHERE dataset = ?" + suffix, (scope,)).one()
    if row is None:
        raise BudgetNotFoundError(f"The data set {scope!r} declares no blocks.")
    spec = json.loads(row[0])
    return Policy(spec.get("scheduler", "dpf")), int(spec.get("recompute", 0))


class SQLQueue:
    """The queue over the SQL ledger (module docstring)."""

    def enqueue(self: _Store, scope: str, key: str, charge: Charge, budgets: Sequence[str],
                demands: Sequence[float], *, principal: str = "",
                request: dict[str, Any] | None = None, wait: float = 0.0,
                now: float | None = None) -> PendingRecord:
        """Queue a request for ``wait`` seconds (its arrival counted); a request already
        queued under ``key`` is returned as it stands (the same request, or
        :class:`~dpsieve.ledger.base.IdempotencyKeyReuseError`)."""
        charge = check_charge(charge, "query", "enqueue")
        req, req_text, fp = request_texts(charge, request)
        t = time.time() if now is None else now
        with self._tx(write=True) as cur:
            _policy(cur, scope, self._lock_suffix)  # the data set's queue lock
            old = cur.run(f"SELECT {_COLUMNS}, charge FROM pending WHERE scope = ? AND"
                          " key = ?", (scope, key)).one()
            txn = cur.run("SELECT fingerprint FROM txns WHERE scope = ? AND key = ?",
                          (scope, key)).one()
            if txn is not None and txn[0] != fp:
                raise IdempotencyKeyReuseError(
                    f"The idempotency key {key!r} was used before for a different request.")
            if old is not None:
                if canonical_json(json.loads(old[3])) != req_text:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request.")
                return _record(old)
            held = Held(self, cur)  # type: ignore[arg-type]
            held.lock(budgets)
            arrive(held, gates(cur, list(budgets), t), principal, key, t)
            now_iso = _iso(t)
            rec = PendingRecord(scope, key, principal, req, tuple(budgets),
                                tuple(float(d) for d in demands), "waiting", "queued", None,
                                now_iso, _iso(t + max(0.0, wait)))
            cur.run("INSERT INTO pending VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, NULL)",
                    (scope, key, principal, req_text, canonical_json(encode_charge(charge)),
                     canonical_json(list(budgets)), canonical_json(list(rec.demands)),
                     "waiting", "queued", now_iso, rec.deadline))
            self._write(cur, self._head(cur, scope), scope, principal, "queued", key,
                        canonical_json({"budgets": list(budgets), "deadline": rec.deadline,
                                        "request_sha256": fp}))
        held.advance()
        return rec

    def schedule_pass(self: _Store, scope: str, *, now: float | None = None) -> PassResult:
        """One scheduling pass over ``scope``'s waiting requests, in one transaction
        (module docstring); the keys whose status changed."""
        t = time.time() if now is None else now
        out = PassResult()
        with self._tx(write=True) as cur:
            policy, recompute = _policy(cur, scope, self._lock_suffix)
            rows = cur.run(f"SELECT {_COLUMNS}, charge FROM pending WHERE scope = ? AND"
                           " status = 'waiting' ORDER BY created_at, key", (scope,)).all()
            if not rows:
                return out
            waiting = [_record(r) for r in rows]
            charges = {str(r[1]): str(r[12]) for r in rows}
            by_key = {r.key: r for r in waiting}
            head = self._head(cur, scope)
            stamp = _iso(t)

            def settle(key: str, status: str, reason: str, event: str) -> None:
                cur.run("UPDATE pending SET status = ?, reason = ?, position = NULL,"
                        " decided_at = ? WHERE scope = ? AND key = ?",
                        (status, reason, stamp, scope, key))
                self._write(cur, head, scope, by_key[key].principal, event, key,
                            canonical_json({"reason": reason}))
                out[key] = status

            marks = ", ".join("?" * len(waiting))
            for key, f in cur.run(f"SELECT key, fingerprint FROM txns WHERE scope = ? AND key"
                                  f" IN ({marks})", (scope, *by_key)).all():
                # its key was charged meanwhile (a direct query): settled, never recharged
                fp = request_texts(decode_charge(json.loads(charges[str(key)])),
                                   by_key[str(key)].request)[2]
                settle(str(key), *key_used(str(f) == fp))
            waiting = [r for r in waiting if r.key not in out]
            if not waiting:
                return out
            held = Held(self, cur)  # type: ignore[arg-type]
            budgets = sorted({b for r in waiting for b in r.budgets})
            held.lock(budgets)
            gate_of = gates(cur, budgets, t)
            plan = plan_pass(policy, waiting, {b: (held.rows[b].state, held.rows[b].initial)
                                               for b in budgets}, gate_of, t,
                             recompute=recompute)

            for key in plan.timed_out:
                settle(key, "timed_out", "timed out: its deadline passed before the budget "
                       "it needs was unlocked; nothing was spent.", "timed_out")
            for key, why in plan.never.items():
                settle(key, "refused", why, "refused")
            for key in plan.attempt:
                r = by_key[key]
                req, req_text, fp = request_texts(decode_charge(json.loads(charges[key])),
                                                  r.request)
                res = charge_all(held, scope, list(r.budgets),
                                 decode_charge(json.loads(charges[key])), key=key,
                                 principal=r.principal, req=req, req_text=req_text, fp=fp,
                                 gate_of=gate_of, now=t, record_refusal=False)
                if res.admitted:
                    settle(key, "admitted", "admitted by the scheduler", "scheduled")
                elif res.why == "budget":
                    settle(key, "refused", res.decision.reason, "refused")
            for key, (pos, why) in plan.waiting.items():
                if (by_key[key].position, by_key[key].reason) != (pos, why):
                    cur.run("UPDATE pending SET position = ?, reason = ? WHERE scope = ? AND"
                            " key = ?", (pos, why, scope, key))
        held.advance()
        return out

    def withdraw(self: _Store, scope: str, key: str, reason: str) -> PendingRecord:
        """Take a waiting request out of the queue (refused with ``reason``; nothing is
        charged); a request no longer waiting is returned as it stands."""
        with self._tx(write=True) as cur:
            _policy(cur, scope, self._lock_suffix)
            row = cur.run(f"SELECT {_COLUMNS} FROM pending WHERE scope = ? AND key = ?",
                          (scope, key)).one()
            if row is None:
                raise BudgetNotFoundError(f"No queued request {key!r} on {scope!r}.")
            if row[6] == "waiting":
                stamp = utcnow()
                cur.run("UPDATE pending SET status = 'refused', reason = ?, position = NULL,"
                        " decided_at = ? WHERE scope = ? AND key = ?",
                        (reason, stamp, scope, key))
                self._write(cur, self._head(cur, scope), scope, str(row[2]), "refused", key,
                            canonical_json({"reason": reason}))
                row = (*row[:6], "refused", reason, None, row[9], row[10], stamp)
        return _record(row)

    def pending(self: _Store, scope: str, key: str) -> PendingRecord | None:
        """A queued request's record, or None."""
        with self._tx(write=False) as cur:
            row = cur.run(f"SELECT {_COLUMNS} FROM pending WHERE scope = ? AND key = ?",
                          (scope, key)).one()
        return None if row is None else _record(row)

    def queue(self: _Store, scope: str, *, limit: int = 100) -> list[PendingRecord]:
        """The waiting requests of ``scope`` by position, then the latest decided ones."""
        if limit < 1:
            raise LedgerError("limit must be at least 1")
        with self._tx(write=False) as cur:
            wait = cur.run(f"SELECT {_COLUMNS} FROM pending WHERE scope = ? AND status ="
                           " 'waiting' ORDER BY position IS NULL, position, created_at"
                           " LIMIT ?", (scope, limit)).all()
            done = cur.run(f"SELECT {_COLUMNS} FROM pending WHERE scope = ? AND status <>"
                           " 'waiting' ORDER BY decided_at DESC LIMIT ?", (scope, limit)).all()
        return [_record(r) for r in (*wait, *done)]
