"""The service's schema memos: a stored schema parsed once per exact value, a resolved
schema once per (stored schema, kept engine's columns) pair; a hit is what a fresh
computation gives, errors are never remembered."""

from __future__ import annotations

import pytest

from dpsieve.errors import ValidationError
from dpsieve.queries.schema import Column, ColumnType, Schema
from dpsieve.session.datasets import stored_schema
from dpsieve.session.schema import resolve_schema


def _stored(**col: object) -> dict[str, object]:
    return {"schema": {"columns": [{"name": "a", "type": "integer"}, col],
                       "privacy_unit": None}}


@pytest.mark.parametrize("variants", [
    [_stored(name="x", type="integer", categories=[1, 2]),
     _stored(name="x", type="boolean", categories=[True, False]),
     _stored(name="x", type="float", categories=[1.0, 2.0])],
    [_stored(name="x", type="float", bounds=[0.0, 1.0]),
     _stored(name="x", type="float", bounds=[-0.5, 1.0]),
     _stored(name="x", type="float")],
])
def test_stored_schema_is_the_fresh_parse_of_each_value(variants: list[dict]) -> None:
    for src in variants * 2:  # the second round from the memo
        got = stored_schema(src)
        want = Schema.from_dict(src["schema"])  # type: ignore[arg-type]
        assert got == want
        assert got.to_dict() == want.to_dict()
        assert stored_schema(src) is got  # parsed once
    assert len({id(stored_schema(v)) for v in variants}) == len(variants)


def test_a_bad_stored_schema_is_refused_every_time() -> None:
    bad = _stored(name="a", type="integer")  # two columns named 'a'
    for _ in range(2):
        with pytest.raises(ValidationError, match="distinct names"):
            stored_schema(bad)


def test_resolve_schema_is_remembered_for_the_same_objects_only() -> None:
    declared = Schema((Column("a", ColumnType.INTEGER, bounds=(0, 10)),))
    table = (Column("a", ColumnType.INTEGER), Column("b", ColumnType.STRING))
    first = resolve_schema(declared, None, lambda: table)
    assert first == Schema((Column("a", ColumnType.INTEGER, bounds=(0, 10)),
                            Column("b", ColumnType.STRING)))
    assert resolve_schema(declared, None, lambda: table) is first
    with_unit = resolve_schema(declared, "a", lambda: table)
    assert with_unit.privacy_unit == "a"
    assert first.privacy_unit is None
    # another table (e.g. the file changed, the engine reopened): computed again
    other = (Column("a", ColumnType.FLOAT),)
    for _ in range(2):
        with pytest.raises(ValidationError, match="table's type"):
            resolve_schema(declared, None, lambda: other)
    assert resolve_schema(declared, None, lambda: table[:1]).names == ("a",)
