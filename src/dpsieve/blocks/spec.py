"""A data set's block declaration: the block column, each block's budget, unlocking, the
scheduler, and what the steward states about privacy units across blocks (pure values).

JSON (the service's ``blocks`` field, ``dpsieve blocks declare``)::

    {"column": "day", "budget": {"type": "approx", "eps": 10, "delta": 1e-7},
     "unlock": {"type": "periodic", "fraction": 0.1, "period": 86400},
     "scheduler": "dpack", "recompute": 50, "unit_in_one_block": false}

``budget`` is any budget the data set could have (it is read, and its filter built, by
the session: :func:`dpsieve.session.budgets.filter_for_budget`); every block arrives
with a fresh copy of it. ``unit_in_one_block`` is the steward's statement that every
privacy unit's rows lie in one block (the block is a function of the unit, as it is
when each row is its own unit); the guarantee each unit gets follows from it
(docs/proofs/blocks.md §3): the budget of its block, or else the composition of the
budgets of every block it has rows in. ``recompute`` (``dpack`` only; default 0: rank
once a pass) re-ranks the waiting requests after every so many admissions within a pass
(:func:`dpsieve.blocks.scheduler.schedule`, DPack's ``metric_recomputation_period``); it
is stated in the JSON only when set, so a declaration without it reads as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpsieve._validation import fail
from dpsieve.blocks.scheduler import Policy
from dpsieve.blocks.unlock import Unlock, unlock_from_dict

__all__ = ["BlockSpec", "block_spec_from_dict"]

_KEYS = {"column", "budget", "unlock", "scheduler", "recompute", "unit_in_one_block"}


@dataclass(frozen=True, slots=True)
class BlockSpec:
    """A block declaration (module docstring); ``budget`` is the budget's JSON."""

    column: str
    budget: dict[str, Any]
    unlock: Unlock = field(default_factory=Unlock)
    scheduler: Policy = Policy.DPF
    unit_in_one_block: bool = False
    recompute: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.column, str) or not self.column:
            raise fail("column", "blocks", "a column name", self.column)
        if not isinstance(self.budget, Mapping) or "type" not in self.budget:
            raise fail("budget", "blocks", "a budget such as {'type': 'approx', 'eps': 10, "
                       "'delta': 1e-7}", self.budget)
        if not isinstance(self.unit_in_one_block, bool):
            raise fail("unit_in_one_block", "blocks", "true or false", self.unit_in_one_block)
        object.__setattr__(self, "budget", dict(self.budget))
        object.__setattr__(self, "scheduler", Policy(self.scheduler))
        r = self.recompute
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise fail("recompute", "blocks", "an integer >= 0 (0: rank once a pass)", r)
        if r and self.scheduler != Policy.DPACK:
            raise fail("recompute", "blocks", "0 unless the scheduler is 'dpack' (only "
                       "DPack's order depends on what is available)", r)

    def to_dict(self) -> dict[str, Any]:
        out = {"column": self.column, "budget": dict(self.budget),
               "unlock": self.unlock.to_dict(), "scheduler": self.scheduler.value,
               "unit_in_one_block": self.unit_in_one_block}
        if self.recompute:
            out["recompute"] = self.recompute
        return out


def block_spec_from_dict(d: Any) -> BlockSpec:
    """A declaration from its JSON (module docstring); failures name the parameter."""
    if not isinstance(d, Mapping):
        raise fail("blocks", "dataset", "an object {column, budget, unlock?, scheduler?, "
                   "recompute?, unit_in_one_block?}", d)
    extra = sorted(set(d) - _KEYS)
    if extra:
        raise fail(extra[0], "blocks", f"one of {sorted(_KEYS)}", extra[0])
    sched = d.get("scheduler", "dpf")
    if sched not in tuple(p.value for p in Policy):
        raise fail("scheduler", "blocks", f"one of {[p.value for p in Policy]}", sched)
    return BlockSpec(d.get("column"), d.get("budget"),  # type: ignore[arg-type]
                     unlock_from_dict(d.get("unlock")), Policy(sched),
                     d.get("unit_in_one_block", False),
                     d.get("recompute", 0))
