"""The service's side of the query layer: the route analysts read a registered data
set's public schema from, and the 409 for a privacy unit that may no longer change (the
schema and the session a query runs in are :mod:`dpsieve._datasets`', shared with the CLI).

A data set's schema is public metadata: column names and types as DuckDB reports them
from the file's metadata (a CSV's types are inferred by DuckDB's reader; the owner may
declare them), the public domains and bounds the owner declares, and the privacy unit.
``GET /v1/datasets/{name}/schema`` shows exactly that to any key the data set is visible
to; it never shows a value of the data.
"""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi import Path as PathParam

from dpsieve._datasets import registered_schema, session_for, stored_schema, unit_conflict
from dpsieve.ledger.base import BudgetStore, Principal

__all__ = ["install", "registered_schema", "session_for", "stored_schema", "unit_change"]


def unit_change(st: BudgetStore, name: str, old: dict[str, Any], unit: str | None) -> None:
    """Refuse (409) changing the privacy unit of a data set whose budget has paid for
    queries: the answers already given protected the old unit, not the new one."""
    why = unit_conflict(st, name, old, unit)
    if why is not None:
        raise HTTPException(409, why)


#: A data-set name in a URL path (as in :mod:`dpsieve.service.app`).
DatasetName = Annotated[str, PathParam(min_length=1, max_length=256,
                                       pattern=r"^[^\x00-\x1f\x7f]+$")]


def install(app: FastAPI, principal: Callable[..., Principal],
            visible: Callable[[Principal, str], dict[str, Any]]) -> None:
    """Add ``GET /v1/datasets/{name}/schema``."""
    Who = Annotated[Principal, Depends(principal)]

    @app.get("/v1/datasets/{name}/schema", tags=["analysts"])
    def schema(name: DatasetName, p: Who) -> dict[str, Any]:
        """The data set's public schema: column names and types, declared public domains
        and bounds, the privacy unit and the budget's neighbouring relation; never values."""
        src = visible(p, name)
        return {"dataset": name, **stored_schema(src).to_dict(),
                "neighbouring": src.get("neighbouring", "add_remove")}
