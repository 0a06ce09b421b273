"""How many more queries a filter admits: exact counts by the filter's own decisions.

:func:`count_admitted` offers a workload (one query, or a list offered cyclically) to a
*copy* of the filter (rebuilt from ``to_json()``; the filter itself never changes) and
counts the admissions, stopping when a whole cycle is refused (the state is then
unchanged, so every later cycle would be refused too) or at ``cap``. The count is
therefore exact for the filter, not an estimate: it is what the filter would do.

Filters whose decisions are closed-form in their state (additive filters, the naive GDP
filter, Gaussian queries against the GDP residue filter) are counted in one step; the
others by running the decisions on a copy. Every decision made while counting is memoised
as a transition (state, query) -> next state, so a chain counted before (the one the last
query stepped along) is walked again by lookups and only new decisions are computed.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpsieve._validation import fail
from dpsieve.accounting.pld import PLD
from dpsieve.filters._queries import as_query
from dpsieve.filters.additive import _ScalarFilter
from dpsieve.filters.base import PrivacyFilter
from dpsieve.filters.charge import PrivacyCharge, Workload

__all__ = ["Capacity", "count_admitted", "query_key"]

#: Default cap on a count (a count that reaches it is reported as "at least cap").
DEFAULT_CAP = 100_000
#: (state, query key) -> the state after admitting it, or None if refused (LRU-bounded).
_NEXT: OrderedDict[tuple[str, str], str | None] = OrderedDict()
_NEXT_SIZE = 20_000
_MISSING = object()
_LOCK = threading.Lock()


@dataclass(frozen=True, slots=True)
class Capacity:
    """``count`` more admissions; ``at_least`` when the count stopped at the cap."""

    count: int
    at_least: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "at_least": self.at_least}


def query_key(q: PrivacyCharge) -> str:
    """A key equal for equal queries (a description's dict; a PLD's content hash)."""
    if not isinstance(q, PLD):
        return json.dumps(q.to_dict(), sort_keys=True, default=repr)
    h = hashlib.sha256(repr((q.grid, q.offset, q.inf_mass, q.mu, q.direction,
                             q.symmetric)).encode())
    h.update(q.probs.tobytes())
    return "pld:" + h.hexdigest()


def count_admitted(flt: PrivacyFilter, workload: Workload, *, cap: int = DEFAULT_CAP
                   ) -> Capacity:
    """Exact number of further admissions of ``workload`` (see module docstring)."""
    if not (isinstance(cap, int) and cap >= 0):
        raise fail("cap", "count_admitted", "an int >= 0", cap)
    items = list(workload) if isinstance(workload, Sequence) else [workload]
    qs = [as_query(q) for q in items]
    if not qs:
        raise fail("workload", "count_admitted", "a query or a non-empty list of queries",
                   workload)
    if len(qs) == 1:
        fast = _closed_form(flt, qs[0], cap)
        if fast is not None:
            return fast
    return _simulate(flt.to_json(), qs, [query_key(q) for q in qs], cap)


def _simulate(state: str, qs: list[Any], keys: list[str], cap: int) -> Capacity:
    """Offer ``qs`` cyclically from ``state``; every transition is memoised, so a chain
    walked before (e.g. the one the previous query was on) costs dictionary lookups only."""
    from dpsieve.filters import filter_from_json

    live: Any = None  # a filter in ``state``, built only when a transition must be computed
    n = refused = i = 0
    while n < cap and refused < len(qs):
        q, k = qs[i % len(qs)], keys[i % len(qs)]
        with _LOCK:
            nxt = _NEXT.get((state, k), _MISSING)
        if nxt is _MISSING:
            if live is None:
                live = filter_from_json(state)
            nxt = live.to_json() if live.try_spend(q).admitted else None
            with _LOCK:
                _NEXT[(state, k)] = nxt
                while len(_NEXT) > _NEXT_SIZE:
                    _NEXT.popitem(last=False)
        elif nxt is not None:
            live = None  # moved along a remembered transition: the live copy is stale
        if nxt is None:
            refused += 1
        else:
            n, refused, state = n + 1, 0, str(nxt)
        i += 1
    return Capacity(n, at_least=n >= cap and refused < len(qs))


def _capped(n: int, cap: int) -> Capacity:
    return Capacity(cap, at_least=True) if n >= cap else Capacity(max(0, n))


def _floor_div(left: Fraction, cost: Fraction) -> int | None:
    if cost <= 0:
        return None  # free queries: count by running (the cap bounds it)
    return math.floor(left / cost) if left >= 0 else 0


def _closed_form(flt: Any, q: PrivacyCharge, cap: int) -> Capacity | None:
    """One-step counts for filters whose admission test is additive in exact arithmetic."""
    rule = _RULES.get(getattr(flt, "kind", ""))
    if rule is None:
        return None
    if isinstance(flt, _ScalarFilter) and type(flt)._decide is _ScalarFilter._decide:
        # pure DP and zCDP: the same test as the rule below, without building a decision
        k = flt.admits_more(q)
        if k is None:
            return None
        return Capacity(0) if k <= 0 else _capped(k, cap)  # 0: refused now, as below
    d = flt.dry_run(q)
    if not d.admitted:
        return Capacity(0)
    n = rule(json.loads(flt.to_json())["state"], d.cost)
    return None if n is None else _capped(n, cap)


def _f(x: Any) -> Fraction:
    return Fraction(x) if isinstance(x, str) else Fraction(float(x))


def _scalar(currency: str) -> Callable[[dict[str, Any], dict[str, Any]], int | None]:
    # _ScalarFilter admits iff spent + c <= budget, c the float cost as an exact Fraction:
    # k more fit iff k c <= budget - spent.
    def rule(st: dict[str, Any], cost: dict[str, Any]) -> int | None:
        c = _f(cost["exact"]) if "exact" in cost else _f(cost[currency])  # exact charge
        return _floor_div(_f(st["budget"]) - _f(st["spent"]), c)
    return rule


def _approx_zcdp(st: dict[str, Any], cost: dict[str, Any]) -> int | None:
    ex = cost.get("exact", cost)  # the exact charges (the floats shown are rounded up)
    a = _floor_div(_f(st["rho"]) - _f(st["spent_rho"]), _f(ex["rho"]))
    b = _floor_div(_f(st["delta"]) - _f(st["spent_delta"]), _f(ex["delta"]))
    vals = [v for v in (a, b) if v is not None]
    return min(vals) if vals else None


def _rdp(st: dict[str, Any], cost: dict[str, Any]) -> int | None:
    exact = cost.get("exact", cost["rdp"])  # the exact charges (the floats shown are rounded up)
    vals = [_floor_div(_f(b) - _f(s), _f(c))
            for b, s, c in zip(st["budgets"], st["spent"], exact, strict=True)]
    ks = [v for v in vals if v is not None]
    return min(ks) if ks else None


def _rdp_any(st: dict[str, Any], cost: dict[str, Any]) -> int | None:
    """AnyOrderRDPFilter: the same query fits while one order holds: the most over the
    orders (an order already exceeded counts 0; a free order: count by running)."""
    exact = cost.get("exact", cost["rdp"])
    vals = [_floor_div(_f(b) - _f(s), _f(c))
            for b, s, c in zip(st["budgets"], st["spent"], exact, strict=True)]
    return None if any(v is None for v in vals) else max(v for v in vals if v is not None)


def _naive_gdp(st: dict[str, Any], cost: dict[str, Any]) -> int | None:
    return _floor_div(_f(st["mu2"]) - _f(st["spent2"]), _f(cost["mu"]) ** 2)


_RULES: dict[str, Callable[[dict[str, Any], dict[str, Any]], int | None]] = {
    "pure_dp": _scalar("eps"),
    "zcdp": _scalar("rho"),
    "approx_zcdp": _approx_zcdp,
    "rdp": _rdp,
    "rdp_any": _rdp_any,
    "gdp_naive": _naive_gdp,
}
