"""The kinds that estimate a distribution's moments and quantiles: mean (a centred sum and
a count), variance (count, sum, sum of squares), quantiles (a histogram of public bins).

A mean's sum is **centred** on the middle of its bounds: each row (or unit total, for
``per="unit"``) contributes ``x - (lower + upper) / 2``, so one unit moves it by at most
``max_rows (upper - lower) / 2`` (``(upper - lower) / 2`` per unit) instead of
``max_rows max(|lower|, |upper|)``; the mean is ``middle + centred sum / count``
(docs/proofs/queries.md §3.4). The released count is floored at
:data:`MEAN_COUNT_FLOOR` of its noise's stds (and at one row) before it divides: a noisy
count that small is not told apart from 0, and dividing by it (or answering the middle
when it was <= 0, as before) was noisier than the peers on real data; the floor is
post-processing of released values by a public figure (docs/proofs/queries.md §3.4 says
why, and why the count and the sum each get half of the mean's share). ``raw`` plans
answer the plain ratio. On the lattice the centred integer is ``r - c0`` for a row
integer ``r`` in ``[klo, khi]`` and ``c0 = floor((klo + khi) / 2)`` (within half a step
of the middle), computed from the engine's sum and count (``S - c0 N``) in Python
integers.

The helpers are read from :mod:`dpsieve.queries.kinds` when a plan is built (the charge
audits put defects back by replacing them there).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import fail
from dpsieve.queries import kinds as k
from dpsieve.queries.calibrate import Calibrated, Contrib, Release, granularity_for, pow2_below
from dpsieve.queries.engine import Aggregates, Bins, BucketCount, Level, ValueSum, snap
from dpsieve.queries.kinds import Ctx, KindPlan, Part
from dpsieve.queries.plan import Mean, Quantile, Variance
from dpsieve.queries.result import Estimate

__all__ = ["DATA_RANGE_BITS", "MEAN_COUNT_FLOOR", "mean_plan", "quantile_plan", "variance_plan"]

#: Lattice bits of a quantile's bins below the width of its bounds.
DATA_RANGE_BITS = 20
#: A mean's noisy count is floored at this many of its noise stds before it divides
#: (docs/proofs/queries.md §3.4): on a grid of true means across the bounds and counts of
#: 0.04 to 9 noise stds, 1.5 gave a lower mean squared error than the unfloored ratio at
#: every point (1.0 was worse near the middle for the smallest counts; 2 and 3 worse for
#: counts of 4-9 stds); tests/queries/test_mean_finish.py checks that grid.
MEAN_COUNT_FLOOR = 1.5


def mean_plan(a: Mean, ctx: Ctx, shares: tuple[Fraction, ...], p: str) -> KindPlan:
    """A centred sum and a count (module docstring; docs/proofs/queries.md §3.4)."""
    col = k._numeric(ctx.schema, a.column, "mean")
    lo, hi = k._bounds(a, col, "mean")
    base = k._sum_part(f"{p}sum", col, lo, hi, a.per, ctx, shares[0])
    n = k._count_part(f"{p}count", a.per, ctx)
    m = base.measures[0]
    assert isinstance(m, ValueSum)
    if a.per == Level.ROW:
        klo, khi, rows = m.row_lower, m.row_upper, ctx.rows("mean")
    else:
        assert m.unit_lower is not None
        assert m.unit_upper is not None
        klo, khi, rows = m.unit_lower, m.unit_upper, 1
    c0, g = (klo + khi) // 2, base.release.unit  # the middle, on the lattice
    sname, cname = f"{p}sum", f"{p}count"

    def exact(aggs: Aggregates) -> npt.NDArray[Any]:
        sums = np.asarray(aggs.values[sname], dtype=np.int64).astype(object).reshape(-1)
        cnt = np.asarray(aggs.values[cname], dtype=np.int64).astype(object).reshape(-1)
        return np.asarray(sums - c0 * cnt, dtype=object).reshape(-1, 1)

    # one cell's centred total lies in [rows (klo - c0), rows (khi - c0)]
    s = Part(Release(sname, 1, g, Contrib.interval(rows * (klo - c0), rows * (khi - c0))),
             (m,), exact)
    mid = c0 * g

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        total, count = k._one(noisy, sname, i), k._one(noisy, cname, i)
        if ctx.raw:  # the plain ratio of the released values
            value = mid + total / count if count > 0 else mid
        else:  # the count floored (public: MEAN_COUNT_FLOOR stds, one row), into the bounds
            floor = max(MEAN_COUNT_FLOOR * cal[cname].noise().std, 1.0)
            value = mid + total / max(count, floor)
            value = min(max(value, lo), hi)
        ws, wn = cal[sname].halfwidth(0.975), cal[cname].halfwidth(0.975)
        if count - wn <= 0:
            return Estimate(value, (lo, hi))
        corners = [mid + (total + x) / (count + y) for x in (-ws, ws) for y in (-wn, wn)]
        # into the bounds at both ends: corners all above ``hi`` gave (33.8, 30.0)
        return Estimate(value, (min(max(lo, min(corners)), hi), max(min(hi, max(corners)), lo)))
    return KindPlan((s, n), finish)


def variance_plan(a: Variance, ctx: Ctx, shares: tuple[Fraction, ...], p: str
                  ) -> KindPlan:
    """Count, sum and sum of squares of the clipped rows (docs/proofs/queries.md §3.4)."""
    col = k._numeric(ctx.schema, a.column, "variance")
    lo, hi = k._bounds(a, col, "variance")
    L = ctx.rows("variance")
    n = k._count_part(f"{p}count", Level.ROW, ctx)
    s = k._sum_part(f"{p}sum", col, lo, hi, Level.ROW, ctx, shares[1])
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
              (q,), k._column_of(f"{p}sumsq"))
    cap = ((hi - lo) / 2.0) ** 2

    def finish(noisy: dict[str, npt.NDArray[np.float64]], cal: dict[str, Calibrated],
               i: int) -> Estimate:
        cnt = k._one(noisy, f"{p}count", i)
        if cnt <= 0:
            return Estimate(cap / 2.0, None)
        m = k._one(noisy, f"{p}sum", i) / cnt
        m = m if ctx.raw else min(max(m, lo), hi)
        v = k._one(noisy, f"{p}sumsq", i) / cnt - m * m
        return Estimate(v if ctx.raw else min(max(v, 0.0), cap), None)
    return KindPlan((n, s, qp), finish, None)



def quantile_plan(a: Quantile, ctx: Ctx, shares: tuple[Fraction, ...], p: str
                  ) -> KindPlan:
    """Quantiles read off a noisy histogram of public bins (docs/proofs/queries.md §3.5)."""
    col = k._numeric(ctx.schema, a.column, "quantile")
    lo, hi = k._bounds(a, col, "quantile")
    L = ctx.rows("quantile")
    g = pow2_below(hi - lo, DATA_RANGE_BITS)
    if not max(abs(lo), abs(hi)) / g < 2.0**50:
        raise fail("lower", "quantile", "bounds whose width is at least 2^-30 of their "
                   "magnitude", (lo, hi))
    rl, ru = snap(lo, g), snap(hi, g)
    name = f"{p}bins"
    m = BucketCount(name, col.name, bins=Bins(g, lo, hi, rl, ru, a.bins))
    part = Part(Release(name, a.bins, 1.0, Contrib.counts(L)), (m,), k._column_of(name))
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
    return KindPlan((part,), finish, None)
