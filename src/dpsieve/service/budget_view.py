"""The budget as the page and ``GET /v1/datasets/{name}/budget`` show it.

Plain words (:mod:`dpsieve.filters.summary`): eps left at the target's delta, the fraction
used, "about N more queries like the last one" (exact for the filter, capped at
:data:`PAGE_CAP`), each admitted query described, and the refusals (from the audit log).
A query's parameters are shown to the data owner and to the analyst who asked it; other
analysts see that a query was admitted or refused and what it cost, not what it asked.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from dpsieve._budget_view import PAGE_CAP, describe_request
from dpsieve.accounting.events import PrivacyDescription
from dpsieve.filters.base import BudgetLeft, Cost
from dpsieve.filters.summary import budget_summary, describe_query, display_delta, eps_of
from dpsieve.ledger.base import BudgetStore, Principal

__all__ = ["PAGE_CAP", "blocks_summary_of", "budget_text", "budget_view", "like_privacy",
           "split_of", "step_eps"]

def step_eps(kind: str, remaining: BudgetLeft) -> tuple[float | None, float]:
    """(eps left at the display delta, rounded up, or None; that delta) of a budget left."""
    d = display_delta(kind, remaining)
    return eps_of(kind, remaining, d), d


def _obj(x: Any) -> dict[str, Any]:
    """A stored JSON object, or an empty one for anything else (an audit row is read as
    it was written; a malformed one states nothing rather than failing the page)."""
    return x if isinstance(x, dict) else {}


def _sees(p: Principal, who: str) -> bool:
    return p.role == "owner" or who == p.name


def like_privacy(text: str, neighbouring: str) -> PrivacyDescription:
    """The ``like`` parameter (a JSON privacy, e.g. {"type": "pure", "eps": 0.1}) as a
    description under the data set's relation; a ValidationError (422) otherwise."""
    import json

    from dpsieve._validation import fail
    from dpsieve.service.schemas import PrivacyIn

    try:
        m = PrivacyIn.model_validate(json.loads(text))
    except ValueError:
        raise fail("like", "budget", 'a JSON privacy such as {"type": "pure", "eps": 0.1}',
                   text) from None
    return m.description(neighbouring, "like")  # JSON to a typed value, once


def budget_view(st: BudgetStore, name: str, p: Principal,
                like: PrivacyDescription | None = None) -> dict[str, Any]:
    """remaining, admitted, summary, history (described) and refusals of one budget;
    "more queries like" ``like`` (default: the last admitted query's charge)."""
    current, initial = st.load_filter(name), st.initial_filter(name)
    kind = str(getattr(initial, "kind", ""))
    hist = st.history(name)
    rows = []
    for r in hist:
        charged = r.cost.charged()
        eps_left, delta = step_eps(kind, r.remaining)
        row: dict[str, Any] = {
            "seq": r.seq, "cost": r.cost.to_dict(), "remaining": r.remaining.to_dict(),
            "created_at": r.created_at, "eps_left": eps_left, "delta": delta,
            "charged": None if charged is None else describe_query(charged),
        }
        if _sees(p, r.principal):
            row.update(principal=r.principal, query=r.request,
                       description=describe_request(r.request))
        else:
            row["description"] = "a query by another analyst"
        rows.append(row)
    if like is None:
        like = hist[-1].cost.charged() if hist else None
    summary = budget_summary(current, initial, like=like, cap=PAGE_CAP)
    return {
        "remaining": current.remaining().to_dict(), "admitted": len(hist),
        "summary": summary.to_dict(), "split": split_of(current), "history": rows,
        "refusals": _refusals(st, name, p),
    }


def budget_text(st: BudgetStore, name: str) -> str | None:
    """The budget left in plain words (no count: cheap enough for a list), or None."""
    from dpsieve.ledger.base import BudgetNotFoundError

    try:
        current, initial = st.load_filter(name), st.initial_filter(name)
    except BudgetNotFoundError:
        return None
    return budget_summary(current, initial).text


def blocks_summary_of(st: BudgetStore, name: str) -> dict[str, Any] | None:
    """A data set's blocks in a few public facts (column, number of blocks, each block's
    budget: :func:`dpsieve.session.blocks_view.blocks_summary`), or None if it declares
    none."""
    stored = getattr(st, "block_spec", None)
    spec = None if stored is None else stored(name)
    if spec is None:
        return None
    from dpsieve.blocks.spec import block_spec_from_dict
    from dpsieve.session.blocks_view import blocks_summary

    return blocks_summary(st, name, block_spec_from_dict(spec))


def split_of(flt: Any) -> dict[str, Any] | None:
    """A mixed budget's split and how it was chosen, in words (None for other budgets)."""
    if getattr(flt, "kind", "") != "mixed":
        return None
    sp = flt.split()
    if sp is None:
        return {"chosen": "undecided", "text": (
            "No typical query was declared: the first admitted query will choose how this "
            "(eps, delta) budget is split between a pure part (pays pure queries eps for "
            "eps) and a Gaussian part (pays the rest by the GDP residue).")}
    typical = []
    for d in sp.get("typical") or []:  # the split's JSON: a description, or a PLD's
        q = Cost({"query": d}).charged()
        typical.append("a PLD query" if q is None else describe_query(q))
    pure, mu = float(Fraction(sp["pure"])), float(sp["mu"])
    parts = (f"eps {pure:.4g} for pure-DP queries, paid eps for eps, and a Gaussian part "
             f"for the others (GDP mu {mu:.4g})")
    how = {
        "typical": f"chosen for the declared typical queries ({', '.join(typical)})",
        "first query": ("chosen for the first admitted query "
                        f"({', '.join(typical)}), as no typical query was declared"),
        "given": "given when the budget was opened",
    }.get(str(sp.get("chosen")), str(sp.get("chosen")))
    return {"chosen": sp.get("chosen"), "pure": pure, "mu": mu, "typical": typical,
            "text": f"The split was {how}: {parts}."}


def _refusals(st: BudgetStore, name: str, p: Principal) -> list[dict[str, Any]]:
    """Refused requests from the audit log, oldest first (nothing was spent for them).

    ``reason`` is in plain words (what was left then, from the decision's ``remaining``);
    the filter's own wording is kept as ``detail`` for the owner and the asker. ``seq``
    numbers this budget's refusals (1, 2, ...) and ``admitted_before`` counts the queries
    admitted before each: the audit log's own seq is shared by all data sets, and its gaps
    would reveal activity on data sets the reader may not see."""
    kind = str(getattr(st.initial_filter(name), "kind", ""))
    requests: dict[str, dict[str, Any]] = {}
    out: list[dict[str, Any]] = []
    admitted = 0
    for e in st.audit(name):
        if e.event == "request":  # a refusal's record is bounded: maybe an excerpt only
            requests[e.key] = _obj(e.payload.get("request"))
            if e.payload.get("truncated"):
                requests[e.key] = {"truncated": int(e.payload.get("request_bytes") or 0)}
        elif e.event == "decision" and e.payload.get("admitted", True):
            admitted += 1
        elif e.event == "decision":
            # the audit row's JSON (stored) mapped to typed values here, once
            charged = Cost(_obj(e.payload.get("cost"))).charged()
            row: dict[str, Any] = {
                "seq": len(out) + 1, "admitted_before": admitted, "ts": e.ts,
                "asked": None if charged is None else describe_query(charged),
            }
            left, delta = step_eps(kind, BudgetLeft(_obj(e.payload.get("remaining"))))
            at = "" if delta == 0 else f" at delta {delta:.3g}"
            row["reason"] = ("more than the budget had left" if left is None else
                             f"more than the budget had left (eps {left:.4g}{at})")
            if _sees(p, e.principal):
                req = requests.get(e.key, {})
                row.update(principal=e.principal, detail=str(e.payload.get("reason", "")),
                           description=_described(req))
            else:
                row["description"] = "a query by another analyst"
            out.append(row)
    return out


def _described(req: dict[str, Any]) -> str:
    """A refused request in words, from its bounded record."""
    if "truncated" in req:
        return (f"a query of {req['truncated']:,} bytes (its record keeps the first "
                "2,048 characters and its hash)")
    return describe_request(req) if req else "a query"
