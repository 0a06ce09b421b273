"""The values a session's children are given, computed on its data set: a child's public
binding to the data, checked against the schema (:func:`binding`), and the exact answers
of its questions (a sparse vector's one number, a counter's window, an answer cache's
weighted count), each read on the query engine after the public checks; a failure to read
one is one fixed refusal (:func:`value`: nothing asked, the child unchanged).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Mapping
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import DPError, QueryFailedError, UnsupportedError
from dpsieve.interactive.sparse_vector import SparseVector

if TYPE_CHECKING:
    from dpsieve.queries.prepare import Prepared
    from dpsieve.queries.schema import Schema
    from dpsieve.session.core import Session

__all__ = ["binding", "checked", "count", "one_number", "one_row_a_unit", "plan_value",
           "value", "weighted", "window"]

#: The lattice of the values given to an answer cache (its own: 2^-10).
_CACHE_G = Fraction(1, 1024)
_FAILED = ("The question could not be evaluated on the data set; nothing was asked and "
           "the child is unchanged.")


def binding(s: Session, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """The child's public binding to the data, checked against the schema."""
    if kind == "counter":
        col = spec.get("time_column")
        where = spec.get("where", [])
        if col is None:
            if where:
                raise fail("where", "counter spec", "given only with 'time_column'",
                           where)
            return {}
        if not isinstance(col, str):
            raise fail("time_column", "counter spec", "a column name", col)
        if not isinstance(where, list):
            raise fail("where", "counter spec", "a list of predicates", where)
        if s.schema().privacy_unit is not None:
            raise UnsupportedError(
                "A counter stepped by 'until' counts rows, and a privacy unit's rows "
                "may fall in many steps: on a data set with a privacy unit a counter "
                "is stepped by the steward's counts only (open it without "
                "'time_column').")
        t = s.schema().column(col, "time_column", "counter spec")
        if t.type.value not in ("integer", "float"):
            raise fail("time_column", "counter spec", "an integer or float column",
                       col)
        window(s, col, where, 0.0, 1.0)  # the predicates checked on the schema
        return {"time_column": col, "where": where, "until": None}
    if kind == "cache":
        col = spec.get("column")
        if not isinstance(col, str):
            raise fail("column", "cache spec", "the name of the column whose "
                       "categories are the cache's domain", col)
        plan: dict[str, Any] = {"type": "histogram", "column": col}
        if "categories" in spec:
            plan["categories"] = spec["categories"]
        prepared = checked(s, one_row_a_unit(s, plan))
        cats = prepared.spec.measures[0]
        categories = list(getattr(cats, "categories", None) or ())
        return {"column": col, "categories": categories}
    return {}


def checked(s: Session, plan: Mapping[str, Any]) -> Prepared:
    """A plan checked against the schema; the privacy only picks a sum's lattice (the
    child was charged when opened). Memoised on (plan, schema, relation): a pure function
    of public values (an analyst asks the same question many times)."""
    try:
        text = json.dumps(plan, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # not JSON: checked (and refused) without the memo
        return _checked(plan, s.schema(), s.neighbouring)
    return _checked_memo(text, s.schema(), s.neighbouring)


@functools.lru_cache(maxsize=256)
def _checked_memo(text: str, schema: Schema, nb: Neighbouring) -> Prepared:
    return _checked(json.loads(text), schema, nb)


def _checked(plan: Mapping[str, Any], schema: Schema, nb: Neighbouring) -> Prepared:
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare

    q = from_spec({**plan, "privacy": PureDP(1.0, nb).to_dict()}, nb.value)
    return prepare(q, schema, nb)


def one_number(s: Session, plan: Mapping[str, Any], c: SparseVector
               ) -> tuple[Prepared, Any]:
    """A sparse vector's question: one count or sum, of sensitivity at most the
    child's (and, for a monotonic child, nondecreasing under add/remove)."""
    from dpsieve.queries.calibrate import sensitivity
    from dpsieve.queries.plan import Contribution

    owner = "ask"
    prepared = checked(s, plan)
    q = prepared.query
    aggs = q.aggregations
    if len(aggs) != 1 or type(aggs[0]).__name__ not in ("Count", "Sum") or q.group_by:
        raise fail("question", owner, "a plan with one 'count' or 'sum' and no "
                   "group_by (its answer is one number)",
                   [type(a).__name__.lower() for a in aggs])
    part = prepared.plans[0].parts[0]
    rel = part.release
    sv = sensitivity(rel.contrib, (q.contribution or Contribution()).groups, 1,
                     s.neighbouring)
    sens = Fraction(sv.l1) * Fraction(rel.unit)
    if sens > Fraction(c.spec.sensitivity):
        raise fail("question", owner, f"of sensitivity at most the child's "
                   f"{c.spec.sensitivity!r} (this plan's is {float(sens)!r} under "
                   f"{s.neighbouring.value!r})", type(aggs[0]).__name__.lower())
    if c.spec.monotonic:
        lower = getattr(aggs[0], "lower", 0.0)
        if s.neighbouring != Neighbouring.ADD_REMOVE or (lower is None or lower < 0):
            raise fail("question", owner, "a count, or a sum with lower >= 0, under "
                       "add/remove (the child is monotonic)",
                       type(aggs[0]).__name__.lower())
    return prepared, part


def plan_value(s: Session, prepared: Prepared, part: Any) -> float:
    """The exact value of a one-number plan on the data set (its lattice units)."""
    aggs = s._source.engine().aggregate(replace(prepared.spec, seed=0))
    got = part.exact(aggs)
    n = int(got[0][0]) if len(got) else 0
    return float(Fraction(n) * Fraction(part.release.unit))


def window(s: Session, col: str, where: list[Any], prev: float | None, until: float
           ) -> Prepared:
    """A counter's step: the count of rows with ``prev <= col < until`` (and ``where``)."""
    preds = [*where, {"column": col, "op": "<", "value": until}]
    if prev is not None:
        preds.append({"column": col, "op": ">=", "value": prev})
    return checked(s, {"type": "count", "where": preds})


def count(s: Session, prepared: Prepared) -> int:
    """The exact count a prepared one-count plan reads."""
    aggs = s._source.engine().aggregate(replace(prepared.spec, seed=0))
    got = prepared.plans[0].parts[0].exact(aggs)
    return int(got[0][0]) if len(got) else 0


def weighted(s: Session, binding: dict[str, Any], w: list[float]) -> float:
    """An answer cache's question: ``sum_c w_c * rows in c``, exact, on the cache's
    lattice."""
    prepared = checked(s, one_row_a_unit(s, {
        "type": "histogram", "column": binding["column"],
        "categories": binding["categories"]}))
    aggs = s._source.engine().aggregate(replace(prepared.spec, seed=0))
    name = prepared.spec.measures[0].name
    counts = aggs.values[name]
    row = [int(x) for x in counts[0]] if len(counts) else [0] * len(w)
    exact = sum((Fraction(x) * n for x, n in zip(w, row, strict=True)), Fraction(0))
    return float(math.floor(exact / _CACHE_G + Fraction(1, 2)) * _CACHE_G)


def one_row_a_unit(s: Session, plan: dict[str, Any]) -> dict[str, Any]:
    """A cache's histogram keeps one row of each privacy unit (sensitivity 1)."""
    if s.schema().privacy_unit is not None:
        return {**plan, "contribution": {"max_rows": 1}}
    return plan


def value(compute: Any) -> Any:
    """``compute()``; any failure but a refusal is one fixed refusal (nothing asked)."""
    try:
        return compute()
    except DPError:
        raise
    except Exception:  # the engine's message may quote a value: one fixed text
        raise QueryFailedError(_FAILED) from None
