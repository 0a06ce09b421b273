"""The generic residue filter (paper, Sec. 4, Thm. 1) with a pluggable update rule U.

Admit L iff L <= B; then B := U(B, L). The filter is valid (the interaction stays within
the initial B) whenever every update satisfies the **residue condition**
U(B, L) (+) L <= B. A rule here returns ``None`` when it has no residue for L (refuse),
which also covers "L is not <= B" because U(B, L) (+) L <= B with U(B, L) >= Id implies L <= B.

Budgets are privacy descriptions so the state serialises exactly; rules are registered by
name (``register_rule``) so ``to_json`` names the rule. Built-in rules:

* ``"pure_dp"``: B = PureDP(eps), U = PureDP(eps - e) for an e-DP query (exact Fractions);
* ``"gdp_naive"``: B = GDP(mu), U = GDP(sqrt(mu^2 - nu^2)), nu the query's GDP cost;
* ``"gdp_residue"``: B = GDP(mu), U = GDP(mu') with mu' from the certified search (Def. 7).

The residue condition of each rule is checked in tests/filters/test_residue.py against
independent oracles (exact tradeoff-curve arithmetic, mpmath).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpsieve._rounding import toward_zero
from dpsieve._validation import fail
from dpsieve.accounting.conversions import pure_eps_of
from dpsieve.accounting.events import GDP, PureDP, description_from_dict
from dpsieve.filters._common import FilterBase, StateReader
from dpsieve.filters._queries import as_query, delta_refusal, query_to_dict
from dpsieve.filters.base import BudgetLeft, Charge, Decision
from dpsieve.filters.gdp import gdp_residue_update, naive_gdp_cost, sqrt_down

__all__ = ["ResidueFilter", "UpdateRule", "register_rule", "rules"]

UpdateRule = Callable[[Any, Any], Any]
_RULES: dict[str, UpdateRule] = {}
_BUDGET_TYPES: dict[str, type | None] = {}


def register_rule(name: str, rule: UpdateRule, budget_type: type | None = None) -> None:
    """Register U under ``name``; U(B, L) must satisfy U(B, L) (+) L <= B or return None.

    ``budget_type``: the description type of the budgets the rule works on (checked when a
    stored state is rebuilt); ``None`` accepts any valid description.
    """
    if not name or name in _RULES:
        raise fail("name", "register_rule", "a new non-empty rule name", name)
    _RULES[name] = rule
    _BUDGET_TYPES[name] = budget_type


def rules() -> tuple[str, ...]:
    """Names of the registered update rules."""
    return tuple(sorted(_RULES))


def _pure(b: Any, q: Any) -> PureDP | None:
    e = pure_eps_of(q)
    if not isinstance(b, PureDP) or e is None or not math.isfinite(e):
        return None
    left = Fraction(b.eps) - Fraction(e)
    if left < 0:
        return None
    out = float(left)
    while Fraction(out) > left:  # round the residue down
        out = toward_zero(out)
    return PureDP(out, b.neighbouring)


def _gdp_naive(b: Any, q: Any) -> GDP | None:
    if not isinstance(b, GDP):
        return None
    nu = naive_gdp_cost(q)
    left = Fraction(b.mu) ** 2 - Fraction(nu) ** 2 if math.isfinite(nu) else Fraction(-1)
    return None if left < 0 else GDP(sqrt_down(left), b.neighbouring)


def _gdp_residue(b: Any, q: Any) -> GDP | None:
    if not isinstance(b, GDP):
        return None
    m = gdp_residue_update(b.mu, q)
    return None if m < 0 else GDP(m, b.neighbouring)


register_rule("pure_dp", _pure, PureDP)
register_rule("gdp_naive", _gdp_naive, GDP)
register_rule("gdp_residue", _gdp_residue, GDP)


class ResidueFilter(FilterBase):
    """Residue filter with budget ``budget`` (a privacy description) and rule ``rule``."""

    KIND = "residue"

    def __init__(self, budget: Any, rule: str) -> None:
        if rule not in _RULES:
            raise fail("rule", "ResidueFilter", f"one of {rules()}", rule)
        self._budget = budget
        self._rule = rule

    def _state(self) -> dict[str, Any]:
        return {"budget": self._budget.to_dict(), "rule": self._rule}

    def _load(self, state: dict[str, Any]) -> None:
        self._budget = description_from_dict(state["budget"])
        self._rule = str(state["rule"])

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        rule = r.string("rule", rules())
        raw = r.raw("budget")
        try:
            budget = description_from_dict(raw) if isinstance(raw, dict) else None
        except (ValueError, TypeError, KeyError):
            budget = None
        want = _BUDGET_TYPES.get(rule)
        if budget is None or budget.to_dict() != raw or (want and not isinstance(budget, want)):
            what = f"a {want.__name__} description" if want else "a privacy description"
            raise r.error("budget", f"{what} (rule {rule!r})", raw)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft(self._budget.to_dict())

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        new = _RULES[self._rule](self._budget, q)
        cost = {"query": query_to_dict(q), "rule": self._rule}
        if new is None:
            built_in = {"pure_dp": "pure-DP", "gdp_naive": "GDP", "gdp_residue": "GDP"}
            why = delta_refusal(q, built_in[self._rule]) if self._rule in built_in else ""
            return Decision.of(False, "no residue for this query" + why, self.remaining(),
                            cost), None
        st = {"budget": new.to_dict(), "rule": self._rule}
        return Decision.of(True, "admitted", new.to_dict(), cost), st
