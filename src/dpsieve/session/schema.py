"""A session's public schema (orchestration only; the privacy is decided in
:mod:`dpsieve.queries`).

* :func:`resolve_schema` -- the public :class:`~dpsieve.queries.schema.Schema`: the
  steward's declaration (types, public domains and bounds) over the types the engine
  reports from the table's metadata, with the privacy unit. Built before any spend, from
  metadata and declarations only (a CSV's columns are text unless declared: its values
  never choose a type).
* :func:`declared_unit` -- the privacy unit, from the argument or the declared schema.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from dpsieve._memo import Memo
from dpsieve._validation import fail
from dpsieve.queries.schema import Column, ColumnType, Schema

__all__ = ["declared_types", "declared_unit", "resolve_schema"]


#: resolve_schema's results for (declared Schema, table columns, unit, registered), by
#: identity.
_RESOLVED: Memo[tuple[Schema, tuple[Column, ...], Schema]] = Memo(64)


def _declared(schema: Any) -> tuple[tuple[Column, ...], str | None]:
    if schema is None:
        return (), None
    if isinstance(schema, Schema):
        return schema.columns, schema.privacy_unit
    if isinstance(schema, Mapping):
        s = Schema.from_dict(schema)
        return s.columns, s.privacy_unit
    if isinstance(schema, Sequence) and not isinstance(schema, str):
        cols = tuple(c if isinstance(c, Column) else Column.from_dict(c) for c in schema)
        return cols, None
    raise fail("schema", "Session", "a Schema, its dict, or a list of Column", schema)


def declared_types(schema: Any, column_types: Mapping[str, Any] | None = None
                   ) -> dict[str, ColumnType]:
    """The owner's declared column types: the declared schema's columns and
    ``column_types`` (name -> type name), the latter first. A file's engine reads its
    columns as these types (a CSV file has no others)."""
    out = {str(n): ColumnType(str(t)) for n, t in (column_types or {}).items()}
    out.update({c.name: c.type for c in _declared(schema)[0]})
    return out


def declared_unit(schema: Any, privacy_unit: Any) -> str | None:
    """The privacy unit column: ``privacy_unit``, else the declared schema's (checked equal
    when both are given); ``None``: one row per person."""
    if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
        raise fail("privacy_unit", "Session", "a column name", privacy_unit)
    unit = _declared(schema)[1]
    if privacy_unit is not None and unit is not None and privacy_unit != unit:
        raise fail("privacy_unit", "Session", f"the schema's privacy unit {unit!r} (or absent)",
                   privacy_unit)
    return privacy_unit if privacy_unit is not None else unit


def resolve_schema(
    schema: Any,
    privacy_unit: str | None,
    actual: tuple[Column, ...] | Callable[[], tuple[Column, ...]] | None,
    column_types: Mapping[str, str] | None = None,
    *,
    registered: bool = False,
) -> Schema:
    """The public schema: declared columns over the table's (``actual``: from metadata,
    or a callable reading them, called only when ``column_types`` is not given; ``None``
    when the source cannot say without loading, e.g. a lazy loader with
    ``column_types``). A declared column absent from the table, or of another type than
    the table's, is refused (the engine would disagree with the checks made on it).
    ``registered``: the declared schema is a registered data set's whole public schema;
    columns the table has beyond it are not part of it (a file rewritten after
    registration shows analysts nothing new)."""
    cols = _declared(schema)[0]
    unit = declared_unit(schema, privacy_unit)
    table: tuple[Column, ...] | None = None
    if column_types is not None:
        table = tuple(Column(str(n), ColumnType(str(t))) for n, t in column_types.items())
    elif actual is not None:
        table = actual() if callable(actual) else actual
    if table is None:
        if not cols:
            raise fail("schema", "Session", "the data set's columns (give schema= or "
                       "column_types=)", None)
        return Schema(cols, unit)
    if isinstance(schema, Schema) and type(table) is tuple:
        # the service resolves the same stored Schema over the same kept engine's columns
        # on every query: remembered by the two objects' identities (the memo holds both,
        # so their ids are not reused while remembered; both are immutable)
        t = table
        hit = _RESOLVED.get((id(schema), id(t), unit, registered),
                            lambda: (schema, t, _resolved(cols, unit, t, registered)))
        if hit[0] is schema and hit[1] is t:
            return hit[2]
    return _resolved(cols, unit, table, registered)


def _resolved(cols: tuple[Column, ...], unit: str | None, table: tuple[Column, ...],
              registered: bool = False) -> Schema:
    if registered and cols:  # the registered schema is the whole public one
        names = {c.name for c in cols}
        table = tuple(c for c in table if c.name in names)
    by_name = {c.name: c for c in table}
    for c in cols:
        t = by_name.get(c.name)
        if t is None:
            raise fail("schema", "Session", "columns of the table "
                       f"({', '.join(sorted(by_name)[:20])})", c.name)
        if t.type != c.type:
            raise fail("schema", "Session", f"column {c.name!r} declared with the table's type "
                       f"{t.type.value!r}", c.type.value)
    if not cols:
        return Schema(table, unit)
    # the storage type is the table's (its metadata now), whatever was declared
    cols = tuple(replace(c, storage=by_name[c.name].storage) for c in cols)
    return Schema(table, None).with_columns(cols).with_unit(unit)
