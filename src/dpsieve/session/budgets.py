"""A session's budget and the privacy it is given: :func:`filter_for_budget` (the valid,
tight filter for a budget), and the one mapping of a privacy given as JSON at the library's
edge (:func:`as_description`, through the one mapping
:func:`dpsieve.accounting.events.description_from_json`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpsieve._validation import fail
from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
    description_from_json,
)
from dpsieve.filters.charge import Workload

if TYPE_CHECKING:
    from dpsieve.filters.base import PrivacyFilter
    from dpsieve.queries.source import BudgetKind

__all__ = ["PrivacyIn", "as_description", "budget_kind_of", "filter_for_budget"]

#: The privacy a library call spends: a description, or its JSON (a dict), which the
#: session maps once, where it is given.
PrivacyIn = PrivacyDescription | Mapping[str, Any]


def filter_for_budget(budget: PrivacyDescription, *,
                      typical: Workload | None = None) -> PrivacyFilter:
    """The valid, tight filter for a budget (docs/filters.md; Theorem 8 of the filters paper).

    ======================  ===============================================================
    budget                  filter
    ======================  ===============================================================
    ``GDP(mu)``             :class:`GDPResidueFilter` (valid for any adaptive queries)
    ``ApproxDP(eps, d>0)``  :class:`MixedFilter`: R_a (+) G_mu inside the (eps, d) target,
                            pure queries charged exactly to R_a, others by the GDP residue;
                            the split is chosen for ``typical`` (a query's privacy, or a
                            list), else for the first admitted query (docs/filters.md)
    ``PureDP(eps)``         :class:`PureDPFilter` (additive, exact Fractions)
    ``ZCDP(rho)``           :class:`ZCDPFilter` (additive, exact Fractions)
    ``ApproxZCDP(rho, d)``  :class:`ApproxZCDPFilter`
    ``RDP(orders, values)`` :class:`RDPFilter`
    ======================  ===============================================================

    A natural filter against an (eps, delta) target is never built: it is invalid for
    adaptive queries. ``typical`` applies to (eps, delta) budgets only.
    """
    from dpsieve import filters

    f: filters.FilterBase
    if isinstance(budget, GDP):
        f = filters.GDPResidueFilter(budget.mu)
    elif isinstance(budget, ApproxDP) and budget.delta > 0:
        f = filters.MixedFilter(budget.eps, budget.delta, typical=typical)
    elif isinstance(budget, (ApproxDP, PureDP)):
        f = filters.PureDPFilter(budget.eps)
    elif isinstance(budget, ZCDP):
        f = filters.ZCDPFilter(budget.rho)
    elif isinstance(budget, ApproxZCDP):
        f = filters.ApproxZCDPFilter(budget.rho, budget.delta)
    elif isinstance(budget, RDP):
        f = filters.RDPFilter(budget.orders, budget.values)
    else:
        raise fail("budget", "filter_for_budget", "a privacy description", budget)
    if typical is not None and not isinstance(f, filters.MixedFilter):
        raise fail("typical", "filter_for_budget", "given only with an ApproxDP(eps, delta > 0) "
                   "budget (other budgets need no split)", typical)
    # The filter enforces the budget's relation: a query stated under the other one is an
    # error unless converted (a replace-one cost can be twice the add/remove one).
    return f.with_neighbouring(budget.neighbouring)


def as_description(p: PrivacyIn, nb: Neighbouring, name: str) -> PrivacyDescription:
    """A privacy description (or its dict, under ``nb`` unless it says otherwise)."""
    if isinstance(p, Mapping):
        p = description_from_json({"neighbouring": nb.value, **p}, name=name)
    if not isinstance(p, PureDP | ApproxDP | GDP | ZCDP | ApproxZCDP | RDP):
        raise fail(name, "Session", "a privacy description such as PureDP(0.1)", p)
    return p


def budget_kind_of(filters: Sequence[PrivacyFilter]) -> BudgetKind | None:
    """The kind of a budget made of ``filters`` (a session's one; a block query's blocks
    and quotas, each charged), as preparation reads it: a charge fits when every filter
    can ever admit it (:func:`dpsieve.filters.summary.query_fits`, from each filter's kind
    and declared parameters: public). None when a filter's kind is not one ``query_fits``
    knows (its own decision then speaks, as before)."""
    from dpsieve._budget_view import KIND_NAMES
    from dpsieve.filters.summary import knows_fits, query_fits
    from dpsieve.queries.source import BudgetKind

    flts = list(filters)
    if not flts or not all(knows_fits(f) for f in flts):
        return None
    kinds = [str(f.kind) for f in flts]
    names = list(dict.fromkeys(KIND_NAMES.get(k, f"a {k} budget") for k in kinds))

    def fits(q: PrivacyDescription) -> bool:
        return all(query_fits(f, q) for f in flts)
    return BudgetKind("+".join(dict.fromkeys(kinds)), " and ".join(names), fits)
