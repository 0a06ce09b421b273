"""A plan checked against a schema: its charge, its engine spec, and how it is finished.

:func:`prepare` does every check that can fail *before* the budget is touched -- columns,
types, bounds, categories and keys (canonicalised, repeats refused), the privacy unit's
bounds, the privacy requested -- and computes the charge from public values only. The
:class:`Prepared` query then runs on any engine (:meth:`Prepared.run`): the engine returns
per-group integers, dpsieve adds exact noise (and, for DP key selection, keeps the groups
whose noisy unit count passes the threshold), and the kinds finish the estimates.

The charge is the composition of the releases: ``PureDP(eps)`` or ``ZCDP(rho)`` as
requested (each release gets a share, rounded down; the shares sum to at most the
request, checked exactly), and with DP key selection ``ApproxDP(eps, delta)`` or
``ApproxZCDP(rho, delta)``. :meth:`PlanCharge.pld` is the exact PLD of the composition where
one is known (pure DP), for filters that account with PLDs. A plan asking for
``ApproxDP(eps, delta)`` is prepared both ways, pure and at the rho implying it, and the
less noisy one kept among those whose charge the budget's kind can take
(:mod:`dpsieve.queries.approx`).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import fail
from dpsieve.accounting.events import (
    GDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
)
from dpsieve.accounting.pld import PLD
from dpsieve.errors import UnsupportedError
from dpsieve.mechanisms import as_source
from dpsieve.queries import engine as engine_module
from dpsieve.queries.calibrate import Calibrated, calibrate, sensitivity
from dpsieve.queries.engine import (
    Aggregates,
    BoundingSpec,
    Engine,
    Level,
    Op,
    Predicate,
    RowCount,
    aggregate_batches,
)
from dpsieve.queries.kinds import KINDS, Ctx, KindPlan, Part, label_of
from dpsieve.queries.plan import Contribution, Query
from dpsieve.queries.result import Answer, GroupAnswer
from dpsieve.queries.schema import ColumnType, KeyValue, Schema, canonical_value
from dpsieve.queries.selection import (
    NoisyThreshold,
    Selection,
    best,
    count_candidates,
    unit_candidates,
)
from dpsieve.queries.source import BudgetKind

__all__ = ["CONTRIBUTION_NEEDED", "PlanCharge", "Prepared", "Selection", "contribution_of",
           "prepare"]


@dataclass(frozen=True, slots=True)
class PlanCharge:
    """What a plan costs: ``description`` (the filter is charged this: a privacy
    description, one of :data:`dpsieve.filters.charge.Charge`) and the parts whose exact
    composition it bounds."""

    description: PrivacyDescription
    parts: tuple[Calibrated, ...]
    selection: Selection | None = None

    def pld(self) -> PLD | None:
        """The exact PLD of the composition (pure DP parts only; ``None`` otherwise)."""
        found = [c.pld() for c in self.parts]
        plds = [p for p in found if p is not None]
        if len(plds) != len(found) or not plds:
            return None
        out = plds[0]
        for p in plds[1:]:
            out = out.compose(p)
        s = self.selection
        if s is None:
            return out
        if isinstance(s, NoisyThreshold) and s.part is not None:  # its noise is a part's
            return out.compose(PLD.zero_delta(s.tail_delta))
        if not isinstance(s.charge, ApproxDP):
            return None
        return out.compose(PLD.approx_dp(s.charge.eps, s.charge.delta))


@dataclass(frozen=True, slots=True)
class Prepared:
    """A checked plan, ready to run on an engine after its charge is admitted."""

    query: Query
    spec: BoundingSpec
    charge: PlanCharge
    plans: tuple[KindPlan, ...]
    labels: tuple[str, ...]
    #: For an (eps, delta) plan, the noise chosen and why (:mod:`dpsieve.queries.approx`).
    calibration: dict[str, Any] | None = None

    def run(self, engine: Engine, rng: np.random.Generator | None = None,
            seed: int | None = None, *, batch: int | None = None) -> Answer:
        """Aggregate on ``engine``, add noise, finish. The sampling key is fresh from the
        secure source (or from ``rng`` in simulations) unless ``seed`` is given.

        With DP key selection the observed groups are streamed in batches of at most
        ``batch`` groups (default :data:`~dpsieve.queries.engine.SELECTION_BATCH`, read
        at the call) (:func:`~dpsieve.queries.engine.aggregate_batches`), each
        thresholded before the next is fetched (:meth:`Selection.keep`), so only one batch
        and the groups kept are held; the selection is the same mechanism as on all groups
        at once (docs/proofs/queries.md §5: each group's noise is drawn independently)."""
        if seed is None:
            seed = int(as_source(rng, "run").words(1)[0])
        spec = replace(self.spec, seed=seed)
        sel_info: dict[str, Any] | None = None
        sel = self.charge.selection
        thresholded: dict[str, npt.NDArray[np.float64]] = {}
        if sel is None:
            aggs = engine.aggregate(spec)
            idx = np.arange(len(aggs.keys))
        else:
            kept: list[Aggregates] = []
            counts: list[npt.NDArray[np.int64]] = []
            size = engine_module.SELECTION_BATCH if batch is None else batch
            for got in aggregate_batches(engine, spec, size):
                chosen = sel.keep(got, rng)
                del got  # only the groups kept are held while the next batch is fetched
                if chosen is not None:
                    kept.append(chosen.aggs)
                    if chosen.noisy is not None:
                        counts.append(chosen.noisy)
            aggs = Aggregates.concat(spec, kept, engine.name)
            del kept
            order = sorted(range(len(aggs.keys)), key=lambda i: _key_order(aggs.keys[i]))
            idx = np.asarray(order, dtype=np.int64)
            sel_info = {**sel.info(), "selected": int(idx.size)}
            if sel.part is not None:  # the released count is the one thresholded
                noisy = (np.concatenate(counts) if counts else np.zeros(0, dtype=np.int64))
                thresholded[sel.part] = noisy[idx].astype(np.float64).reshape(-1, 1)
        keys = list(aggs.keys)
        noisy_parts: dict[str, Any] = {}
        cal: dict[str, Calibrated] = {}
        for c, part in zip(self.charge.parts, (p for k in self.plans for p in k.parts),
                           strict=True):
            name = part.release.name
            if name in thresholded:
                noisy_parts[name] = thresholded[name] * c.release.unit
            else:
                noisy_parts[name] = c.draw(part.exact(aggs)[idx], rng)
            cal[name] = c
        groups = []
        for j, i in enumerate(idx.tolist()):
            ests = tuple(k.finish(noisy_parts, cal, j) for k in self.plans)
            groups.append(GroupAnswer(tuple(keys[i]), ests))
        noise = {lab: {p.release.name: cal[p.release.name].noise() for p in k.parts}
                 for lab, k in zip(self.labels, self.plans, strict=True)}
        details = {p.release.name: cal[p.release.name].details()
                   for k in self.plans for p in k.parts}
        covers = {lab: k.covers for lab, k in zip(self.labels, self.plans, strict=True)}
        return Answer(self.labels, tuple(groups), noise, sel_info, details, covers)


def _key_order(key: tuple[KeyValue, ...]) -> tuple[tuple[int, str], ...]:
    return tuple((0, "") if v is None else (1, repr(v)) for v in key)


def _check_privacy(p: Any, neighbouring: Neighbouring) -> PureDP | ZCDP:
    if isinstance(p, GDP):
        raise UnsupportedError(
            "GDP(mu) noise is not offered: releases use the exact discrete Gaussian, which is "
            "not known to be mu-GDP (its pessimistic PLD has mass at +inf, which no GDP "
            "budget dominates). Request 'pure' (eps, Laplace noise; GDP budgets admit it "
            "through the residue filter) or 'zcdp' (rho) with a zCDP or RDP budget.")
    if isinstance(p, ApproxDP):  # prepare() takes these first: here only 'auto' plans
        raise fail("privacy", "query", "PureDP(eps) or ZCDP(rho) with 'auto' bounds (an "
                   "ApproxDP(eps, delta) plan needs numeric bounds)", p)
    if not isinstance(p, PureDP | ZCDP):
        raise fail("privacy", "query", "PureDP(eps), ZCDP(rho) or ApproxDP(eps, delta)", p)
    value = p.eps if isinstance(p, PureDP) else p.rho
    if not (0 < value < math.inf):
        raise fail("eps" if isinstance(p, PureDP) else "rho", "query", "a finite float > 0",
                   value)
    if p.neighbouring != neighbouring:
        raise fail("privacy", "query", f"under the budget's relation {neighbouring.value!r}",
                   p)
    return p


def _check_predicate(schema: Schema, p: Predicate) -> Predicate:
    col = schema.column(p.column, "column", "where")
    if col.type == ColumnType.OTHER:
        raise fail("column", "where", "a column of type integer, float, string or boolean",
                   p.column)
    if p.op in (Op.IS_NULL, Op.NOT_NULL):
        return p
    if p.op in (Op.IN, Op.NOT_IN):
        vals = p.value if isinstance(p.value, tuple) else (p.value,)
        canon = tuple(canonical_value(col.type, v, "value", "where", col.storage)
                      for v in vals)
        return Predicate(p.column, p.op, tuple(dict.fromkeys(canon)))
    if col.type == ColumnType.BOOLEAN and p.op not in (Op.EQ, Op.NE):
        raise fail("op", "where", "'==' or '!=' on a boolean column", p.op.value)
    return Predicate(p.column, p.op, canonical_value(col.type, p.value, "value", "where",
                                                     col.storage))


def _keys(schema: Schema, q: Query) -> tuple[tuple[KeyValue, ...], ...] | None:
    cols = [schema.column(c, "group_by", "query") for c in q.group_by]
    for c in cols:
        if c.type == ColumnType.OTHER or (q.selection is not None and not c.type.hashable):
            raise fail("group_by", "query", "columns of type integer, string or boolean (or "
                       "float with public keys)", c.name)
    if q.keys is None:
        return None if q.group_by else ((),)
    if len(q.keys) > 100_000:
        raise fail("keys", "query", "at most 100000 keys", len(q.keys))
    out = []
    for k in q.keys:
        if len(k) != len(cols):
            raise fail("keys", "query", f"tuples of {len(cols)} values (one per group_by "
                       "column)", list(k))
        out.append(tuple(canonical_value(c.type, v, "keys", "query", c.storage)
                         for c, v in zip(cols, k, strict=True)))
    if len(set(out)) != len(out):
        raise fail("keys", "query", "a list without repeated (or equal) keys", q.keys)
    return tuple(out)


def _shares(q: Query, sel: Fraction) -> list[tuple[Fraction, ...]]:
    """Per aggregation, the shares of its parts, beside ``sel`` for a separate selection."""
    n = len(q.aggregations)
    w = [Fraction(x) for x in (q.weights or (1.0,) * n)]
    tw = sum(w)
    out = []
    for a, wi in zip(q.aggregations, w, strict=True):
        parts = KINDS[a.kind].parts
        each = (1 - sel) * wi / tw / parts
        out.append((each,) * parts)
    if sum(s for t in out for s in t) + sel > 1:  # exact: cannot happen
        raise fail("weights", "query", "shares summing to at most 1", q.weights)
    return out


#: What a refusal of a plan without contribution bounds on a privacy unit says to do.
CONTRIBUTION_NEEDED = (
    "given when the data set has a privacy unit: {'max_groups': G, 'max_rows': R} (each "
    "unit's rows in at most G groups, at most R rows in each), or 'auto' (bounds chosen "
    "by DP quantiles of the data on 'auto_share' of the privacy); a preview "
    "(Session.preview, dpsieve query --preview, POST .../queries?preview=true) states "
    "each choice's noise before any spend")


def contribution_of(query: Query, unit: str | None) -> Contribution:
    """The plan's contribution bounds, checked against the data set's privacy unit before
    any spend: required with a unit (no silent default: :data:`CONTRIBUTION_NEEDED`),
    absent (or the trivial ``max_groups=1``) without one."""
    c = query.contribution
    if unit is None:
        if c is not None and (c.max_groups not in (None, 1) or c.max_rows is not None):
            raise fail("contribution", "query", "absent: the data set has no privacy unit "
                       "(every row is one person)",
                       {"max_groups": c.max_groups, "max_rows": c.max_rows})
        return Contribution(1)
    if c is None:
        raise fail("contribution", "query", CONTRIBUTION_NEEDED, None)
    if c.max_groups is None:
        if query.group_by:
            raise fail("max_groups", "contribution", "given when grouping on a data set with "
                       "a privacy unit: the most groups one unit's rows may count in (no "
                       "silent 1), or 'auto' (chosen from the data)", None)
        return Contribution(1, c.max_rows)
    return c


def prepare(query: Query, schema: Schema, neighbouring: Neighbouring,
            budget: BudgetKind | None = None) -> Prepared:
    """Check ``query`` against ``schema`` and compute its charge (no data is read).
    ``budget``, the kind of budget it will be charged to (public), decides an (eps, delta)
    plan's candidates and charge (:mod:`dpsieve.queries.approx`); other plans ignore it
    (their charge is what they request)."""
    if isinstance(query.privacy, ApproxDP) and not query.auto_fields():
        from dpsieve.queries.approx import prepare_approx

        return prepare_approx(query, schema, neighbouring, budget)
    total = _check_privacy(query.privacy, neighbouring)
    keys = _keys(schema, query)
    where = tuple(_check_predicate(schema, p) for p in query.where)
    unit = schema.privacy_unit
    c = contribution_of(query, unit)
    if query.auto_fields():
        raise fail("contribution" if c.auto else "lower", "query", "numbers here: 'auto' "
                   "bounds are chosen by queries.auto.prepare_auto (a query request does "
                   "so)", query.auto_fields())
    max_groups, max_rows = c.max_groups, c.max_rows
    assert isinstance(max_groups, int)  # not 'auto': refused above
    assert not isinstance(max_rows, str)
    if query.selection is not None and neighbouring != Neighbouring.ADD_REMOVE:
        raise UnsupportedError("DP key selection is offered under add/remove neighbours only")
    ctx = Ctx(schema, total, neighbouring, unit is not None, max_groups, max_rows,
              None if keys is None else len(keys), query.raw)
    n_groups = 1 if keys is None else len(keys)
    selection: Selection | None = None
    description: PrivacyDescription = total
    if query.selection is None:
        plans, parts = _build(query, ctx, total, _shares(query, Fraction(0)), n_groups,
                              keys is not None)
    else:
        selection, plans, parts = _select(query, ctx, total)
        description = (ApproxDP(total.eps, query.selection.delta, neighbouring)
                       if isinstance(total, PureDP)
                       else ApproxZCDP(total.rho, query.selection.delta, neighbouring))
    measures = [m for kp in plans for p in kp.parts for m in p.measures]
    if not measures:
        measures = [RowCount("_rows")]
    spec = BoundingSpec(tuple(measures), query.group_by, keys, where, unit,
                        max_groups if unit is not None else 1,
                        max_rows if unit is not None else None)
    labels = tuple(label_of(a) for a in query.aggregations)
    return Prepared(query, spec, PlanCharge(description, tuple(parts), selection), tuple(plans),
                    labels)


def _build(query: Query, ctx: Ctx, total: PureDP | ZCDP, shares: list[tuple[Fraction, ...]],
           n_groups: int, public: bool) -> tuple[list[KindPlan], list[Calibrated]]:
    """The kinds' plans at ``shares`` and their calibrated parts (observed keys: the
    release is over at most ``max_groups`` coordinates a unit changes, calibrated as a
    vector, never as one integer coordinate)."""
    plans = [KINDS[a.kind].build(a, ctx, sh, f"a{i}.")
             for i, (a, sh) in enumerate(zip(query.aggregations, shares, strict=True))]
    _check_size(n_groups, plans, public)
    groups = n_groups if public else max(2, ctx.k)
    parts = [_calibrate(part, s, ctx, total, groups)
             for kp, sh in zip(plans, shares, strict=True)
             for part, s in zip(kp.parts, sh, strict=True)]
    return plans, parts


def _count_part(plans: list[KindPlan], ctx: Ctx) -> tuple[int, str, int] | None:
    """The released count DP key selection may threshold: (flat part index, statistic,
    the most one unit adds to it), a unit count first, else the first row count."""
    found: list[tuple[int, str, int]] = []
    flat = [p for kp in plans for p in kp.parts]
    for i, part in enumerate(flat):
        m = part.measures[0]
        if len(part.measures) == 1 and isinstance(m, RowCount) and part.release.dims == 1:
            units = m.level == Level.UNIT or not ctx.has_unit
            found.append((i, "units" if units else "rows", part.release.contrib.a1))
    found.sort(key=lambda f: f[1] != "units")
    return found[0] if found else None


def _select(query: Query, ctx: Ctx, total: PureDP | ZCDP
            ) -> tuple[Selection, list[KindPlan], list[Calibrated]]:
    """The selection construction releasing a group with the fewest units, with the
    plans and parts it goes with (docs/proofs/queries.md §5)."""
    sel = query.selection
    assert sel is not None
    l0 = ctx.k
    cands: list[tuple[Selection, list[KindPlan], list[Calibrated]]] = []
    if sel.by in ("auto", "count"):
        shares = _shares(query, Fraction(0))
        plans, parts = _build(query, ctx, total, shares, 1, False)
        found = _count_part(plans, ctx)
        if found is None and sel.by == "count":
            raise fail("by", "select", "'auto' or 'units' for a query without a count or "
                       "mean aggregation (by='count' thresholds the count it releases)",
                       sel.by)
        if found is not None:
            i, statistic, rows = found
            cal, share = parts[i], [s for t in shares for s in t][i]
            for s, mech, charge in count_candidates(
                    total, cal.mechanism, share, cal.sens.l2sq, rows, statistic,
                    cal.release.name, sel.delta, l0, max(2, l0)):
                ps = list(parts)
                if mech is not None and charge is not None:
                    ps[i] = Calibrated(cal.release, cal.sens, mech, charge)
                cands.append((s, plans, ps))
    if sel.by in ("auto", "units"):
        n = len(query.aggregations)
        share = Fraction(1, n + 1) if sel.share is None else Fraction(sel.share)
        shares = _shares(query, share)
        plans, parts = _build(query, ctx, total, shares, 1, False)
        cands.extend((s, plans, parts)
                     for s in unit_candidates(total, share, sel.delta, l0))
    if not cands:
        raise fail("privacy", "query", "large enough for DP key selection at this delta "
                   "(every construction's noise exceeds the exact samplers' range)", total)
    out: tuple[Selection, list[KindPlan], list[Calibrated]] = best(cands, lambda c: c[0])
    return out


#: The most numbers a plan with public keys may release (groups x numbers per group),
#: unless ``DPSIEVE_MAX_QUERY_CELLS`` says otherwise. Each costs ~10 us of exact noise and
#: ~0.5 KB of answer: 10^6 is ~10 s and ~0.5 GB (measured), refused before the spend.
MAX_CELLS_ENV = "DPSIEVE_MAX_QUERY_CELLS"
DEFAULT_MAX_CELLS = 1_000_000


def max_cells() -> int:
    """The limit on the numbers a plan releases (``DPSIEVE_MAX_QUERY_CELLS``, else
    :data:`DEFAULT_MAX_CELLS`); a bad value is refused naming the variable."""
    env = os.environ.get(MAX_CELLS_ENV)
    if env is None or not env.strip():
        return DEFAULT_MAX_CELLS
    try:
        value = int(env.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise fail(MAX_CELLS_ENV, "query", "an integer >= 1", env)
    return value


def _check_size(n_groups: int, plans: list[KindPlan], public: bool) -> None:
    """Refuse, from public values before any spend, a plan whose answer would be too large
    to compute and store (every request that can be large is costed first; 10^5
    public keys x a 10^4-category histogram is 10^9 noisy numbers). With DP key selection
    the groups are not known in advance: each group's numbers are checked."""
    per = sum(p.release.dims for kp in plans for p in kp.parts)
    cells = n_groups * per if public else per
    limit = max_cells()
    if cells > limit:
        raise fail("keys" if public and n_groups > 1 else "aggregations", "query",
                   f"a plan releasing at most {limit} numbers ({MAX_CELLS_ENV} sets the "
                   f"limit; this one releases {n_groups} groups x {per} numbers = {cells}, "
                   "refused before any spend)", cells)


#: The largest noise scale (in answer units) a release may have: answers and intervals
#: stay finite doubles with room for the tails (2^1016 ~ 7e305: a draw would need ~250
#: scales to overflow, probability below e^-250).
MAX_ANSWER_SCALE = 2.0**1016


def _calibrate(part: Part, share: Fraction, ctx: Ctx, total: PrivacyDescription,
               n_groups: int) -> Calibrated:
    """The part's mechanism; refused (before the spend) when its noise in answer units
    would not be a finite double far from overflow: it would answer infinity."""
    sens = sensitivity(part.release.contrib, ctx.max_groups if ctx.has_unit else 1,
                       ctx.groups, ctx.neighbouring)
    c = calibrate(part.release, sens, total, share, n_groups)
    n = c.noise()
    if not max(abs(n.scale), abs(n.std), abs(n.ci95)) < MAX_ANSWER_SCALE:
        raise fail("aggregations", "query", f"noise of finite scale below {MAX_ANSWER_SCALE!r} "
                   f"in the answer's units ({part.release.name!r} would have scale "
                   f"{n.scale!r}: give tighter bounds, smaller coefficients or more privacy)",
                   part.release.name)
    return c
