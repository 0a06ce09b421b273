"""Which blocks a plan's where may read (dpsieve.queries.blocks): three-valued, from the
plan and the declared blocks only, and never missing a block one of whose rows the
engine's semantics would keep."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries.blocks import blocks_read, canonical_block, restrict
from dpsieve.queries.engine import Op, Predicate
from dpsieve.queries.engines.reference import _holds
from dpsieve.queries.plan import Count, Query
from dpsieve.queries.schema import Column, ColumnType

DAY = Column("day", ColumnType.STRING)
PART = Column("part", ColumnType.INTEGER)
DAYS = ["2024-01-01", "2024-01-02", "2024-01-03", "2024-02-01"]


def _w(col: str, op: str, v: object = None) -> Predicate:
    return Predicate(col, Op(op), tuple(v) if isinstance(v, list) else v)


@pytest.mark.parametrize(("where", "expect"), [
    ([], [0, 1, 2, 3]),
    ([_w("day", ">=", "2024-01-02")], [1, 2, 3]),
    ([_w("day", ">=", "2024-01-02"), _w("day", "<", "2024-02")], [1, 2]),
    ([_w("day", "==", "2024-01-05")], []),
    ([_w("day", "in", ["2024-01-01", "2024-02-01"])], [0, 3]),
    ([_w("day", "not_in", ["2024-01-01"])], [1, 2, 3]),
    ([_w("day", "!=", "2024-01-01"), _w("age", ">", 30)], [1, 2, 3]),
    ([_w("day", "is_null")], []),
    ([_w("day", "not_null")], [0, 1, 2, 3]),
    ([_w("age", "==", 3)], [0, 1, 2, 3]),  # another column: unknown, every block
])
def test_string_blocks(where: list[Predicate], expect: list[int]) -> None:
    assert blocks_read(where, DAY, DAYS) == expect


def test_integer_blocks_compare_by_value_and_refuse_strings() -> None:
    parts = [1, 2, 3, 10]
    with pytest.raises(ValidationError):  # as the query layer refuses it
        blocks_read([_w("part", "<", 2.5)], PART, parts)
    assert blocks_read([_w("part", "<", 3.0)], PART, parts) == [0, 1]
    assert blocks_read([_w("part", "<=", 3), _w("part", ">", 1)], PART, parts) == [1, 2]
    with pytest.raises(ValidationError):
        blocks_read([_w("part", "==", "3")], PART, parts)
    with pytest.raises(ValidationError):
        canonical_block(Column("x", ColumnType.FLOAT), 1.0)
    assert canonical_block(PART, 3.0) == 3


def test_restrict_adds_the_blocks_charged_and_refuses_none() -> None:
    q = Query((Count(),), PureDP(1.0), where=(_w("day", ">", "2024-01-01"),))
    r = restrict(q, "day", DAYS[1:3])
    assert r.where[-1] == Predicate("day", Op.IN, tuple(DAYS[1:3]))
    assert r.where[:-1] == q.where
    assert r.privacy == q.privacy
    with pytest.raises(ValidationError) as e:
        restrict(q, "day", [])
    assert e.value.parameter == "where"
    full = Query((Count(),), PureDP(1.0), where=tuple(_w("age", ">", i) for i in range(32)))
    with pytest.raises(ValidationError):
        restrict(full, "day", DAYS)


_ops = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not_in", "is_null",
                        "not_null"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["part", "age"]), _ops,
                          st.lists(st.integers(0, 6), min_size=1, max_size=3)),
                max_size=4),
       st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.integers(0, 6))),
                max_size=20))
def test_no_block_the_engine_would_read_is_left_out(
        preds: list[tuple[str, str, list[int]]], rows: list[tuple[int, int | None]]) -> None:
    where = []
    for col, op, vals in preds:
        v: object = vals if op in ("in", "not_in") else (
            None if op in ("is_null", "not_null") else vals[0])
        where.append(_w(col, op, v))
    blocks = list(range(7))
    read = set(blocks_read(where, PART, blocks))
    for part, age in rows:
        row = {"part": part, "age": age}
        if all(_holds(row, p) for p in where):
            assert part in read
