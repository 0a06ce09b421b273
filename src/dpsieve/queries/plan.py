"""Typed, immutable query plans, and their one mapping from JSON.

A :class:`Query` is: aggregations (one or more of :data:`Aggregation`), the privacy to
spend on all of them together, optional row filter (``where``), optional ``group_by`` with
public ``keys`` or DP key ``selection``, and the contribution bounds of a privacy unit.
Plans hold only public values; nothing here reads data. :func:`dpsieve.queries.prepare`
checks a plan against a data set's :class:`~dpsieve.queries.schema.Schema` and turns it
into a charge, an engine spec and a finishing step.

JSON (service, CLI, ``Session.run``)::

    {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
     "aggregations": [{"type": "count"}, {"type": "sum", "column": "x", "lower": 0,
                       "upper": 10, "per": "unit"}],
     "group_by": ["city"], "keys": [["a"], ["b"]],        # or "select": {"delta": 1e-6}
     "where": [{"column": "age", "op": ">=", "value": 18}],
     "contribution": {"max_groups": 4, "max_rows": 10}}

With a privacy unit the contribution bounds must be given: numbers, or ``"auto"`` (the
whole object or one of its fields) for bounds chosen by differentially private quantiles
on ``auto_share`` of the plan's privacy; a numeric aggregation's ``lower`` / ``upper`` may
be ``"auto"`` too (:mod:`dpsieve.queries.auto`, docs/queries.md "Bounds that fit the
data").

The one-aggregation shapes of earlier versions (``{"type": "count" | "sum" | "mean" |
"histogram" | "linear", ...}``) are read as one-aggregation plans (:func:`from_spec`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, TypeAlias

from dpsieve._validation import check_int, fail
from dpsieve.accounting.events import (
    PrivacyDescription,
    description_from_json,
)
from dpsieve.queries.engine import Level, Op, Predicate
from dpsieve.queries.schema import KeyValue, finite_number

__all__ = [
    "AGGREGATION_TYPES",
    "AUTO",
    "DEFAULT_AUTO_SHARE",
    "Aggregation",
    "Contribution",
    "Count",
    "Histogram",
    "KeySelection",
    "Linear",
    "Mean",
    "Quantile",
    "Query",
    "Sum",
    "Variance",
    "aggregation_from_dict",
    "aggregation_to_dict",
    "concrete",
    "from_spec",
    "is_auto",
    "query_to_dict",
]


def _level(v: Any, owner: str) -> Level:
    try:
        return Level(v)
    except ValueError:
        raise fail("per", owner, "'row' or 'unit'", v) from None


#: The value of a bound the plan leaves to the data: chosen by a DP quantile before the
#: main query runs (:mod:`dpsieve.queries.auto`).
AUTO: Literal["auto"] = "auto"
#: The share of a plan's privacy spent on its ``"auto"`` bounds unless ``auto_share``
#: says otherwise (docs/queries.md "Bounds that fit the data").
DEFAULT_AUTO_SHARE = 0.1


def _opt_float(v: Any, name: str, owner: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise fail(name, owner, "a finite number", v)
    try:
        x = float(v)
    except OverflowError:  # an int beyond the doubles
        x = math.inf
    if not math.isfinite(x):
        raise fail(name, owner, "a finite number", v)
    return x


def _bound(v: Any, name: str, owner: str) -> float | Literal["auto"] | None:
    if isinstance(v, str):
        if v != AUTO:
            raise fail(name, owner, "a finite number or 'auto'", v)
        return AUTO
    return _opt_float(v, name, owner)


def concrete(v: float | Literal["auto"] | None, name: str, owner: str) -> float:
    """A bound that has been given as a number (a prepared plan's are)."""
    if v is None or isinstance(v, str):
        raise fail(name, owner, "a finite number", v)
    return v


def is_auto(v: object) -> bool:
    """Whether a bound or contribution field is left to the data (``"auto"``)."""
    return isinstance(v, str) and v == AUTO


@dataclass(frozen=True, slots=True)
class Count:
    """Rows per group (``per="row"``, at most ``max_rows`` per unit and group) or privacy
    units per group (``per="unit"``)."""

    per: Level = Level.ROW
    kind: ClassVar[str] = "count"

    def __post_init__(self) -> None:
        object.__setattr__(self, "per", _level(self.per, "count"))


@dataclass(frozen=True, slots=True)
class Sum:
    """Sum of ``column``. ``per="row"``: each row clipped to [lower, upper]; ``per="unit"``:
    each unit's total in a group clipped to [lower, upper]. Bounds default to the schema's."""

    column: str
    lower: float | Literal["auto"] | None = None
    upper: float | Literal["auto"] | None = None
    per: Level = Level.ROW
    kind: ClassVar[str] = "sum"

    def __post_init__(self) -> None:
        object.__setattr__(self, "per", _level(self.per, self.kind))
        object.__setattr__(self, "lower", _bound(self.lower, "lower", self.kind))
        object.__setattr__(self, "upper", _bound(self.upper, "upper", self.kind))


@dataclass(frozen=True, slots=True)
class Mean:
    """Noisy sum / noisy count (per row, or per unit: the mean of units' totals)."""

    column: str
    lower: float | Literal["auto"] | None = None
    upper: float | Literal["auto"] | None = None
    per: Level = Level.ROW
    kind: ClassVar[str] = "mean"

    def __post_init__(self) -> None:
        object.__setattr__(self, "per", _level(self.per, self.kind))
        object.__setattr__(self, "lower", _bound(self.lower, "lower", self.kind))
        object.__setattr__(self, "upper", _bound(self.upper, "upper", self.kind))


@dataclass(frozen=True, slots=True)
class Variance:
    """Variance of the clipped row values: from noisy count, sum and sum of squares."""

    column: str
    lower: float | Literal["auto"] | None = None
    upper: float | Literal["auto"] | None = None
    kind: ClassVar[str] = "variance"

    def __post_init__(self) -> None:
        object.__setattr__(self, "lower", _bound(self.lower, "lower", self.kind))
        object.__setattr__(self, "upper", _bound(self.upper, "upper", self.kind))


@dataclass(frozen=True, slots=True)
class Quantile:
    """Quantiles of the clipped row values, from a noisy histogram over ``bins`` equal
    public bins of [lower, upper] (post-processing; no exponential mechanism)."""

    column: str
    quantiles: tuple[float, ...] = (0.5,)
    lower: float | Literal["auto"] | None = None
    upper: float | Literal["auto"] | None = None
    bins: int = 64
    kind: ClassVar[str] = "quantile"

    def __post_init__(self) -> None:
        q = self.quantiles
        if (not isinstance(q, tuple | list) or not q or len(q) > 100
                or any(isinstance(x, bool) or not isinstance(x, int | float)
                       or not 0 <= x <= 1 for x in q)):
            raise fail("quantiles", self.kind, "a non-empty list of at most 100 numbers in "
                       "[0, 1]", q)
        object.__setattr__(self, "quantiles", tuple(float(x) for x in q))
        check_int("bins", self.bins, self.kind, minimum=2)
        if self.bins > 4096:
            raise fail("bins", self.kind, "an int in [2, 4096]", self.bins)
        object.__setattr__(self, "lower", _bound(self.lower, "lower", self.kind))
        object.__setattr__(self, "upper", _bound(self.upper, "upper", self.kind))


@dataclass(frozen=True, slots=True)
class Histogram:
    """Rows per public category of ``column`` (default: the schema's declared domain)."""

    column: str
    categories: tuple[KeyValue, ...] | None = None
    kind: ClassVar[str] = "histogram"

    def __post_init__(self) -> None:
        if self.categories is not None:
            if not isinstance(self.categories, tuple | list):
                raise fail("categories", self.kind, "a list of values", self.categories)
            object.__setattr__(self, "categories", tuple(self.categories))


@dataclass(frozen=True, slots=True)
class Linear:
    """W . h for the counts h of the public categories (an m x K workload W)."""

    column: str
    categories: tuple[KeyValue, ...]
    workload: tuple[tuple[float, ...], ...]
    kind: ClassVar[str] = "linear"

    def __post_init__(self) -> None:
        if not isinstance(self.categories, tuple | list):
            raise fail("categories", self.kind, "a list of values", self.categories)
        object.__setattr__(self, "categories", tuple(self.categories))
        w = self.workload
        k = len(self.categories)
        ok = (isinstance(w, tuple | list) and 0 < len(w) <= 1000 and all(
            isinstance(r, tuple | list) and len(r) == k and all(
                finite_number(x)
                for x in r) for r in w))
        if not ok or not any(x != 0 for r in w for x in r):
            raise fail("workload", self.kind, f"a finite non-zero m x {k} matrix, m <= 1000",
                       w)
        object.__setattr__(self, "workload", tuple(tuple(float(x) for x in r) for r in w))


Aggregation: TypeAlias = Count | Sum | Mean | Variance | Quantile | Histogram | Linear
AGGREGATION_TYPES: dict[str, type[Any]] = {
    t.kind: t for t in (Count, Sum, Mean, Variance, Quantile, Histogram, Linear)}


@dataclass(frozen=True, slots=True)
class Contribution:
    """Bounds on one privacy unit: groups (L0) and rows per group (L-infinity; ``None``:
    unbounded, allowed only for per-unit aggregations). Either may be ``"auto"``: chosen
    by a DP quantile of the data before the query runs (:mod:`dpsieve.queries.auto`).
    ``max_groups`` ``None``: not given -- 1 without ``group_by``; refused with one
    (:func:`~dpsieve.queries.prepare.contribution_of`: no silent ``max_groups=1``)."""

    max_groups: int | Literal["auto"] | None = None
    max_rows: int | Literal["auto"] | None = None

    def __post_init__(self) -> None:
        for name in ("max_groups", "max_rows"):
            v = getattr(self, name)
            if isinstance(v, str) and not is_auto(v):
                raise fail(name, "contribution", "an int in [1, 1e6] or 'auto'", v)
        if self.max_groups is not None and not is_auto(self.max_groups):
            check_int("max_groups", self.max_groups, "contribution", minimum=1)
        if self.max_rows is not None and not is_auto(self.max_rows):
            check_int("max_rows", self.max_rows, "contribution", minimum=1)
        for name in ("max_groups", "max_rows"):
            v = getattr(self, name)
            if isinstance(v, int) and v > 1_000_000:
                raise fail(name, "contribution", "an int in [1, 1e6] or 'auto'", v)

    @property
    def auto(self) -> bool:
        """Whether a field is left to the data."""
        return is_auto(self.max_groups) or is_auto(self.max_rows)

    @property
    def groups(self) -> int:
        """``max_groups`` as chosen (1 if not given; refused while ``"auto"``: a prepared
        plan's is not)."""
        if self.max_groups is None:
            return 1
        if not isinstance(self.max_groups, int):
            raise fail("max_groups", "contribution", "a number here ('auto' is chosen by the "
                       "query's auto stage)", self.max_groups)
        return self.max_groups

    @property
    def rows(self) -> int | None:
        """``max_rows`` as chosen (refused while ``"auto"``: a prepared plan's is not)."""
        if isinstance(self.max_rows, str):
            raise fail("max_rows", "contribution", "a number or absent here ('auto' is "
                       "chosen by the query's auto stage)", self.max_rows)
        return self.max_rows


#: How DP key selection may choose groups: "count" thresholds a count the query releases
#: (no privacy set aside), "units" a separate noisy unit count (a ``share`` of the
#: privacy), "auto" the one releasing groups with the fewest units.
SELECTION_BY = ("auto", "count", "units")


@dataclass(frozen=True, slots=True)
class KeySelection:
    """DP key selection: a group is kept when a noisy count of it passes a threshold set
    by ``delta`` (docs/queries.md, "Group-by"). ``by``: ``"count"`` thresholds a count the
    query releases (its own noise; no share of the privacy), ``"units"`` a separate noisy
    unit count on ``share`` of the privacy (default: an equal share beside each
    aggregation), ``"auto"`` (default; ``"units"`` when ``share`` is given) whichever
    releases a group with the fewest units (docs/proofs/queries.md §5)."""

    delta: float
    share: float | None = None
    by: str = "auto"

    def __post_init__(self) -> None:
        if (isinstance(self.delta, bool) or not isinstance(self.delta, int | float)
                or not 0 < self.delta < 1):
            raise fail("delta", "select", "a float in (0, 1)", self.delta)
        if self.share is not None and (isinstance(self.share, bool) or not isinstance(
                self.share, int | float) or not 0 < self.share < 1):
            raise fail("share", "select", "a float in (0, 1)", self.share)
        if self.by not in SELECTION_BY:
            raise fail("by", "select", f"one of {list(SELECTION_BY)}", self.by)
        if self.share is not None:
            if self.by == "count":
                raise fail("share", "select", "absent with by='count' (a released count is "
                           "thresholded: no share is set aside)", self.share)
            object.__setattr__(self, "by", "units")


@dataclass(frozen=True, slots=True)
class Query:
    """A query plan (module docstring). ``weights`` split the privacy between the
    aggregations (default: equally). ``raw``: answers as released; by default they are
    clamped to what the data allow (post-processing): counts and histograms at >= 0, a
    sum of non-negative (non-positive) values at >= 0 (<= 0), means and variances inside
    their bounds; intervals likewise (one that held the true value still does).

    ``contribution``: the privacy unit's bounds (``None``: not given -- refused on a data
    set with a privacy unit, before any spend; ``"auto"``: both fields left to the data).
    ``auto_share``: the share of ``privacy`` the ``"auto"`` bounds spend (only with
    some; default :data:`DEFAULT_AUTO_SHARE`)."""

    aggregations: tuple[Aggregation, ...]
    privacy: PrivacyDescription
    group_by: tuple[str, ...] = ()
    keys: tuple[tuple[KeyValue, ...], ...] | None = None
    selection: KeySelection | None = None
    where: tuple[Predicate, ...] = ()
    contribution: Contribution | None = None
    weights: tuple[float, ...] | None = None
    raw: bool = False
    auto_share: float | None = None

    def __post_init__(self) -> None:
        aggs = self.aggregations
        if (not isinstance(aggs, tuple | list) or not aggs or len(aggs) > 32
                or not all(isinstance(a, tuple(AGGREGATION_TYPES.values())) for a in aggs)):
            raise fail("aggregations", "query", "a list of 1 to 32 aggregations", aggs)
        object.__setattr__(self, "aggregations", tuple(aggs))
        if not isinstance(self.group_by, tuple | list) or len(self.group_by) > 8:
            raise fail("group_by", "query", "a list of at most 8 column names", self.group_by)
        object.__setattr__(self, "group_by", tuple(self.group_by))
        if len(set(self.group_by)) != len(self.group_by):
            raise fail("group_by", "query", "distinct column names", self.group_by)
        if self.keys is not None:
            if not isinstance(self.keys, tuple | list) or not self.keys:
                raise fail("keys", "query", "a non-empty list of key tuples", self.keys)
            object.__setattr__(self, "keys", tuple(
                tuple(k) if isinstance(k, tuple | list) else (k,) for k in self.keys))
        if self.group_by and self.keys is None and self.selection is None:
            raise fail("keys", "query", "the public group keys, or 'select' for DP key "
                       "selection, when grouping", None)
        if self.keys is not None and self.selection is not None:
            raise fail("select", "query", "absent when public keys are given", self.selection)
        if self.selection is not None and not self.group_by:
            raise fail("select", "query", "used only with group_by", self.selection)
        if not self.group_by and self.keys is not None:
            raise fail("keys", "query", "absent without group_by", self.keys)
        if not isinstance(self.where, tuple | list) or len(self.where) > 32:
            raise fail("where", "query", "a list of at most 32 predicates", self.where)
        object.__setattr__(self, "where", tuple(self.where))
        if not isinstance(self.raw, bool):
            raise fail("raw", "query", "a boolean (true: answers as released, no clamping)",
                       self.raw)
        if self.weights is not None:
            w = self.weights
            if (not isinstance(w, tuple | list) or len(w) != len(self.aggregations)
                    or any(isinstance(x, bool) or not isinstance(x, int | float)
                           or not (0 < x < math.inf) for x in w)):
                raise fail("weights", "query", f"{len(self.aggregations)} finite numbers > 0",
                           w)
            object.__setattr__(self, "weights", tuple(float(x) for x in w))
        if is_auto(self.contribution):
            object.__setattr__(self, "contribution", Contribution(AUTO, AUTO))
        if self.contribution is not None and not isinstance(self.contribution, Contribution):
            raise fail("contribution", "query", "an object {max_groups, max_rows} or 'auto'",
                       self.contribution)
        if self.auto_share is not None:
            a = self.auto_share
            if isinstance(a, bool) or not isinstance(a, int | float) or not 0 < a < 1:
                raise fail("auto_share", "query", "a float in (0, 1)", a)
            if not self.auto_fields():
                raise fail("auto_share", "query", "absent unless a bound is 'auto' (the share "
                           "of the privacy the 'auto' bounds spend)", a)
            object.__setattr__(self, "auto_share", float(a))

    def auto_fields(self) -> tuple[str, ...]:
        """The bounds left to the data, as ``"max_groups"``, ``"max_rows"``, and
        ``"<i>.lower"`` / ``"<i>.upper"`` for aggregation ``i`` (empty: none)."""
        out: list[str] = []
        c = self.contribution
        if c is not None:
            out += [n for n in ("max_groups", "max_rows") if is_auto(getattr(c, n))]
        for i, a in enumerate(self.aggregations):
            out += [f"{i}.{n}" for n in ("lower", "upper") if is_auto(getattr(a, n, None))]
        return tuple(out)

    @property
    def share_for_auto(self) -> float:
        """The share of the privacy the ``"auto"`` bounds spend (0 without any)."""
        if not self.auto_fields():
            return 0.0
        return DEFAULT_AUTO_SHARE if self.auto_share is None else self.auto_share


# -- JSON ---------------------------------------------------------------------------------

_AGG_KEYS: dict[str, set[str]] = {
    "count": {"per"}, "sum": {"column", "lower", "upper", "per"},
    "mean": {"column", "lower", "upper", "per"}, "variance": {"column", "lower", "upper"},
    "quantile": {"column", "lower", "upper", "quantiles", "bins"},
    "histogram": {"column", "categories"}, "linear": {"column", "categories", "workload"},
}


def _keys_ok(d: Mapping[str, Any], allowed: set[str], owner: str) -> None:
    extra = sorted(set(d) - allowed)
    if extra:
        raise fail(extra[0], owner, f"one of the accepted keys {sorted(allowed)} (unknown "
                   "key)", d[extra[0]])


def aggregation_from_dict(d: Any) -> Aggregation:
    """One aggregation from JSON (unknown keys refused, each naming the parameter)."""
    if not isinstance(d, Mapping) or d.get("type") not in _AGG_KEYS:
        raise fail("type", "aggregation", f"one of {sorted(_AGG_KEYS)}",
                   d.get("type") if isinstance(d, Mapping) else d)
    t = str(d["type"])
    _keys_ok(d, _AGG_KEYS[t] | {"type"}, t)
    args = {k: v for k, v in d.items() if k != "type"}
    if "column" in _AGG_KEYS[t] and not isinstance(args.get("column"), str):
        raise fail("column", t, "a column name", args.get("column"))
    for k in ("categories", "quantiles"):
        if isinstance(args.get(k), list):
            args[k] = tuple(args[k])
    if t == "linear" and isinstance(args.get("workload"), list):
        args["workload"] = tuple(tuple(r) if isinstance(r, list) else r
                                 for r in args["workload"])
    if t == "linear" and ("categories" not in args or "workload" not in args):
        raise fail("categories" if "categories" not in args else "workload", t,
                   "given", None)
    try:
        out: Aggregation = AGGREGATION_TYPES[t](**args)
    except TypeError as e:
        raise fail("aggregation", t, "well-formed", str(e)) from None
    return out


def _predicate(d: Any) -> Predicate:
    if not isinstance(d, Mapping):
        raise fail("where", "query", "a list of {column, op, value} objects", d)
    _keys_ok(d, {"column", "op", "value"}, "where")
    try:
        op = Op(str(d.get("op")))
    except ValueError:
        raise fail("op", "where", f"one of {[o.value for o in Op]}", d.get("op")) from None
    if not isinstance(d.get("column"), str):
        raise fail("column", "where", "a column name", d.get("column"))
    v = d.get("value")
    if op in (Op.IN, Op.NOT_IN):
        if not isinstance(v, list) or not v or len(v) > 10_000:
            raise fail("value", "where", f"a non-empty list of at most 10000 values for "
                       f"{op.value!r}", v)
        v = tuple(v)
    elif op in (Op.IS_NULL, Op.NOT_NULL):
        if v is not None:
            raise fail("value", "where", f"absent for {op.value!r}", v)
    elif v is None or isinstance(v, list | dict):
        raise fail("value", "where", f"a number, string or boolean for {op.value!r}", v)
    return Predicate(str(d["column"]), op, v)


_QUERY_KEYS = {"type", "aggregations", "privacy", "group_by", "keys", "select", "where",
               "contribution", "weights", "raw", "auto_share"}


def from_spec(spec: Any, neighbouring: str | None = None) -> Query:
    """A plan from JSON: ``{"type": "query", ...}`` or a one-aggregation shape."""
    if not isinstance(spec, Mapping):
        raise fail("spec", "query", "a JSON object", spec)
    t = spec.get("type")
    privacy = description_from_json(spec.get("privacy"), neighbouring)
    common = {k: spec[k] for k in ("where", "contribution", "group_by", "keys", "select")
              if k in spec}
    if t == "query":
        _keys_ok(spec, _QUERY_KEYS, "query")
        aggs = spec.get("aggregations")
        if not isinstance(aggs, list):
            raise fail("aggregations", "query", "a list of aggregations", aggs)
        parsed = tuple(aggregation_from_dict(a) for a in aggs)
        weights = spec.get("weights")
    elif t in _AGG_KEYS:
        _keys_ok(spec, _AGG_KEYS[t] | {"type", "privacy", "where", "contribution"}, t)
        parsed = (aggregation_from_dict({k: v for k, v in spec.items()
                                         if k not in ("privacy", "where", "contribution")}),)
        weights = None
        common.pop("group_by", None)
    else:
        raise fail("type", "query", f"'query' or one of {sorted(_AGG_KEYS)}", t)
    contribution = common.get("contribution")
    if is_auto(contribution):
        contribution = {"max_groups": AUTO, "max_rows": AUTO}
    if contribution is not None and not isinstance(contribution, Mapping):
        raise fail("contribution", "query", "an object {max_groups, max_rows} or 'auto'",
                   contribution)
    if contribution is not None:
        _keys_ok(contribution, {"max_groups", "max_rows"}, "contribution")
    select = common.get("select")
    if select is not None:
        if not isinstance(select, Mapping):
            raise fail("select", "query", "an object {delta, share, by}", select)
        _keys_ok(select, {"delta", "share", "by"}, "select")
    where = common.get("where", [])
    if not isinstance(where, list):
        raise fail("where", "query", "a list of predicates", where)
    group_by = common.get("group_by", [])
    if not isinstance(group_by, list) or not all(isinstance(c, str) for c in group_by):
        raise fail("group_by", "query", "a list of column names", group_by)
    keys = common.get("keys")
    if keys is not None and not isinstance(keys, list):
        raise fail("keys", "query", "a list of key lists", keys)
    return Query(
        parsed, privacy, tuple(group_by),
        None if keys is None else tuple(tuple(k) if isinstance(k, list) else (k,)
                                        for k in keys),
        None if select is None else KeySelection(select.get("delta"),  # type: ignore[arg-type]
                                                 select.get("share"),
                                                 select.get("by", "auto")),
        tuple(_predicate(p) for p in where),
        None if contribution is None else Contribution(contribution.get("max_groups"),
                                                       contribution.get("max_rows")),
        None if weights is None else tuple(weights) if isinstance(weights, list) else weights,
        spec.get("raw", False),
        spec.get("auto_share"),
    )


def aggregation_to_dict(a: Aggregation) -> dict[str, Any]:
    """JSON of one aggregation (for the ledger's request record)."""
    out: dict[str, Any] = {"type": a.kind}
    for name in a.__dataclass_fields__:
        v = getattr(a, name)
        if v is None:
            continue
        out[name] = (v.value if isinstance(v, Level) else
                     [list(r) for r in v] if name == "workload" else
                     list(v) if isinstance(v, tuple) else v)
    return out


def query_to_dict(q: Query) -> dict[str, Any]:
    """JSON of a plan (the public request the ledger records)."""
    out: dict[str, Any] = {
        "type": "query", "privacy": q.privacy.to_dict(),
        "aggregations": [aggregation_to_dict(a) for a in q.aggregations]}
    if q.group_by:
        out["group_by"] = list(q.group_by)
    if q.keys is not None:
        out["keys"] = [list(k) for k in q.keys]
    if q.selection is not None:
        out["select"] = {"delta": q.selection.delta, **(
            {} if q.selection.share is None else {"share": q.selection.share}), **(
            {} if q.selection.by == "auto" or q.selection.share is not None
            else {"by": q.selection.by})}
    if q.where:
        out["where"] = [{"column": p.column, "op": p.op.value, **(
            {} if p.value is None else {"value": list(p.value) if isinstance(p.value, tuple)
                                        else p.value})} for p in q.where]
    c = q.contribution
    if c is not None:
        out["contribution"] = {
            **({} if c.max_groups is None else {"max_groups": c.max_groups}),
            **({} if c.max_rows is None else {"max_rows": c.max_rows})}
    if q.weights is not None:
        out["weights"] = list(q.weights)
    if q.raw:
        out["raw"] = True
    if q.auto_fields():
        out["auto_share"] = q.share_for_auto
    return out
