"""A scheduling pass over a data set's queue, planned from the ledger's public state
(no I/O here; both backends run the plan in one transaction).

:func:`plan_pass` takes the waiting requests, the stored and initial states of every
budget they are to be charged to, the blocks' unlocking gates and the time, and says:

* which requests **timed out** (their deadline passed; nothing is charged);
* which can **never** run (a demand above what is left of a budget even fully
  unlocked; refused, nothing charged);
* the order in which to **try** the others (:func:`dpsieve.blocks.scheduler.schedule`
  with the data set's policy and its declared ``recompute``; the ledger admits each
  through the real filters and gates, so a proposal refused in exact arithmetic stays
  waiting);
* for each one left waiting, its **position** and **reason**, in public words.

Every input is public (docs/proofs/blocks.md §5): demands and states are functions of
charges, gates of policies, arrivals and the clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from dpsieve._memo import Memo
from dpsieve.blocks.currency import used_fraction_of_states
from dpsieve.blocks.scheduler import Pending, Policy, schedule
from dpsieve.ledger.blockset import Gate, PendingRecord, epoch

__all__ = ["PassPlan", "key_used", "label", "plan_pass"]


@dataclass(frozen=True, slots=True)
class PassPlan:
    """What a pass is to do (module docstring); keys of pending requests."""

    timed_out: list[str] = field(default_factory=list)
    never: dict[str, str] = field(default_factory=dict)
    attempt: list[str] = field(default_factory=list)
    waiting: dict[str, tuple[int, str]] = field(default_factory=dict)


def label(budget_id: str) -> str:
    """A budget id in words: ``block "2024-01"``, ``the quota of analyst 'ana'``."""
    if "/block:" in budget_id:
        return "block " + budget_id.rsplit("/block:", 1)[1]
    if "/quota:" in budget_id:
        scope, _, name = budget_id.rsplit("/quota:", 1)[1].partition(":")
        return f"the quota of {scope} {name!r}"
    return f"the budget {budget_id!r}"


#: fractions used (as floats), by the exact (stored state, initial state) texts: a pass
#: reads the same states again until they change (a function of the texts alone, so a
#: hit is what the computation gives)
_USED: Memo[float] = Memo(8192)


def _used(state: str, initial: str) -> float:
    """The fraction of a budget used, as the nearest float: the pass only orders and
    pre-selects with it (1e-12 tolerance); the ledger admits in exact arithmetic."""
    return _USED.get((state, initial),
                     lambda: float(used_fraction_of_states(state, initial)))


def key_used(same: bool) -> tuple[str, str, str]:
    """How a pass settles a waiting request whose idempotency key was charged meanwhile
    (by a direct query): admitted if that charge was this very request (charged once, no
    second charge), else refused (nothing charged); (status, reason, chain event)."""
    if same:
        return ("admitted", "admitted: already charged under its idempotency key (a direct "
                "query with the same key); not charged again", "scheduled")
    return ("refused", "refused: its idempotency key was used for another request; nothing "
            "was spent.", "refused")


def _pct(x: float | Fraction) -> str:
    return f"{float(x) * 100:.4g} %"


def plan_pass(policy: Policy | str, waiting: Sequence[PendingRecord],
              states: Mapping[str, tuple[str, str]], gates: Mapping[str, Gate],
              now: float, *, recompute: int = 0) -> PassPlan:
    """Plan one pass (module docstring). ``states`` maps each budget of the waiting
    requests to its (stored state, initial state) texts; ``recompute`` (the data set's
    declaration, ``dpack`` only; 0: rank once) re-ranks the requests not yet walked after
    every ``recompute`` proposed admissions, as :func:`~dpsieve.blocks.scheduler.schedule`
    does (positions and reasons are then those of the re-ranked walk)."""
    out = PassPlan()
    live = []
    for r in waiting:
        if epoch(r.deadline) <= now:
            out.timed_out.append(r.key)
        else:
            live.append(r)
    budgets = sorted({b for r in live for b in r.budgets})
    index = {b: i for i, b in enumerate(budgets)}
    used = [_used(*states[b]) for b in budgets]
    unlocked = [gates[b].unlocked if b in gates else Fraction(1) for b in budgets]
    avail = np.array([float(u) for u in unlocked]) - np.array(used)
    left = 1.0 - np.array(used)
    pend, keys = [], []
    for r in live:
        dims = np.array([index[b] for b in r.budgets], dtype=np.int64)
        dem = np.array(r.demands, dtype=np.float64)
        short = dem > left[dims] + 1e-12
        if bool(np.any(short)):
            b = budgets[int(dims[int(np.argmax(short))])]
            out.never[r.key] = (f"{label(b)} has {_pct(left[index[b]])} of its budget left, "
                                "less than this request needs even when all of it is "
                                "unlocked; nothing was spent.")
            continue
        pend.append(Pending(dims, dem, epoch(r.created_at)))
        keys.append(r)
    plan = schedule(policy, pend, avail, recompute=recompute)
    out.attempt.extend(keys[i].key for i in plan.admitted)
    n = len(plan.position)
    pol = Policy(policy)
    why = {Policy.DPF: "requests with smaller dominant shares go first",
           Policy.DPACK: "requests using less of what is left go first",
           Policy.FCFS: "earlier requests go first"}[pol]
    for i, pos in plan.position.items():
        j = plan.blocked_on[i]
        b = budgets[j]
        need = float(pend[i].demand[list(pend[i].dims).index(j)])
        taken = float(unlocked[j]) - float(plan.left[j]) if plan.left is not None else 0.0
        state = (f"{label(b)} has {_pct(unlocked[j])} of its budget unlocked and "
                 f"{_pct(taken)} used (or given to requests admitted before it)"
                 if unlocked[j] < 1 else f"{label(b)} has {_pct(1 - taken)} of its budget "
                 "left")
        out.waiting[keys[i].key] = (pos, f"waiting ({pol.value}: {why}; position {pos} of "
                                         f"{n}): {state}; this request needs {_pct(need)}.")
    return out
