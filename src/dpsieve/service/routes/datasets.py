"""The owner registers data sets (a file on the server or a Spark catalog table, with its
public schema and privacy unit), sets their budgets and grants them to analysts; any key
lists the data sets it sees with their budgets left."""

# no "from __future__ import annotations": FastAPI must see the local Annotated aliases

from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException

from dpsieve._validation import fail
from dpsieve.accounting.events import PrivacyDescription
from dpsieve.errors import DPError
from dpsieve.filters.base import PrivacyFilter
from dpsieve.service.budget_view import blocks_summary_of, budget_text
from dpsieve.service.deps import DatasetName, Owner, ServiceState, Svc, Who
from dpsieve.service.errors import redact_quoted
from dpsieve.service.registration import column_count, resolve_path, with_deadline
from dpsieve.service.routes.schema import schema_change, unit_change
from dpsieve.service.schemas import BudgetIn, DatasetIn, GrantIn
from dpsieve.session import filter_for_budget
from dpsieve.session.data import file_columns
from dpsieve.session.datasets import (
    declaration_types,
    registered_schema,
    spent,
    unit_warnings,
    with_inferred,
)

__all__ = ["budget_filter", "router", "set_budget"]

router = APIRouter()


def budget_filter(body: BudgetIn) -> tuple[PrivacyDescription, PrivacyFilter]:
    """The budget's description and its filter, or a 422 naming ``budget`` for a budget
    whose remaining privacy cannot be stated (e.g. GDP mu = 1e308 overflows)."""
    desc = body.budget()  # JSON to typed values, once (service.schemas)
    flt = filter_for_budget(desc, typical=body.typicals())
    try:  # a budget the filter cannot state (e.g. GDP mu = 1e308 overflows) is refused
        flt.remaining()
        flt.to_json()
    except (ArithmeticError, ValueError):
        raise fail("budget", "budget", "a budget whose remaining privacy can be stated "
                   "in floating point (its parameters are too large)",
                   body.description()) from None
    return desc, flt


def set_budget(svc: ServiceState, name: str, body: BudgetIn) -> dict[str, Any]:
    st = svc.store
    desc, flt = budget_filter(body)
    st.create_budget(name, flt, replace=True)
    src = st.dataset(name) or {}
    st.register_dataset(name, {**src, "neighbouring": desc.neighbouring.value,
                               "budget": desc.to_dict()})
    return {"dataset": name, "budget": desc.to_dict(), "remaining": svc.budget_of(name)}


def _not_spent(svc: ServiceState, name: str) -> None:
    """A budget given with a registration replaces the data set's budget: refused (409)
    before anything is written once that budget has admitted a query (registering again
    never resets a budget)."""
    if spent(svc.store, name):
        raise HTTPException(409, f"The data set {name!r} has a budget that has admitted "
                                 "queries: registering it again keeps that budget (it is "
                                 "never reset); send the registration without 'budget'.")


def declarations(body: DatasetIn) -> list[dict[str, Any]] | None:
    """The owner's column declarations (with ``infer_types``: completed by the types
    DuckDB's reader guesses for a CSV file's other columns)."""
    declared = None if body.columns is None else [
        c.model_dump(exclude_none=True) for c in body.columns]
    if body.infer_types and body.path is not None:
        declared = with_inferred(str(resolve_path(body.path)), declared)
    return declared


def registration_warnings(path: str, types: Any, unit: str | None) -> list[str]:
    """The privacy unit's missing rows, for the owner (:func:`dpsieve.session.datasets.
    unit_warnings`; a file that cannot be counted gives none: it was read already)."""
    try:
        return unit_warnings(path, types, unit)
    except Exception:  # the count is advice; the registration itself succeeded
        return []


def declared_schema(svc: ServiceState, body: DatasetIn, actual: Callable[[], Any],
                    declared: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The public schema to store (checked, with the privacy unit, before any write;
    neither the unit nor the declarations may change once the budget has paid for
    queries, as in ``PUT .../schema``). ``declared``: the declarations (default:
    :func:`declarations` of ``body``)."""
    declared = declarations(body) if declared is None else declared
    schema = registered_schema(actual, declared, body.privacy_unit)
    old = svc.store.dataset(body.name) or {}
    unit_change(svc.store, body.name, old, body.privacy_unit)
    schema_change(svc.store, body.name, old, schema)
    return {"schema": schema, "privacy_unit": body.privacy_unit}


def _blocks(svc: ServiceState, body: DatasetIn, schema: dict[str, Any]
            ) -> dict[str, Any] | None:
    """The registration's block declaration, checked before anything is written."""
    if body.blocks is None:
        return None
    from dpsieve.queries.schema import Schema
    from dpsieve.service.routes.blocks import check_blocks

    return check_blocks(svc, body.name, Schema.from_dict(schema["schema"]), body.blocks)


def _declare(svc: ServiceState, name: str, spec: dict[str, Any] | None) -> dict[str, Any]:
    if spec is None:
        return {}
    svc.store.declare_blocks(name, spec)  # type: ignore[attr-defined]
    return {"blocks": spec}


@router.post("/v1/datasets", status_code=201, tags=["owners"])
def register(body: DatasetIn, _: Owner, svc: Svc) -> dict[str, Any]:
    """Register a file (or a Spark catalog table) with its public schema: column types
    from metadata, the owner's declared types, domains and bounds, and the privacy
    unit (``privacy_unit``: the column identifying a person; absent: one row each)."""
    st = svc.store
    if body.spark_table is not None:  # metadata only: the catalog's column types
        if body.budget is not None:
            budget_filter(body.budget)
            _not_spent(svc, body.name)
        cols = svc.spark_engine(body.spark_table).columns()
        schema_s = declared_schema(svc, body, lambda: cols)
        spec_s = _blocks(svc, body, schema_s)
        old = st.dataset(body.name) or {}
        st.register_dataset(body.name, {
            **{k: v for k, v in old.items() if k != "path"},
            "spark_table": body.spark_table, "columns": [c.name for c in cols],
            "column_types": {c.name: c.type.value for c in cols}, **schema_s})
        out_s: dict[str, Any] = {"dataset": body.name, "spark_table": body.spark_table,
                                 **schema_s["schema"], **_declare(svc, body.name, spec_s)}
        if body.budget is not None:
            out_s.update(set_budget(svc, body.name, body.budget))
        return out_s
    assert body.path is not None  # the model requires exactly one source
    path = resolve_path(body.path)  # a symlink loop or no such file: 422 naming 'path'
    if body.budget is not None:
        budget_filter(body.budget)  # validate before anything is written
        _not_spent(svc, body.name)
    old = st.dataset(body.name) or {}
    limits = svc.settings

    def metadata() -> tuple[Any, dict[str, Any], Any]:
        column_count(path, limits.max_columns)  # bounded: the header or the footer
        declared = declarations(body)
        types = declaration_types(declared)
        # the types the engine reads: metadata and the declarations, never values
        return declared, types, file_columns(path, types)
    try:
        declared, types, table = with_deadline(limits.registration_timeout, metadata,
                                               str(path))
    except DPError:
        raise
    except Exception as e:  # an unreadable file is the owner's input error
        raise HTTPException(422, "'path' could not be read as a table: "
                                 f"{redact_quoted(str(e))}") from None
    schema = declared_schema(svc, body, lambda: table, declared)
    spec = _blocks(svc, body, schema)
    st.register_dataset(body.name, {
        **old, "path": str(path), "columns": [c.name for c in table],
        "column_types": {c["name"]: c["type"] for c in schema["schema"]["columns"]},
        **schema})
    out: dict[str, Any] = {"dataset": body.name, "path": str(path), **schema["schema"],
                           **_declare(svc, body.name, spec)}
    warnings = registration_warnings(str(path), types, body.privacy_unit)
    if warnings:  # to the owner only (this is the owner's route)
        out["warnings"] = warnings
    if body.budget is not None:
        out.update(set_budget(svc, body.name, body.budget))
    return out


@router.put("/v1/datasets/{name}/budget", tags=["owners"])
def put_budget(name: DatasetName, body: BudgetIn, _: Owner, svc: Svc) -> dict[str, Any]:
    if svc.store.dataset(name) is None:
        raise HTTPException(404, f"No data set named {name!r}.")
    return set_budget(svc, name, body)


@router.post("/v1/datasets/{name}/grants", status_code=201, tags=["owners"])
def grant(name: DatasetName, body: GrantIn, _: Owner, svc: Svc) -> dict[str, Any]:
    svc.store.grant(body.analyst, name)
    return {"dataset": name, "analyst": body.analyst}


def _listed(svc: ServiceState, name: str) -> dict[str, Any]:
    """One data set in the list: its budget left; a data set with blocks (no budget of its
    own) names its block column, how many blocks and the budget each has (public
    metadata: :func:`dpsieve.session.blocks_view.blocks_summary`)."""
    st = svc.store
    remaining = svc.budget_of(name)
    if remaining:
        return {"dataset": name, "remaining": remaining, "budget_left": budget_text(st, name)}
    summary = blocks_summary_of(st, name)
    if summary is None:
        return {"dataset": name, "remaining": {}, "budget_left": None}
    return {"dataset": name, "remaining": {}, "budget_left": summary["text"],
            "blocks": summary}


@router.get("/v1/datasets", tags=["analysts"])
def list_datasets(p: Who, svc: Svc) -> list[dict[str, Any]]:
    st = svc.store
    names = st.datasets() if p.role == "owner" else st.grants(p.name)
    return [_listed(svc, n) for n in names]
