"""The registry of aggregation kinds: each registered once, with what it asks the engine,
what one privacy unit can change (its sensitivity), and how its answer is finished.

A kind's ``build(agg, ctx, shares)`` returns :class:`Part` s -- one released integer
vector per group each, with the engine measures it needs, its :class:`Release` (lattice
unit and per-group contribution bound) and the map from engine aggregates to the exact
integers -- and a ``finish`` that turns the noisy parts into an :class:`Estimate`
(post-processing only). The noise itself comes from :mod:`dpsieve.queries.calibrate`
(the mechanisms layer). Each kind names the section of docs/proofs/queries.md that proves
its contribution bound; ``tests/queries/test_sensitivity_bruteforce.py`` checks every kind
on every add/remove-one-unit neighbour of small tables.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription
from dpsieve.queries.calibrate import (
    Calibrated,
    Contrib,
    Release,
    granularity_for,
)
from dpsieve.queries.engine import (
    Aggregates,
    BucketCount,
    Level,
    Measure,
    RowCount,
    ValueSum,
    snap,
)
from dpsieve.queries.plan import (
    Aggregation,
    Count,
    Histogram,
    Linear,
    Mean,
    Quantile,
    Sum,
    Variance,
)
from dpsieve.queries.result import Estimate
from dpsieve.queries.schema import Column, ColumnType, KeyValue, Schema, canonical_values

__all__ = ["KINDS", "Ctx", "Finish", "KindPlan", "Part", "QueryKind", "label_of"]

Exact = Callable[[Aggregates], npt.NDArray[Any]]
#: finish(noisy parts by name, the parts' calibrations, group index) -> estimate
Finish = Callable[[dict[str, npt.NDArray[np.float64]], dict[str, Calibrated], int],
                  Estimate]

#: Row values are pre-clipped to 2^11 times the bound of a per-unit sum (docs/queries.md).
UNIT_ROW_FACTOR = 2.0**11
#: The largest pre-clip of a per-unit sum's rows: 2^1000, far inside the doubles (bounds
#: of magnitude up to 2^989, ~4e297, are admitted).
MAX_ROW_CLIP = 2.0**1000


@dataclass(frozen=True, slots=True)
class Ctx:
    """What a kind may know when planning: public facts only."""

    schema: Schema
    privacy: PrivacyDescription
    neighbouring: Neighbouring
    has_unit: bool
    max_groups: int
    max_rows: int | None
    groups: int | None  # public keys; None for observed (DP-selected) keys
    raw: bool = False  # True: answers as released (no clamping to what the data allow)

    @property
    def k(self) -> int:
        """Groups one unit can change."""
        if not self.has_unit:
            return 1
        return self.max_groups if self.groups is None else max(1, min(self.max_groups,
                                                                      self.groups))

    def rows(self, owner: str) -> int:
        """L-infinity for a per-row aggregation (1 without a privacy unit)."""
        if not self.has_unit:
            return 1
        if self.max_rows is None:
            raise fail("max_rows", owner, "an int >= 1 (contribution.max_rows): a per-row "
                       "aggregation needs a bound on each unit's rows per group when the data "
                       "set has a privacy unit", None)
        return self.max_rows


@dataclass(frozen=True, slots=True)
class Part:
    """One released integer vector per group."""

    release: Release
    measures: tuple[Measure, ...]
    exact: Exact


@dataclass(frozen=True, slots=True)
class KindPlan:
    """A kind's parts and finish; ``covers`` says what its 95 % interval holds:
    ``"truth"`` (no bound can change the aggregate, so the noise is all there is),
    ``"bounded"`` (the aggregate after clipping and contribution bounds: their bias is not
    in it), or ``None`` (no interval)."""

    parts: tuple[Part, ...]
    finish: Finish
    covers: str | None = "bounded"


@dataclass(frozen=True, slots=True)
class QueryKind:
    """A registered aggregation kind."""

    name: str
    plan_type: type[Any]
    parts: int
    build: Callable[[Any, Ctx, tuple[Fraction, ...], str], KindPlan]
    proof: str


KINDS: dict[str, QueryKind] = {}


def register(kind: QueryKind) -> QueryKind:
    if kind.name in KINDS:
        raise ValueError(f"query kind {kind.name!r} registered twice")
    KINDS[kind.name] = kind
    return kind


def label_of(a: Aggregation) -> str:
    """A readable label, e.g. ``count``, ``sum(x)``, ``quantile(x)``."""
    col = getattr(a, "column", None)
    return a.kind if col is None else f"{a.kind}({col})"


# -- helpers --------------------------------------------------------------------------------

def _numeric(schema: Schema, name: str, owner: str) -> Column:
    col = schema.column(name, "column", owner)
    if not col.type.numeric:
        raise fail("column", owner, "a numeric column (integer, float or boolean; the schema "
                   f"says {col.type.value})", name)
    return col


def _bounds(a: Sum | Mean | Variance | Quantile, col: Column, owner: str) -> tuple[float, float]:
    lo, hi = a.lower, a.upper
    if isinstance(lo, str) or isinstance(hi, str):  # 'auto': resolved before a kind plans
        raise fail("lower" if isinstance(lo, str) else "upper", owner, "a finite number "
                   "('auto' bounds are chosen by the query's auto stage)", "auto")
    if lo is None or hi is None:
        if col.bounds is None:
            raise fail("lower" if lo is None else "upper", owner, "a finite number (the "
                       "column declares no public bounds)", None)
        lo = col.bounds[0] if lo is None else lo
        hi = col.bounds[1] if hi is None else hi
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise fail("lower", owner, "finite bounds", (lo, hi))
    if not lo < hi:
        raise fail("upper", owner, f"a number > lower = {lo!r}", hi)
    return float(lo), float(hi)


def _column_of(name: str) -> Exact:
    def get(aggs: Aggregates) -> npt.NDArray[Any]:
        v = np.asarray(aggs.values[name], dtype=np.int64)
        return v if v.ndim == 2 else v.reshape(-1, 1)  # (groups, 1); reshape(0, -1) fails
    return get


def _sum_part(name: str, col: Column, lo: float, hi: float, per: Level, ctx: Ctx,
              share: Fraction) -> Part:
    """A lattice sum (docs/proofs/queries.md §3.2, §3.3)."""
    if per == Level.ROW:
        L = ctx.rows(name)
        g = granularity_for(L * max(abs(lo), abs(hi)), ctx.privacy, share, ctx.k)
        klo, khi = snap(lo, g), snap(hi, g)
        m = ValueSum(name, col.name, g, lo, hi, klo, khi)
        c = Contrib.interval(min(klo, L * klo), max(khi, L * khi))
    else:
        g = granularity_for(max(abs(lo), abs(hi)), ctx.privacy, share, ctx.k)
        p = UNIT_ROW_FACTOR * max(abs(lo), abs(hi))
        if not p < MAX_ROW_CLIP:  # the rows' pre-clip would overflow the doubles
            raise fail("upper", "sum", f"per-unit bounds of magnitude at most "
                       f"{MAX_ROW_CLIP / UNIT_ROW_FACTOR!r} (each row is pre-clipped to "
                       f"{UNIT_ROW_FACTOR:g} times the bound, a finite double)",
                       (lo, hi))
        ulo, uhi = snap(lo, g), snap(hi, g)
        m = ValueSum(name, col.name, g, -p, p, snap(-p, g), snap(p, g), Level.UNIT, ulo, uhi)
        c = Contrib.interval(ulo, uhi)
    return Part(Release(name, 1, g, c), (m,), _column_of(name))


def _count_part(name: str, per: Level, ctx: Ctx) -> Part:
    """Rows (at most L-inf per cell) or units (one per cell): docs/proofs/queries.md §3.1."""
    top = 1 if per == Level.UNIT or not ctx.has_unit else ctx.rows(name)
    return Part(Release(name, 1, 1.0, Contrib.interval(0, top)), (RowCount(name, per),),
                _column_of(name))


def _one(noisy: dict[str, npt.NDArray[np.float64]], name: str, i: int) -> float:
    return float(noisy[name][i, 0])


# -- the kinds --------------------------------------------------------------------------------

def _clamped(v: float, w: float, floor: float | None, ceil: float | None
             ) -> tuple[float, tuple[float, float]]:
    """``v`` and its interval ``[v - w, v + w]`` clamped into ``[floor, ceil]`` (None: no
    side): the true value lies there, so an interval that held it still does."""
    lo_, hi_ = v - w, v + w
    if floor is not None:
        v, lo_, hi_ = max(v, floor), max(lo_, floor), max(hi_, floor)
    if ceil is not None:
        v, lo_, hi_ = min(v, ceil), min(lo_, ceil), min(hi_, ceil)
    return v, (lo_, hi_)


def _count_covers(per: Level, ctx: Ctx) -> str:
    """A count is exact but for noise without a unit, or for units when every unit keeps
    all its groups (public keys no more than max_groups, or one group)."""
    if not ctx.has_unit:
        return "truth"
    whole = ctx.groups is not None and ctx.max_groups >= ctx.groups
    return "truth" if per == Level.UNIT and whole else "bounded"


def _count(a: Count, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    part = _count_part(f"{p}count", a.per, ctx)

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        v = _one(noisy, f"{p}count", i)
        w = cal[f"{p}count"].halfwidth(0.95)
        value, iv = _clamped(v, w, None if ctx.raw else 0.0, None)
        return Estimate(value, iv)
    return KindPlan((part,), finish, _count_covers(a.per, ctx))


def _sum(a: Sum, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    col = _numeric(ctx.schema, a.column, "sum")
    lo, hi = _bounds(a, col, "sum")
    part = _sum_part(f"{p}sum", col, lo, hi, a.per, ctx, shares[0])
    floor = 0.0 if lo >= 0 and not ctx.raw else None  # a sum of values >= 0 is >= 0
    ceil = 0.0 if hi <= 0 and not ctx.raw else None

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        v = _one(noisy, f"{p}sum", i)
        w = cal[f"{p}sum"].halfwidth(0.95)
        value, iv = _clamped(v, w, floor, ceil)
        return Estimate(value, iv)
    return KindPlan((part,), finish)


def _categories(a: Histogram | Linear, col: Column, owner: str) -> tuple[KeyValue, ...]:
    cats: Any = a.categories
    if cats is None:
        if col.categories is None:
            raise fail("categories", owner, "a list of values (the column declares no public "
                       "domain)", None)
        cats = col.categories  # declared: checked again against the storage type
    if col.type == ColumnType.OTHER:
        raise fail("column", owner, "a column of type integer, float, string or boolean",
                   col.name)
    return canonical_values(col.type, list(cats), "categories", owner, max_len=10_000,
                            storage=col.storage)


def _histogram(a: Histogram, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    col = ctx.schema.column(a.column, "column", "histogram")
    cats = _categories(a, col, "histogram")
    L = ctx.rows("histogram")
    name = f"{p}histogram"
    m = BucketCount(name, col.name, categories=cats)
    part = Part(Release(name, len(cats), 1.0, Contrib.counts(L)), (m,), _column_of(name))

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        w = cal[name].halfwidth(0.95)
        got = [_clamped(float(x), w, None if ctx.raw else 0.0, None) for x in noisy[name][i]]
        return Estimate([v for v, _ in got], [iv for _, iv in got])
    return KindPlan((part,), finish, "truth" if not ctx.has_unit else "bounded")


def _linear(a: Linear, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    from dpsieve.mechanisms import default_granularity

    col = ctx.schema.column(a.column, "column", "linear")
    if len(a.categories) > 1000:
        raise fail("categories", "linear", "a list of at most 1000 values", len(a.categories))
    cats = _categories(a, col, "linear")
    L = ctx.rows("linear")
    gw = default_granularity(max(abs(x) for r in a.workload for x in r), 20)
    wint = [[snap(x, gw) for x in r] for r in a.workload]
    k1 = max(sum(abs(r[j]) for r in wint) for j in range(len(cats)))
    k2 = max(sum(r[j] * r[j] for r in wint) for j in range(len(cats)))
    c = Contrib(L * k1, L * L * k2, 2 * L * k1, 4 * L * L * k2, False)
    hist = f"{p}histogram"
    name = f"{p}answers"
    w_obj = np.asarray(wint, dtype=object)

    def exact(aggs: Aggregates) -> npt.NDArray[Any]:
        h = np.asarray(aggs.values[hist], dtype=np.int64).astype(object)
        return np.asarray(h.dot(w_obj.T), dtype=object).reshape(h.shape[0], len(wint))

    part = Part(Release(name, len(wint), gw, c), (BucketCount(hist, col.name, cats),), exact)

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        v = [float(x) for x in noisy[name][i]]
        w = cal[name].halfwidth(0.95)
        return Estimate(v, [(x - w, x + w) for x in v])
    return KindPlan((part,), finish)


from dpsieve.queries._kind_moments import mean_plan, quantile_plan, variance_plan  # noqa: E402

for _kind in (
    QueryKind("count", Count, 1, _count, "docs/proofs/queries.md §3.1"),
    QueryKind("sum", Sum, 1, _sum, "docs/proofs/queries.md §3.2"),
    QueryKind("mean", Mean, 2, mean_plan, "docs/proofs/queries.md §3.4"),
    QueryKind("variance", Variance, 3, variance_plan, "docs/proofs/queries.md §3.4"),
    QueryKind("quantile", Quantile, 1, quantile_plan, "docs/proofs/queries.md §3.5"),
    QueryKind("histogram", Histogram, 1, _histogram, "docs/proofs/queries.md §3.5"),
    QueryKind("linear", Linear, 1, _linear, "docs/proofs/queries.md §3.6"),
):
    register(_kind)
