"""Additive residue filters: pure DP, zCDP, RDP over several orders, approximate zCDP.

Each keeps a budget in one currency and subtracts each admitted query's cost, which is a
residue update (paper, Sec. 4: U(B, L) (+) L <= B):

* pure DP (Rogers et al. 2016): R_{eps-e} (+) R_e <= R_eps;
* zCDP and RDP at fixed orders (Feldman & Zrnic 2021, the Renyi filter): RDP adds under
  adaptive composition, and admitting while sum rho_i <= rho at *every* listed order makes
  the interaction (a, rho_a)-RDP at each of them;
* approximate zCDP (Whitehouse et al. 2023): sums of rhos and of deltas.

Budgets, spends and costs are exact (``Fraction``): a cost is an exact rational bound, or a
transcendental value already rounded up by the conversion (see
:mod:`dpsieve.filters._queries`), so the admission test ``spent + cost <= budget`` has no
rounding at all. A query with a positive parameter always has a positive cost, so an
exhausted budget refuses it. Decisions report costs rounded up and what is left rounded
down (``float_up``/``float_down``); the exact values are in ``remaining()["exact"]``.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from fractions import Fraction
from typing import Any

from dpsieve._rounding import next_down
from dpsieve._validation import check_in_open, check_nonnegative, fail
from dpsieve.accounting.conversions import pure_eps_of, rdp_of, zcdp_of
from dpsieve.filters._common import (
    FilterBase,
    StateReader,
    float_down,
    float_up,
    frac_from_json,
    frac_to_json,
)
from dpsieve.filters._queries import as_query, delta_refusal, query_to_dict
from dpsieve.filters._zcdp_target import cks_rho_at, zcdp_rho_for
from dpsieve.filters.base import BudgetLeft, Charge, Decision

__all__ = [
    "ApproxZCDPFilter",
    "PureDPFilter",
    "RDPFilter",
    "ZCDPFilter",
    "cks_rho_at",
    "zcdp_rho_for",
]


def _refuse(reason: str, remaining: BudgetLeft | dict[str, Any], cost: dict[str, Any]
            ) -> Decision:
    return Decision.of(admitted=False, reason=reason, remaining=remaining, cost=cost)


class _ScalarFilter(FilterBase):
    """A budget in one additive currency (exact)."""

    CURRENCY = ""

    def __init__(self, budget: float) -> None:
        b = check_nonnegative(self.CURRENCY, budget, type(self).__name__)
        self._budget = Fraction(b)
        self._spent = Fraction(0)

    @abstractmethod
    def _cost(self, query: Charge) -> Fraction | None:
        """The query's cost in this currency, exact or rounded up (``None``: no finite cost)."""

    def _state(self) -> dict[str, Any]:
        return {"budget": frac_to_json(self._budget), "spent": frac_to_json(self._spent)}

    def _load(self, state: dict[str, Any]) -> None:
        self._budget = frac_from_json(state["budget"], "budget")
        self._spent = frac_from_json(state["spent"], "spent")

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        budget = r.frac("budget", lo=0)
        r.frac("spent", lo=0, hi=budget)

    def _remaining(self) -> BudgetLeft:
        left = self._budget - self._spent
        return BudgetLeft({self.CURRENCY: float_down(left), "exact": frac_to_json(left)})

    def admits_more(self, query: Charge) -> int | None:
        """How many more of ``query`` this filter admits, by its own admission test in one
        step: ``floor((budget - spent) / cost)`` with the exact cost :meth:`try_spend`
        charges (k more fit iff spent + k cost <= budget); 0 for a query it refuses
        whatever is left (no finite cost). ``None`` for a free query (count by running).
        Raises what :meth:`dry_run` raises (a query under another neighbouring relation).
        Used by :func:`dpsieve.filters.capacity.count_admitted`; builds no decision."""
        self._check_relation(query)
        c = self._cost(as_query(query))
        if c is None:
            return 0
        if c <= 0:
            return None
        left = self._budget - self._spent
        return left.numerator * c.denominator // (left.denominator * c.numerator)

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        c = self._cost(q)
        qd = query_to_dict(q)
        if c is None:
            return _refuse(
                f"the query states no finite {self.CURRENCY} cost"
                + delta_refusal(q, {"eps": "pure-DP", "rho": "zCDP"}.get(self.CURRENCY, "")),
                self.remaining(), {"query": qd}
            ), None
        shown = float_up(c)
        cost = {self.CURRENCY: shown, "exact": frac_to_json(c), "query": qd}
        new_spent = self._spent + c
        if new_spent > self._budget:
            have = float_down(self._budget - self._spent)
            return _refuse(
                f"{self.CURRENCY} cost {shown!r} exceeds the remaining {have!r}",
                self.remaining(),
                cost,
            ), None
        left = self._budget - new_spent
        state = {"budget": frac_to_json(self._budget), "spent": frac_to_json(new_spent)}
        rem = {self.CURRENCY: float_down(left), "exact": frac_to_json(left)}
        return Decision.of(
            True, f"admitted; {self.CURRENCY} left {float_down(left)!r}", rem, cost
        ), state


class PureDPFilter(_ScalarFilter):
    """Pure eps-DP filter (Rogers et al. 2016): admit while the sum of eps_i <= eps."""

    KIND = "pure_dp"
    CURRENCY = "eps"

    def _cost(self, query: Charge) -> Fraction | None:
        e = pure_eps_of(query)
        return None if e is None or not math.isfinite(e) else Fraction(e)


class ZCDPFilter(_ScalarFilter):
    """rho-zCDP filter (Feldman & Zrnic 2021 at every order): admit while sum rho_i <= rho.

    Queries that are only approximately zCDP (delta > 0) are refused.
    """

    KIND = "zcdp"
    CURRENCY = "rho"

    def _cost(self, query: Charge) -> Fraction | None:
        z = zcdp_of(query)
        if z is None or z[1] > 0:
            return None
        return z[0]

    @classmethod
    def for_target(cls, eps: float, delta: float) -> ZCDPFilter:
        """The zCDP budget whose conversion gives (eps, delta)-DP: :func:`zcdp_rho_for`
        (Canonne-Kamath-Steinke or Bun-Steinke, whichever allows more; rounded down)."""
        return cls(zcdp_rho_for(eps, delta))


class ApproxZCDPFilter(FilterBase):
    """delta-approximate rho-zCDP filter (Whitehouse et al. 2023): sums of rhos and deltas.

    An (eps, delta)-DP query is charged (delta, eps^2/2). The interaction is
    (sum delta)-approximately (sum rho)-zCDP, hence (eps, delta_conv + delta_sum)-DP.
    """

    KIND = "approx_zcdp"

    def __init__(self, rho: float, delta: float) -> None:
        self._rho = Fraction(check_nonnegative("rho", rho, "ApproxZCDPFilter"))
        self._delta = Fraction(check_nonnegative("delta", delta, "ApproxZCDPFilter"))
        self._srho = Fraction(0)
        self._sdelta = Fraction(0)

    @classmethod
    def for_target(cls, eps: float, delta: float, *, delta_split: float = 0.5) -> ApproxZCDPFilter:
        """Split delta: ``delta_split`` of it for the queries' deltas, the rest for conversion."""
        check_in_open("delta", delta, 0.0, 1.0, "ApproxZCDPFilter.for_target")
        check_in_open("delta_split", delta_split, 0.0, 1.0, "ApproxZCDPFilter.for_target")
        d_q = delta * delta_split
        # the conversion's share, rounded down so that the two shares sum to <= delta exactly
        d_conv = float_down(Fraction(delta) - Fraction(d_q))
        return cls(zcdp_rho_for(eps, d_conv), d_q)

    def _state(self) -> dict[str, Any]:
        return {
            "rho": frac_to_json(self._rho),
            "delta": frac_to_json(self._delta),
            "spent_rho": frac_to_json(self._srho),
            "spent_delta": frac_to_json(self._sdelta),
        }

    def _load(self, state: dict[str, Any]) -> None:
        self._rho = frac_from_json(state["rho"], "rho")
        self._delta = frac_from_json(state["delta"], "delta")
        self._srho = frac_from_json(state["spent_rho"], "spent_rho")
        self._sdelta = frac_from_json(state["spent_delta"], "spent_delta")

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        rho = r.frac("rho", lo=0)
        delta = r.frac("delta", lo=0, hi=Fraction(1))
        r.frac("spent_rho", lo=0, hi=rho)
        r.frac("spent_delta", lo=0, hi=delta)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({
            "rho": float_down(self._rho - self._srho),
            "delta": float_down(self._delta - self._sdelta),
        })

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        z = zcdp_of(q)
        qd = query_to_dict(q)
        if z is None:
            return _refuse(
                "the query states no approximate-zCDP cost", self.remaining(), {"query": qd}
            ), None
        cost = {
            "rho": float_up(z[0]),
            "delta": float_up(z[1]),
            "exact": {"rho": frac_to_json(z[0]), "delta": frac_to_json(z[1])},
            "query": qd,
        }
        srho = self._srho + z[0]
        sdel = self._sdelta + z[1]
        if srho > self._rho or sdel > self._delta:
            return _refuse("rho or delta would exceed the budget", self.remaining(), cost), None
        state = dict(self._state(), spent_rho=frac_to_json(srho), spent_delta=frac_to_json(sdel))
        rem = {"rho": float_down(self._rho - srho), "delta": float_down(self._delta - sdel)}
        return Decision.of(True, "admitted", rem, cost), state


class RDPFilter(FilterBase):
    """RDP filter at several orders (Feldman & Zrnic 2021, Thm. 3.1 at each order).

    Admits a query iff at *every* order a the spent RDP plus the query's stays within the
    budget rho_a; the interaction is then (a, rho_a)-RDP at each listed order.
    """

    KIND = "rdp"

    def __init__(self, orders: tuple[float, ...], budgets: tuple[float, ...]) -> None:
        if len(orders) == 0 or len(orders) != len(budgets):
            raise fail("orders", "RDPFilter", "a non-empty tuple as long as 'budgets'", orders)
        for a in orders:
            if not (a > 1) or not math.isfinite(a):
                raise fail("orders", "RDPFilter", "finite floats > 1", orders)
        self._orders = tuple(float(a) for a in orders)
        self._budgets = tuple(
            Fraction(check_nonnegative("budgets", b, "RDPFilter")) for b in budgets
        )
        self._spent = tuple(Fraction(0) for _ in orders)

    @classmethod
    def for_target(cls, eps: float, delta: float, orders: tuple[float, ...]) -> RDPFilter:
        """Budgets rho_a = eps - log(1 - 1/a) + log(delta a)/(a - 1), orders with rho_a > 0.

        (a, rho)-RDP implies (rho + log(1 - 1/a) - log(delta a)/(a - 1), delta)-DP
        (Canonne, Kamath, Steinke 2020, Prop. 12; the conversion dp_accounting uses), so
        every admitted interaction, being (a, rho_a)-RDP at all kept orders, is
        (eps, delta)-DP. Budgets are rounded down.
        """
        eps = check_nonnegative("eps", eps, "RDPFilter.for_target")
        check_in_open("delta", delta, 0.0, 1.0, "RDPFilter.for_target")

        def budget(a: float) -> float:
            # three terms, each within a few ulp; their sum may cancel, so the margin is
            # absolute: 1e-15 (about 4.5 ulp) times the sum of their magnitudes
            t1 = -math.log1p(-1.0 / a)
            t2 = (math.log(delta) + math.log(a)) / (a - 1.0)
            b = eps + t1 + t2
            return next_down(b - 1e-15 * (eps + abs(t1) + abs(t2)))

        kept = [(a, budget(a)) for a in orders if a > 1.01 and budget(a) > 0]
        if not kept:
            raise fail(
                "orders", "RDPFilter.for_target", "orders > 1.01 with a positive budget", orders
            )
        return cls(tuple(a for a, _ in kept), tuple(b for _, b in kept))

    def _state(self) -> dict[str, Any]:
        return {
            "orders": list(self._orders),
            "budgets": [frac_to_json(b) for b in self._budgets],
            "spent": [frac_to_json(s) for s in self._spent],
        }

    def _load(self, state: dict[str, Any]) -> None:
        self._orders = tuple(float(a) for a in state["orders"])
        self._budgets = tuple(frac_from_json(b, "budgets") for b in state["budgets"])
        self._spent = tuple(frac_from_json(s, "spent") for s in state["spent"])

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        orders = r.listed("orders", r.number_item(1.0, lo_open=True))
        r.require(len(orders) > 0, "orders", "a non-empty list", orders)
        budgets = r.listed("budgets", r.frac_item(lo=0), size=len(orders))
        spent = r.listed("spent", r.frac_item(lo=0), size=len(orders))
        for i, (s, b) in enumerate(zip(spent, budgets, strict=True)):
            r.require(s <= b, f"spent[{i}]", f"<= budgets[{i}] = {float(b)!r}", float(s))

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({
            "orders": list(self._orders),
            "rdp": [float_down(b - s) for b, s in zip(self._budgets, self._spent, strict=True)],
        })

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        qd = query_to_dict(q)
        costs = [rdp_of(q, a) for a in self._orders]
        cs = [c for c in costs if c is not None]
        if len(cs) != len(costs):
            return _refuse(
                "the query states no finite RDP at every order" + delta_refusal(q, "Renyi-DP"),
                self.remaining(), {"query": qd}
            ), None
        cost = {
            "orders": list(self._orders),
            "rdp": [float_up(c) for c in cs],
            "exact": [frac_to_json(c) for c in cs],
            "query": qd,
        }
        new = tuple(s + c for s, c in zip(self._spent, cs, strict=True))
        if any(n > b for n, b in zip(new, self._budgets, strict=True)):
            return _refuse(
                "the RDP budget would be exceeded at some order", self.remaining(), cost
            ), None
        state = dict(self._state(), spent=[frac_to_json(s) for s in new])
        rem = {
            "orders": list(self._orders),
            "rdp": [float_down(b - s) for b, s in zip(self._budgets, new, strict=True)],
        }
        return Decision.of(True, "admitted", rem, cost), state
