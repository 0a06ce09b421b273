"""A data set's budget as the page shows it (left, history, refusals, "about N more
queries like this one"), its tradeoff curves after each admitted query, and the audit
log (owner only)."""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from dpsieve.filters.base import BudgetLeft
from dpsieve.service.budget_view import (
    blocks_summary_of,
    budget_view,
    like_privacy,
    step_eps,
)
from dpsieve.service.curves import ALPHAS, description_of, tradeoff_curve
from dpsieve.service.deps import DatasetName, Owner, Svc, Who
from dpsieve.session.blocks_view import block_history

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/datasets/{name}/budget", tags=["analysts"])
def get_budget(
    name: DatasetName, p: Who, svc: Svc,
    like: Annotated[str | None, Query(max_length=300, description=(
        'Count "about N more queries like this one" for this privacy, e.g. '
        '{"type": "pure", "eps": 0.1} (default: like the last admitted query).'))] = None,
) -> dict[str, Any]:
    src = svc.visible(p, name)
    if not svc.budget_of(name):
        blocks = blocks_summary_of(svc.store, name)
        history = [] if blocks is None else block_history(
            svc.store, name, analyst=None if p.role == "owner" else p.name)
        out: dict[str, Any] = {
            "dataset": name, "budget": src.get("budget"), "remaining": {},
            "admitted": len(history), "history": history, "refusals": [], "summary": None,
            "split": None}
        if blocks is not None:  # a budget per block: GET .../blocks has each one's
            out["blocks"] = blocks
        return out
    asked = None if like is None else like_privacy(
        like, src.get("neighbouring", "add_remove"))
    return {"dataset": name, "budget": src.get("budget"),
            **budget_view(svc.store, name, p, like=asked)}


@router.get("/v1/datasets/{name}/curves", tags=["analysts"])
def curves(name: DatasetName, p: Who, svc: Svc) -> dict[str, Any]:
    st = svc.store
    src = svc.visible(p, name)
    if not svc.budget_of(name):
        raise HTTPException(409, f"The data set {name!r} has no budget yet." if
                            blocks_summary_of(st, name) is None else
                            f"The data set {name!r} has a budget per block: each block's "
                            f"is at GET /v1/datasets/{name}/blocks.")
    initial = st.initial_filter(name)
    lefts: list[tuple[dict[str, Any] | None, BudgetLeft]] = [
        (None, initial.remaining())]  # typed; the JSON is made per step below
    lefts += [(r.cost.to_dict(), r.remaining) for r in st.history(name)]
    kind = str(getattr(initial, "kind", ""))
    steps: list[dict[str, Any]] = []
    for i, (cost, left) in enumerate(lefts):
        desc = description_of(left)
        eps_left, delta = step_eps(kind, left)
        steps.append({"step": i, "cost": cost, "remaining": left.to_dict(),
                      "curve": None if desc is None else tradeoff_curve(desc),
                      "eps_left": eps_left, "delta": delta})
    return {"dataset": name, "budget": src.get("budget"),
            "alphas": [round(float(a), 6) for a in ALPHAS], "steps": steps}


@router.get("/v1/datasets/{name}/audit", tags=["owners"])
def audit(name: DatasetName, _: Owner, svc: Svc) -> list[dict[str, Any]]:
    return [{"seq": e.seq, "ts": e.ts, "principal": e.principal, "event": e.event,
             "key": e.key, "payload": e.payload} for e in svc.store.audit(name)]
