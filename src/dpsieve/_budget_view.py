"""What a steward reads about a budget: summaries, refusals and incompatibilities in words.

Used by the session, the service and the CLI (orchestration only: the numbers come from
:mod:`dpsieve.filters.summary`, which counts with the filter's own decisions).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dpsieve.accounting.events import ApproxDP, ApproxZCDP
from dpsieve.errors import BudgetExceededError, DPError, IncompatiblePrivacyError
from dpsieve.queries.request_robust import ROBUST_KINDS

if TYPE_CHECKING:
    from dpsieve.accounting.events import PrivacyDescription
    from dpsieve.filters.base import BudgetLeft, PrivacyFilter
    from dpsieve.filters.charge import PrivacyCharge
    from dpsieve.filters.summary import BudgetSummary
    from dpsieve.ledger.base import BudgetStore

__all__ = [
    "KIND_NAMES",
    "PAGE_CAP",
    "QUERY_CAP",
    "TYPE_NAMES",
    "after_query",
    "check_fits",
    "describe_plan",
    "describe_request",
    "refused",
    "store_summary",
]

#: Cap on "about N more queries like this one" in a query's answer (the count is exact up
#: to it; beyond, "at least N"). Budget pages and ``dpsieve budget show`` count further.
QUERY_CAP = 100
#: Cap on "about N more queries like the last one" on the budget page and in
#: ``dpsieve budget show`` (exact up to it).
PAGE_CAP = 1000
#: The kinds of privacy a session query can state (for "types that fit").
OFFERED = ("pure", "zcdp", "approx")

#: How each kind of query privacy is named to a person.
TYPE_NAMES = {
    "pure": "pure (eps)", "gdp": "GDP (mu)", "zcdp": "zCDP (rho)",
    "approx": "approximate (eps, delta)", "approx_zcdp": "approximate zCDP (rho, delta)",
}
#: How each filter is named to a person.
KIND_NAMES = {
    "mixed": "an (eps, delta) budget with a pure part and a Gaussian part",
    "gdp_residue": "a Gaussian (GDP) budget", "gdp_naive": "a Gaussian (GDP) budget",
    "pure_dp": "a pure eps budget", "zcdp": "a zCDP budget",
    "approx_zcdp": "an approximate zCDP budget", "rdp": "an RDP budget",
    "approx_gdp_residue": "an approximate Gaussian budget",
}


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, int | float) and not isinstance(x, bool) else repr(x)


def _range(d: Mapping[str, Any]) -> str:
    lo, hi = d.get("lower"), d.get("upper")
    if isinstance(lo, int | float) and isinstance(hi, int | float):
        return f" in [{lo:g}, {hi:g}]"
    return " (bounds chosen privately)" if d.get("type") in ("sum", "mean", "variance",
                                                              "quantile") else ""


def _aggregation(a: Any) -> str:
    """One aggregation of a plan in words, e.g. "sum of 'amount' in [0, 500] per unit"."""
    if not isinstance(a, Mapping):
        return "an aggregation"
    t, col = str(a.get("type", "aggregation")), a.get("column")
    per = " per unit" if a.get("per") == "unit" else ""
    if t == "count":
        return "count of units" if per else "count of rows"
    if t in ("sum", "mean", "variance") and col is not None:
        return f"{t} of {col!r}{_range(a)}{per}"
    if t == "quantile" and col is not None:
        qs = a.get("quantiles") or [0.5]
        which = ("median" if list(qs) == [0.5] else
                 "quantiles " + ", ".join(_num(q) for q in qs))
        return f"{which} of {col!r}{_range(a)}"
    if t == "histogram" and col is not None:
        cats = a.get("categories")
        return (f"histogram of {col!r} over {len(cats)} categories"
                if isinstance(cats, list) else f"histogram of {col!r}")
    if t == "linear" and col is not None:
        return f"{len(a.get('workload') or [])} linear queries over {col!r}"
    return t


def _predicate(p: Any) -> str:
    if not isinstance(p, Mapping):
        return "a condition"
    col, op, v = p.get("column"), str(p.get("op", "")), p.get("value")
    if op in ("is_null", "not_null"):
        return f"{col!r} {'is' if op == 'is_null' else 'is not'} missing"
    if op in ("in", "not_in") and isinstance(v, list):
        shown = ", ".join(_num(x) for x in v[:3]) + (", ..." if len(v) > 3 else "")
        return f"{col!r} {'in' if op == 'in' else 'not in'} [{shown}]"
    return f"{col!r} {op} {_num(v)}"


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def describe_plan(spec: Mapping[str, Any]) -> str:
    """A query plan in words: its aggregations, groups, filter and contribution bounds,
    e.g. "count of rows and sum of 'amount' in [0, 500] per unit, by 'city' (40 public
    keys); each unit in at most 2 groups, 20 rows in each" (public parts only)."""
    aggs = spec.get("aggregations")
    words = _and([_aggregation(a) for a in aggs]) if isinstance(aggs, list) and aggs \
        else "a query"
    by = spec.get("group_by")
    if isinstance(by, list) and by:
        cols = _and([repr(c) for c in by])
        keys, select = spec.get("keys"), spec.get("select")
        if isinstance(keys, list):
            words += f", by {cols} ({len(keys)} public {'key' if len(keys) == 1 else 'keys'})"
        elif isinstance(select, Mapping):
            d = select.get("delta")
            words += (f", by {cols}, groups selected privately"
                      + (f" (delta {d:.3g})" if isinstance(d, int | float) else ""))
        else:
            words += f", by {cols}"
    where = spec.get("where")
    if isinstance(where, list) and where:
        words += ", where " + _and([_predicate(p) for p in where])
    c = spec.get("contribution")
    if c == "auto" or (isinstance(c, Mapping) and "auto" in (c.get("max_groups"),
                                                             c.get("max_rows"))):
        words += "; contribution bounds chosen from the data ('auto')"
    elif isinstance(c, Mapping):
        g, r = c.get("max_groups", 1), c.get("max_rows")
        g = g if isinstance(g, int) else 1
        rows = f"at most {r} {'row' if r == 1 else 'rows'}" if isinstance(r, int) else ""
        if isinstance(by, list) and by and (g > 1 or rows):
            words += (f"; each unit in at most {g} {'group' if g == 1 else 'groups'}"
                      + (f", {rows} in each" if rows else ""))
        elif rows:
            words += f"; {rows} per unit"
    return words


def describe_request(spec: dict[str, Any]) -> str:
    """A query spec in a few words, e.g. "mean of 'bmi' in [15, 45]" or a plan's
    aggregations, groups and bounds (:func:`describe_plan`; public parts only)."""
    if "open_child" in spec:  # an interactive child: its declared privacy, charged once
        kind = str(spec.get("kind", "")).replace("_", " ")
        return f"opening the {kind} child {spec['open_child']!r}".replace("  ", " ")
    t = str(spec.get("type", "query"))
    col = spec.get("column")
    if t == "query":
        return describe_plan(spec)
    if t == "count":
        return "count of rows"
    if t in ("sum", "mean") and col is not None:
        return f"{t} of {col!r}{_range(spec)}"
    if t in ROBUST_KINDS and col is not None:
        b = spec.get("bound")
        return (f"{t.replace('_', ' ')} of {col!r} (Propose-Filter-Release"
                + (f", bound {b:g})" if isinstance(b, int | float) else ")"))
    if t in ("histogram", "linear") and col is not None:
        return _aggregation(spec)
    if t == "release":
        cols = ", ".join(repr(c) for c in spec.get("columns") or [])
        w = str(spec.get("workload", "marginals:1"))
        what = (f"{w.split(':', 1)[1]}-way marginals" if w.startswith("marginals:")
                else w)
        n = spec.get("n")
        return (f"{spec.get('mechanism', '')} release of {what} over {cols}".strip()
                + (f" (n = {n})" if isinstance(n, int) else ""))
    return t


def _filters(store: BudgetStore, budget_id: str) -> tuple[PrivacyFilter, PrivacyFilter]:
    from dpsieve.ledger.base import load_filters

    return load_filters(store, budget_id)


def store_summary(store: BudgetStore, budget_id: str, *, like: PrivacyCharge | None = None,
                  cap: int | None = None) -> BudgetSummary:
    """:func:`dpsieve.filters.summary.budget_summary` of a budget in a ledger."""
    from dpsieve.filters.summary import budget_summary

    current, initial = _filters(store, budget_id)
    kw: dict[str, Any] = {} if cap is None else {"cap": cap}
    return budget_summary(current, initial, like=like, **kw)


def check_fits(flt: PrivacyFilter, cost: PrivacyDescription, requested: PrivacyDescription,
               offered: tuple[str, ...] | None = None) -> None:
    """Raise :class:`IncompatiblePrivacyError` if ``flt`` can never admit ``cost``.

    ``requested`` is the privacy the query asked for (``cost`` is what it is charged);
    ``offered`` restricts the types named as fitting to those the caller can run.
    """
    from dpsieve.filters.summary import fitting_types, query_fits

    if query_fits(flt, cost):
        return
    fits = [t for t in fitting_types(flt) if offered is None or t in offered]
    kind = KIND_NAMES.get(getattr(flt, "kind", ""), f"a {getattr(flt, 'kind', '')} budget")
    rtype = str(requested.to_dict().get("type"))
    asked = TYPE_NAMES.get(rtype, rtype)
    charged = cost.to_dict().get("type")
    why = "its privacy has no conversion to the budget's"
    if charged is not None and charged != rtype:
        asked += f" query, charged as {TYPE_NAMES.get(str(charged), str(charged))},"
    else:
        asked += " query"
    dq = cost.delta if isinstance(cost, ApproxDP | ApproxZCDP) else 0.0
    if dq > 0 and charged in ("approx", "approx_zcdp"):
        why = (f"its delta ({dq:.3g}, e.g. from DP key selection) may lose all "
               "privacy with that probability, and this budget has no delta to pay it")
        if getattr(flt, "kind", "") == "mixed" and charged == "approx":
            # an (eps, delta) budget has a delta: say why it cannot pay this one
            why = (f"its delta ({dq:.3g}, e.g. from DP key selection) is paid from "
                   "a delta part of an (eps, delta) budget's split, and this budget's split "
                   "has none (it was declared for typical queries without a delta, or "
                   "stored before a split chosen at the first query kept one); a budget "
                   "opened without a typical query keeps a tenth of its delta, and one "
                   "declared with a typical (eps, delta) query, e.g. typical={'type': "
                   "'approx', 'eps': ..., 'delta': ...}, keeps what that query needs "
                   "(docs/queries.md)")
        elif getattr(flt, "kind", "") == "mixed":
            why += (": an (eps, delta) budget pays a query's delta for (eps, delta) charges "
                    "only; ask for pure (eps) privacy, which DP key selection charges as "
                    "(eps, delta)")
    names = ", ".join(TYPE_NAMES.get(t, t) for t in fits) or "none that this service runs"
    raise IncompatiblePrivacyError(
        f"A {asked} can never be admitted by this budget ({kind}), however small: "
        f"{why}. Query types that fit: {names}. Nothing was spent.",
        fits=fits, requested=requested)


def refused(store: BudgetStore, budget_id: str, cost: PrivacyDescription,
            requested: PrivacyDescription, remaining: BudgetLeft) -> DPError:
    """The error for a refused query: :class:`IncompatiblePrivacyError` when no budget of
    this kind could ever pay for it, else a plain-words :class:`BudgetExceededError` with
    the cost asked and what is left."""
    from dpsieve.filters.summary import describe_query

    current = store.load_filter(budget_id)
    try:
        check_fits(current, cost, requested, OFFERED)
    except IncompatiblePrivacyError as e:
        return e
    s = store_summary(store, budget_id, like=cost, cap=QUERY_CAP)
    part = remaining.get("delta_part")
    dq = getattr(cost, "delta", 0.0)
    why = ""
    if isinstance(part, float) and dq > part:  # an (eps, delta) budget's delta part is short
        why = (f" Its delta {dq:.3g} is more than the budget's delta part left ({part:.3g}),"
               " which pays the delta of (eps, delta) queries such as DP key selection: ask "
               "for a smaller delta (a budget opened without a typical query keeps a tenth "
               "of its delta for them; one declared with a typical (eps, delta) query keeps "
               "what that query needs).")
    return BudgetExceededError(
        f"Refused: this query asks for {describe_query(cost)}, more than the budget has "
        f"left: {s.text}.{why} Nothing was spent.",
        remaining=remaining, requested=requested, summary=s.to_dict())


def after_query(store: BudgetStore, budget_id: str, cost: PrivacyDescription) -> dict[str, Any]:
    """The budget summary shown with an answer ("about N more queries like this one")."""
    out: dict[str, Any] = store_summary(store, budget_id, like=cost, cap=QUERY_CAP).to_dict()
    return out
