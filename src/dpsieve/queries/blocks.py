"""Which blocks a plan may read, decided from the plan and public metadata only.

A data set with blocks declares a **block column** (a day, a month, a partition key) and
the blocks that have arrived (public values of that column). A plan is charged to every
declared block its ``where`` **may** read and runs on those blocks only:

* :func:`blocks_read` evaluates the plan's predicates on the block column for each
  declared block value, in three-valued logic (a predicate on another column is
  *unknown*, and so is a comparison it cannot decide): a block is read unless some
  predicate is *false* for its value. Rows are never looked at, so a block with no
  matching row is charged like any other (a charge may not depend on the data).
* :func:`restrict` adds ``block_column in (those blocks)`` to the plan, so the engine
  reads no row of any other block -- nor a row whose block is undeclared or missing. The
  charge therefore covers every row the plan reads whatever the evaluation says
  (docs/proofs/blocks.md §2): the three-valued evaluation only has to be as close to the
  engine's semantics as possible for the answer to be the one asked for.

Comparisons follow the engines': strings by code point (UTF-8 byte order), numbers by
value; a comparison between a string and a number is unknown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dpsieve._validation import fail
from dpsieve.queries.engine import Op, Predicate
from dpsieve.queries.plan import Query
from dpsieve.queries.schema import Column, ColumnType, KeyValue, canonical_value

__all__ = ["BLOCK_TYPES", "blocks_read", "canonical_block", "restrict"]

#: Column types a block column may have.
BLOCK_TYPES = (ColumnType.INTEGER, ColumnType.STRING)


def canonical_block(column: Column, value: object, owner: str = "blocks") -> KeyValue:
    """A block value as the column's canonical value (an ``int`` or a ``str``), or a
    ValidationError naming ``block``."""
    if column.type not in BLOCK_TYPES:
        raise fail("column", owner, "a column of type integer or string", column.name)
    return canonical_value(column.type, value, "block", owner, column.storage)


def _comparable(a: KeyValue, b: KeyValue) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str)
    return isinstance(a, int | float) and isinstance(b, int | float)


def _truth(p: Predicate, v: KeyValue) -> bool | None:
    """``p`` on a row whose block value is ``v`` (never missing): True, False or None
    (unknown)."""
    op, c = p.op, p.value
    if op == Op.IS_NULL:
        return False
    if op == Op.NOT_NULL:
        return True
    if op in (Op.IN, Op.NOT_IN):
        vals = c if isinstance(c, tuple) else (c,)
        if not all(_comparable(v, x) for x in vals):
            return None
        hit = any(v == x for x in vals)
        return hit if op == Op.IN else not hit
    if c is None or isinstance(c, tuple) or not _comparable(v, c):
        return None
    if op == Op.EQ:
        return v == c
    if op == Op.NE:
        return v != c
    if op == Op.LT:
        return v < c  # type: ignore[operator]
    if op == Op.LE:
        return v <= c  # type: ignore[operator]
    if op == Op.GT:
        return v > c  # type: ignore[operator]
    return v >= c  # type: ignore[operator]


def _canonical(column: Column, p: Predicate) -> Predicate:
    if p.op in (Op.IS_NULL, Op.NOT_NULL):
        return p
    if p.op in (Op.IN, Op.NOT_IN):
        vals = p.value if isinstance(p.value, tuple) else (p.value,)
        return Predicate(p.column, p.op, tuple(
            canonical_value(column.type, x, "value", "where", column.storage) for x in vals))
    return Predicate(p.column, p.op, canonical_value(column.type, p.value, "value", "where",
                                                     column.storage))


def blocks_read(where: Sequence[Predicate], column: Column, blocks: Sequence[KeyValue]
                ) -> list[int]:
    """Indices (into ``blocks``, the declared block values) of the blocks ``where`` may
    read (module docstring). Predicates on the block column are checked against its
    type first (a ValidationError naming the parameter, as the query layer would)."""
    mine = [_canonical(column, p) for p in where if p.column == column.name]
    return [i for i, v in enumerate(blocks) if all(_truth(p, v) is not False for p in mine)]


def restrict(plan: Query, column: str, blocks: Sequence[KeyValue]) -> Query:
    """``plan`` reading only the rows of ``blocks`` (``column in blocks`` added to its
    ``where``). Refused (naming ``where``) when no block is left or the plan already has
    the most predicates a plan may have."""
    if not blocks:
        raise fail("where", "query", "a row filter that may read at least one declared "
                   "block of this data set", "a filter no declared block satisfies")
    if len(plan.where) >= 32:
        raise fail("where", "query", "at most 31 predicates on a data set with blocks (one "
                   "more restricts the rows to the blocks charged)", len(plan.where))
    return replace(plan, where=(*plan.where, Predicate(column, Op.IN, tuple(blocks))))
