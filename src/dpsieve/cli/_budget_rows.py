"""The rows ``dpsieve budget show`` prints: one per data set, a data set with blocks with
its blocks and quotas grouped under it.

A data set with blocks has no budget of its own: the ledger keeps one per block
(``"<data set>/block:<value>"``) and per quota (``"<data set>/quota:..."``). Listed as
budgets, they read as data sets; here they are a data set's blocks and quotas, and the
data set's own line is the public summary ``GET /v1/datasets`` gives
(:func:`dpsieve.session.blocks_view.blocks_summary`: the block column, the number of
blocks, the budget each arrives with, unlocking and the scheduler). Each block and quota
is stated as ``dpsieve blocks show`` states it: its budget left in words and the queries
charged to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dpsieve.filters.charge import PrivacyCharge
    from dpsieve.ledger.base import BudgetStore

__all__ = ["budget_rows", "table_rows"]


def _one(store: BudgetStore, budget_id: str, asked: PrivacyCharge | None) -> dict[str, Any]:
    """One budget: left, initial, admitted and its summary ("about N more queries like"
    ``asked``, else like its own last admitted query)."""
    from dpsieve._budget_view import PAGE_CAP, store_summary

    hist = store.history(budget_id)
    q = asked if asked is not None else (hist[-1].cost.charged() if hist else None)
    summary = store_summary(store, budget_id, like=q, cap=PAGE_CAP)
    return {"remaining": store.load_filter(budget_id).remaining().to_dict(),
            "initial": store.initial_filter(budget_id).remaining().to_dict(),
            "admitted": len(hist), "summary": summary.to_dict()}


def _block_sets(store: BudgetStore) -> dict[str, dict[str, Any]]:
    """The data sets that declare blocks, each with its public summary."""
    stored = getattr(store, "block_spec", None)
    if stored is None:
        return {}
    from dpsieve.blocks.spec import block_spec_from_dict
    from dpsieve.session.blocks_view import blocks_summary

    out = {}
    for n in store.datasets():
        spec = stored(n)
        if spec is not None:
            out[n] = blocks_summary(store, n, block_spec_from_dict(spec))
    return out


def _grouped(store: BudgetStore, name: str, summary: dict[str, Any],
             asked: PrivacyCharge | None) -> dict[str, Any]:
    """A data set with blocks: its summary, its most recent blocks
    (:data:`~dpsieve.session.blocks_view.MAX_LISTED`, as ``dpsieve blocks show``) and its
    quotas; ``admitted`` counts its queries (one transaction each, however many blocks
    it was charged to)."""
    from dpsieve.ledger.passes import label
    from dpsieve.session.blocks_view import MAX_LISTED

    s: Any = store
    recs = s.blocks(name)
    keys = {h.key for r in recs for h in store.history(r.budget_id)}
    blocks = [{"block": r.value, "label": label(r.budget_id),
               **_one(store, r.budget_id, asked)} for r in recs[-MAX_LISTED:]]
    quotas = [{"scope": q.scope, "name": q.name, "label": label(q.budget_id),
               **_one(store, q.budget_id, asked)} for q in s.quotas(name)]
    return {"dataset": name, "admitted": len(keys), "summary": {"text": summary["text"]},
            "blocks": summary, "block_budgets": blocks,
            "blocks_not_listed": len(recs) - len(blocks), "quotas": quotas}


def budget_rows(store: BudgetStore, dataset: str | None,
                asked: PrivacyCharge | None) -> list[dict[str, Any]]:
    """One row per data set (``dataset``: that one only; a block's or a quota's budget id
    named explicitly is shown as a budget of its own)."""
    sets = _block_sets(store)
    if dataset is not None:
        if dataset in sets:
            return [_grouped(store, dataset, sets[dataset], asked)]
        return [{"dataset": dataset, **_one(store, dataset, asked)}]
    s: Any = store
    owned = {r.budget_id for n in sets for r in s.blocks(n)}
    owned |= {q.budget_id for n in sets for q in s.quotas(n)}
    names = sorted({b for b in store.budget_ids() if b not in owned} | set(sets))
    return [_grouped(store, n, sets[n], asked) if n in sets
            else {"dataset": n, **_one(store, n, asked)} for n in names]


def table_rows(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(name, budget left, admitted) lines of the table: a data set with blocks, then
    each of its blocks and quotas indented under it."""
    out = []
    for r in rows:
        out.append((r["dataset"], r["summary"]["text"], str(r["admitted"])))
        if r.get("blocks_not_listed"):
            out.append((f"  ({r['blocks_not_listed']} earlier blocks)", "", ""))
        for b in [*r.get("block_budgets", []), *r.get("quotas", [])]:
            out.append((f"  {b['label']}", b["summary"]["text"], str(b["admitted"])))
    return out
