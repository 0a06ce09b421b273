"""Interactive children over HTTP: ``/v1/datasets/{name}/children``.

A child (sparse vector, continual counter, answer cache) is opened under a data set's
budget by an analyst granted the data set (or the owner), who owns it; its declared
privacy is charged once, in the ledger transaction that creates it. Then it answers one
question at a time, computed by the data set's session on the data
(:mod:`dpsieve.session.children`), each answer stored with the child's new state and an
audit row before it is sent:

=========================================================  ==============================
``POST /v1/datasets/{name}/children``                      open (charged; 201)
``GET  /v1/datasets/{name}/children``                      the children the key may ask
``GET  /v1/datasets/{name}/children/{child}``              one child's public view
``POST /v1/datasets/{name}/children/{child}/questions``    one question (free)
``POST /v1/datasets/{name}/children/{child}/grants``       let another analyst ask (owner
                                                           of the child)
=========================================================  ==============================

A question is ``{"question": plan, "threshold": t}`` (sparse vector), ``{"until": x}``
(a counter opened with a ``time_column``), ``{"count": n}`` (a counter, the data owner's
key only: the steward's count of new events), or ``{"weights": [...]}`` (answer cache).
A child the key may not ask answers 404 like one that does not exist; an exhausted child
409 ``child_exhausted``. A data set with blocks has no children (422 ``unsupported`` on
every route here: docs/proofs/blocks.md §6). Every request takes an ``Idempotency-Key``
(one is assigned and returned otherwise): a retried open is charged once, a retried
question answered once.
"""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

import uuid
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, HTTPException, Response
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from dpsieve.errors import (
    BudgetExceededError,
    ConcurrencyError,
    IncompatiblePrivacyError,
    UnsupportedError,
)
from dpsieve.interactive.base import ChildExhaustedError
from dpsieve.ledger.base import (
    LedgerUnavailableError,
    Principal,
    has_budget,
    spend_journal,
)
from dpsieve.ledger.children import ChildAccessError, ChildRecord
from dpsieve.service.deps import DatasetName, ServiceState, Svc, Who
from dpsieve.service.errors import Limited, QueryLedgerError
from dpsieve.service.routes.queries import _session
from dpsieve.session.block_budgets import CHILDREN_ON_BLOCKS
from dpsieve.session.blocks_declared import has_blocks
from dpsieve.session.children import Children

__all__ = ["ChildIn", "GrantChildIn", "QuestionIn", "router"]

router = APIRouter()

ChildName = Annotated[str, PathParam(min_length=1, max_length=200,
                                     pattern=r"^[^\x00-\x1f\x7f]+$")]
IdemKey = Annotated[str | None, Header(min_length=1, max_length=200)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ChildIn(_Body):
    """A child to open: its name, kind and parameters (docs/interactive.md)."""

    child: Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$")]
    kind: Literal["sparse_vector", "counter", "cache"]
    spec: Annotated[dict[str, Any], Field(description=(
        'The child\'s parameters, e.g. {"noise": "laplace", "eps": 0.5, "positives": 3}; '
        'a counter {"mu": 1.0, "time_column": "day"}; a cache {"eps": 1, "column": "city",'
        ' "updates": 20, "tolerance": 50, "expected_rows": 1000}.'))]


class QuestionIn(_Body):
    """One question: exactly one of the shapes of the module docstring."""

    question: dict[str, Any] | None = None
    threshold: Finite | None = None
    until: Finite | None = None
    count: Annotated[int | None, Field(ge=0, le=2**53)] = None
    weights: Annotated[list[Annotated[float, Field(ge=0.0, le=1.0)]] | None,
                       Field(max_length=10_000)] = None


class GrantChildIn(_Body):
    """The analyst who may question the child."""

    analyst: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]


def _record(r: ChildRecord) -> dict[str, Any]:
    return {"child": r.child_id, "owner": r.owner, "kind": r.kind, "declared": r.declared,
            "public": r.public, "version": r.version, "created_at": r.created_at}


def _children(svc: ServiceState, name: str, p: Principal, *, opening: bool = False
              ) -> Children:
    """The data set's children as ``p`` sees them. The owner key questions and grants
    every child (as the steward, ``""``) and owns those it opens (``"owner"``)."""
    src = svc.visible(p, name)
    if not has_budget(svc.store, name):
        if has_blocks(svc.store, name):  # public metadata: 422, nothing written or spent
            raise UnsupportedError(CHILDREN_ON_BLOCKS)
        raise HTTPException(409, f"The data set {name!r} has no budget yet.")
    acting = p.name if opening or p.role != "owner" else ""
    return _session(svc, src, name, acting).children


def _not_found(name: str, child: str) -> HTTPException:
    return HTTPException(404, f"No child named {child!r} on {name!r} is visible to this key.")


@router.post("/v1/datasets/{name}/children", status_code=201, tags=["analysts"])
def open_child(name: DatasetName, body: ChildIn, p: Who, response: Response, svc: Svc,
               idempotency_key: IdemKey = None) -> dict[str, Any]:
    """Open a child: its declared privacy is charged once, with the child's creation."""
    kids = _children(svc, name, p, opening=True)
    wait = svc.refusals.retry_after(p.name)
    if wait is not None:
        raise Limited("too_many_refusals", f"{svc.refusals.limit} requests by {p.name!r} "
                      f"were refused in the last {svc.refusals.window:g} s; nothing was "
                      "written or spent.", wait)
    key = idempotency_key or "srv-" + uuid.uuid4().hex
    journal: list[str] = []
    noted = spend_journal.set(journal)
    try:
        out = kids.open(body.child, body.kind, body.spec, key=f"{p.name}/child/{key}")
    except (BudgetExceededError, IncompatiblePrivacyError):
        svc.refusals.count(p.name)
        raise
    except (LedgerUnavailableError, ConcurrencyError) as e:
        charged = "yes" if journal else (
            "unknown" if isinstance(e, LedgerUnavailableError) and e.uncertain else "no")
        raise QueryLedgerError(e, key, charged) from None
    finally:
        spend_journal.reset(noted)
    response.headers["Idempotency-Key"] = key
    out["key"] = key
    return {"dataset": name, **out}


@router.get("/v1/datasets/{name}/children", tags=["analysts"])
def list_children(name: DatasetName, p: Who, svc: Svc) -> dict[str, Any]:
    kids = _children(svc, name, p)
    return {"dataset": name, "children": [_record(r) for r in kids.visible()]}


@router.get("/v1/datasets/{name}/children/{child}", tags=["analysts"])
def get_child(name: DatasetName, child: ChildName, p: Who, svc: Svc) -> dict[str, Any]:
    kids = _children(svc, name, p)
    for r in kids.visible():
        if r.child_id == child:
            return {"dataset": name, **_record(r)}
    raise _not_found(name, child)


@router.post("/v1/datasets/{name}/children/{child}/questions", tags=["analysts"])
def ask_child(name: DatasetName, child: ChildName, body: QuestionIn, p: Who,
              response: Response, svc: Svc, idempotency_key: IdemKey = None
              ) -> Any:
    """One question to a child (free: the child was charged when opened)."""
    kids = _children(svc, name, p)
    given = [k for k in ("question", "until", "count", "weights")
             if getattr(body, k) is not None]
    if len(given) != 1 or (given == ["question"]) != (body.threshold is not None):
        raise HTTPException(422, "A question is exactly one of {'question', 'threshold'} "
                            "(sparse vector), {'until'} or {'count'} (counter), {'weights'} "
                            f"(answer cache); got the fields {sorted(given)} and threshold "
                            f"{body.threshold!r}.")
    if body.count is not None and p.role != "owner":
        raise HTTPException(403, "Only the data owner (the steward, who holds the data) "
                            "appends counts to a counter; analysts step it by 'until'.")
    key = idempotency_key or "srv-" + uuid.uuid4().hex
    k = f"{p.name}/{key}"
    try:
        if body.question is not None and body.threshold is not None:
            out = kids.ask(child, body.question, threshold=body.threshold, key=k)
        elif body.until is not None:
            out = kids.step(child, until=body.until, key=k)
        elif body.count is not None:
            out = kids.step(child, count=body.count, key=k)
        else:
            out = kids.query(child, body.weights or [], key=k)
    except ChildAccessError:
        raise _not_found(name, child) from None
    except ChildExhaustedError as e:  # public: a function of the answers released
        return JSONResponse({"error": "child_exhausted", "message": f"{e}; nothing was "
                             "asked."}, status_code=409)
    response.headers["Idempotency-Key"] = key
    return {"dataset": name, **out, "key": key}


@router.post("/v1/datasets/{name}/children/{child}/grants", status_code=201,
             tags=["analysts"])
def grant_child(name: DatasetName, child: ChildName, body: GrantChildIn, p: Who,
                svc: Svc) -> dict[str, Any]:
    """Let another analyst (granted the data set) question the child: its owner only."""
    kids = _children(svc, name, p)
    if name not in svc.store.grants(body.analyst):
        raise HTTPException(404, f"No analyst named {body.analyst!r} is granted {name!r}.")
    try:
        kids.grant(child, body.analyst)
    except ChildAccessError:
        if any(r.child_id == child for r in kids.visible()):
            raise HTTPException(403, f"Only the owner of the child {child!r} may grant "
                                "it.") from None
        raise _not_found(name, child) from None
    return {"dataset": name, "child": child, "granted": body.analyst}
