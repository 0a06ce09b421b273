"""A registered data set's public schema: read by any key it is visible to, replaced in
place by the owner, and the 409 for a privacy unit or declarations that may no longer
change (the schema and the session a query runs in are :mod:`dpsieve.session.datasets`', shared
with the CLI).

A data set's schema is public metadata: column names and types as DuckDB reports them
from the file's metadata (a CSV's types are inferred by DuckDB's reader; the owner may
declare them), the public domains and bounds the owner declares, and the privacy unit.
``GET /v1/datasets/{name}/schema`` shows exactly that to any key the data set is visible
to; it never shows a value of the data. ``PUT /v1/datasets/{name}/schema`` (the owner)
replaces the declarations and the privacy unit in place, checked against the table's
metadata before anything is written, and only while the budget has paid for no query
(409 after: the answers given were computed under the old declarations). Registering the
data set again under its name (``POST /v1/datasets``) follows the same rule.
"""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from typing import Any

from fastapi import APIRouter, HTTPException

from dpsieve.ledger.base import BudgetStore
from dpsieve.service.deps import DatasetName, Owner, Svc, Who
from dpsieve.service.schemas import SchemaIn
from dpsieve.session.datasets import (
    declaration_types,
    registered_schema,
    spent,
    stored_schema,
    unit_conflict,
)

__all__ = ["router", "schema_change", "unit_change"]

router = APIRouter()


def unit_change(st: BudgetStore, name: str, old: dict[str, Any], unit: str | None) -> None:
    """Refuse (409) changing the privacy unit of a data set whose budget has paid for
    queries: the answers already given protected the old unit, not the new one."""
    why = unit_conflict(st, name, old, unit)
    if why is not None:
        raise HTTPException(409, why)


def schema_change(st: BudgetStore, name: str, old: dict[str, Any],
                  schema: dict[str, Any]) -> None:
    """Refuse (409) changing the declarations of a data set once its budget has paid for
    queries: the answers given were computed under the old ones. The same rule holds in
    place (``PUT .../schema``) and for a registration under the same name (``POST
    /v1/datasets``), which may re-point the name at another file only if the schema
    stays as it is."""
    if isinstance(old.get("schema"), dict) and old["schema"] != schema and spent(st, name):
        changed = _changed_columns(old["schema"], schema)
        raise HTTPException(409, f"'columns': the schema of {name!r} cannot change "
                                 f"({changed}): its budget has already paid for queries "
                                 "answered under the current declarations. Register the "
                                 "data under a new name.")


def _changed_columns(old: dict[str, Any], new: dict[str, Any]) -> str:
    """The columns whose declarations differ (names are public schema), in words."""
    def by_name(s: dict[str, Any]) -> dict[str, Any]:
        return {str(c.get("name")): c for c in s.get("columns", ()) if isinstance(c, dict)}
    a, b = by_name(old), by_name(new)
    names = [n for n in dict.fromkeys([*a, *b]) if a.get(n) != b.get(n)]
    if not names:
        return "its declarations differ"
    shown = ", ".join(repr(n) for n in names[:5]) + (", ..." if len(names) > 5 else "")
    return f"column{'s' if len(names) > 1 else ''} {shown} would change"


@router.get("/v1/datasets/{name}/schema", tags=["analysts"])
def schema(name: DatasetName, p: Who, svc: Svc) -> dict[str, Any]:
    """The data set's public schema: column names and types, declared public domains
    and bounds, the privacy unit and the budget's neighbouring relation; never values."""
    src = svc.visible(p, name)
    return {"dataset": name, **stored_schema(src).to_dict(),
            "neighbouring": src.get("neighbouring", "add_remove")}


@router.put("/v1/datasets/{name}/schema", tags=["owners"])
def put_schema(name: DatasetName, body: SchemaIn, _: Owner, svc: Svc) -> dict[str, Any]:
    """Replace the data set's declarations (``columns``: types, public domains and
    bounds) and privacy unit in place (absent: no unit), checked against the table's
    metadata (422) before anything is written; refused (409) once its budget has paid
    for queries, unless nothing changes."""
    store = svc.store
    old = store.dataset(name)
    if old is None:
        raise HTTPException(404, f"No data set named {name!r}.")
    declared = None if body.columns is None else [
        c.model_dump(exclude_none=True) for c in body.columns]
    schema = registered_schema(lambda: svc.table_columns(old, declaration_types(declared)),
                               declared, body.privacy_unit)
    unit_change(store, name, old, body.privacy_unit)
    schema_change(store, name, {**old, "schema": old.get("schema") or {}}, schema)
    store.register_dataset(name, {**old, "schema": schema,
                                  "privacy_unit": body.privacy_unit})
    return {"dataset": name, **stored_schema({"schema": schema}).to_dict(),
            "neighbouring": old.get("neighbouring", "add_remove")}
