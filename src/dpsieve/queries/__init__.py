"""Typed query plans, public schemas with privacy units, and the engines that run them.

See docs/queries.md (users) and docs/queries-engines.md (the engine contract).
"""

from __future__ import annotations

from dpsieve.queries.engine import (
    Aggregates,
    Bins,
    BoundingSpec,
    BucketCount,
    Engine,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
)
from dpsieve.queries.schema import Column, ColumnType, KeyValue, Schema

__all__ = [
    "Aggregates",
    "Bins",
    "BoundingSpec",
    "BucketCount",
    "Column",
    "ColumnType",
    "Engine",
    "KeyValue",
    "Level",
    "Op",
    "Predicate",
    "RowCount",
    "Schema",
    "ValueSum",
]
