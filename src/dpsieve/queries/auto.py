"""Bounds that fit the data: a plan's ``"auto"`` bounds chosen privately, then the plan.

A plan may leave its contribution bounds (``max_groups``, ``max_rows``) and a per-row
numeric aggregation's clamping bounds (``lower``, ``upper``) to the data. Such a plan is
run in two stages under **one** charge, fixed before the spend from public values only:

1. **Choices** (``auto_share`` of the privacy, default
   :data:`~dpsieve.queries.plan.DEFAULT_AUTO_SHARE`): one exponential-mechanism choice
   (exact permute-and-flip, :func:`choose`) per auto bound over a public candidate
   lattice (:func:`count_candidates`, :func:`value_candidates`), each on an equal part
   ``eps_q`` of the stage's pure ``eps_a``. Each privacy unit contributes exactly one
   value to each choice: its number of groups, its largest number of rows in one group,
   and the value of one of its rows (sampled by the keyed mixer of contribution bounding:
   a function of the sampling key and the unit's own rows only).
2. **The plan** with the released bounds, on the rest of the privacy: an ordinary plan
   (:func:`~dpsieve.queries.prepare.prepare`), its bounds a post-processing of stage 1.

The charge is the plan's own privacy (``PureDP(eps)`` / ``ZCDP(rho)``, or with DP key
selection ``ApproxDP(eps, delta)`` / ``ApproxZCDP(rho, delta)``): it dominates the
composition, checked in exact rationals before the spend (pure: ``k eps_q + eps_main <=
eps``; zCDP: each choice is ``eps_q``-DP, so ``eps_q^2 / 2``-zCDP, and ``k eps_q^2 / 2 +
rho_main <= rho``). docs/proofs/queries.md §7 proves it.

**Targets: the bias / noise trade-off, not a fixed quantile.** A bound ``c`` costs noise
in proportion to ``c`` and bias in proportion to what it cuts: raising it one unit saves
one row (or one unit of value) for every unit beyond it and adds ``s`` (the noise std per
unit of sensitivity) to every released number's std. The sum of bias and std (an upper
bound on the RMSE within a factor ``sqrt 2``) is therefore least where the units beyond
``c`` number ``s G`` (``G`` the public keys; Amin, Kulesza, Munoz Medina & Vassilvitskii
2019 for one total). So each bound has a *target* -- the units it may leave beyond it --
fixed from public values (:func:`_targets`): ``s G`` for ``max_groups``; ``s G L0 / 2``
for ``max_rows`` (each unit beyond it counted as :data:`CELLS_PER_UNIT` cells beyond);
``s G / 2`` for a column bound (a centred sum's sensitivity is half the range); a plan of
means, variances and quantiles only takes its contribution bounds at the median
(truncation at random barely biases a ratio). The target grows as eps falls, so the bounds
shrink with it: a count per group at eps 0.1 wants fewer rows per unit than at eps 1.

**Why the exponential mechanism with a prior, not a scan or a plain quantile.** A choice
scores each candidate by its *excess*, the units beyond it over the target (a count:
sensitivity 1, monotonic under add/remove and replace-one alike, so ``exp(eps_q q)``),
so every candidate within target scores the same -- and above the data's maximum the
lattices run on for decades (1e6 rows; 9e18 for a BIGINT), where a plain exponential
mechanism would spread evenly. A data-independent prior ``exp(-beta i)`` on the ``i``-th
candidate of the walk (upward from the smallest count or the first non-negative value,
downward from below the upper bound for a lower bound) keeps the first candidate within
target likely (:data:`PRIOR_STEP`). The AboveThreshold scan this replaces spent a third of each
release on its comparisons and needed a noisy unit count for its threshold; at eps 0.1 on
1,618 units its shared threshold noise ran past the data (to 1e6 rows) in a few percent
of runs.

**Which way each choice errs.** The prior prefers a candidate ``i`` steps short of the
target unless its excess is above ``beta i / eps_q`` units: an upper bound errs low and
a lower bound high (more clamping, less noise); ``max_groups`` capped by the public keys
has only the ``eps_q / 2`` part of the prior (its empty tail ends at the keys' count) and
errs high within target. With too little privacy for the units there are (``eps_q``
times the units below a few) the bounds may land far from the data, never unsoundly:
privacy does not depend on them.

**Totality.** After the spend nothing can fail on a row's value: the stage-1 aggregates
come from the engines' total specs (one sampled row per unit, unit-keyed cells), an empty
data set gives no values (the prior alone chooses), and if the plan cannot be prepared at
the released bounds (a public fact of those bounds, e.g. noise past the samplers' range)
it runs at the *fallback* bounds checked before the spend (the smallest candidates),
which the answer states. Permute-and-flip's running time depends on the scores (the
stage's aggregation already depends on the data's size).
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
from dpsieve.mechanisms import as_source
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
    "PRIOR_STEP",
    "AutoPlan",
    "choose",
    "count_candidates",
    "plan_auto",
    "units_per_step",
    "value_candidates",
]

F64 = npt.NDArray[np.float64]

#: Cells beyond ``max_rows`` per unit beyond it, assumed in its target (module docstring).
CELLS_PER_UNIT = 2
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


#: The prior of each choice: candidate ``i`` (counted from where the walk starts) is
#: weighted ``exp(-beta i)``, ``beta = max(PRIOR_STEP, eps / 2)``, before the data's
#: score (a data-independent base measure). Above the data every candidate scores the
#: same, so without it the choice would spread evenly over a lattice's empty tail (to 1e6
#: rows or 9e18 of a BIGINT); at 3/2 the first candidate within target keeps ~78 % of the
#: tail's mass (``eps / 2``: nearly all of it at a large eps). The price: a candidate
#: ``i`` steps short of the target is preferred unless its excess is above
#: ``beta i / eps`` units (the choice errs low: more clamping, less noise).
PRIOR_STEP = Fraction(3, 2)
#: Each score is an integer (exact in a double): ``-SCORE_UNIT x excess - B i``.
SCORE_UNIT = 2**16
#: The smallest eps of one choice (refused naming ``auto_share`` below it, before the
#: spend): its prior's integer scores stay below 2^51 on any lattice, and below it a
#: choice says nothing of fewer than ~1e9 units.
MIN_EACH_EPS = 1e-9


def _excesses(values: F64, candidates: F64, target: float | None, upper: bool
              ) -> npt.NDArray[np.int64]:
    """Per candidate (in walk order), how far it is from what it should hold: with a
    ``target`` the units beyond it over the target, ``max(0, A(c) - floor(target))``
    (``A(c)`` the values above ``c`` for an upper bound, below it for a lower one); with
    ``target=None`` its distance from the median, ``|#{v <= c} - #{v > c}|``."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    n = v.size
    le = np.searchsorted(v, candidates, side="right")
    if target is None:
        return np.abs(2 * le - n).astype(np.int64)
    a = n - le if upper else np.searchsorted(v, candidates, side="left")
    return np.maximum(0, a - math.floor(target)).astype(np.int64)


def choose(values: F64, candidates: F64, target: float | None, eps: float,
           rng: np.random.Generator | None, *, upper: bool = True,
           nb: Neighbouring = Neighbouring.ADD_REMOVE, prior: bool = True) -> int:
    """The index (into ``candidates``, increasing) of the candidate released for one bound
    from one value per unit: the exponential mechanism, by exact permute-and-flip
    (:func:`~dpsieve.mechanisms.select.permute_and_flip`), over the candidates walked
    upward (``upper``) or downward, scoring each ``-excess`` (:func:`_excesses`: the
    units beyond it over ``target``, or its distance from the median) with the prior
    ``-PRIOR_STEP i`` per step of the walk. ``eps``-DP: a tail count moves by at most 1
    when one unit is added, removed or changed, all the tail counts the same way (one
    value ``v`` changed to ``v' > v`` adds 1 to the counts above ``c`` for ``c`` in
    ``[v, v')`` and takes 1 from the counts below ``c`` for ``c`` in ``(v, v']``), and
    ``x -> min(max(0, x - floor(t)), cap)`` is non-decreasing and 1-Lipschitz: a target's
    excesses are monotonic with sensitivity 1 under either ``nb`` (``exp(eps q)``, not
    ``exp(eps q / 2)``). The median's ``|2 #{v <= c} - n|`` moves by 1 when one is added
    or removed, by 2 when one is changed (its sensitivity then is 2), and not all one
    way (the absolute value): never monotonic. The prior is data-independent
    (``prior=False``: only its ``eps / 2`` part, for a walk whose empty tail is short:
    ``max_groups`` capped by the public keys' count). Total: empty ``values`` score every
    candidate by the prior alone."""
    from dpsieve.mechanisms.select import permute_and_flip

    c = np.asarray(candidates, dtype=np.float64)
    walk = c if upper else c[::-1]
    exc = _excesses(values, walk, target, upper).tolist()
    monotonic = target is not None  # under either neighbouring (docstring)
    sens = 2 if target is None and nb == Neighbouring.REPLACE_ONE else 1
    # exp(coef q), coef = eps / (M sens (1 or 2)); the prior exp(-PRIOR_STEP i) is
    # B i = PRIOR_STEP i / coef in score units, rounded (data-independent either way)
    half = 1 if monotonic else 2
    limit = 2**52
    m = SCORE_UNIT
    while True:
        beta = max(PRIOR_STEP if prior else Fraction(0), Fraction(eps) / 2)
        b = round(beta * m * sens * half / Fraction(eps))
        if b * walk.size < limit // 2 or m == 1:
            break
        m //= 2
    b = min(b, (limit // 2) // max(1, walk.size))
    cap = (limit // 2) // m  # excesses above it are equally bad: clamped (1-Lipschitz)
    scores = [-float(min(e, cap) * m + b * i) for i, e in enumerate(exc)]
    j = permute_and_flip(scores, eps, m * sens, rng, monotonic=monotonic)
    return j if upper else c.size - 1 - j


def units_per_step(eps: float, median: bool, capped: bool, nb: Neighbouring) -> float:
    """The evidence one step of a choice's walk costs (the preview's figure, public): a
    candidate ``k`` steps further along the walk is more likely than an earlier one only
    if its excess (:func:`_excesses`: the units beyond the target, or ``|#{v <= c} -
    #{v > c}|`` for the ``median``) is smaller by more than ``k`` times this. From
    :func:`choose`'s parameters: its prior costs ``beta = max(PRIOR_STEP, eps / 2)``
    nats a step (``eps / 2`` for ``max_groups`` ``capped`` by the public keys), a unit
    of excess ``eps`` nats with a target (monotonic, sensitivity 1) and ``eps / (2 s)``
    for the median (``s`` 2 under replace-one, else 1). The data's size is not public,
    so this tells the analyst before the spend how many units the data must hold to move
    a bound ``k`` steps from where its walk starts (e.g. 12,000 for the 20 steps from 0
    to 100 at ``eps`` 0.0025: benchmarks/RESULTS.md, issue 24)."""
    e = Fraction(eps)
    beta = max(Fraction(0) if capped else PRIOR_STEP, e / 2)
    if not median:
        return float(beta / e)
    return float(beta * 2 * (2 if nb == Neighbouring.REPLACE_ONE else 1) / e)


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
    ``<i>.upper``), its candidates and target: the units it should leave beyond it
    (``max_rows``: per group a unit keeps; :func:`_targets`), or ``None``: the median."""

    field: str
    candidates: tuple[float, ...]
    target: float | None
    column: str | None = None  # value bounds: the column


def _is_total(q: Query) -> bool:
    """A plan with a count, sum, histogram or linear aggregation (a total: every group or
    row a unit loses biases it down), not only means, variances and quantiles (dropping a
    unit's groups or rows at random leaves a ratio nearly unbiased)."""
    return any(not isinstance(a, Mean | Variance | Quantile) for a in q.aggregations)


def _noise_unit(main: PureDP | ZCDP, q: Query) -> float:
    """The noise std of one released number per unit of its sensitivity in the main stage,
    the privacy split evenly over the aggregations: Laplace ``sqrt(2) A / eps``, Gaussian
    ``sqrt(A / (2 rho))`` (an approximation of each kind's calibration: it sets targets
    only, never privacy)."""
    k = max(1, len(q.aggregations))
    if isinstance(main, PureDP):
        return math.sqrt(2) * k / main.eps
    return math.sqrt(k / (2 * main.rho))


def _targets(q: Query, main: PureDP | ZCDP) -> dict[str, float | None]:
    """Each bound's target (module docstring, "Targets"): with ``s`` the noise unit and
    ``G`` the public keys (1 without), ``max_groups`` ``s G`` units beyond it, ``max_rows``
    ``s G L0 / CELLS_PER_UNIT`` units (``L0`` the released or given ``max_groups``), a
    column bound ``s G / 2``; for a plan of ratios only, the contribution bounds' median."""
    s = _noise_unit(main, q)
    g = len(q.keys) if q.keys is not None else 1
    total = _is_total(q)
    return {"max_groups": s * g if total else None,
            "max_rows": s * g / CELLS_PER_UNIT if total else None,
            "value": s * g / 2}


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
    l0: float = 1.0  # the given max_groups (max_rows' target when max_groups is not auto)

    def figures(self) -> dict[str, Any]:
        """The public figures of the auto stage (preview): its charge, share, targets,
        each bound's candidate range and the evidence a step of its walk costs
        (:func:`units_per_step`); the plan's noise depends on the bounds it releases, so
        none is stated."""
        return {
            "charge": self.charge.to_dict(),
            "noise": None,
            "labels": list(self.fallback.labels),
            "intervals": None,
            "selection": None,
            "auto": {
                "share": self.query.share_for_auto,
                "privacy": PureDP(self.auto_eps, self.charge.neighbouring).to_dict(),
                "each": {b.field: {"eps": self.each_eps, "target": b.target,
                                   "candidates": [b.candidates[0], b.candidates[-1]],
                                   "count": len(b.candidates),
                                   "units_per_step": units_per_step(
                                       self.each_eps, b.target is None,
                                       b.field == "max_groups"
                                       and self.query.keys is not None,
                                       self.charge.neighbouring)}
                         for b in self.bounds},
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
                "targets": {b.field: b.target for b in self.bounds}}

    def release(self, engine: Engine, rng: np.random.Generator | None) -> dict[str, float]:
        """Stage 1: the released bounds (after the spend; total). ``max_groups`` first (its
        value sets ``max_rows``' target), a column's upper bound before its lower."""
        out: dict[str, float] = dict(self.fixed)
        contrib = [b for b in self.bounds if b.column is None]
        values = [b for b in self.bounds if b.column is not None]
        nb = self.charge.neighbouring
        if contrib:
            per_unit = self._cells(engine)
            for b in contrib:  # max_groups before max_rows (plan_auto's order)
                v = per_unit[0] if b.field == "max_groups" else per_unit[1]
                t = b.target
                if b.field == "max_rows" and t is not None:
                    t *= out.get("max_groups", self.l0)
                capped = b.field == "max_groups" and self.query.keys is not None
                j = choose(v, np.asarray(b.candidates), t, self.each_eps, rng, nb=nb,
                           prior=not capped)
                out[b.field] = b.candidates[j]
        if values:
            cols = sorted({b.column for b in values if b.column is not None})
            got = self._values(engine, cols, rng)
            for b in sorted(values, key=lambda b: b.field.endswith("lower")):  # upper first
                assert b.column is not None
                j, cands = 0, b.candidates
                if b.field.endswith("upper"):  # upward from 0 (or the first candidate)
                    j = next((i for i, x in enumerate(cands) if x >= 0), 0)
                else:  # downward from below the released upper bound
                    top = out.get(b.field.replace(".lower", ".upper"))
                    if top is not None:
                        cands = tuple(x for x in cands if x < top) or cands
                i = choose(got[b.column], np.asarray(cands[j:]), b.target, self.each_eps,
                           rng, upper=b.field.endswith("upper"), nb=nb)
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
                                 None))
            fallback["max_groups"] = 1.0
    if is_auto(c.max_rows) and _needs_rows(q):
        for name in q.group_by:
            if not schema.column(name, "group_by", "query").type.hashable:
                raise fail("contribution", "query", "numbers when grouping by a float "
                           "column ('auto' counts each unit's rows per group: integer, "
                           "string or boolean group_by columns)", name)
        bounds.append(_Bound("max_rows", tuple(float(x) for x in count_candidates()),
                             None))
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
            bounds.append(_Bound(f, tuple(cands), None, col.name))
            fallback[f] = _fallback_value(cands, side, other_fixed, col)
    fallback = _ordered(fallback, tuple(bounds))
    k = len(bounds)  # one release per bound
    if k:
        main_privacy, each = _split(total, q.share_for_auto, k, nb)
    else:  # nothing to choose from the data: the whole privacy goes to the plan
        main_privacy, each = total, 0.0
    eps_a = round_up(k * Fraction(each))  # stated: rounded up (k eps_q exactly is charged)
    if k and each < MIN_EACH_EPS:
        raise fail("auto_share", "query", f"large enough for each of the {k} choices to "
                   f"get eps >= {MIN_EACH_EPS:g} (it would get {each!r})", q.share_for_auto)
    targets = _targets(q, main_privacy)
    bounds = [replace(b, target=targets[b.field if b.column is None else "value"])
              for b in bounds]
    fb = prepare(_resolved(q, fallback, main_privacy), schema, nb)  # every other check
    if q.selection is None:
        charge: PrivacyDescription = total
    else:
        charge = (ApproxDP(total.eps, q.selection.delta, nb) if isinstance(total, PureDP)
                  else ApproxZCDP(total.rho, q.selection.delta, nb))
    where = (*(_check_predicate(schema, p) for p in q.where),
             Predicate(unit, Op.NOT_NULL), *_key_filter(q, schema))
    keys = None if fb.spec.keys is None else frozenset(fb.spec.keys)
    l0 = float(c.max_groups) if isinstance(c.max_groups, int) else 1.0
    return AutoPlan(q, charge, eps_a, each, tuple(bounds), main_privacy, fb, fallback, fixed,
                    unit, tuple(where), keys, l0)


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

