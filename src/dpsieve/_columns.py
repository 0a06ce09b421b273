"""Column kinds (public schema) and categories canonicalised against them.

A column's *kind* is public schema, like its name: ``integer``, ``float``, ``boolean``,
``string`` or ``other`` (dates, times, ...). It comes from the schema the data owner
registered (the service and the ledger store it with the column names), from
``Session(column_types=...)``, or else from the frame's dtypes or the file's header as
DuckDB describes it -- never from a private decision at query time. Everything checkable
against it is refused before any spend:

* ``sum``, ``mean`` and the robust estimators need a numeric or boolean column
  (:data:`NUMERIC_KINDS`);
* the categories of ``histogram`` and ``linear`` must be values of the column's kind, and
  pairwise distinct *as values of that kind*: ``20`` and ``20.0`` are one category of a
  numeric column (and ``0.0``, ``-0.0`` another pair), so a repeat would release two noisy
  copies of one count at the price of one.

Counting is done in the same canonical space (:func:`category_counts`): every row is
mapped by a row-wise function to at most one key, and the keys of the categories are
pairwise distinct, so **each row adds 1 to at most one category** -- the fact the charged
sensitivities of histograms and linear workloads rest on (docs/session.md). This holds
whatever pandas does with mixed types, because matching uses Python's exact equality of
canonical keys, never the frame's index lookup.

The kind names are those of :class:`dpsieve.queries.schema.ColumnType`; this module serves
the session's current query path until it moves onto :mod:`dpsieve.queries`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from dpsieve._validation import fail, redacted

__all__ = [
    "KINDS",
    "NUMERIC_KINDS",
    "canonical_categories",
    "category_counts",
    "frame_kinds",
    "kind_of_sql",
    "require_kind",
]

KINDS = ("integer", "float", "boolean", "string", "other")
#: Kinds a sum, mean or robust estimator may read (booleans count as 0/1).
NUMERIC_KINDS = ("integer", "float", "boolean")
_INT64 = 2**63


def kind_of_sql(type_name: str) -> str:
    """The kind of a DuckDB column type (``BIGINT`` -> integer, ``VARCHAR`` -> string, ...)."""
    t = type_name.upper().split("(")[0].strip()
    if t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT", "UHUGEINT", "INT1", "INT2", "INT4", "INT8", "INT", "LONG"):
        return "integer"
    if t in ("DOUBLE", "FLOAT", "REAL", "DECIMAL", "NUMERIC", "FLOAT4", "FLOAT8"):
        return "float"
    if t in ("BOOLEAN", "BOOL"):
        return "boolean"
    if t in ("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR"):
        return "string"
    return "other"


def _kind_of_dtype(dtype: Any) -> str:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    api = pd.api.types
    if isinstance(dtype, pd.CategoricalDtype):
        return _kind_of_dtype(dtype.categories.dtype)
    if api.is_bool_dtype(dtype):
        return "boolean"
    if api.is_integer_dtype(dtype):
        return "integer"
    if api.is_float_dtype(dtype):
        return "float"
    if api.is_string_dtype(dtype) or api.is_object_dtype(dtype):
        return "string"
    return "other"


def frame_kinds(frame: Any) -> dict[str, str]:
    """The kind of every column of a pandas frame, from its dtypes (schema, not values)."""
    return {str(c): _kind_of_dtype(t) for c, t in frame.dtypes.items()}


def require_kind(column: str, kind: str, allowed: Sequence[str], owner: str) -> None:
    """Refuse (before any spend) a query whose column kind is not in ``allowed``."""
    if kind not in allowed:
        raise fail("column", owner, f"a column of kind {' or '.join(allowed)} (the public "
                   f"schema says {column!r} is {kind})", column)


def _number(c: Any) -> bool:
    return isinstance(c, int | float | np.integer | np.floating) and not isinstance(
        c, bool | np.bool_)


def _canonical(c: Any, kind: str) -> Any:
    """The canonical key of a category of a column of ``kind``; None if it is not a value
    of that kind (the caller refuses it)."""
    if kind == "boolean":
        return bool(c) if isinstance(c, bool | np.bool_) else None
    if kind in ("string", "other"):
        return str(c) if isinstance(c, str) else None
    if not _number(c):
        return None
    if isinstance(c, float | np.floating) and not math.isfinite(float(c)):
        return None
    if kind == "integer":
        if isinstance(c, float | np.floating) and not float(c).is_integer():
            return None
        v = int(c)
        return v if -_INT64 <= v < _INT64 else None
    f = float(c)  # a float column holds floats: a category must be one exactly
    return f if f == c else None


def canonical_categories(cats: Any, kind: str, owner: str, *, limit: int) -> list[Any]:
    """Categories as canonical values of the column's kind, refused if any is not a value
    of that kind or two are equal as such values (``20`` and ``20.0``; ``0.0`` and ``-0.0``).

    The message names the offending positions, never the column's data (the categories are
    the analyst's own public input)."""
    if not isinstance(cats, list) or not cats or len(cats) > limit:
        raise fail("categories", owner, f"a non-empty list of at most {limit} values",
                   redacted(cats))
    want = {"integer": "integers (or integral floats) in the int64 range",
            "float": "finite numbers exactly representable as floats",
            "boolean": "booleans", "string": "strings", "other": "strings"}[kind]
    out: list[Any] = []
    first: dict[Any, int] = {}
    for i, c in enumerate(cats):
        key = _canonical(c, kind)
        if key is None:
            raise fail("categories", owner, f"{want} (the column is {kind}); entry {i} is "
                       f"{type(c).__name__} {c!r}", redacted(cats))
        if key in first:
            raise fail("categories", owner, "pairwise distinct values of the column's kind "
                       f"({kind}): entries {first[key]} and {i} are the same value "
                       f"{key!r}, which would release one count twice", redacted(cats))
        first[key] = i
        out.append(key)
    return out


def _row_key(v: Any, kind: str) -> Any:
    """The canonical key of one data value (None: missing or not a value of the kind)."""
    if kind == "boolean":
        return bool(v) if isinstance(v, bool | np.bool_) else None
    if kind == "string":
        return v if isinstance(v, str) else str(v)
    if kind == "other":
        return str(v)
    if not _number(v):
        return None
    if kind == "integer":
        f = float(v) if isinstance(v, float | np.floating) else None
        if f is not None and not f.is_integer():
            return None
        return int(v)
    return float(v)


def category_counts(values: Any, categories: Sequence[Any], kind: str) -> list[int]:
    """Exact counts of the canonical ``categories`` among ``values`` (a pandas Series).

    Each distinct value is mapped once to its canonical key; a row adds to at most one
    category (keys of distinct categories are unequal), whatever the frame's dtypes."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    index = {c: j for j, c in enumerate(categories)}
    out = [0] * len(categories)
    for v, c in values.value_counts(dropna=True).items():
        if pd.isna(v):
            continue
        j = index.get(_row_key(v, kind))
        if j is not None:
            out[j] += int(c)
    return out


