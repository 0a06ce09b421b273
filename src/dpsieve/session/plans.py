"""The session's side of the query layer: a data set's public schema and how a plan's
answer is stored and read back (orchestration only; the privacy is decided in
:mod:`dpsieve.queries`; the engine a source runs on is
:func:`dpsieve.queries.engines.resolve.engine_for`'s).

* :func:`resolve_schema` -- the public :class:`~dpsieve.queries.schema.Schema`: the
  steward's declaration (types, public domains and bounds) over the types the engine
  reports from the table's metadata, with the privacy unit. Built before any spend, from
  metadata only (a CSV's types are those DuckDB's reader infers from the file; declare them
  to fix them).
* :func:`legacy_stored` -- a one-aggregation shape's answer in its stored form.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpsieve._memo import Memo
from dpsieve._validation import fail
from dpsieve.queries.plan import Query
from dpsieve.queries.prepare import Prepared
from dpsieve.queries.result import Answer
from dpsieve.queries.schema import Column, ColumnType, Schema

__all__ = ["declared_unit", "is_file", "is_plan", "legacy_stored", "resolve_schema"]


def is_plan(spec: Any) -> bool:
    """True for a typed plan or the JSON of one (``{"type": "query", ...}``)."""
    return isinstance(spec, Query) or (isinstance(spec, Mapping) and spec.get("type") == "query")


def is_file(data: Any) -> bool:
    return isinstance(data, str | Path)


#: resolve_schema's results for (declared Schema, table columns, unit), by identity.
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
    actual: Callable[[], tuple[Column, ...]] | None,
    column_types: Mapping[str, str] | None = None,
) -> Schema:
    """The public schema: declared columns over the table's (``actual()``: from metadata;
    ``None`` when the source cannot say without loading, e.g. a lazy loader with
    ``column_types``). A declared column absent from the table, or of another type than
    the table's, is refused (the engine would disagree with the checks made on it)."""
    cols = _declared(schema)[0]
    unit = declared_unit(schema, privacy_unit)
    table: tuple[Column, ...] | None = None
    if column_types is not None:
        table = tuple(Column(str(n), ColumnType(str(t))) for n, t in column_types.items())
    elif actual is not None:
        table = actual()
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
        hit = _RESOLVED.get((id(schema), id(t), unit),
                            lambda: (schema, t, _resolved(cols, unit, t)))
        if hit[0] is schema and hit[1] is t:
            return hit[2]
    return _resolved(cols, unit, table)


def _resolved(cols: tuple[Column, ...], unit: str | None, table: tuple[Column, ...]) -> Schema:
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


def legacy_stored(kind: str, prepared: Prepared, answer: Answer) -> dict[str, Any]:
    """The stored answer of a one-aggregation shape in its earlier form: ``value`` (a
    number; ``{"categories", "counts"}``; ``{"answers"}``), ``noise`` in user terms
    (mechanism, scale, std, ci95; a mean's ``sum`` and ``count``), ``interval`` (95 %),
    ``details`` (lattice internals)."""
    est = answer.groups[0].estimates[0]
    label = answer.labels[0]
    parts = answer.noise[label]
    short = {name: name.split(".", 1)[1] for name in parts}
    value: Any = est.value
    if kind == "histogram":
        m = prepared.spec.measures[0]
        cats = list(getattr(m, "categories", None) or [])
        value = {"categories": cats, "counts": est.value}
    elif kind == "linear":
        value = {"answers": est.value}
    if len(parts) == 1:
        (name, noise), = parts.items()
        noise_d: dict[str, Any] = noise.to_dict()
        details: dict[str, Any] = dict(answer.details[name])
    else:
        noise_d = {short[n]: v.to_dict() for n, v in parts.items()}
        details = {short[n]: answer.details[n] for n in parts}
    iv: Any = est.interval
    iv = list(iv) if isinstance(iv, tuple) else [list(x) for x in iv] if iv else None
    return {"value": value, "noise": noise_d, "interval": iv, "details": details}
