"""Budgets over time (pure: no I/O): blocks, unlocking, the scheduler's currency and
policies.

* :mod:`~dpsieve.blocks.spec` -- a data set's block declaration (:class:`BlockSpec`);
* :mod:`~dpsieve.blocks.unlock` -- how much of a block's budget is unlocked
  (:class:`Unlock`), from public facts only;
* :mod:`~dpsieve.blocks.currency` -- the fraction of a budget used, and a charge's demand;
* :mod:`~dpsieve.blocks.scheduler` -- DPF, DPack-style and FCFS passes over pending
  requests (:func:`schedule`).

Which blocks a plan may read is the query layer's (:mod:`dpsieve.queries.blocks`); the
ledger stores blocks, quotas and the queue (:mod:`dpsieve.ledger.blocks`); proofs in
docs/proofs/blocks.md.
"""

from dpsieve.blocks.currency import demand, used_fraction, used_fraction_of_states
from dpsieve.blocks.scheduler import Pending, Policy, Schedule, schedule
from dpsieve.blocks.spec import BlockSpec, block_spec_from_dict
from dpsieve.blocks.unlock import Unlock, unlock_from_dict

__all__ = [
    "BlockSpec",
    "Pending",
    "Policy",
    "Schedule",
    "Unlock",
    "block_spec_from_dict",
    "demand",
    "schedule",
    "unlock_from_dict",
    "used_fraction",
    "used_fraction_of_states",
]
