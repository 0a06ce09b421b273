"""A data set's blocks, quotas and queue as the budget page and ``dpsieve blocks show``
state them (public values only: budgets as their filters state them, fractions used and
unlocked, the requests waiting with their positions and reasons).

Every number here is a function of the charges admitted, the declared blocks and their
unlocking, and the clock (docs/proofs/blocks.md §5). An analyst sees every block and the
quotas that apply to them (their own, their groups'); the queue shows every waiting
request's position, status and reason, and the request itself to the analyst who asked
only. The owner sees everything.
"""

from __future__ import annotations

import time
from typing import Any

from dpsieve.blocks.currency import used_fraction
from dpsieve.blocks.spec import BlockSpec
from dpsieve.filters.summary import describe_query
from dpsieve.ledger.passes import label

__all__ = ["block_history", "blocks_summary", "blocks_view", "guarantee"]

#: The most recent blocks listed (the others are counted).
MAX_LISTED = 200
#: The most recent queries the view lists, each naming its blocks.
HISTORY_LISTED = 50


def guarantee(spec: BlockSpec) -> str:
    """What each privacy unit gets from the block budgets, in words (docs/proofs/blocks.md
    §3)."""
    if spec.unit_in_one_block:
        return ("Each privacy unit's rows lie in one block (the steward's statement): each "
                "unit is protected at its block's budget, however many blocks there are "
                "(parallel composition).")
    return ("Each block's budget protects a unit's rows in that block; a unit whose rows "
            "span k blocks is protected by the composition of those k budgets (without a "
            "privacy unit column every row is its own unit, in one block).")


def _pct(x: float) -> str:
    return f"{x * 100:.4g} %"


def _budget(store: Any, budget_id: str) -> dict[str, Any]:
    from dpsieve.filters.summary import budget_summary

    cur, init = store.load_filter(budget_id), store.initial_filter(budget_id)
    used = float(used_fraction(cur, init))
    return {"used": used, "used_text": _pct(used), "remaining": cur.remaining().to_dict(),
            "text": budget_summary(cur, init).text}


def blocks_view(store: Any, dataset: str, spec: BlockSpec, *, analyst: str | None = None,
                now: float | None = None) -> dict[str, Any]:
    """The page's data (module docstring). ``analyst``: the analyst who asks (None: the
    owner, who sees every quota and every request)."""
    t = time.time() if now is None else now
    recs = store.blocks(dataset)
    listed = [(r, store.history(r.budget_id)) for r in recs[-MAX_LISTED:]]
    blocks = []
    for r, hist in listed:
        unlocked = float(r.unlocked(t))
        blocks.append({"block": r.value, "arrived_at": r.created_at,
                       "unlock": r.unlock.describe(), "unlocked": unlocked,
                       "unlocked_text": _pct(unlocked), "arrivals": r.arrivals,
                       **_budget(store, r.budget_id), "admitted": len(hist),
                       "history": [{"key": _own_key(h.key, h.principal, analyst),
                                    "principal": h.principal if analyst is None else None,
                                    "cost": h.cost.to_dict(), "at": h.created_at,
                                    "charged": _charged(h.cost)}
                                   for h in hist[-20:]]})
    mine = set(store.quota_budgets(dataset, analyst)) if analyst is not None else None
    quotas = [{"scope": q.scope, "name": q.name, "label": label(q.budget_id),
               **_budget(store, q.budget_id)}
              for q in store.quotas(dataset) if mine is None or q.budget_id in mine]
    queue = []
    for p in store.queue(dataset, limit=100):
        own = analyst is None or p.principal == analyst
        d = p.to_dict(public=not own)
        d["key"] = _own_key(p.key, p.principal, analyst)
        d["blocks"] = [lbl for lbl in (label(b) for b in p.budgets) if lbl.startswith("block")]
        queue.append(d)
    return {"dataset": dataset, "column": spec.column, "scheduler": spec.scheduler.value,
            "recompute": spec.recompute, "unlock": spec.unlock.describe(),
            "unit_in_one_block": spec.unit_in_one_block,
            "guarantee": guarantee(spec), "block_budget": spec.budget,
            "n_blocks": len(recs), "blocks": blocks,
            "history": _by_query(listed, analyst, HISTORY_LISTED), "quotas": quotas,
            "groups": store.groups() if analyst is None else None, "queue": queue}


def blocks_summary(store: Any, dataset: str, spec: BlockSpec) -> dict[str, Any]:
    """A data set with blocks in a list of data sets (``GET /v1/datasets``): public
    metadata only -- the block column, the number of blocks declared, the budget each
    block arrives with (its kind and its description), unlocking and the scheduler; no
    block's use (that is ``GET .../blocks``)."""
    from dpsieve.session.block_budgets import budget_of_spec

    n = len(store.blocks(dataset))
    desc, _ = budget_of_spec(spec)
    each = describe_query(desc)
    plural = "block" if n == 1 else "blocks"
    return {"column": spec.column, "n_blocks": n, "budget_kind": str(spec.budget["type"]),
            "block_budget": spec.budget, "unlock": spec.unlock.describe(),
            "scheduler": spec.scheduler.value, "recompute": spec.recompute,
            "unit_in_one_block": spec.unit_in_one_block,
            "text": f"A budget per block: {n} {plural} by {spec.column!r}, each with its "
                    f"own budget of {each} ({spec.unlock.describe()})."}


def block_history(store: Any, dataset: str, *, analyst: str | None = None,
                  limit: int = 100) -> list[dict[str, Any]]:
    """The admitted queries of a data set with blocks, oldest first, each naming the
    blocks it was charged to (one multi-budget transaction per query: its rows in the
    blocks' chains share its key). Of the most recent :data:`MAX_LISTED` blocks, the last
    ``limit`` queries. The request and its key are shown to the owner (``analyst`` None)
    and to the analyst who asked; others see "a query by another analyst" and its cost."""
    listed = [(r, store.history(r.budget_id)) for r in store.blocks(dataset)[-MAX_LISTED:]]
    return _by_query(listed, analyst, limit)


def _by_query(listed: list[tuple[Any, Any]], analyst: str | None, limit: int
              ) -> list[dict[str, Any]]:
    """:func:`block_history` from each block's record and spend history."""
    from dpsieve._budget_view import describe_request

    by_key: dict[str, dict[str, Any]] = {}
    for r, hist in listed:
        for h in hist:
            row = by_key.get(h.key)
            if row is None:
                sees = analyst is None or h.principal == analyst
                row = {"key": _own_key(h.key, h.principal, analyst),
                       "principal": h.principal if analyst is None else None,
                       "description": describe_request(h.request) if sees
                       else "a query by another analyst",
                       "cost": h.cost.to_dict(), "charged": _charged(h.cost),
                       "at": h.created_at, "blocks": []}
                by_key[h.key] = row
            row["blocks"].append(r.value)
    rows = sorted(by_key.values(), key=lambda q: str(q["at"]))
    return rows[-limit:]


def _charged(cost: Any) -> str | None:
    q = cost.charged()
    return None if q is None else describe_query(q)


def _own_key(key: str, principal: str, analyst: str | None) -> str | None:
    """A request's key, shown to the owner and to the analyst who made it only (the
    service's ``<analyst>/`` prefix taken off for the analyst: the key they sent)."""
    if analyst is None:
        return key
    if principal != analyst:
        return None
    return key.removeprefix(f"{analyst}/")
