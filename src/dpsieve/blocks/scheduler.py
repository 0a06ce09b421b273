"""Scheduling requests that wait for budget (pure: numbers in, a decision out).

A pending request is charged to several **dimensions** -- the blocks its ``where`` may
read and the quotas of its analyst -- and uses a fraction of each one's budget as created
(:func:`dpsieve.blocks.currency.demand`). Each dimension has an **available** fraction:
what is unlocked and not yet used (:mod:`dpsieve.blocks.unlock`). A scheduling pass
orders the pending requests by a policy, then walks the order once and admits each
request whose demands all fit what is still available, subtracting them (a greedy
knapsack):

* ``dpf`` -- dominant private-block fairness (Luo et al., OSDI 2021): the smallest
  *dominant share* first, the largest fraction of any one budget the request uses;
* ``dpack`` -- efficiency (Tholoniat et al., EuroSys 2025): the largest
  ``weight / sum_j demand_j / available_j`` first, so requests that use little of what
  is left, summed over their blocks, go before those that use much of it; with one
  currency per block DPack's per-block choice of a Rényi order has one option;
* ``fcfs`` -- arrival order.

Ties go to the earlier arrival. Everything here is a function of the demands, the
available fractions, the arrival order and the weights: public numbers derived from
charges and unlocking, never from the data (docs/proofs/blocks.md §5). The scheduler
only proposes: the ledger admits each proposed request through the blocks' real filters
in one transaction (a request a filter refuses stays pending; nothing is charged).

The floats here only order and pre-select; an admission is decided in exact arithmetic
by the filters and the unlocking gate, so the small ``tolerance`` (a request within
1e-12 of fitting is proposed) can only make the ledger try a request it then refuses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from dpsieve._validation import fail

__all__ = ["Pending", "Policy", "Schedule", "dominant_share", "efficiency", "schedule"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class Policy(StrEnum):
    """Scheduling policies (module docstring)."""

    DPF = "dpf"
    DPACK = "dpack"
    FCFS = "fcfs"


@dataclass(frozen=True, slots=True, eq=False)
class Pending:
    """A pending request: the ``dims`` it is charged to (indices into the available
    vector), its ``demand`` on each (a fraction of that budget as created, >= 0), its
    ``arrival`` (any increasing number: time or sequence) and its ``weight`` (> 0)."""

    dims: IntArray
    demand: FloatArray
    arrival: float = 0.0
    weight: float = 1.0

    def __post_init__(self) -> None:
        dims = np.asarray(self.dims, dtype=np.int64).reshape(-1)
        dem = np.asarray(self.demand, dtype=np.float64).reshape(-1)
        if dims.shape != dem.shape:
            raise fail("demand", "Pending", f"one number per dimension ({dims.size})",
                       dem.size)
        if not bool(np.all(dem >= 0)):  # NaN fails too
            raise fail("demand", "Pending", "fractions >= 0", "a negative or NaN demand")
        if np.unique(dims).size != dims.size:
            raise fail("dims", "Pending", "distinct dimensions", "a repeated dimension")
        if not (self.weight > 0):
            raise fail("weight", "Pending", "a number > 0", self.weight)
        object.__setattr__(self, "dims", dims)
        object.__setattr__(self, "demand", dem)


@dataclass(frozen=True, slots=True)
class Schedule:
    """One pass: ``order`` (indices of the requests in the policy's order), ``admitted``
    (proposed for admission, in that order), and for each request left waiting its
    ``position`` among them (1-based) and ``blocked_on``, the first of its dimensions
    (an index into the available vector) that lacked room when its turn came; ``left``
    is what remains available after the admissions."""

    order: list[int]
    admitted: list[int]
    position: dict[int, int] = field(default_factory=dict)
    blocked_on: dict[int, int] = field(default_factory=dict)
    #: what is available after the pass's admissions, per dimension
    left: FloatArray | None = None


def dominant_share(p: Pending) -> float:
    """The largest fraction of any one budget the request uses (DPF's key)."""
    return float(p.demand.max()) if p.demand.size else 0.0


def efficiency(p: Pending, available: FloatArray) -> float:
    """``weight / sum_j demand_j / available_j`` (DPack's key; 0 when some demand meets
    nothing available, infinite for a request that demands nothing)."""
    if not p.demand.size:
        return float("inf")
    avail = available[p.dims]
    need = p.demand > 0
    if bool(np.any(need & (avail <= 0))):
        return 0.0
    with np.errstate(over="ignore"):  # a subnormal room: an infinite cost, efficiency 0
        cost = float(np.sum(p.demand[need] / avail[need]))
    return float("inf") if cost == 0 else p.weight / cost


def schedule(policy: Policy | str, pending: Sequence[Pending], available: FloatArray, *,
             tolerance: float = 1e-12) -> Schedule:
    """Order ``pending`` by ``policy`` and admit greedily within ``available`` (module
    docstring). ``available`` is not modified."""
    pol = Policy(policy)
    avail = np.array(available, dtype=np.float64, copy=True).reshape(-1)
    n = len(pending)
    arrival = [p.arrival for p in pending]
    if pol == Policy.DPF:
        keys = [(dominant_share(p), arrival[i], i) for i, p in enumerate(pending)]
    elif pol == Policy.DPACK:
        keys = [(-efficiency(p, avail), arrival[i], i) for i, p in enumerate(pending)]
    else:
        keys = [(0.0, arrival[i], i) for i in range(n)]
    order = [k[2] for k in sorted(keys)]
    admitted: list[int] = []
    position: dict[int, int] = {}
    blocked: dict[int, int] = {}
    for i in order:
        p = pending[i]
        room = avail[p.dims]
        short = p.demand > room + tolerance
        if bool(np.any(short)):
            position[i] = len(position) + 1
            blocked[i] = int(p.dims[int(np.argmax(short))])
            continue
        avail[p.dims] = room - p.demand
        admitted.append(i)
    return Schedule(order, admitted, position, blocked, avail)
