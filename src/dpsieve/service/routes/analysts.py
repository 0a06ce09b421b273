"""Who am I, and the owner's management of analysts and their API keys (a key is shown
once, when made; listed by its identifier only)."""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Response
from fastapi import Path as PathParam

from dpsieve.ledger.base import BudgetStore
from dpsieve.service.auth import hash_key, key_id, new_key
from dpsieve.service.deps import DatasetName, Owner, Svc, Who
from dpsieve.service.schemas import AnalystIn

__all__ = ["router"]

router = APIRouter()


@router.get("/v1/me", tags=["analysts"])
def me(p: Who, svc: Svc) -> dict[str, Any]:
    st = svc.store
    return {"name": p.name, "role": p.role,
            "datasets": st.datasets() if p.role == "owner" else st.grants(p.name)}


@router.post("/v1/analysts", status_code=201, tags=["owners"])
def create_analyst(body: AnalystIn, _: Owner, svc: Svc) -> dict[str, Any]:
    if body.name == "owner":
        raise HTTPException(422, "'name' must not be 'owner' (reserved for the data owner).")
    key = new_key()
    svc.store.add_principal(body.name, "analyst", hash_key(key))
    svc.keys.added(hash_key(key))  # works at once on this worker
    return {"name": body.name, "api_key": key, "key_id": key_id(hash_key(key))}


def analyst_keys(st: BudgetStore, name: str) -> list[dict[str, str]]:
    keys = st.principal_keys(name)  # type: ignore[attr-defined]
    if keys is None or name == "owner":
        raise HTTPException(404, f"No analyst named {name!r}.")
    return [{"key_id": key_id(h), "created_at": ts} for h, ts in keys]


@router.get("/v1/analysts/{name}/keys", tags=["owners"])
def list_keys(name: DatasetName, _: Owner, svc: Svc) -> list[dict[str, str]]:
    """The analyst's keys (identifiers only; a key is shown once, when made)."""
    return analyst_keys(svc.store, name)


@router.post("/v1/analysts/{name}/keys", status_code=201, tags=["owners"])
def add_key(name: DatasetName, _: Owner, svc: Svc) -> dict[str, str]:
    """A new key for an existing analyst (rotation: add, hand over, then revoke)."""
    analyst_keys(svc.store, name)
    key = new_key()
    svc.store.add_principal(name, "analyst", hash_key(key))
    svc.keys.added(hash_key(key))  # works at once on this worker
    return {"name": name, "api_key": key, "key_id": key_id(hash_key(key))}


@router.delete("/v1/analysts/{name}/keys/{kid}", status_code=204, tags=["owners"])
def revoke_key(name: DatasetName, kid: Annotated[str, PathParam(
        pattern=r"^[0-9a-f]{16}$")], _: Owner, svc: Svc) -> Response:
    """Revoke a key: once this returns, no request with it is admitted."""
    analyst_keys(svc.store, name)
    if not svc.store.revoke_key(name, kid):  # type: ignore[attr-defined]
        raise HTTPException(404, f"Analyst {name!r} has no key {kid!r}.")
    return Response(status_code=204)
