"""Budgets over time: a data set's blocks, quotas, groups and queue
(:class:`dpsieve.session.blocks.BlockSession` over the ledger's blocks).

========================================  ========  ==========================================
route                                     who       what
========================================  ========  ==========================================
``PUT /v1/datasets/{name}/blocks``        owner     declare the block column, each block's
                                                    budget, unlocking, scheduler
``POST /v1/datasets/{name}/blocks``       owner     a new block, with a fresh budget
``GET /v1/datasets/{name}/blocks``        any       blocks, quotas and queue (the page's)
``PUT /v1/datasets/{name}/quotas``        owner     an analyst's or a group's quota
``PUT /v1/groups/{group}``                owner     a group's members
``POST /v1/datasets/{name}/queue``        any       queue a query (``?wait=`` seconds)
``GET /v1/datasets/{name}/queue/{key}``   any       a queued query's position, reason, answer
``DELETE /v1/datasets/{name}/queue/{key}``  any     withdraw it (nothing charged)
``POST /v1/datasets/{name}/schedule``     owner     one scheduling pass
========================================  ========  ==========================================

Queries on a data set with blocks go through the one query route
(``POST /v1/datasets/{name}/queries``, :mod:`dpsieve.service.routes.queries`), which
runs them in a block session: charged to every block their ``where`` may read and to the
analyst's quotas, all or nothing. Every refusal is a 4xx with public text; nothing is
charged for it.
"""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Query, Response
from fastapi import Path as PathParam
from pydantic import Field, StrictInt

from dpsieve.errors import BudgetExceededError, IncompatiblePrivacyError
from dpsieve.ledger.base import has_budget
from dpsieve.ledger.blockset import PendingRecord
from dpsieve.queries.schema import Schema
from dpsieve.service.deps import DatasetName, Owner, ServiceState, Svc, Who
from dpsieve.service.schemas import BlocksIn, BudgetIn, Name, QueryBody, _Strict
from dpsieve.session.block_budgets import block_budget_filter
from dpsieve.session.blocks import MAX_WAIT, BlockSession
from dpsieve.session.blocks_declared import (
    block_session_for,
    check_redeclaration,
    declared_blocks,
    has_blocks,
)
from dpsieve.session.datasets import source_types, stored_schema

__all__ = ["block_session", "check_blocks", "has_blocks", "router"]

router = APIRouter()

GroupName = Annotated[str, PathParam(min_length=1, max_length=64,
                                     pattern=r"^[A-Za-z0-9_.-]+$")]
QueueKey = Annotated[str, PathParam(min_length=1, max_length=200,
                                    pattern=r"^[^\x00-\x1f\x7f/]+$")]


class BlockIn(_Strict):
    """A block that arrives: its value of the block column (public)."""

    block: StrictInt | Annotated[str, Field(min_length=1, max_length=256)]


class QuotaIn(_Strict):
    """An analyst's or a group's quota on the data set: a budget each of their queries is
    also charged to (under the blocks' neighbouring relation)."""

    scope: Literal["analyst", "group"]
    name: Name
    budget: BudgetIn


class GroupIn(_Strict):
    """A group's members (existing analysts); replaces the previous list."""

    members: Annotated[list[Name], Field(max_length=1000)]


def block_session(svc: ServiceState, src: dict[str, Any], name: str, who: str,
                  declared: dict[str, Any] | None = None) -> BlockSession:
    """The block session one request runs in, on the registered source (its stored schema
    looked up once: the engine's column types and the session's schema are both read
    from it; its block declaration ``declared``, as the request read it to find that the
    data set has blocks, is not read again)."""
    schema = stored_schema(src) if isinstance(src.get("schema"), dict) else None
    if src.get("spark_table"):
        data, engine = svc.spark_engine(str(src["spark_table"])), None
    else:
        data = str(src["path"])
        engine = svc.engines.get(data, source_types(src, schema))
    return block_session_for(src, data, svc.store, name, who, svc.after_spend,
                             engine=engine, release_limits=svc.limits, schema=schema,
                             declared=declared)


def check_blocks(svc: ServiceState, name: str, schema: Schema, body: BlocksIn
                 ) -> dict[str, Any]:
    """A block declaration checked before any write (its unlocking, its budget, the block
    column against the public ``schema``; 409 if the data set has a budget of its own, or
    if its blocks exist and it changes their column, budget or ``unit_in_one_block``):
    the JSON to store (:meth:`dpsieve.ledger.blocks.SQLBlocks.declare_blocks`)."""
    from dpsieve.blocks.spec import block_spec_from_dict
    from dpsieve.queries.blocks import BLOCK_TYPES

    parsed = block_spec_from_dict(body.spec())
    block_budget_filter(parsed)
    cols = {c.name: c for c in schema.columns}
    col = cols.get(parsed.column)
    if col is None or col.type not in BLOCK_TYPES:
        from dpsieve._validation import fail

        raise fail("column", "blocks", "a column of the data set of type integer or string",
                   parsed.column)
    if has_budget(svc.store, name):
        raise HTTPException(409, f"The data set {name!r} has a budget of its own; a data set "
                                 "with blocks has a budget per block instead (register it "
                                 "under a new name).")
    spec = parsed.to_dict()
    check_redeclaration(svc.store, name, spec)  # 409 if it changes what blocks froze
    return spec


def _blocks_of(svc: ServiceState, p: Any, name: str) -> tuple[dict[str, Any], BlockSession]:
    src = svc.visible(p, name)
    declared = declared_blocks(svc.store, name)  # read once for the request
    if declared is None:
        raise HTTPException(409, f"The data set {name!r} declares no blocks.")
    return src, block_session(svc, src, name, p.name, declared)


@router.put("/v1/datasets/{name}/blocks", tags=["owners"])
def put_blocks(name: DatasetName, body: BlocksIn, _: Owner, svc: Svc) -> dict[str, Any]:
    src = svc.store.dataset(name)
    if src is None:
        raise HTTPException(404, f"No data set named {name!r}.")
    spec = check_blocks(svc, name, stored_schema(src), body)
    svc.store.declare_blocks(name, spec)  # type: ignore[attr-defined]
    return {"dataset": name, "blocks": spec}


@router.post("/v1/datasets/{name}/blocks", status_code=201, tags=["owners"])
def add_block(name: DatasetName, body: BlockIn, p: Owner, svc: Svc) -> dict[str, Any]:
    _, s = _blocks_of(svc, p, name)
    rec = s.add_block(body.block)
    return {"dataset": name, "block": rec.value, "arrived_at": rec.created_at,
            "unlock": rec.unlock.describe(), "budget": s.spec.budget}


@router.get("/v1/datasets/{name}/blocks", tags=["analysts"])
def get_blocks(name: DatasetName, p: Who, svc: Svc) -> dict[str, Any]:
    _, s = _blocks_of(svc, p, name)
    return s.view(analyst=None if p.role == "owner" else p.name)


@router.put("/v1/datasets/{name}/quotas", tags=["owners"])
def put_quota(name: DatasetName, body: QuotaIn, p: Owner, svc: Svc) -> dict[str, Any]:
    _, s = _blocks_of(svc, p, name)
    rec = s.set_quota(body.scope, body.name, body.budget.budget())
    return {"dataset": name, "scope": rec.scope, "name": rec.name,
            "budget": body.budget.description()}


@router.put("/v1/groups/{group}", tags=["owners"])
def put_group(group: GroupName, body: GroupIn, _: Owner, svc: Svc) -> dict[str, Any]:
    setter = getattr(svc.store, "set_group", None)
    if setter is None:
        raise HTTPException(409, "This ledger keeps no groups.")
    setter(group, body.members)
    return {"group": group, "members": sorted(set(body.members))}


def _pending(rec: PendingRecord, name: str, client_key: str) -> dict[str, Any]:
    return {"dataset": name, **rec.to_dict(public=False), "key": client_key}


@router.post("/v1/datasets/{name}/queue", tags=["analysts"])
def enqueue(
    name: DatasetName, body: QueryBody, p: Who, response: Response, svc: Svc,
    wait: Annotated[float, Query(ge=0, le=MAX_WAIT, allow_inf_nan=False, description=(
        "How long the query may wait for budget, in seconds"))] = 3600.0,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200,
                                                  pattern=r"^[^/]+$")] = None,
) -> dict[str, Any]:
    """Queue a query on a data set with blocks: answered at once (``status``
    ``admitted``) if a scheduling pass admits it now, else 202 with its position and the
    reason it waits. Nothing is charged unless it is admitted."""
    _, s = _blocks_of(svc, p, name)
    svc.queue_cap(p.name)  # the refusal cap and the queue's: before the ledger is touched
    client_key = idempotency_key or "srv-" + uuid.uuid4().hex
    response.headers["Idempotency-Key"] = client_key
    try:
        out = s.submit(body.request(s.neighbouring), wait=wait,
                       key=f"{p.name}/{client_key}")
    except (BudgetExceededError, IncompatiblePrivacyError):
        svc.refusals.count(p.name)
        raise
    if isinstance(out, PendingRecord):
        if out.status == "waiting":  # its request stored until a pass decides it
            response.status_code = 202
            svc.queued.count(p.name)
        elif out.status != "admitted":  # refused or timed out at once: nothing charged
            svc.refusals.count(p.name)
        return _pending(out, name, client_key)
    return {"dataset": name, "status": "admitted", **out.to_dict(), "key": client_key}


def _mine(svc: ServiceState, p: Any, name: str, key: str) -> tuple[BlockSession, str]:
    _, s = _blocks_of(svc, p, name)
    full = f"{p.name}/{key}"
    if svc.store.pending(name, full) is None:  # type: ignore[attr-defined]
        raise HTTPException(404, f"No queued request with key {key!r} on {name!r}.")
    return s, full


@router.get("/v1/datasets/{name}/queue/{key}", tags=["analysts"])
def queued(name: DatasetName, key: QueueKey, p: Who, svc: Svc) -> dict[str, Any]:
    """A queued query after a scheduling pass: its answer once admitted, else its
    status, position and reason."""
    s, full = _mine(svc, p, name, key)
    out = s.status(full)
    if isinstance(out, PendingRecord):
        return _pending(out, name, key)
    return {"dataset": name, "status": "admitted", **out.to_dict(), "key": key}


@router.delete("/v1/datasets/{name}/queue/{key}", tags=["analysts"])
def withdraw(name: DatasetName, key: QueueKey, p: Who, svc: Svc) -> dict[str, Any]:
    s, full = _mine(svc, p, name, key)
    return _pending(s.withdraw(full), name, key)


@router.post("/v1/datasets/{name}/schedule", tags=["owners"])
def schedule(name: DatasetName, p: Owner, svc: Svc) -> dict[str, Any]:
    _, s = _blocks_of(svc, p, name)
    changed = s.schedule()
    return {"dataset": name, "changed": {k.split("/", 1)[-1]: v for k, v in changed.items()}}
