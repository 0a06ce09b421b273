"""Bounds that fit the data: a plan's ``"auto"`` bounds chosen by DP quantiles, then the plan.

A plan may leave its contribution bounds (``max_groups``, ``max_rows``) and a per-row
numeric aggregation's clamping bounds (``lower``, ``upper``) to the data. Such a plan is
run in two stages under **one** charge, fixed before the spend from public values only:

1. **Quantiles** (``auto_share`` of the privacy, default
   :data:`~dpsieve.queries.plan.DEFAULT_AUTO_SHARE`): a noisy count of the units
   (:func:`noisy_count`), then one AboveThreshold scan (the sparse vector technique,
   :func:`choose`) per auto bound over a public candidate lattice (:func:`count_candidates`,
   :func:`value_candidates`) against the threshold ``level x noisy count``, each release
   on an equal part ``eps_q`` of the stage's pure ``eps_a``. Each privacy unit
   contributes exactly one value to each quantile: its number of groups, its largest
   number of rows in one group, and the value of one of its rows (sampled by the keyed
   mixer of contribution bounding: a function of the sampling key and the unit's own rows
   only).
2. **The plan** with the released bounds, on the rest of the privacy: an ordinary plan
   (:func:`~dpsieve.queries.prepare.prepare`), its bounds a post-processing of stage 1.

The charge is the plan's own privacy (``PureDP(eps)`` / ``ZCDP(rho)``, or with DP key
selection ``ApproxDP(eps, delta)`` / ``ApproxZCDP(rho, delta)``): it dominates the
composition, checked in exact rationals before the spend (pure: ``k eps_q + eps_main <=
eps``; zCDP: each scan is ``eps_q``-DP, so ``eps_q^2 / 2``-zCDP, and ``k eps_q^2 / 2 +
rho_main <= rho``). docs/proofs/queries.md §7 proves it.

**Why a scan, not the exponential mechanism.** The lattices are wide (an integer column's
candidates span its storage type's range: 379 for a BIGINT). With the exponential
mechanism every candidate above the data's maximum scores the same (``-(1 - q) n``), and
at ``eps_q n`` of a few dozen their number outweighs the few good ones: on 1,618 units
at ``eps_q = 0.0375`` the 0.98-quantile of a score in [66, 100] came out at 2e10 in the
median of 300 draws. The scan stops at the first candidate that passes, so candidates far
from the quantile on the far side are never reached; it released 100 (the 10-90 %
range 100-200) on the same data. A premature stop is the scan's failure, so the scans
start where one does least harm: an upper bound from the column's first non-negative
candidate upward, a lower bound downward from below the upper bound (released first when
both are auto) -- never from the far end of a 37-decade lattice.

**Which way each choice errs.** The levels (:data:`LEVELS`, :data:`RATIO_LEVELS`): a
bound at the 0.9 quantile of a unit's groups or largest group errs toward more groups and
rows (more noise, less truncation) than one at its median -- right for totals, which
truncation biases down; a plan of means only takes the median (truncation at random
barely biases a ratio). The scan's candidate noise makes it stop early (below the
quantile for an upper bound, above it for a lower bound: more clamping, less noise), its
shared threshold noise run on past it (:data:`THRESHOLD_SHARE`); with too little privacy
for the units there are (``eps_q n`` below ~``8 ln m``, ``m`` candidates) the bounds may
land far from the data, never unsoundly: privacy does not depend on them.

**Totality.** After the spend nothing can fail on a row's value: the stage-1 aggregates
come from the engines' total specs (one sampled row per unit, unit-keyed cells), an empty
data set gives ``n = 0`` (every candidate scores 0: a uniform choice), and if the plan
cannot be prepared at the released bounds (a public fact of those bounds, e.g. noise past
the samplers' range) it runs at the *fallback* bounds checked before the spend (the
smallest candidates), which the answer states.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_down, round_down, round_up, sqrt_down
from dpsieve._validation import fail
from dpsieve.accounting.events import (
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
)
from dpsieve.errors import UnsupportedError, ValidationError
from dpsieve.mechanisms import as_source, discrete_laplace
from dpsieve.mechanisms.noise import MAX_DISCRETE_SCALE
from dpsieve.queries.engine import (
    BoundingSpec,
    Engine,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
    aggregate_batches,
)
from dpsieve.queries.plan import (
    AUTO,
    Contribution,
    Count,
    Mean,
    Quantile,
    Query,
    Sum,
    Variance,
    is_auto,
)
from dpsieve.queries.prepare import Prepared, contribution_of, prepare
from dpsieve.queries.schema import Column, ColumnType, KeyValue, Schema, integer_range

__all__ = [
    "LEVELS",
    "AutoPlan",
    "choose",
    "count_candidates",
    "plan_auto",
    "value_candidates",
]

F64 = npt.NDArray[np.float64]

#: The quantile level of each auto bound (module docstring: which way each errs).
LEVELS: dict[str, float] = {"max_groups": 0.9, "max_rows": 0.9, "lower": 0.1,
                            "upper": 0.9}
#: The contribution levels of a plan of means, variances and quantiles only.
RATIO_LEVELS: dict[str, float] = {"max_groups": 0.5, "max_rows": 0.5}
#: Mantissas of the candidate lattices: ``m 10^d``, 10 a decade (ratio <= 1.33).
MANTISSAS = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
#: Decades of a float column's candidates without declared bounds: 1e-6 .. 8e15.
FLOAT_DECADES = (-6, 15)
#: Decades below a declared bound's magnitude that its candidates span.
DECLARED_DECADES = 6
#: Contribution bounds are at most 1e6 (:class:`~dpsieve.queries.plan.Contribution`).
MAX_CONTRIBUTION = 1_000_000
#: The snapping tiers of stage 1's per-row values: ``(R, g)`` with ``R / g = 2^51``; a
#: value is read from the first tier whose range ``[-R, R]`` holds it strictly.
TIERS: tuple[tuple[float, float], ...] = ((2.0**20, 2.0**-31), (2.0**60, 2.0**9),
                                          (2.0**1000, 2.0**949))


def _decades(lo: int, hi: int, integral: bool) -> list[float]:
    out = {float(f"{m}e{d}") for d in range(lo, hi + 1) for m in MANTISSAS}
    if integral:
        out = {x for x in out if x.is_integer()} | {float(i) for i in range(1, 11)}
    return sorted(out)


def count_candidates(cap: int = MAX_CONTRIBUTION) -> list[int]:
    """The public lattice of ``max_groups`` / ``max_rows``: 1..10, then ``m 10^d`` (a
    ratio of at most 1.33 between neighbours) up to ``cap`` (and ``cap`` itself)."""
    cands = sorted({int(x) for x in _decades(0, 6, True) if x <= cap} | {cap})
    return cands


def value_candidates(col: Column, side: str, other: float | None) -> list[float]:
    """The public lattice of a column's ``lower`` or ``upper`` bound (``side``), from its
    declaration or type only: inside declared bounds ``[L, U]`` (with ``L``, ``U`` and 0)
    the decades down to ``10^-6`` of their magnitude; an integer column the integers
    ``m 10^d`` of its storage type's range; a boolean 0 and 1; a float ``+-m 10^d`` for
    ``d`` in :data:`FLOAT_DECADES`, and 0. ``other``: the plan's fixed other bound, which
    the candidates must lie strictly beyond (``upper`` above it, ``lower`` below)."""
    integral = col.type in (ColumnType.INTEGER, ColumnType.BOOLEAN)
    if col.type == ColumnType.BOOLEAN:
        cands = [0.0, 1.0]
    elif col.bounds is not None:
        lo, hi = col.bounds
        top = max(abs(lo), abs(hi), 1e-300)
        d = math.floor(math.log10(top))
        pos = _decades(d - DECLARED_DECADES, d + 1, integral)
        cands = sorted({x for x in [*pos, *(-x for x in pos), 0.0, lo, hi] if lo <= x <= hi})
    elif col.type == ColumnType.INTEGER:
        lo_i, hi_i = integer_range(col.storage)
        pos = _decades(0, 18, True)
        cands = sorted({x for x in [*pos, *(-x for x in pos), 0.0] if lo_i <= x <= hi_i})
    else:
        pos = _decades(FLOAT_DECADES[0], FLOAT_DECADES[1], False)
        cands = sorted({*pos, *(-x for x in pos), 0.0})
    if other is not None:
        cands = [x for x in cands if (x > other if side == "upper" else x < other)]
    return cands


def noisy_count(n: int, eps: float, rng: np.random.Generator | None) -> int:
    """``n`` plus exact discrete Laplace noise of scale ``1 / eps`` (rounded up): the
    number of values, ``eps``-DP (one unit changes it by at most 1)."""
    return n + discrete_laplace(round_up(1 / Fraction(eps)), None, rng)


def choose(values: F64, candidates: F64, level: float, eps: float,
           rng: np.random.Generator | None, *, n_hat: float, upper: bool = True) -> int:
    """The index of the candidate released for the ``level`` quantile of ``values`` (one
    value per unit): AboveThreshold (:func:`~dpsieve.mechanisms.select.above_threshold`,
    ``eps``-DP, exact discrete Laplace noise) over the candidates in increasing order with
    the queries ``N(c_j)`` (the values ``<= c_j``) and the public threshold
    ``level n_hat`` (``n_hat``: a released noisy count of the values) -- the first
    candidate holding a share ``level`` of the values, as noise sees it; none: the last.
    ``upper=False`` (a lower bound) scans downward with ``#{v >= c_j}`` and threshold
    ``(1 - level) n_hat``. The queries are counts: one unit added, removed or changed
    moves every one of them by at most 1, all in the same direction (monotonic), under
    both relations. Total: empty ``values`` give the first candidate that noise passes."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    c = np.asarray(candidates, dtype=np.float64)
    n = v.size
    if upper:
        f = np.searchsorted(v, c, side="right").astype(np.float64)
        t = level * n_hat
    else:
        c = c[::-1]
        f = (n - np.searchsorted(v, c, side="left")).astype(np.float64)
        t = (1.0 - level) * n_hat
    i = _above_threshold(f.astype(np.int64), t, eps, rng)
    j = c.size - 1 if i is None else i
    return int(j if upper else c.size - 1 - j)


#: The share of a scan's eps on its threshold's noise (Lyu, Su & Li 2017 allow any split
#: eps_1 + eps_2 = eps). The threshold's noise is shared by every candidate: a large draw
#: makes the scan run far past the quantile (probability ~ exp(-eps_1 (1 - q) n) / 2); the
#: candidates' own noise makes it stop early (~ exp(-eps_2 d) for each candidate ``d``
#: values short). 2/3 balanced the two on the benchmark's data (1,618 units at eps_q 0.05:
#: 0.2 % and 0.3 % of 2,000 scans; an even split ran away in 0.9 %).
THRESHOLD_SHARE = Fraction(2, 3)


def _scales(eps: float) -> float:
    """The largest noise scale stage 1 draws at ``eps`` per release (checked before the
    spend against the exact sampler's range)."""
    e = Fraction(eps)
    return max(round_up(1 / e), round_up(1 / (e * THRESHOLD_SHARE)),
               round_up(1 / (e - e * THRESHOLD_SHARE))) if e > 0 else math.inf


def _above_threshold(counts: npt.NDArray[np.int64], t: float, eps: float,
                     rng: np.random.Generator | None) -> int | None:
    """AboveThreshold for monotonic integer queries of sensitivity 1 (Lyu, Su & Li 2017,
    Alg. 1 with c = 1; monotonic: the query noise at ``1 / eps_2``): threshold noise
    ``rho ~ DLap(1 / eps_1)``, query noise ``nu_i ~ DLap(1 / eps_2)`` (exact discrete
    Laplace on the integers, scales rounded up, all drawn before any comparison), the
    first ``i`` with ``q_i + nu_i >= t + rho`` -- for integers ``q_i + nu_i - rho >=
    ceil(t)``, an exact integer comparison. ``eps``-DP with ``eps_1 = THRESHOLD_SHARE
    eps``, ``eps_2 = eps - eps_1`` (the proof on Z is the real one with sums for integrals:
    the shifts are by the integer sensitivity 1; docs/proofs/mechanisms.md)."""
    e = Fraction(eps)
    e1 = e * THRESHOLD_SHARE
    rho = discrete_laplace(round_up(1 / e1), None, rng)
    nu = discrete_laplace(round_up(1 / (e - e1)), max(1, counts.size), rng)
    bar = math.ceil(t) + int(rho)
    for i, (q, z) in enumerate(zip(counts.tolist(), nu.tolist(), strict=False)):
        if q + z >= bar:
            return i
    return None


def _split(total: PureDP | ZCDP, share: float, k: int, nb: Neighbouring
           ) -> tuple[PureDP | ZCDP, float]:
    """(the main plan's privacy, each quantile's pure eps), their composition at most
    ``total`` in exact rationals (module docstring)."""
    a = Fraction(share)
    if isinstance(total, PureDP):
        eps = Fraction(total.eps)
        main_eps = round_down(eps * (1 - a))
        each = round_down((eps - Fraction(main_eps)) / k)
        ok = Fraction(main_eps) + k * Fraction(each) <= eps
        main: PureDP | ZCDP = PureDP(main_eps, nb)
    else:
        rho = Fraction(total.rho)
        main_rho = round_down(rho * (1 - a))
        rest = rho - Fraction(main_rho)
        each = sqrt_down(2 * rest / k)
        while each > 0 and k * Fraction(each) ** 2 / 2 > rest:
            each = next_down(each)
        ok = Fraction(main_rho) + k * Fraction(each) ** 2 / 2 <= rho
        main = ZCDP(main_rho, nb)
    value = main.eps if isinstance(main, PureDP) else main.rho
    if not (ok and value > 0 and each > 0):
        raise fail("auto_share", "query", "a share leaving both stages some privacy "
                   f"(each of {k} quantiles would get eps {each!r})", share)
    return main, each


@dataclass(frozen=True, slots=True)
class _Bound:
    """One auto bound: ``field`` (``max_groups``, ``max_rows``, ``<i>.lower``,
    ``<i>.upper``), its candidates and level."""

    field: str
    candidates: tuple[float, ...]
    level: float
    column: str | None = None  # value bounds: the column


def _contribution_level(q: Query, field: str) -> float:
    """:data:`LEVELS` for a plan with a count, sum, histogram or linear aggregation (a
    total: every group or row a unit loses biases it down); :data:`RATIO_LEVELS` for a
    plan of means, variances and quantiles only (dropping a unit's groups or rows at
    random leaves a ratio nearly unbiased, and smaller bounds mean less noise)."""
    totals = any(not isinstance(a, Mean | Variance | Quantile) for a in q.aggregations)
    return (LEVELS if totals else RATIO_LEVELS)[field]


def _needs_rows(q: Query) -> bool:
    return any(not (isinstance(a, Count | Sum | Mean) and a.per == Level.UNIT)
               for a in q.aggregations)


def _key_filter(q: Query, schema: Schema) -> tuple[Predicate, ...]:
    """``column in (values of the public keys)`` per group column: rows no public key can
    hold are no unit's (a superset of the keys' rows for several columns)."""
    if q.keys is None:
        return ()
    from dpsieve.queries.prepare import _check_predicate

    out = []
    for j, name in enumerate(q.group_by):
        vals = tuple(dict.fromkeys(k[j] for k in q.keys if k[j] is not None))
        if len(vals) < len({k[j] for k in q.keys}):  # a NULL key: no filter on this column
            continue
        out.append(_check_predicate(schema, Predicate(name, Op.IN, vals)))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class AutoPlan:
    """An auto plan checked from public values: the charge (the plan's privacy), the
    stage-1 bounds and their eps, the fallback plan prepared before the spend."""

    query: Query
    charge: PrivacyDescription
    auto_eps: float
    each_eps: float
    bounds: tuple[_Bound, ...]
    main_privacy: PureDP | ZCDP
    fallback: Prepared
    fallback_bounds: dict[str, float]
    fixed: dict[str, float]
    unit: str
    where: tuple[Predicate, ...]
    public_keys: frozenset[tuple[KeyValue, ...]] | None

    def figures(self) -> dict[str, Any]:
        """The public figures of the auto stage (preview): its charge, share, levels and
        each bound's candidate range; the plan's noise depends on the bounds it releases,
        so none is stated."""
        return {
            "charge": self.charge.to_dict(),
            "noise": None,
            "labels": list(self.fallback.labels),
            "intervals": None,
            "selection": None,
            "auto": {
                "share": self.query.share_for_auto,
                "privacy": PureDP(self.auto_eps, self.charge.neighbouring).to_dict(),
                "each": {b.field: {"eps": self.each_eps, "level": b.level,
                                   "candidates": [b.candidates[0], b.candidates[-1]],
                                   "count": len(b.candidates)} for b in self.bounds},
                "main_privacy": self.main_privacy.to_dict(),
                "fallback": self.fallback_bounds,
                "note": "the noise of every released number depends on the bounds the "
                        "auto stage releases (chosen from the data): preview the plan with "
                        "those bounds to see it",
            },
        }

    def stated(self, released: dict[str, float], used: dict[str, float], fell_back: bool
               ) -> dict[str, Any]:
        """The answer's ``bounds``: the contribution bounds and each aggregation's bounds
        the plan used (released by stage 1, ordered; the fallback's if ``fallback``), what
        stage 1 released, and its privacy."""
        contrib = {f: int(v) for f, v in used.items() if f in ("max_groups", "max_rows")}
        aggs: list[dict[str, Any]] = []
        for i in range(len(self.query.aggregations)):
            got = {side: used[f"{i}.{side}"] for side in ("lower", "upper")
                   if f"{i}.{side}" in used}
            if got:
                aggs.append({"aggregation": i, "label": self.fallback.labels[i], **got})
        return {"contribution": contrib, "aggregations": aggs, "fallback": fell_back,
                "released": dict(released),
                "privacy": PureDP(self.auto_eps, self.charge.neighbouring).to_dict(),
                "levels": {b.field: b.level for b in self.bounds}}

    def release(self, engine: Engine, rng: np.random.Generator | None) -> dict[str, float]:
        """Stage 1: the released bounds (after the spend; total)."""
        out: dict[str, float] = dict(self.fixed)
        contrib = [b for b in self.bounds if b.column is None]
        values = [b for b in self.bounds if b.column is not None]
        if contrib:
            per_unit = self._cells(engine)
            n_hat = noisy_count(per_unit[0].size, self.each_eps, rng)
            for b in contrib:
                v = per_unit[0] if b.field == "max_groups" else per_unit[1]
                j = choose(v, np.asarray(b.candidates), b.level, self.each_eps, rng,
                           n_hat=n_hat)
                out[b.field] = b.candidates[j]
        if values:
            cols = sorted({b.column for b in values if b.column is not None})
            got = self._values(engine, cols, rng)
            n_hat = noisy_count(got[cols[0]].size, self.each_eps, rng)
            for b in sorted(values, key=lambda b: b.field.endswith("lower")):  # upper first
                assert b.column is not None
                j, cands = 0, b.candidates
                if b.field.endswith("upper"):  # ascending from 0 (or the first candidate)
                    j = next((i for i, x in enumerate(cands) if x >= 0), 0)
                else:  # descending from below the released upper bound
                    top = out.get(b.field.replace(".lower", ".upper"))
                    if top is not None:
                        cands = tuple(x for x in cands if x < top) or cands
                i = choose(got[b.column], np.asarray(cands[j:]), b.level, self.each_eps,
                           rng, n_hat=n_hat, upper=b.field.endswith("upper"))
                out[b.field] = cands[j + i]
        return out

    def _cells(self, engine: Engine) -> tuple[F64, F64]:
        """Per unit: its groups (in the public keys) and its largest group's rows."""
        q = self.query
        spec = BoundingSpec((RowCount("rows"),), (self.unit, *q.group_by), None, self.where)
        groups: dict[KeyValue, int] = {}
        rows: dict[KeyValue, int] = {}
        for batch in aggregate_batches(engine, spec):
            got = batch.take(np.arange(batch.n_groups, dtype=np.int64))
            counts = np.asarray(got.values["rows"], dtype=np.int64).tolist()
            for key, r in zip(got.keys, counts, strict=True):
                if self.public_keys is not None and tuple(key[1:]) not in self.public_keys:
                    continue
                u = key[0]
                groups[u] = groups.get(u, 0) + 1
                rows[u] = max(rows.get(u, 0), int(r))
        return (np.asarray(list(groups.values()), dtype=np.float64),
                np.asarray(list(rows.values()), dtype=np.float64))

    def _values(self, engine: Engine, cols: list[str], rng: np.random.Generator | None
                ) -> dict[str, F64]:
        """Per unit, each column's value in one of its rows (max_rows = 1, sampled by the
        keyed mixer), read from the first snapping tier that holds it."""
        measures = [ValueSum(f"{c}.{t}", c, g, -r, r, -(2**51), 2**51)
                    for c in cols for t, (r, g) in enumerate(TIERS)]
        seed = int(as_source(rng, "auto").words(1)[0])
        spec = BoundingSpec(tuple(measures), (self.unit,), None, self.where, self.unit, 1, 1,
                            seed)
        parts: dict[str, list[F64]] = {c: [] for c in cols}
        for batch in aggregate_batches(engine, spec):
            got = batch.take(np.arange(batch.n_groups, dtype=np.int64))
            for c in cols:
                out = np.zeros(got.n_groups, dtype=np.float64)
                done = np.zeros(got.n_groups, dtype=bool)
                for t, (r, g) in enumerate(TIERS):
                    k = np.asarray(got.values[f"{c}.{t}"], dtype=np.int64)
                    inside = ~done & (np.abs(k) < 2**51)
                    out[inside] = k[inside].astype(np.float64) * g
                    done |= inside
                    if t == len(TIERS) - 1:
                        out[~done] = np.sign(k[~done]).astype(np.float64) * r
                parts[c].append(out)
        return {c: (np.concatenate(p) if p else np.zeros(0)) for c, p in parts.items()}

    def main(self, bounds: dict[str, float], schema: Schema, nb: Neighbouring
             ) -> tuple[Prepared, dict[str, float], bool]:
        """The plan at ``bounds`` (post-processing of stage 1), or at the fallback bounds
        if it cannot be prepared at them: (prepared, bounds used, fell back)."""
        lo_hi = _ordered(bounds, self.bounds)
        try:
            return prepare(_resolved(self.query, lo_hi, self.main_privacy), schema, nb), \
                lo_hi, False
        except (ValidationError, UnsupportedError):
            return self.fallback, self.fallback_bounds, True


def _ordered(bounds: dict[str, float], spec: tuple[_Bound, ...]) -> dict[str, float]:
    """Both bounds of an aggregation auto: if the released lower is not below the released
    upper, the upper becomes the next upper candidate above the lower (else the lower
    the next lower candidate below the upper) -- post-processing of public values."""
    out = dict(bounds)
    by = {b.field: b for b in spec}
    for f in list(out):
        if not f.endswith(".lower") or f.replace(".lower", ".upper") not in out:
            continue
        fu = f.replace(".lower", ".upper")
        lo, hi = out[f], out[fu]
        if lo < hi:
            continue
        above = [c for c in by[fu].candidates if c > lo]
        below = [c for c in by[f].candidates if c < hi]
        if above:
            out[fu] = above[0]
        elif below:
            out[f] = below[-1]
        else:  # both at the lattice's ends: its two smallest values (>= 2, checked)
            out[f] = by[f].candidates[0]
            out[fu] = min(c for c in by[fu].candidates if c > out[f])
    return out


def _resolved(q: Query, bounds: dict[str, float], privacy: PureDP | ZCDP) -> Query:
    """The plan with its auto fields replaced by ``bounds`` and its privacy by the main
    stage's."""
    aggs = list(q.aggregations)
    for f, v in bounds.items():
        if "." in f:
            i, side = f.split(".")
            aggs[int(i)] = replace(aggs[int(i)], **{side: v})  # type: ignore[arg-type]
    c = q.contribution
    if c is not None and c.auto:
        g = int(bounds["max_groups"]) if is_auto(c.max_groups) else c.max_groups or 1
        r: int | str | None = c.max_rows
        if is_auto(c.max_rows):
            r = int(bounds["max_rows"]) if "max_rows" in bounds else None
        c = Contribution(g, r)  # type: ignore[arg-type]
    return replace(q, aggregations=tuple(aggs), contribution=c, privacy=privacy,
                   auto_share=None)


def plan_auto(q: Query, schema: Schema, nb: Neighbouring) -> AutoPlan:
    """Check an auto plan from public values only (every refusal before the spend) and
    fix its charge, its stage-1 bounds and its fallback plan."""
    from dpsieve.queries.prepare import _check_predicate, _check_privacy

    total = _check_privacy(q.privacy, nb)
    unit = schema.privacy_unit
    c = contribution_of(q, unit)
    if unit is None:
        raise fail("lower", "query", "numbers: 'auto' bounds need a privacy unit (each "
                   "unit gives one value to a DP quantile)", q.auto_fields())
    if c.auto and unit in q.group_by:
        raise fail("group_by", "query", "columns other than the privacy unit with 'auto' "
                   "contribution bounds (grouped by its unit, each unit is one group: give "
                   "max_groups 1)", unit)
    bounds: list[_Bound] = []
    fallback: dict[str, float] = {}
    fixed: dict[str, float] = {}  # auto fields with one sensible value: no quantile
    if is_auto(c.max_groups):
        if not q.group_by:
            fixed["max_groups"] = fallback["max_groups"] = 1.0
        else:
            for name in q.group_by:
                if not schema.column(name, "group_by", "query").type.hashable:
                    raise fail("contribution", "query", "numbers when grouping by a float "
                               "column ('auto' counts each unit's groups: integer, string "
                               "or boolean group_by columns)", name)
            cap = MAX_CONTRIBUTION if q.keys is None else min(MAX_CONTRIBUTION, len(q.keys))
            bounds.append(_Bound("max_groups", tuple(float(x) for x in count_candidates(cap)),
                                 _contribution_level(q, "max_groups")))
            fallback["max_groups"] = 1.0
    if is_auto(c.max_rows) and _needs_rows(q):
        for name in q.group_by:
            if not schema.column(name, "group_by", "query").type.hashable:
                raise fail("contribution", "query", "numbers when grouping by a float "
                           "column ('auto' counts each unit's rows per group: integer, "
                           "string or boolean group_by columns)", name)
        bounds.append(_Bound("max_rows", tuple(float(x) for x in count_candidates()),
                             _contribution_level(q, "max_rows")))
        fallback["max_rows"] = 1.0
    for i, a in enumerate(q.aggregations):
        for side in ("lower", "upper"):
            if not is_auto(getattr(a, side, None)):
                continue
            if getattr(a, "per", Level.ROW) == Level.UNIT:
                raise fail(side, a.kind, "a number for per='unit' (an 'auto' bound is a "
                           "quantile of row values: per='row' aggregations)", AUTO)
            col = schema.column(a.column, "column", a.kind)  # type: ignore[union-attr]
            if not col.type.numeric:
                raise fail("column", a.kind, "a numeric column (integer, float or boolean)",
                           col.name)
            other = getattr(a, "lower" if side == "upper" else "upper")
            other_fixed = None if other is None or is_auto(other) else float(other)
            cands = value_candidates(col, side, other_fixed)
            if len(cands) < 1 or (other_fixed is None and is_auto(other) and len(cands) < 2):
                raise fail(side, a.kind, "'auto' with room for candidates beyond the other "
                           "bound", other_fixed)
            f = f"{i}.{side}"
            bounds.append(_Bound(f, tuple(cands), LEVELS[side], col.name))
            fallback[f] = _fallback_value(cands, side, other_fixed, col)
    fallback = _ordered(fallback, tuple(bounds))
    # one release per bound, and a noisy count of the values of each stage that runs
    k = len(bounds) + any(b.column is None for b in bounds) + any(
        b.column is not None for b in bounds)
    if k:
        main_privacy, each = _split(total, q.share_for_auto, k, nb)
    else:  # nothing to choose from the data: the whole privacy goes to the plan
        main_privacy, each = total, 0.0
    eps_a = round_up(k * Fraction(each))  # stated: rounded up (k eps_q exactly is charged)
    if k and not _scales(each) <= MAX_DISCRETE_SCALE:  # the noise in the samplers' range
        raise fail("auto_share", "query", "large enough for the scans' noise to stay in "
                   f"the exact samplers' range (each of {k} releases would get eps "
                   f"{each!r})", q.share_for_auto)
    fb = prepare(_resolved(q, fallback, main_privacy), schema, nb)  # every other check
    if q.selection is None:
        charge: PrivacyDescription = total
    else:
        charge = (ApproxDP(total.eps, q.selection.delta, nb) if isinstance(total, PureDP)
                  else ApproxZCDP(total.rho, q.selection.delta, nb))
    where = (*(_check_predicate(schema, p) for p in q.where),
             Predicate(unit, Op.NOT_NULL), *_key_filter(q, schema))
    keys = None if fb.spec.keys is None else frozenset(fb.spec.keys)
    return AutoPlan(q, charge, eps_a, each, tuple(bounds), main_privacy, fb, fallback, fixed,
                    unit, tuple(where), keys)


def _fallback_value(cands: list[float], side: str, fixed: float | None, col: Column) -> float:
    """The candidate nearest the declared bound on ``side`` if any, else nearest 0 on
    its side (the fallback is used only when the released bounds cannot be prepared)."""
    if col.bounds is not None:
        target = col.bounds[0] if side == "lower" else col.bounds[1]
    else:
        target = 0.0
    if side == "upper" and fixed is not None:
        target = max(target, fixed)
    if side == "lower" and fixed is not None:
        target = min(target, fixed)
    return min(cands, key=lambda x: (abs(x - target), x if side == "upper" else -x))

