"""Registered data sets as query sessions, shared by the service and the CLI
(orchestration only; no web framework here).

A registered data set is a ledger registry record: its source (``path`` or
``spark_table``), the budget's neighbouring relation and its **public schema** -- column
names and types from the table's metadata and the owner's declarations (a CSV file's
columns are text until declared: its values never choose a type; the owner may declare
any type), the public domains and bounds the owner declares, and
the **privacy unit** (the column identifying a person; absent: one row per person). The
schema is public metadata: it never holds a value of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpsieve._memo import Memo
from dpsieve.accounting.events import Neighbouring
from dpsieve.ledger.base import BudgetNotFoundError, BudgetStore
from dpsieve.queries.schema import Column, ColumnType, Schema

if TYPE_CHECKING:
    from dpsieve.session.core import Session

__all__ = ["declaration_types", "registered_schema", "session_for", "source_types", "spent",
           "stored_schema", "unit_conflict", "unit_warnings", "with_inferred"]


#: Stored schemas parsed (Schema is immutable), keyed by the stored value's repr.
_SCHEMAS: Memo[Schema] = Memo(256)


def registered_schema(actual: Callable[[], tuple[Column, ...]],
                      declared: Sequence[dict[str, Any]] | None,
                      privacy_unit: str | None) -> dict[str, Any]:
    """The schema to store at registration: the table's column types (``actual()``, from
    metadata) with the owner's declarations, and the privacy unit (a ValidationError
    naming the parameter if a declared column or the unit is not a column of the table,
    raised before anything is written)."""
    from dpsieve.session.schema import resolve_schema

    cols = None if declared is None else [Column.from_dict(c) for c in declared]
    return resolve_schema(cols, privacy_unit, actual).to_dict()


def with_inferred(path: str, declared: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The owner's declarations completed with the types DuckDB's reader guesses for the
    other columns of a CSV file (:func:`dpsieve.queries.engines.files.infer_types`; the
    owner asked for it at registration: it is stored as their declaration)."""
    from dpsieve.queries.engines.files import infer_types

    out = list(declared or [])
    named = {d.get("name") for d in out if isinstance(d, Mapping)}
    out += [{"name": n, "type": t} for n, t in infer_types(path).items() if n not in named]
    return out


def declaration_types(declared: Sequence[Mapping[str, Any]] | None) -> dict[str, ColumnType]:
    """The types of the owner's column declarations (each checked as a
    :class:`~dpsieve.queries.schema.Column`): a file is read as these at registration."""
    return {c.name: c.type for c in (Column.from_dict(d) for d in declared or ())}


#: A privacy unit missing on at least this fraction of the rows is reported to the owner.
MOSTLY_NULL = 0.5


def unit_warnings(path: str, types: Mapping[str, Any] | None, unit: str | None
                  ) -> list[str]:
    """What the data owner should know about the privacy unit column at registration (a
    diagnostic for the owner only: it reads the data, and is never on an analyst's path):
    rows whose unit is missing are dropped from every query, so a unit column that is all
    or mostly missing answers (almost) pure noise, charged."""
    from dpsieve.queries.engines.files import unit_nulls

    if unit is None:
        return []
    rows, nulls = unit_nulls(path, types, unit)
    if rows and nulls == rows:
        return [f"The privacy unit column {unit!r} is missing (empty, NULL or not of its "
                f"declared type) on every row ({rows}): every query would drop every row "
                "and answer pure noise, charged. Check the column or its declared type."]
    if rows and nulls >= MOSTLY_NULL * rows:
        return [f"The privacy unit column {unit!r} is missing on {nulls} of {rows} rows "
                f"({nulls / rows:.0%}): those rows are dropped from every query."]
    return []


def source_types(src: dict[str, Any], schema: Schema | None = None) -> dict[str, ColumnType]:
    """A registered data set's declared column types (its stored schema's; older
    registrations: the stored column types): its file is read as these. ``schema``:
    ``stored_schema(src)``, if the caller has it already."""
    from dpsieve.session.schema import declared_types

    if isinstance(src.get("schema"), dict):
        return declared_types(schema if schema is not None else stored_schema(src))
    return declared_types(None, src.get("column_types") or {})


def stored_schema(src: dict[str, Any]) -> Schema:
    """A registered data set's schema (older registrations: from the stored column types,
    without a privacy unit)."""
    d = src.get("schema")
    if isinstance(d, dict):
        # the same stored schema is parsed on every query: remembered by its exact
        # rendering (repr tells str, int, float, bool, None, list, tuple and dict apart,
        # and floats round-trip), so a hit is what Schema.from_dict(d) returns
        return _SCHEMAS.get(repr(d), lambda: Schema.from_dict(d))
    kinds = src.get("column_types") or {}
    return Schema(tuple(Column(str(n), ColumnType(str(t))) for n, t in kinds.items()))


def spent(st: BudgetStore, name: str) -> bool:
    """Whether the budget of ``name`` has paid for a query (no budget: it has not)."""
    try:
        return bool(st.history(name))
    except BudgetNotFoundError:
        return False


def unit_conflict(st: BudgetStore, name: str, old: dict[str, Any],
                  unit: str | None) -> str | None:
    """Why the privacy unit of ``name`` may not change to ``unit`` (``None``: it may): the
    answers its budget already paid for protected the old unit, not the new one."""
    if not old or old.get("privacy_unit") == unit:
        return None
    if not spent(st, name):
        return None
    return (f"The privacy unit of {name!r} cannot change from {old.get('privacy_unit')!r} "
            f"to {unit!r}: its budget has already paid for queries protecting the old "
            "unit. Register the data under a new name.")


def session_for(src: dict[str, Any], data: Any, st: BudgetStore, name: str, principal: str,
                after_spend: Callable[[str], None] | None,
                frame_of: Callable[..., Any], release_limits: Any = None,
                engine: Any = None, schema: Schema | None = None) -> Session:
    """The session one query runs in, on ``data`` (the file's path, or a Spark engine):
    plans and the one-aggregation shapes run inside the engine (``engine``, e.g. the
    file's from :class:`FileEngines`; default: one opened for the query); release and the
    robust estimators load the file through ``frame_of(path, types)`` after the spend.
    The session is a registered data set's (``dataset=``): its public schema is the
    stored one, and a source that cannot be read as registered is refused naming the
    data set only. ``schema``: ``stored_schema(src)``, if the caller has it already."""
    from dpsieve.session.core import Session
    from dpsieve.session.data import data_row_count

    path = src.get("path")
    has_schema = isinstance(src.get("schema"), dict)
    if has_schema and schema is None:
        schema = stored_schema(src)
    return Session(
        data, store=st, budget_id=name, principal=principal, after_spend=after_spend,
        columns=src.get("columns"),
        column_types=None if has_schema else src.get("column_types"),
        schema=schema if has_schema else None,
        row_count=None if path is None else (lambda: data_row_count(str(path))),
        loader=None if path is None else (lambda: frame_of(str(path),
                                                           source_types(src, schema))),
        release_limits=release_limits, engine=engine, dataset=name,
        neighbouring=Neighbouring(src.get("neighbouring", "add_remove")))
