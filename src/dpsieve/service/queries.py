"""The service's side of the query layer: public schemas of registered data sets (with
their privacy unit), the route analysts read them from, and the session a query runs in.

A data set's schema is public metadata: column names and types as DuckDB reports them
from the file's metadata (a CSV's types are inferred by DuckDB's reader; the owner may
declare them), the public domains and bounds the owner declares, and the privacy unit.
``GET /v1/datasets/{name}/schema`` shows exactly that to any key the data set is visible
to; it never shows a value of the data.
"""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from collections.abc import Callable, Sequence
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException
from fastapi import Path as PathParam

from dpsieve.accounting.events import Neighbouring
from dpsieve.ledger.base import BudgetNotFoundError, BudgetStore, Principal
from dpsieve.queries.schema import Column, ColumnType, Schema

__all__ = ["install", "registered_schema", "session_for", "stored_schema", "unit_change"]


def registered_schema(actual: Callable[[], tuple[Column, ...]],
                      declared: Sequence[dict[str, Any]] | None,
                      privacy_unit: str | None) -> dict[str, Any]:
    """The schema to store at registration: the table's column types (``actual()``, from
    metadata) with the owner's declarations, and the privacy unit (a ValidationError
    naming the parameter if a declared column or the unit is not a column of the table,
    raised before anything is written)."""
    from dpsieve._session_query import resolve_schema

    cols = None if declared is None else [Column.from_dict(c) for c in declared]
    return resolve_schema(cols, privacy_unit, actual).to_dict()


def stored_schema(src: dict[str, Any]) -> Schema:
    """A registered data set's schema (older registrations: from the stored column types,
    without a privacy unit)."""
    if isinstance(src.get("schema"), dict):
        return Schema.from_dict(src["schema"])
    kinds = src.get("column_types") or {}
    return Schema(tuple(Column(str(n), ColumnType(str(t))) for n, t in kinds.items()))


def unit_change(st: BudgetStore, name: str, old: dict[str, Any], unit: str | None) -> None:
    """Refuse (409) changing the privacy unit of a data set whose budget has paid for
    queries: the answers already given protected the old unit, not the new one."""
    if not old or old.get("privacy_unit") == unit:
        return
    try:
        spent = bool(st.history(name))
    except BudgetNotFoundError:
        spent = False
    if spent:
        raise HTTPException(409, f"The privacy unit of {name!r} cannot change from "
                                 f"{old.get('privacy_unit')!r} to {unit!r}: its budget has "
                                 "already paid for queries protecting the old unit. Register "
                                 "the data under a new name.")


def session_for(src: dict[str, Any], data: Any, st: BudgetStore, name: str, principal: str,
                after_spend: Callable[[str], None] | None,
                frame_of: Callable[[str], Any], release_limits: Any = None) -> Any:
    """The session one query runs in, on ``data`` (the file's path, or a Spark engine):
    plans run inside the engine; the shapes that need a frame (release, robust) load the
    file through ``frame_of(path)`` (cached)."""
    from dpsieve.session import Session, data_row_count

    path = src.get("path")
    has_schema = isinstance(src.get("schema"), dict)
    return Session(
        data, store=st, budget_id=name, principal=principal, after_spend=after_spend,
        columns=src.get("columns"),
        column_types=None if has_schema else src.get("column_types"),
        schema=stored_schema(src) if has_schema else None,
        row_count=None if path is None else (lambda: data_row_count(str(path))),
        loader=None if path is None else (lambda: frame_of(str(path))),
        release_limits=release_limits,
        neighbouring=Neighbouring(src.get("neighbouring", "add_remove")))


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
