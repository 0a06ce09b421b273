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
  is left, summed over their blocks, go before those that use much of it;
* ``fcfs`` -- arrival order.

**Several orders per budget.** A budget kept at several Rényi orders has one fraction
per order: ``available`` is then an array of shape (dimensions, orders) and each
request's ``demand`` one row per dimension. The ``rule`` says when a request fits a
dimension: at **every** order (:class:`~dpsieve.filters.RDPFilter`: the spent RDP stays
within the budget at each listed order), or at **any** order
(:class:`~dpsieve.filters.AnyOrderRDPFilter`, DPack's and PrivateKube's blocks: an order
whose budget is exceeded is dropped, the block is spent when every order is; what is
available at a dropped order goes negative and stays so). DPF's dominant share is the
largest fraction over dimensions and orders (as in DPack's own DPF). DPack measures each
dimension at one order, chosen per dimension from the waiting requests
(:func:`measured_orders`): at each order, how many of the requests that name the
dimension would fit it alone (a one-dimension knapsack with unit profits, solved exactly
by taking the smallest demands first); under ``any`` the order where the *most* fit
(DPack's "best alpha": the block will be spent at that order), under ``every`` the order
where the *fewest* fit (it binds). With one order (a 1-D ``available``) this is the
one-currency rule above.

**Re-ranking within a pass** (``recompute``, DPack only). DPack's key depends on what
is available, and each admission shrinks it on the admitted request's blocks; DPack's own
scheduler therefore ranks the waiting requests again every so many admissions (its
``metric_recomputation_period``, 50 in its online experiments). ``schedule(...,
recompute=k)`` does the same: after every k admissions the requests not yet walked are
ranked against what is then available (the orders re-measured over every request still
waiting). ``recompute=0`` ranks once.

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

__all__ = [
    "Pending",
    "Policy",
    "Schedule",
    "dominant_share",
    "efficiency",
    "measured_orders",
    "schedule",
]

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
    vector), its ``demand`` on each (a fraction of that budget as created, >= 0; a row of
    fractions, one per order, for budgets kept at several orders), its ``arrival`` (any
    increasing number: time or sequence) and its ``weight`` (> 0)."""

    dims: IntArray
    demand: FloatArray
    arrival: float = 0.0
    weight: float = 1.0

    def __post_init__(self) -> None:
        dims = np.asarray(self.dims, dtype=np.int64).reshape(-1)
        dem = np.asarray(self.demand, dtype=np.float64)
        if dem.ndim <= 1:
            dem = dem.reshape(-1)
        if dem.ndim > 2 or dem.shape[0] != dims.size or (dem.ndim == 2 and not dem.shape[1]):
            raise fail("demand", "Pending", f"one number (or one row of orders) per "
                       f"dimension ({dims.size})", dem.shape)
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
    """One pass: ``order`` (indices of the requests in the order walked: the policy's,
    re-ranked after admissions when ``schedule(recompute=...)`` asks), ``admitted``
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


def efficiency(p: Pending, available: FloatArray, orders: IntArray | None = None
               ) -> float:
    """``weight / sum_j demand_j / available_j`` (DPack's key; 0 when some demand meets
    nothing available, infinite for a request that demands nothing). With several
    orders, ``orders[j]`` is the order (a column of ``available``) dimension j is
    measured at (:func:`measured_orders`)."""
    if not p.demand.size:
        return float("inf")
    avail = available[p.dims]
    dem = p.demand
    if dem.ndim == 2:
        if orders is None:
            raise fail("orders", "efficiency", "one order per dimension for a 2-D demand",
                       None)
        cols = orders[p.dims]
        rows = np.arange(p.dims.size)
        avail = avail[rows, cols]
        dem = dem[rows, cols]
    need = dem > 0
    if bool(np.any(need & (avail <= 0))):
        return 0.0
    with np.errstate(over="ignore"):  # a subnormal room: an infinite cost, efficiency 0
        cost = float(np.sum(dem[need] / avail[need]))
    return float("inf") if cost == 0 else p.weight / cost


def measured_orders(pending: Sequence[Pending], available: FloatArray,
                    rule: str = "every") -> IntArray:
    """For each dimension (a row of the 2-D ``available``), the order (a column) DPack
    measures it at (module docstring): at each order, the largest number of the waiting
    requests that name the dimension whose demands there sum within what is available
    there (the smallest demands first: that one-dimension knapsack's optimum for unit
    profits); under ``rule="every"`` the order with the fewest (ties: the least
    available), under ``"any"`` the order with the most (ties: the most available).
    Dimensions no request names get the order of their count 0 under the same ties."""
    rule = _rule(rule)
    n, m = available.shape
    if not pending:
        pending = [Pending(np.zeros(0, dtype=np.int64), np.zeros((0, m)))]
    dims = np.concatenate([p.dims for p in pending])
    dem = np.concatenate([p.demand for p in pending], axis=0)  # (entries, m)
    counts = np.zeros((n, m), dtype=np.int64)
    for a in range(m):
        order = np.lexsort((dem[:, a], dims))  # by dimension, then demand
        d_s, x_s = dims[order], dem[order, a]
        csum = np.cumsum(x_s)
        start = np.searchsorted(d_s, d_s, side="left")  # each entry's group start
        before = np.where(start > 0, csum[np.maximum(start - 1, 0)], 0.0)
        fits = (csum - before) <= available[d_s, a] + 1e-12
        np.add.at(counts[:, a], d_s, fits.astype(np.int64))
    span = float(np.max(np.abs(available), initial=0.0)) * 2.0 + 1.0
    key = counts.astype(np.float64) * span + available
    pick = np.argmin(key, axis=1) if rule == "every" else np.argmax(key, axis=1)
    out: IntArray = pick.astype(np.int64)
    return out


def _rule(rule: str) -> str:
    if rule not in ("every", "any"):
        raise fail("rule", "schedule", "'every' or 'any'", rule)
    return rule


def schedule(policy: Policy | str, pending: Sequence[Pending], available: FloatArray, *,
             tolerance: float = 1e-12, rule: str = "every", recompute: int = 0) -> Schedule:
    """Order ``pending`` by ``policy`` and admit greedily within ``available`` (module
    docstring; ``rule``: when a request fits a budget kept at several orders).
    ``available`` is not modified.

    ``recompute`` (``dpack`` only; 0: never): after every ``recompute`` admissions the
    requests not yet walked are ranked again against what is then available (the
    orders re-measured over every request still waiting, as DPack's own scheduler does
    every ``metric_recomputation_period`` admissions): an admission shrinks the room on
    its blocks, so requests on those blocks fall back. DPF's and FCFS's keys do not
    depend on what is available, so ``recompute`` changes nothing for them."""
    pol = Policy(policy)
    rule = _rule(rule)
    if isinstance(recompute, bool) or not isinstance(recompute, int) or recompute < 0:
        raise fail("recompute", "schedule", "an integer >= 0", recompute)
    avail = np.array(available, dtype=np.float64, copy=True)
    if avail.ndim <= 1:
        avail = avail.reshape(-1)
    n = len(pending)
    for p in pending:
        if p.demand.ndim != avail.ndim or (avail.ndim == 2
                                           and p.demand.shape[1] != avail.shape[1]):
            raise fail("demand", "schedule", f"shaped like 'available' (orders: "
                       f"{avail.shape[1:] or 'one'})", p.demand.shape)
    arrival = [p.arrival for p in pending]
    order: list[int] = []
    admitted: list[int] = []
    position: dict[int, int] = {}
    blocked: dict[int, int] = {}
    todo = list(range(n))
    while todo:
        taken = set(admitted)
        ranked = _rank(pol, pending, todo, arrival, avail, rule,
                       [i for i in range(n) if i not in taken])
        since = 0
        for at, i in enumerate(ranked):
            order.append(i)
            p = pending[i]
            room = avail[p.dims]
            short = np.asarray(p.demand > room + tolerance)
            if short.ndim == 2:  # several orders: short at any of them, or at all of them
                short = np.asarray(short.any(axis=1) if rule == "every"
                                   else short.all(axis=1))
            if bool(np.any(short)):
                position[i] = len(position) + 1
                blocked[i] = int(p.dims[int(np.argmax(short))])
                continue
            avail[p.dims] = room - p.demand
            admitted.append(i)
            since += 1
            if pol == Policy.DPACK and recompute and since == recompute:
                todo = ranked[at + 1:]
                break
        else:
            todo = []
    return Schedule(order, admitted, position, blocked, avail)


def _rank(pol: Policy, pending: Sequence[Pending], todo: list[int], arrival: list[float],
          avail: FloatArray, rule: str, waiting: list[int]) -> list[int]:
    """``todo`` in ``pol``'s order against ``avail`` (ties: the earlier arrival, then
    the index); DPack's orders are measured over the ``waiting`` requests."""
    if pol == Policy.DPF:
        keys = [(dominant_share(pending[i]), arrival[i], i) for i in todo]
    elif pol == Policy.DPACK:
        cols = (measured_orders([pending[i] for i in waiting], avail, rule)
                if avail.ndim == 2 else None)
        keys = [(-efficiency(pending[i], avail, cols), arrival[i], i) for i in todo]
    else:
        keys = [(0.0, arrival[i], i) for i in todo]
    return [k[2] for k in sorted(keys)]
