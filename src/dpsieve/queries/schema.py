"""The public schema of a data set: column names and types, optional public domains and
bounds, and the privacy unit.

A schema is public metadata: analysts may read it (``Schema.to_dict``), and every check
that can be made against it -- unknown columns, wrong types, repeated or equal categories,
bounds -- is made before any budget is spent. It never holds a value of the data, only
what the data steward declares or what an engine reports from the table's metadata
(:meth:`dpsieve.queries.engine.Engine.columns`).

Each column also carries its **storage type** (:attr:`Column.storage`), the physical type
the engine reports from the table's metadata (DuckDB's names: ``INTEGER``, ``UBIGINT``,
``FLOAT``, ...). Constants, keys and categories of an integer column are checked against
its storage type's range before any spend (:func:`integer_range`): a value no row can hold
is refused, never handed to an engine, where a failing cast could depend on the rows.

The **privacy unit** is a column identifying the person (or other unit protected): the
budget's neighbouring relation is then the addition or removal of *all* rows of one unit.
Without it every row is its own unit.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

from dpsieve._validation import fail

__all__ = [
    "Column",
    "ColumnType",
    "KeyValue",
    "Schema",
    "canonical_value",
    "canonical_values",
    "finite_number",
    "integer_range",
]

#: A public value that can be compared with a column: a category, a group key, a constant.
KeyValue: TypeAlias = int | float | str | bool | None


class ColumnType(StrEnum):
    """The public type of a column. ``OTHER`` columns (dates, lists, ...) cannot be used in
    queries yet."""

    INTEGER = "integer"
    FLOAT = "float"
    STRING = "string"
    BOOLEAN = "boolean"
    OTHER = "other"

    @property
    def numeric(self) -> bool:
        return self in (ColumnType.INTEGER, ColumnType.FLOAT, ColumnType.BOOLEAN)

    @property
    def hashable(self) -> bool:
        """Types a privacy unit or an observed (DP-selected) group key may have."""
        return self in (ColumnType.INTEGER, ColumnType.STRING, ColumnType.BOOLEAN)


#: The value range of each integer storage type (DuckDB's names; the frame and Spark
#: engines report theirs in the same names).
_INT_RANGES: dict[str, tuple[int, int]] = {
    "TINYINT": (-(2**7), 2**7 - 1), "SMALLINT": (-(2**15), 2**15 - 1),
    "INTEGER": (-(2**31), 2**31 - 1), "BIGINT": (-(2**63), 2**63 - 1),
    "HUGEINT": (-(2**127), 2**127 - 1), "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1), "UINTEGER": (0, 2**32 - 1), "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1)}


def integer_range(storage: str | None) -> tuple[int, int]:
    """The least and greatest value of an integer column stored as ``storage``. Unknown
    (``None`` or a name not listed): ``BIGINT``'s, a range every engine binds and
    compares constants in (the engines also treat a constant outside a column's range as
    equal to no value, so this check is the refusal's, not their safety's)."""
    return _INT_RANGES.get((storage or "BIGINT").upper(), _INT_RANGES["BIGINT"])


def finite_number(x: Any) -> bool:
    """Whether ``x`` is an int or float (not a bool) of finite double value (an int
    beyond the doubles is not: ``math.isfinite`` would raise OverflowError on it)."""
    if isinstance(x, bool) or not isinstance(x, int | float):
        return False
    try:
        return math.isfinite(float(x))
    except OverflowError:
        return False


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: no engine can hold or compare it
        return False
    return True


def canonical_value(ctype: ColumnType, value: Any, name: str, owner: str,
                    storage: str | None = None, *, ranged: bool = True) -> KeyValue:
    """``value`` as the column type's canonical Python value, or a ValidationError.

    Integers: ``int`` (an integral float such as ``20.0`` becomes ``20``) inside the range
    of the column's storage type (:func:`integer_range`; a value outside it could never
    be equal to a row's, and an engine asked to cast it may fail on the rows it reaches);
    floats: finite ``float`` (``-0.0`` becomes ``0.0``, so equal values compare equal);
    strings: ``str`` only (``1`` is not ``"1"``), valid Unicode (no lone surrogate);
    booleans: ``bool`` only. So ``[20, 20.0]`` on a numeric column is a repeat, and
    ``"20"`` on it a type error. The message names the parameter and the public
    constraint, and echoes the caller's own value. ``ranged=False`` skips the range
    check (a declaration, checked against the storage type when a query uses it).
    """
    if ctype == ColumnType.INTEGER:
        if isinstance(value, bool):
            raise fail(name, owner, "an integer (the column's type)", value)
        if isinstance(value, float) and math.isfinite(value) and value.is_integer():
            value = int(value)
        if not isinstance(value, int):
            raise fail(name, owner, "an integer (the column's type)", value)
        lo, hi = integer_range(storage) if ranged else (-(2**127), 2**128 - 1)
        if not lo <= value <= hi:
            kind = (storage or "BIGINT").upper()
            raise fail(name, owner, f"an integer in [{lo}, {hi}] (the range of the "
                       f"column's storage type {kind})", value)
        return int(value)
    if ctype == ColumnType.FLOAT:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail(name, owner, "a finite number (the column's type)", value)
        try:
            x = float(value)
        except OverflowError:  # an int beyond the double range
            x = math.inf
        if not math.isfinite(x):
            raise fail(name, owner, "a finite number (the column's type)", value)
        return x + 0.0  # -0.0 -> 0.0
    if ctype == ColumnType.STRING:
        if not isinstance(value, str):
            raise fail(name, owner, "a string (the column's type)", value)
        if not _utf8(value):
            raise fail(name, owner, "a string of valid Unicode (no lone surrogate)",
                       value.encode("utf-8", "backslashreplace").decode("ascii"))
        return value
    if ctype == ColumnType.BOOLEAN:
        if not isinstance(value, bool):
            raise fail(name, owner, "a boolean (the column's type)", value)
        return value
    raise fail(name, owner, "a value of a column of type integer, float, string or boolean",
               value)


def canonical_values(ctype: ColumnType, values: Any, name: str, owner: str, *,
                     max_len: int = 100_000, storage: str | None = None,
                     ranged: bool = True) -> tuple[KeyValue, ...]:
    """A non-empty list of distinct canonical values (repeats refused *after*
    canonicalisation: ``[20, 20.0]`` is a repeat on a numeric column)."""
    if not isinstance(values, list | tuple) or not values or len(values) > max_len:
        raise fail(name, owner, f"a non-empty list of at most {max_len} values", values)
    out = tuple(canonical_value(ctype, v, name, owner, storage, ranged=ranged)
                for v in values)
    if len(set(out)) != len(out):
        raise fail(name, owner, "a list without repeated (or equal) values", values)
    return out


@dataclass(frozen=True, slots=True)
class Column:
    """One public column: name, type, and optional public domain (``categories``) and
    ``bounds`` (defaults for clipping; declared by the steward, never read from data).

    ``storage`` is the physical type the engine reports from the table's metadata
    (upper-case DuckDB names, e.g. ``INTEGER``; ``None``: not known). It is not part of
    the column's identity (equality ignores it), nor of :meth:`to_dict`: the schema
    stored at registration would hold a stale one after the file changes, so the
    engine's current one is attached when a query's schema is resolved."""

    name: str
    type: ColumnType
    categories: tuple[KeyValue, ...] | None = None
    bounds: tuple[float, float] | None = None
    storage: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if self.storage is not None:
            object.__setattr__(self, "storage", str(self.storage).upper())
        if not isinstance(self.name, str) or not self.name:
            raise fail("name", "Column", "a non-empty string", self.name)
        try:
            object.__setattr__(self, "type", ColumnType(self.type))
        except ValueError:
            raise fail("type", "Column", f"one of {[t.value for t in ColumnType]}",
                       self.type) from None
        if self.categories is not None:
            object.__setattr__(self, "categories", canonical_values(
                self.type, list(self.categories), "categories", f"Column {self.name!r}",
                ranged=False))
        if self.bounds is not None:
            b = self.bounds
            ok = (isinstance(b, tuple | list) and len(b) == 2
                  and all(finite_number(x) for x in b) and b[0] < b[1])
            if not ok or not self.type.numeric:
                raise fail("bounds", f"Column {self.name!r}",
                           "two finite numbers lower < upper on a numeric column", b)
            object.__setattr__(self, "bounds", (float(b[0]), float(b[1])))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "type": self.type.value}
        if self.categories is not None:
            out["categories"] = list(self.categories)
        if self.bounds is not None:
            out["bounds"] = list(self.bounds)
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Column:
        if not isinstance(d, Mapping) or set(d) - {"name", "type", "categories", "bounds"}:
            raise fail("column", "Column.from_dict",
                       "a dict with keys name, type and optionally categories, bounds", d)
        cats = d.get("categories")
        bounds = d.get("bounds")
        return cls(d.get("name"), d.get("type"),  # type: ignore[arg-type]
                   tuple(cats) if isinstance(cats, list | tuple) else cats,
                   tuple(bounds) if isinstance(bounds, list | tuple) else bounds)


@dataclass(frozen=True, slots=True)
class Schema:
    """Columns (in table order) and the privacy unit column (``None``: one row per unit)."""

    columns: tuple[Column, ...]
    privacy_unit: str | None = None
    _index: dict[str, Column] = field(default_factory=dict, init=False, repr=False,
                                      compare=False)

    def __post_init__(self) -> None:
        cols = tuple(self.columns)
        if not cols or not all(isinstance(c, Column) for c in cols):
            raise fail("columns", "Schema", "a non-empty sequence of Column", self.columns)
        names = [c.name for c in cols]
        if len(set(names)) != len(names):
            raise fail("columns", "Schema", "columns with distinct names", names)
        object.__setattr__(self, "columns", cols)
        self._index.update({c.name: c for c in cols})
        if self.privacy_unit is not None:
            unit = self.column(self.privacy_unit, "privacy_unit", "Schema")
            if not unit.type.hashable:
                raise fail("privacy_unit", "Schema", "a column of type integer, string or "
                           f"boolean (got a {unit.type.value} column)", self.privacy_unit)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def column(self, name: Any, parameter: str = "column", owner: str = "query") -> Column:
        """The column called ``name``; a ValidationError naming ``parameter`` otherwise."""
        if not isinstance(name, str) or name not in self._index:
            raise fail(parameter, owner, "a column of the data set "
                       f"({', '.join(sorted(self._index)[:20])})", name)
        return self._index[name]

    def with_unit(self, privacy_unit: str | None) -> Schema:
        return Schema(self.columns, privacy_unit)

    def with_columns(self, overrides: Iterable[Column]) -> Schema:
        """The schema with some columns' declarations replaced (same names, any order)."""
        new = {c.name: c for c in overrides}
        for n in new:
            self.column(n, "columns", "Schema.with_columns")
        return Schema(tuple(new.get(c.name, c) for c in self.columns), self.privacy_unit)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready public schema (names, types, declared domains and bounds, unit)."""
        return {"columns": [c.to_dict() for c in self.columns],
                "privacy_unit": self.privacy_unit}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Schema:
        if not isinstance(d, Mapping) or not isinstance(d.get("columns"), list):
            raise fail("schema", "Schema.from_dict", "a dict with a 'columns' list", d)
        return cls(tuple(Column.from_dict(c) for c in d["columns"]), d.get("privacy_unit"))

    @classmethod
    def of(cls, columns: Sequence[tuple[str, str]], privacy_unit: str | None = None) -> Schema:
        """Shorthand: ``Schema.of([("age", "integer"), ("city", "string")], "pid")``."""
        return cls(tuple(Column(n, ColumnType(t)) for n, t in columns), privacy_unit)
