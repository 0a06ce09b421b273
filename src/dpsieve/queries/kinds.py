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
    pow2_below,
)
from dpsieve.queries.engine import (
    Aggregates,
    Bins,
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
    parts: tuple[Part, ...]
    finish: Finish


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

def _count(a: Count, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    part = _count_part(f"{p}count", a.per, ctx)

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        v = _one(noisy, f"{p}count", i)
        w = cal[f"{p}count"].halfwidth(0.95)
        return Estimate(v, (v - w, v + w))
    return KindPlan((part,), finish)


def _sum(a: Sum, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    col = _numeric(ctx.schema, a.column, "sum")
    lo, hi = _bounds(a, col, "sum")
    part = _sum_part(f"{p}sum", col, lo, hi, a.per, ctx, shares[0])

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        v = _one(noisy, f"{p}sum", i)
        w = cal[f"{p}sum"].halfwidth(0.95)
        return Estimate(v, (v - w, v + w))
    return KindPlan((part,), finish)


def _mean(a: Mean, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    col = _numeric(ctx.schema, a.column, "mean")
    lo, hi = _bounds(a, col, "mean")
    s = _sum_part(f"{p}sum", col, lo, hi, a.per, ctx, shares[0])
    n = _count_part(f"{p}count", a.per, ctx)

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        total, count = _one(noisy, f"{p}sum", i), _one(noisy, f"{p}count", i)
        value = min(max(total / count, lo), hi) if count > 0 else (lo + hi) / 2.0
        ws, wn = cal[f"{p}sum"].halfwidth(0.975), cal[f"{p}count"].halfwidth(0.975)
        if count - wn <= 0:
            return Estimate(value, (lo, hi))
        corners = [(total + x) / (count + y) for x in (-ws, ws) for y in (-wn, wn)]
        return Estimate(value, (max(lo, min(corners)), min(hi, max(corners))))
    return KindPlan((s, n), finish)


def _variance(a: Variance, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    col = _numeric(ctx.schema, a.column, "variance")
    lo, hi = _bounds(a, col, "variance")
    L = ctx.rows("variance")
    n = _count_part(f"{p}count", Level.ROW, ctx)
    s = _sum_part(f"{p}sum", col, lo, hi, Level.ROW, ctx, shares[1])
    big = max(abs(lo), abs(hi))
    g2 = pow2_below(big, 15)  # |r| <= 2^16, r^2 <= 2^32
    if not g2 * g2 > 0:  # |bound| below ~1e-150: the squares' lattice underflows
        raise fail("upper", "variance", "bounds whose magnitude squared is a normal double "
                   "(max(|lower|, |upper|) >= 2^-522)", (lo, hi))
    klo, khi = snap(lo, g2), snap(hi, g2)
    gsq = granularity_for(L * big * big, ctx.privacy, shares[2], ctx.k)
    shift = max(0, math.frexp(gsq / (g2 * g2))[1] - 1)

    def sq(r: int) -> int:
        return (r * r + (1 << (shift - 1))) >> shift if shift > 0 else r * r

    top = max(sq(klo), sq(khi))
    q = ValueSum(f"{p}sumsq", col.name, g2, lo, hi, klo, khi, square_shift=shift)
    qp = Part(Release(f"{p}sumsq", 1, g2 * g2 * 2.0**shift, Contrib.interval(0, L * top)),
              (q,), _column_of(f"{p}sumsq"))
    cap = ((hi - lo) / 2.0) ** 2

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        cnt = _one(noisy, f"{p}count", i)
        if cnt <= 0:
            return Estimate(cap / 2.0, None)
        m = min(max(_one(noisy, f"{p}sum", i) / cnt, lo), hi)
        v = _one(noisy, f"{p}sumsq", i) / cnt - m * m
        return Estimate(min(max(v, 0.0), cap), None)
    return KindPlan((n, s, qp), finish)


def _quantile(a: Quantile, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    col = _numeric(ctx.schema, a.column, "quantile")
    lo, hi = _bounds(a, col, "quantile")
    L = ctx.rows("quantile")
    g = pow2_below(hi - lo, DATA_RANGE_BITS)
    if not max(abs(lo), abs(hi)) / g < 2.0**50:
        raise fail("lower", "quantile", "bounds whose width is at least 2^-30 of their "
                   "magnitude", (lo, hi))
    rl, ru = snap(lo, g), snap(hi, g)
    name = f"{p}bins"
    m = BucketCount(name, col.name, bins=Bins(g, lo, hi, rl, ru, a.bins))
    part = Part(Release(name, a.bins, 1.0, Contrib.counts(L)), (m,), _column_of(name))
    width = (hi - lo) / a.bins

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        h = np.maximum(noisy[name][i], 0.0)
        total = float(h.sum())
        if total <= 0:
            vals = [(lo + hi) / 2.0 for _ in a.quantiles]
        else:
            cum = np.cumsum(h)
            vals = [lo + (int(np.searchsorted(cum, q * total)) + 0.5) * width
                    for q in a.quantiles]
            vals = [min(max(v, lo), hi) for v in vals]
        return Estimate(vals[0] if len(vals) == 1 else vals, None)
    return KindPlan((part,), finish)


DATA_RANGE_BITS = 20


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
        v = [float(x) for x in noisy[name][i]]
        w = cal[name].halfwidth(0.95)
        return Estimate(v, [(x - w, x + w) for x in v])
    return KindPlan((part,), finish)


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


for _kind in (
    QueryKind("count", Count, 1, _count, "docs/proofs/queries.md §3.1"),
    QueryKind("sum", Sum, 1, _sum, "docs/proofs/queries.md §3.2"),
    QueryKind("mean", Mean, 2, _mean, "docs/proofs/queries.md §3.4"),
    QueryKind("variance", Variance, 3, _variance, "docs/proofs/queries.md §3.4"),
    QueryKind("quantile", Quantile, 1, _quantile, "docs/proofs/queries.md §3.5"),
    QueryKind("histogram", Histogram, 1, _histogram, "docs/proofs/queries.md §3.5"),
    QueryKind("linear", Linear, 1, _linear, "docs/proofs/queries.md §3.6"),
):
    register(_kind)
