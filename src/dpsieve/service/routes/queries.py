"""``POST /v1/datasets/{name}/queries``: the one query route. The body is mapped to a
typed request once (:mod:`dpsieve.service.schemas`), then the data set's session runs it
(:meth:`dpsieve.session.Session.execute`): checked, charged durably in the ledger, run."""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Request

from dpsieve._datasets import session_for
from dpsieve.ledger.base import has_budget, spend_key
from dpsieve.service.deps import DatasetName, Svc, Who
from dpsieve.service.schemas import QueryBody

__all__ = ["QUERY_PATH", "router"]

router = APIRouter()

#: The route almost every request takes.
QUERY_PATH = "/v1/datasets/{name}/queries"


@router.post(QUERY_PATH, tags=["analysts"])
def query(
    name: DatasetName, body: QueryBody, p: Who, request: Request, svc: Svc,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
) -> dict[str, Any]:
    st = svc.store
    src = svc.visible(p, name)
    if not has_budget(st, name):  # existence only: the spend reads the filter
        raise HTTPException(409, f"The data set {name!r} has no budget yet.")
    # plans and the one-aggregation shapes run inside the engine (DuckDB for a file,
    # Spark for a catalog table, whose rows never leave it); release and the robust
    # estimators load a file's frame after the spend
    if src.get("spark_table"):
        data, engine = svc.spark_engine(str(src["spark_table"])), None
    else:  # the file's engine, kept open across queries (the file's stamp checked)
        data, engine = str(src["path"]), svc.engines.get(str(src["path"]))
    session = session_for(src, data, st, name, p.name, svc.after_spend, svc.frames.get,
                          svc.limits, engine=engine)
    key = f"{p.name}/{idempotency_key}" if idempotency_key else None
    # an analyst's spend commits only while the key is still valid (revocation races)
    token = spend_key.set(getattr(request.state, "key_hash", None)
                          if p.role != "owner" else None)
    try:
        typed = body.request(session.neighbouring)  # JSON to typed values, once
        return {"dataset": name, **session.execute(typed, key=key).to_dict()}
    finally:
        spend_key.reset(token)
