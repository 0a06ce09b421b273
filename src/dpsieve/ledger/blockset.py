"""Blocks, quotas and the queue in a ledger: the values both backends share, and the
pieces of a multi-budget spend that do not touch storage.

A **multi-budget spend** (:meth:`spend_all` of :class:`~dpsieve.ledger.blocks.SQLBlocks`
and :class:`~dpsieve.ledger.blocks_memory.MemoryBlocks`) charges one request to several
budgets -- the blocks its ``where`` may read and its analyst's quotas -- all or nothing,
in one transaction (docs/proofs/blocks.md §4). Each budget decides with its own filter;
a block with an unlocking policy also requires the fraction of its budget used after the
charge to be at most the fraction unlocked (:class:`Gate`). The outcome
(:class:`MultiOutcome`) names every budget charged, which a retry (the same key) gets back
with the stored decision and answer even if blocks arrived since.

Budget ids: a block's is ``"<data set>/block:<value as JSON>"``, a quota's
``"<data set>/quota:analyst:<name>"`` or ``"<data set>/quota:group:<name>"``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from fractions import Fraction
from typing import Any

from dpsieve.blocks.currency import used_fraction_of_states
from dpsieve.blocks.unlock import Unlock, unlock_from_dict
from dpsieve.errors import LedgerError
from dpsieve.filters.base import BudgetLeft, Decision
from dpsieve.ledger.base import canonical_json

__all__ = [
    "BlockRecord",
    "Gate",
    "MultiOutcome",
    "PendingRecord",
    "QuotaRecord",
    "block_budget_id",
    "check_frozen",
    "epoch",
    "locked_decision",
    "quota_budget_id",
    "value_text",
]

#: The statuses of a pending request.
STATUSES = ("waiting", "admitted", "refused", "timed_out")


def value_text(value: Any) -> str:
    """A block value's canonical text (its JSON)."""
    return canonical_json(value)


def block_budget_id(dataset: str, value: Any) -> str:
    """The budget id of a block of ``dataset`` (``value``: the block value)."""
    return f"{dataset}/block:{value_text(value)}"


def quota_budget_id(dataset: str, scope: str, name: str) -> str:
    """The budget id of an analyst's or a group's quota on ``dataset``."""
    return f"{dataset}/quota:{scope}:{name}"


def check_frozen(dataset: str, old: dict[str, Any], new: dict[str, Any]) -> None:
    """Refuse a new declaration ``new`` of ``dataset`` (a :class:`LedgerError`: the
    service's 409) if it changes what is frozen once a block exists -- ``old`` is the
    stored one; call it only when a block exists. The column and the budget say what each
    block is; ``unit_in_one_block`` says which guarantee the charges already made were
    made under (docs/proofs/blocks.md §3): the budget of the unit's block, or the
    composition over every block it has rows in. Unlocking, the scheduler and
    ``recompute`` may change. Both backends call it in the transaction that would write,
    and the service and the CLI before they write anything."""
    if (old.get("column"), old.get("budget")) != (new.get("column"), new.get("budget")):
        raise LedgerError(f"The blocks of {dataset!r} exist: their column and budget "
                          "cannot change (unlocking and the scheduler can).")
    was = bool(old.get("unit_in_one_block", False))
    if was != bool(new.get("unit_in_one_block", False)):
        raise LedgerError(
            f"'unit_in_one_block' of {dataset!r} cannot change once its blocks exist: the "
            "guarantee stated for the charges already made depends on it "
            f"(docs/proofs/blocks.md §3). It is {json.dumps(was)}; got "
            f"{json.dumps(new.get('unit_in_one_block', False))}.")


def epoch(ts: str) -> float:
    """Seconds since the epoch of an ISO 8601 time the ledger wrote."""
    return datetime.fromisoformat(ts).timestamp()


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """A block as the ledger keeps it: its value, budget id, unlocking, arrival time
    and the distinct arrivals counted so far."""

    dataset: str
    value: Any
    budget_id: str
    unlock: Unlock
    created_at: str
    arrivals: int = 0

    def unlocked(self, now: float) -> Fraction:
        """The fraction of its budget unlocked at ``now`` (epoch seconds)."""
        return self.unlock.unlocked(now - epoch(self.created_at), self.arrivals)


@dataclass(frozen=True, slots=True)
class QuotaRecord:
    """An analyst's or a group's quota on a data set."""

    dataset: str
    scope: str
    name: str
    budget_id: str


@dataclass(frozen=True, slots=True)
class Gate:
    """A block's unlocking gate at one moment: admitted only if the fraction used after
    the charge is at most the fraction unlocked."""

    unlock: Unlock
    created: float
    arrivals: int
    now: float

    @property
    def unlocked(self) -> Fraction:
        return self.unlock.unlocked(self.now - self.created, self.arrivals)

    def used_after(self, state_after: str, initial: str) -> Fraction:
        return used_fraction_of_states(state_after, initial)

    @classmethod
    def of(cls, unlock_json: str, created_at: str, arrivals: int, now: float) -> Gate:
        return cls(unlock_from_dict(json.loads(unlock_json)), epoch(created_at), arrivals, now)


def locked_decision(admitted: Decision, before: BudgetLeft, used: Fraction,
                    unlocked: Fraction, block: str) -> Decision:
    """The refusal of a charge the block's filter admits but its unlocking does not: the
    filter's cost, the budget left before it (nothing was spent)."""
    pct = f"{float(unlocked) * 100:.4g} %"
    reason = (f"locked: block {block} has {pct} of its budget unlocked; this query would "
              f"bring its use to {float(used) * 100:.4g} %. More is unlocked over time or "
              "as analysts arrive; nothing was spent.")
    return Decision(False, reason, before, admitted.cost)


@dataclass(frozen=True, slots=True)
class MultiOutcome:
    """What a multi-budget spend did. ``decision`` is the binding one: on admission the
    decision of the budget left most used (every budget admitted), on refusal the refusing
    budget's (``refused_by``; ``why`` is ``"budget"`` when its filter refused, ``"locked"``
    when only unlocking did). ``budgets`` are the budgets charged (a replay's as stored).
    """

    key: str
    decision: Decision
    budgets: tuple[str, ...]
    decisions: dict[str, Decision] = field(default_factory=dict)
    replayed: bool = False
    answer: dict[str, Any] | None = None
    refused_by: str | None = None
    why: str = "admitted"

    @property
    def admitted(self) -> bool:
        return self.decision.admitted


@dataclass(frozen=True, slots=True)
class PendingRecord:
    """A request waiting for budget (or that waited): who asked, the budgets it is to be
    charged to, its demand on each (fractions of the budgets as created), its status
    (``waiting``, ``admitted``, ``refused``, ``timed_out``), its position among the waiting
    and the reason it waits (public words), and its deadline."""

    scope: str
    key: str
    principal: str
    request: dict[str, Any]
    budgets: tuple[str, ...]
    demands: tuple[float, ...]
    status: str
    reason: str
    position: int | None
    created_at: str
    deadline: str
    decided_at: str | None = None

    def to_dict(self, *, public: bool = True) -> dict[str, Any]:
        """JSON for the analyst who asked (``public=False``: with the request) or for
        others (no request)."""
        out: dict[str, Any] = {
            "key": self.key, "status": self.status, "reason": self.reason,
            "position": self.position, "created_at": self.created_at,
            "deadline": self.deadline, "decided_at": self.decided_at,
            "blocks": len(self.budgets)}
        if not public:
            out["request"] = self.request
            out["principal"] = self.principal
        return out
