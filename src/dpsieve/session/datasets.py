"""Registered data sets as query sessions, shared by the service and the CLI
(orchestration only; no web framework here).

A registered data set is a ledger registry record: its source (``path`` or
``spark_table``), the budget's neighbouring relation and its **public schema** -- column
names and types from the table's metadata (a CSV's types are those DuckDB's reader
infers; the owner may declare them), the public domains and bounds the owner declares, and
the **privacy unit** (the column identifying a person; absent: one row per person). The
schema is public metadata: it never holds a value of the data.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from dpsieve._memo import Memo
from dpsieve.accounting.events import Neighbouring
from dpsieve.ledger.base import BudgetNotFoundError, BudgetStore
from dpsieve.queries.schema import Column, ColumnType, Schema

if TYPE_CHECKING:
    from dpsieve.session.core import Session

__all__ = ["registered_schema", "session_for", "spent", "stored_schema", "unit_conflict"]


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
                frame_of: Callable[[str], Any], release_limits: Any = None,
                engine: Any = None) -> Session:
    """The session one query runs in, on ``data`` (the file's path, or a Spark engine):
    plans and the one-aggregation shapes run inside the engine (``engine``, e.g. the
    file's from :class:`FileEngines`; default: one opened for the query); release and the
    robust estimators load the file through ``frame_of(path)`` after the spend."""
    from dpsieve.session.core import Session
    from dpsieve.session.data import data_row_count

    path = src.get("path")
    has_schema = isinstance(src.get("schema"), dict)
    return Session(
        data, store=st, budget_id=name, principal=principal, after_spend=after_spend,
        columns=src.get("columns"),
        column_types=None if has_schema else src.get("column_types"),
        schema=stored_schema(src) if has_schema else None,
        row_count=None if path is None else (lambda: data_row_count(str(path))),
        loader=None if path is None else (lambda: frame_of(str(path))),
        release_limits=release_limits, engine=engine,
        neighbouring=Neighbouring(src.get("neighbouring", "add_remove")))
