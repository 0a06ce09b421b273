"""An RDP filter that admits while the budget holds at *some* order (DPack's blocks).

:class:`~dpsieve.filters.RDPFilter` admits a query only if the spent RDP stays within the
budget at *every* listed order, so the order that suits the workload least binds. Block
schedulers (PrivateKube, Luo et al. OSDI 2021; DPack, Tholoniat et al. EuroSys 2025) keep a
block's budget at several orders and admit while *one* order still holds: an order whose
budget would be exceeded is dropped, the block is spent when every order is. The orders
that survive are the ones the workload uses well (Gaussian tasks favour middle orders,
DP-SGD low ones, Laplace high ones).

**Budgets** (``for_target``): with n candidate orders, B_a = eps - log(n / delta) / (a - 1),
rounded down, orders with B_a > 0 kept. **Why the interaction is (eps, delta)-DP**
(docs/proofs/filters.md, "RDP at some order"): for each order a the process
exp((a - 1)(L_t - S_{a,t})), L_t the privacy loss of the first t outputs and S_{a,t} the
RDP at a of the first t admitted queries, is a supermartingale under D (each query's
E[exp((a - 1) l)] = exp((a - 1) D_a) <= exp((a - 1) rho_a)); stopped before a query that
would take S_a above B_a, its expectation is at most 1. On the event that a survives to
the end, L > eps gives the stopped process at least exp((a - 1)(eps - B_a)) = n / delta,
so that event has probability at most delta / n (Markov). The filter admits a query only
if some order survives it, and spending only grows, so at the end some order survived:
P(L > eps) <= sum over orders of delta / n = delta, and a privacy-loss tail bound gives
(eps, delta)-DP. The delta is split over the orders (a union bound); without the split
(as PrivateKube states it) the argument above does not go through, so we keep it: it
costs log n / (a - 1) of budget at order a. The improved conversion of Canonne, Kamath
and Steinke (which :meth:`RDPFilter.for_target` uses) holds for one RDP guarantee of the
whole interaction, which this filter does not give, so it is not used here.

Costs are the same exact rationals as :class:`RDPFilter`'s (``rdp_of``: exact or rounded
up); the admission test is exact.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpsieve._rounding import next_down
from dpsieve._validation import check_in_open, check_nonnegative, fail
from dpsieve.accounting.conversions import rdp_of
from dpsieve.filters._common import StateReader, float_down, float_up, frac_to_json
from dpsieve.filters._queries import as_query, delta_refusal, query_to_dict
from dpsieve.filters.additive import RDPFilter
from dpsieve.filters.base import BudgetLeft, Charge, Decision

__all__ = ["AnyOrderRDPFilter"]


class AnyOrderRDPFilter(RDPFilter):
    """RDP filter at several orders that admits while the budget holds at one of them
    (module docstring). Build it with :meth:`for_target`; ``AnyOrderRDPFilter(orders,
    budgets)`` takes budgets as given (the caller then owns the conversion)."""

    KIND = "rdp_any"

    @classmethod
    def for_target(cls, eps: float, delta: float, orders: tuple[float, ...]
                   ) -> AnyOrderRDPFilter:
        """Budgets B_a = eps - log(n / delta) / (a - 1) for the n orders given (> 1.01),
        rounded down; orders with B_a > 0 kept (module docstring)."""
        o = "AnyOrderRDPFilter.for_target"
        eps = check_nonnegative("eps", eps, o)
        check_in_open("delta", delta, 0.0, 1.0, o)
        cand = [float(a) for a in orders if float(a) > 1.01 and math.isfinite(float(a))]
        if not cand:
            raise fail("orders", o, "finite orders > 1.01", orders)
        big = math.log(len(cand)) - math.log(delta)

        def budget(a: float) -> float:
            t = big / (a - 1.0)  # a few ulp off: an absolute margin of 1e-15 (eps + t)
            return next_down(eps - t - 1e-15 * (eps + t))

        kept = [(a, budget(a)) for a in cand if budget(a) > 0]
        if not kept:
            raise fail("orders", o, "orders with a positive budget", orders)
        return cls(tuple(a for a, _ in kept), tuple(b for _, b in kept))

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        orders = r.listed("orders", r.number_item(1.0, lo_open=True))
        r.require(len(orders) > 0, "orders", "a non-empty list", orders)
        budgets = r.listed("budgets", r.frac_item(lo=0), size=len(orders))
        spent = r.listed("spent", r.frac_item(lo=0), size=len(orders))
        r.require(any(s <= b for s, b in zip(spent, budgets, strict=True)), "spent",
                  "within the budget at one order at least", [float(s) for s in spent])

    def _left(self, spent: tuple[Fraction, ...]) -> list[float]:
        return [float_down(max(b - s, Fraction(0)))
                for b, s in zip(self._budgets, spent, strict=True)]

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({"orders": list(self._orders), "rdp": self._left(self._spent)})

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        qd = query_to_dict(q)
        costs = [rdp_of(q, a) for a in self._orders]
        cs = [c for c in costs if c is not None]
        if len(cs) != len(costs):
            return Decision.of(
                admitted=False,
                reason="the query states no finite RDP at every order"
                + delta_refusal(q, "Renyi-DP"),
                remaining=self.remaining(), cost={"query": qd}), None
        cost = {"orders": list(self._orders), "rdp": [float_up(c) for c in cs],
                "exact": [frac_to_json(c) for c in cs], "query": qd}
        new = tuple(s + c for s, c in zip(self._spent, cs, strict=True))
        if not any(n <= b for n, b in zip(new, self._budgets, strict=True)):
            return Decision.of(admitted=False,
                               reason="the RDP budget would be exceeded at every order",
                               remaining=self.remaining(), cost=cost), None
        state = dict(self._state(), spent=[frac_to_json(s) for s in new])
        rem = {"orders": list(self._orders), "rdp": self._left(new)}
        return Decision.of(True, "admitted", rem, cost), state
