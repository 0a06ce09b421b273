"""Blocks and quotas in the SQL ledger: each block and each quota is a budget of its own
(its filter, its hash chain, its spends), and a request is charged to all of its budgets
in one transaction (mixed into :class:`dpsieve.ledger.sql.SQLStore`).

* :meth:`add_block` creates a block's budget (a fresh filter) and its registry row in one
  transaction; its ``budget_set`` row carries, in the chain, the unlocking policy and the
  arrival time, so a replay re-checks every admission against what was unlocked then.
* :meth:`spend_all` locks every budget of the request in sorted order (PostgreSQL: no
  two transactions wait on each other in a cycle; SQLite: one writer), records the
  request's arrival on blocks that unlock per arrival (an ``arrival`` row in the block's
  chain), asks every filter and every unlocking gate, and writes the spends only if all
  admit (docs/proofs/blocks.md §4). Each admitted ``decision`` row names the transaction
  (its key, every budget charged, the time its gates were read), so ``verify`` checks
  that an admitted transaction is admitted in every budget it names. A refusal is
  recorded (request and decision) in the refusing budget's chain only; nothing is spent.
* A retry with the same key finds the transaction (table ``txns``) and returns its
  decision, budgets and answer; nothing is charged again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

from dpsieve.blocks.currency import used_fraction_of_states
from dpsieve.blocks.unlock import Unlock, unlock_from_dict
from dpsieve.errors import LedgerError
from dpsieve.filters.base import Decision, PrivacyFilter
from dpsieve.filters.charge import Charge, check_charge
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    IdempotencyKeyReuseError,
    KeyRevokedError,
    _json_safe,
    canonical_json,
    left_json,
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
    QuotaRecord,
    block_budget_id,
    check_frozen,
    locked_decision,
    quota_budget_id,
    value_text,
)
from dpsieve.ledger.chain import Checkpoint, encode_charge, state_sha
from dpsieve.ledger.cursor import Cursor
from dpsieve.ledger.sql_registry import Head

__all__ = ["SQLBlocks"]

_SCOPES = ("analyst", "group")


class _Store(Protocol):
    _loads: Any
    _share_suffix: str
    _lock_suffix: str
    _verified: dict[str, Checkpoint]

    def _tx(self, *, write: bool) -> AbstractContextManager[Cursor]: ...

    def _locked_budget(self, cur: Cursor, budget_id: str) -> tuple[Any, ...]: ...

    def _check(self, cur: Cursor, budget_id: str, row: tuple[Any, ...],
               head: Head | None = None) -> Head: ...

    def _head(self, cur: Cursor, chain: str) -> Head: ...

    def _guard(self, budget_id: str) -> None: ...

    def _write(self, cur: Cursor, head: Head, chain: str, principal: str, event: str,
               key: str, payload: str, data: str | None = None) -> int: ...

    def _advance(self, budget_id: str, before: Head, after: Head, state: str | None = None,
                 initial: str | None = None, spent: int = 0) -> None: ...


@dataclass(slots=True)
class _Held:
    """A budget locked in the current transaction: its stored row and chain head."""

    state: str
    initial: str
    head: Head
    before: Head
    spent: int = 0
    arrived: bool = False


class Held:
    """The budgets one transaction has locked (in sorted order), read once each."""

    def __init__(self, store: _Store, cur: Cursor) -> None:
        self.store, self.cur = store, cur
        self.rows: dict[str, _Held] = {}

    def lock(self, budgets: Sequence[str]) -> None:
        for b in sorted(set(budgets) - set(self.rows)):
            row = self.store._locked_budget(self.cur, b)
            head = self.store._check(self.cur, b, row)
            self.rows[b] = _Held(str(row[0]), str(row[1]), head,
                                 Head(head.seq, head.n, head.hash))

    def write(self, b: str, principal: str, event: str, key: str, payload: str,
              data: str | None = None) -> int:
        return self.store._write(self.cur, self.rows[b].head, b, principal, event, key,
                                 payload, data)

    def advance(self) -> None:
        """After the commit: move each budget's verified position past this
        transaction's rows (not past arrivals: the next check replays those)."""
        for b, h in self.rows.items():
            if not h.arrived:
                self.store._advance(b, h.before, h.head, h.state, spent=h.spent)


def gates(cur: Cursor, budgets: Sequence[str], now: float) -> dict[str, Gate]:
    """The unlocking gates of the blocks among ``budgets`` (those with a policy)."""
    if not budgets:
        return {}
    marks = ", ".join("?" * len(budgets))
    rows = cur.run(f"SELECT budget_id, unlock, created_at FROM blocks WHERE budget_id IN"
                   f" ({marks})", tuple(budgets)).all()
    counts = dict(cur.run(f"SELECT budget_id, COUNT(*) FROM arrivals WHERE budget_id IN"
                          f" ({marks}) GROUP BY budget_id", tuple(budgets)).all())
    out = {}
    for b, unlock, created in rows:
        if json.loads(unlock).get("type", "none") != "none":
            out[str(b)] = Gate.of(str(unlock), str(created), int(counts.get(b, 0)), now)
    return out


def arrive(held: Held, gate_of: dict[str, Gate], principal: str, key: str, now: float
           ) -> dict[str, Gate]:
    """Record an arrival (the analyst, or the request) on each block that unlocks per
    arrival and has not counted it yet; the gates with the new counts."""
    out = dict(gate_of)
    for b, g in gate_of.items():
        if not g.unlock.counts_arrivals:
            continue
        who = principal if g.unlock.by == "analyst" else key
        if held.cur.run("SELECT 1 FROM arrivals WHERE budget_id = ? AND who = ?",
                        (b, who)).one() is not None:
            continue
        held.cur.run("INSERT INTO arrivals VALUES (?, ?, ?)", (b, who, utcnow()))
        held.write(b, principal, "arrival", key, canonical_json({"who": who}))
        held.rows[b].arrived = True
        out[b] = Gate(g.unlock, g.created, g.arrivals + 1, now)
    return out


def charge_all(held: Held, scope: str, budgets: Sequence[str], charge: Charge, *,
               key: str, principal: str, req: Any, req_text: str, fp: str,
               gate_of: dict[str, Gate], now: float, record_refusal: bool = True
               ) -> MultiOutcome:
    """Decide a charge on every budget (already locked in ``held``) and write it if all
    admit, inside the caller's transaction (module docstring); a refusal is recorded in
    the refusing budget's chain unless ``record_refusal`` is False (a queued request the
    scheduler tried: it keeps waiting or is refused in the queue's own record)."""
    loads = held.store._loads
    decisions: dict[str, Decision] = {}
    after: dict[str, str] = {}
    used: dict[str, Fraction] = {}
    refused: tuple[str, Decision, str] | None = None
    for b in sorted(budgets):
        h = held.rows[b]
        flt = loads(h.state)
        d = flt.try_spend(charge)  # may raise: the transaction rolls back
        decisions[b] = d
        if not d.admitted:
            refused = refused or (b, d, "budget")
            continue
        after[b] = new = flt.to_json()
        used[b] = used_fraction_of_states(new, h.initial)
        g = gate_of.get(b)
        if g is not None and used[b] > g.unlocked and refused is None:
            refused = (b, locked_decision(d, loads(h.state).remaining(), used[b], g.unlocked,
                                          b.rsplit("/block:", 1)[-1]), "locked")
    if refused is not None:
        b, d, why = refused
        if record_refusal:
            held.write(b, principal, "request", key, refusal_record(req, req_text, fp))
            held.write(b, principal, "decision", key,
                       canonical_json(_json_safe(d.to_dict())))
        return MultiOutcome(key, d, tuple(budgets), decisions, refused_by=b, why=why)
    txn = {"at": now, "budgets": list(budgets), "scope": scope}
    enc = encode_charge(charge)
    stamp = utcnow()
    for b in budgets:
        new, d = after[b], decisions[b]
        dec_text = canonical_json(_json_safe(d.to_dict()))
        held.write(b, principal, "request", key, '{"request":' + req_text + "}")
        seq = held.write(b, principal, "decision", key, dec_text, canonical_json(
            {"charge": enc, "state_sha256": state_sha(new), "txn": txn}))
        held.cur.run("UPDATE budgets SET state = ?, n_spends = n_spends + 1, updated_at = ?"
                     " WHERE budget_id = ?", (new, stamp, b))
        held.cur.run("INSERT INTO spends (budget_id, key, seq, principal, fingerprint,"
                     " decision, request, answer, created_at, answered_at)"
                     " VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, NULL)",
                     (b, key, seq, principal, fp, dec_text, req_text, stamp))
        held.rows[b].state, held.rows[b].spent = new, held.rows[b].spent + 1
    dec = decisions[max(budgets, key=lambda b: used[b])]  # the budget left most used
    held.cur.run("INSERT INTO txns VALUES (?, ?, ?, ?, ?, ?, NULL, ?, NULL)",
                 (scope, key, principal, fp, canonical_json(list(budgets)),
                  canonical_json(_json_safe(dec.to_dict())), stamp))
    return MultiOutcome(key, dec, tuple(budgets), decisions)


def request_texts(charge: Charge, request: dict[str, Any] | None) -> tuple[Any, str, str]:
    """The request as recorded, its canonical text and its fingerprint."""
    req = _json_safe(request if request is not None else {"query": query_to_dict(charge)})
    text = canonical_json(req)
    return req, text, hashlib.sha256(text.encode()).hexdigest()


class SQLBlocks:
    """Blocks, quotas and groups over the SQL ledger (module docstring)."""

    # -- declarations -------------------------------------------------------------------
    def declare_blocks(self: _Store, dataset: str, spec: dict[str, Any]) -> None:
        """Record a data set's block declaration (public; once a block exists, only its
        unlocking, scheduler and ``recompute`` may change, so what a block means and the
        guarantee stated for it never do: :func:`~dpsieve.ledger.blockset.check_frozen`)."""
        text = canonical_json(spec)
        with self._tx(write=True) as cur:
            if cur.run("SELECT 1 FROM budgets WHERE budget_id = ?", (dataset,)).one():
                raise LedgerError(f"The data set {dataset!r} has a budget of its own; a data "
                                  "set with blocks has a budget per block instead.")
            row = cur.run("SELECT spec FROM blocksets WHERE dataset = ?", (dataset,)).one()
            if row is None:
                cur.run("INSERT INTO blocksets VALUES (?, ?, ?)", (dataset, text, utcnow()))
            elif row[0] != text:
                if cur.run("SELECT 1 FROM blocks WHERE dataset = ?", (dataset,)).one():
                    check_frozen(dataset, json.loads(row[0]), spec)
                cur.run("UPDATE blocksets SET spec = ? WHERE dataset = ?", (text, dataset))

    def block_spec(self: _Store, dataset: str) -> dict[str, Any] | None:
        """A data set's block declaration, or None."""
        with self._tx(write=False) as cur:
            row = cur.run("SELECT spec FROM blocksets WHERE dataset = ?", (dataset,)).one()
        return None if row is None else dict(json.loads(row[0]))

    def add_block(self: _Store, dataset: str, value: Any, flt: PrivacyFilter,
                  unlock: Unlock) -> BlockRecord:
        """A new block of ``dataset`` with a fresh budget ``flt``, in one transaction;
        the block's value is public (declared by the steward)."""
        bid = block_budget_id(dataset, value)
        state, now = flt.to_json(), utcnow()
        with self._tx(write=True) as cur:
            if cur.run("SELECT 1 FROM blocksets WHERE dataset = ?", (dataset,)).one() is None:
                raise BudgetNotFoundError(f"The data set {dataset!r} declares no blocks.")
            if cur.run("SELECT 1 FROM budgets WHERE budget_id = ?", (bid,)).one() is not None:
                raise LedgerError(f"The block {value_text(value)} of {dataset!r} exists.")
            self._guard(bid)
            cur.run("INSERT INTO budgets VALUES (?, ?, ?, 0, ?, ?)", (bid, state, state, now,
                                                                       now))
            cur.run("INSERT INTO blocks VALUES (?, ?, ?, ?, ?)",
                    (dataset, value_text(value), bid, canonical_json(unlock.to_dict()), now))
            head = self._head(cur, bid)
            self._write(cur, head, bid, "", "budget_set", "", canonical_json(_json_safe(
                {"filter": left_json(flt), "block": value})), canonical_json(
                {"state": state, "unlock": unlock.to_dict(), "created_at": now}))
        self._verified[bid] = Checkpoint(head.seq, head.n, head.hash, state, state, 0)
        return BlockRecord(dataset, value, bid, unlock, now)

    def blocks(self: _Store, dataset: str) -> list[BlockRecord]:
        """The blocks of ``dataset`` in arrival order, with their arrival counts."""
        with self._tx(write=False) as cur:
            rows = cur.run("SELECT b.block, b.budget_id, b.unlock, b.created_at,"
                           " (SELECT COUNT(*) FROM arrivals a WHERE a.budget_id = b.budget_id)"
                           " FROM blocks b WHERE b.dataset = ? ORDER BY b.created_at,"
                           " b.block", (dataset,)).all()
        return [BlockRecord(dataset, json.loads(v), str(b), unlock_from_dict(json.loads(u)),
                            str(t), int(n)) for v, b, u, t, n in rows]

    def set_unlock(self: _Store, dataset: str, unlock: Unlock) -> None:
        """Change the unlocking of blocks that arrive from now on (a block keeps the
        policy it arrived with: its chain states it)."""
        with self._tx(write=True) as cur:
            row = cur.run("SELECT spec FROM blocksets WHERE dataset = ?", (dataset,)).one()
            if row is None:
                raise BudgetNotFoundError(f"The data set {dataset!r} declares no blocks.")
            spec = {**json.loads(row[0]), "unlock": unlock.to_dict()}
            cur.run("UPDATE blocksets SET spec = ? WHERE dataset = ?",
                    (canonical_json(spec), dataset))

    # -- quotas and groups --------------------------------------------------------------
    def set_quota(self: _Store, dataset: str, scope: str, name: str, flt: PrivacyFilter
                  ) -> QuotaRecord:
        """Set the quota of an analyst (``scope="analyst"``) or a group on ``dataset``; a
        quota that has admitted spends cannot be replaced (what it counted stays)."""
        if scope not in _SCOPES:
            raise LedgerError(f"A quota's scope is one of {_SCOPES}, not {scope!r}.")
        bid = quota_budget_id(dataset, scope, name)
        state, now = flt.to_json(), utcnow()
        with self._tx(write=True) as cur:
            row = cur.run("SELECT state, initial, n_spends FROM budgets WHERE budget_id = ?"
                          + self._lock_suffix, (bid,)).one()
            if row is not None:
                self._check(cur, bid, row)
                if int(row[2]) > 0:
                    raise LedgerError(f"The quota {bid!r} has admitted spends and cannot be "
                                      "replaced.")
                cur.run("UPDATE budgets SET state = ?, initial = ?, updated_at = ? WHERE"
                        " budget_id = ?", (state, state, now, bid))
            else:
                self._guard(bid)
                cur.run("INSERT INTO budgets VALUES (?, ?, ?, 0, ?, ?)", (bid, state, state,
                                                                           now, now))
                cur.run("INSERT INTO quotas VALUES (?, ?, ?, ?, ?)", (dataset, scope, name,
                                                                       bid, now))
            head = self._head(cur, bid)
            self._write(cur, head, bid, "", "budget_set", "", canonical_json(_json_safe(
                {"filter": left_json(flt), "quota": {"scope": scope, "name": name}})),
                canonical_json({"state": state}))
        self._verified.pop(bid, None)  # the next check replays it
        return QuotaRecord(dataset, scope, name, bid)

    def quotas(self: _Store, dataset: str) -> list[QuotaRecord]:
        """The quotas set on ``dataset``."""
        with self._tx(write=False) as cur:
            rows = cur.run("SELECT scope, name, budget_id FROM quotas WHERE dataset = ?"
                           " ORDER BY scope, name", (dataset,)).all()
        return [QuotaRecord(dataset, str(s), str(n), str(b)) for s, n, b in rows]

    def set_group(self: _Store, group: str, members: Sequence[str]) -> None:
        """Make ``members`` the members of ``group`` (principals that exist)."""
        with self._tx(write=True) as cur:
            for m in members:
                if cur.run("SELECT 1 FROM principals WHERE name = ?", (m,)).one() is None:
                    raise BudgetNotFoundError(f"No principal named {m!r}.")
            cur.run("DELETE FROM members WHERE grp = ?", (group,))
            now = utcnow()
            for m in sorted(set(members)):
                cur.run("INSERT INTO members VALUES (?, ?, ?)", (group, m, now))

    def groups(self: _Store) -> dict[str, list[str]]:
        """Every group with its members, sorted."""
        with self._tx(write=False) as cur:
            rows = cur.run("SELECT grp, principal FROM members ORDER BY grp, principal").all()
        out: dict[str, list[str]] = {}
        for g, p in rows:
            out.setdefault(str(g), []).append(str(p))
        return out

    def quota_budgets(self: _Store, dataset: str, principal: str) -> list[str]:
        """The quota budgets a query of ``principal`` on ``dataset`` is charged to: the
        analyst's own and those of the groups it belongs to."""
        if not principal:
            return []
        with self._tx(write=False) as cur:
            rows = cur.run("SELECT budget_id FROM quotas WHERE dataset = ? AND ((scope ="
                           " 'analyst' AND name = ?) OR (scope = 'group' AND name IN"
                           " (SELECT grp FROM members WHERE principal = ?)))",
                           (dataset, principal, principal)).all()
        return sorted(str(r[0]) for r in rows)

    # -- spending -----------------------------------------------------------------------
    def spend_all(self: _Store, scope: str, budgets: Sequence[str], charge: Charge, *,
                  key: str, principal: str = "", request: dict[str, Any] | None = None,
                  now: float | None = None) -> MultiOutcome:
        """Charge ``charge`` to every budget in ``budgets``, all or nothing (module
        docstring); ``scope`` (the data set) keys the transaction for retries. ``now``
        (epoch seconds; default the clock) is the time unlocking is read at."""
        charge = check_charge(charge, "query", f"{type(self).__name__}.spend_all")
        budgets = list(dict.fromkeys(budgets))
        if not budgets:
            raise LedgerError("A spend needs at least one budget.")
        req, req_text, fp = request_texts(charge, request)
        t = time.time() if now is None else now
        with self._tx(write=True) as cur:
            held = Held(self, cur)
            old = cur.run("SELECT fingerprint, budgets, decision, answer FROM txns WHERE"
                          " scope = ? AND key = ?", (scope, key)).one()
            kh = spend_key.get()
            if kh is not None and cur.run("SELECT 1 FROM api_keys WHERE key_hash = ?"
                                          + self._share_suffix, (kh,)).one() is None:
                raise KeyRevokedError("The API key was revoked; nothing was spent.")
            if old is not None:
                if old[0] != fp:
                    raise IdempotencyKeyReuseError(
                        f"The idempotency key {key!r} was used before for a different request.")
                stored = tuple(json.loads(old[1]))
                held.lock(stored[:1])
                held.write(stored[0], principal, "replay", key,
                           '{"request_sha256":"' + fp + '"}')
                out = MultiOutcome(key, Decision.from_dict(json.loads(old[2])), stored,
                                   replayed=True,
                                   answer=None if old[3] is None else json.loads(old[3]))
            else:
                held.lock(budgets)
                gate_of = arrive(held, gates(cur, budgets, t), principal, key, t)
                out = charge_all(held, scope, budgets, charge, key=key, principal=principal,
                                 req=req, req_text=req_text, fp=fp, gate_of=gate_of, now=t)
        if out.admitted:
            note_committed()
        held.advance()
        return out

    def record_txn_answer(self: _Store, scope: str, key: str, answer: dict[str, Any]
                          ) -> dict[str, Any]:
        """Store the answer of an admitted multi-budget spend, first writer wins (an
        ``answer`` row in its first budget's chain); return the stored one."""
        with self._tx(write=True) as cur:
            row = cur.run("SELECT budgets, answer, principal FROM txns WHERE scope = ? AND"
                          " key = ?", (scope, key)).one()
            if row is None:
                raise BudgetNotFoundError(f"No admitted spend with key {key!r} on {scope!r}.")
            first = str(json.loads(row[0])[0])
            held = Held(self, cur)
            held.lock([first])
            row = cur.run("SELECT budgets, answer, principal FROM txns WHERE scope = ? AND"
                          " key = ?", (scope, key)).one()  # read again under the lock
            assert row is not None
            if row[1] is not None:
                stored: dict[str, Any] = json.loads(row[1])
                return stored
            text = canonical_json(_json_safe(answer))
            cur.run("UPDATE txns SET answer = ?, answered_at = ? WHERE scope = ? AND key = ?",
                    (text, utcnow(), scope, key))
            held.write(first, str(row[2]), "answer", key, '{"released":true}')
        held.advance()
        out: dict[str, Any] = json.loads(text)
        return out
