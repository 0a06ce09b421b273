"""``POST /v1/datasets/{name}/queries``: the one query route. The body is mapped to a
typed request once (:mod:`dpsieve.service.schemas`), then the data set's session runs it
(:meth:`dpsieve.session.Session.execute`): checked, charged durably in the ledger, run.

Every query runs under an idempotency key: the client's ``Idempotency-Key``, or one the
server assigns (``srv-`` + 128 random bits), returned in the ``Idempotency-Key`` response
header. A ledger fault is a 503 that says whether the query was charged (``charged``:
``"no"``, ``"unknown"`` when the commit's outcome was lost, ``"yes"`` when the answer was
lost after the charge) and carries the key (``idempotency_key``): a retry with it is
charged at most once. An analyst past the refusal cap is refused (429) before the ledger
is touched.

``?preview=true`` answers the same body for free (:meth:`dpsieve.session.Session.preview`):
the charge, whether the budget admits it, the budget after it and each released number's
noise, from public values only; nothing is spent, read or written to the log (it takes no
idempotency key and counts toward no refusal cap)."""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, HTTPException, Query, Request, Response

from dpsieve.errors import BudgetExceededError, ConcurrencyError, IncompatiblePrivacyError
from dpsieve.ledger.base import LedgerUnavailableError, has_budget, spend_journal, spend_key
from dpsieve.service.deps import DatasetName, ServiceState, Svc, Who
from dpsieve.service.errors import QueryLedgerError
from dpsieve.service.routes.blocks import block_session
from dpsieve.service.schemas import QueryBody
from dpsieve.session.blocks_declared import declared_blocks
from dpsieve.session.core import Session
from dpsieve.session.datasets import session_for, source_types, stored_schema

__all__ = ["QUERY_PATH", "router"]

router = APIRouter()

#: The route almost every request takes.
QUERY_PATH = "/v1/datasets/{name}/queries"


def _session(svc: ServiceState, src: dict[str, Any], name: str, who: str,
             blocks: dict[str, Any] | None = None) -> Session:
    """The data set's session for one request (``blocks``: the data set's block
    declaration as this request read it, and this is its block session,
    :mod:`dpsieve.service.routes.blocks`)."""
    if blocks is not None:
        return block_session(svc, src, name, who, blocks)
    # the stored schema is looked up once per query (its memo's key, the schema's repr,
    # costs about as much as a spend's row hashes)
    schema = stored_schema(src) if isinstance(src.get("schema"), dict) else None
    # plans and the one-aggregation shapes run inside the engine (DuckDB for a file,
    # Spark for a catalog table, whose rows never leave it); release and the robust
    # estimators load a file's frame after the spend
    if src.get("spark_table"):
        data, engine = svc.spark_engine(str(src["spark_table"])), None
    else:  # the file's engine, kept open across queries (the file's stamp checked)
        data, engine = str(src["path"]), svc.engines.get(str(src["path"]),
                                                         source_types(src, schema))
    return session_for(src, data, svc.store, name, who, svc.after_spend, svc.frames.get,
                       svc.limits, engine=engine, schema=schema)


@router.post(QUERY_PATH, tags=["analysts"])
def query(
    name: DatasetName, body: QueryBody, p: Who, request: Request, response: Response,
    svc: Svc,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=200)] = None,
    preview: Annotated[bool, Query(description="true: the charge, the budget after it and "
                                   "the noise, for free (nothing spent or logged)")] = False,
) -> dict[str, Any]:
    st = svc.store
    src = svc.visible(p, name)
    blocks = None
    if not has_budget(st, name):  # existence only: the spend reads the filter
        blocks = declared_blocks(st, name)  # a budget per block instead (never both)
        if blocks is None:
            raise HTTPException(409, f"The data set {name!r} has no budget yet.")
    if preview:  # public values only: no data read, nothing spent or written
        session = _session(svc, src, name, p.name, blocks)
        return {"dataset": name, "preview": True,
                **session.preview(body.request(session.neighbouring))}
    svc.refusal_cap(p.name)  # the refusals one analyst may write to the log are bounded
    session = _session(svc, src, name, p.name, blocks)
    # every query has an idempotency key: the client's, or one assigned here and sent
    # back (header and, after a ledger fault, body), so a retry is always safe
    client_key = idempotency_key or "srv-" + uuid.uuid4().hex
    journal: list[str] = []  # the ledger notes there when the charge committed
    # an analyst's spend commits only while the key is still valid (revocation races)
    token = spend_key.set(getattr(request.state, "key_hash", None)
                          if p.role != "owner" else None)
    noted = spend_journal.set(journal)
    try:
        typed = body.request(session.neighbouring)  # JSON to typed values, once
        out = {"dataset": name,
               **session.execute(typed, key=f"{p.name}/{client_key}").to_dict()}
    except (BudgetExceededError, IncompatiblePrivacyError):
        svc.refusals.count(p.name)
        raise
    except (LedgerUnavailableError, ConcurrencyError) as e:
        charged = "yes" if journal else (
            "unknown" if isinstance(e, LedgerUnavailableError) and e.uncertain else "no")
        raise QueryLedgerError(e, client_key, charged) from None
    finally:
        spend_journal.reset(noted)
        spend_key.reset(token)
    response.headers["Idempotency-Key"] = client_key
    return out
