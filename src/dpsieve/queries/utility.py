"""The data owner's utility analysis: bias and noise of candidate bounds. **Not private.**

For a declared typical plan (counts, sums and means, per row or per unit, with public keys,
DP key selection or no grouping) and candidate contribution bounds (``max_groups``,
``max_rows``) and clamping bounds (``lower``, ``upper``), :func:`analyze` reports per
candidate and aggregation:

* **bias**, computed exactly on the data: per group, the expected bounded answer (over
  the random choice of the groups and rows a unit keeps; no noise) minus the true,
  unbounded answer (every row of every unit, no clamping: the same query with bounds that
  bind nowhere), and the share of rows and of (unit, group) cells the bounds drop;
* **noise**: each released number's std from the same calibration as the preview (the
  candidate plan is prepared as a run prepares it: :func:`~dpsieve.queries.prepare.prepare`);
* **RMSE** per group: the root of the expected squared error of the answer as released
  by default, ``clamp(bounded + noise)`` (counts at >= 0, a sum of non-negative values
  at >= 0, a mean into its bounds; ``raw`` plans unclamped: ``bias^2 + std^2``) minus
  the truth; with DP key selection a group is released with probability ``P`` and a group
  not released costs its whole true value: ``P mse + (1 - P) truth^2``;
* the **recommended** candidate: the smallest score, the mean over the plan's
  aggregations of RMSE / RMS(truth) (unit-free; with one aggregation, the smallest RMSE).

Why this may be computed without privacy: it is for the data owner only, who sees the
data anyway, to choose the *public* declarations (the bounds of a typical query, the
defaults offered to analysts). What it returns is a function of every row and is never
released to an analyst: no analyst route of the service reaches it, it never touches a
budget or the ledger, and bounds chosen with it are public parameters whose choice is the
owner's (docs/queries.md, "Choosing bounds: the owner's utility analysis"). Bounds that
must be chosen privately by an analyst use ``contribution="auto"`` instead.

Which way the figures err:

* The expected bounded answer is exact for counts and sums (each unit keeps each of its
  ``G`` cells with probability ``min(1, max_groups / G)`` and each of a cell's ``n`` rows
  with probability ``min(1, max_rows / n)``: the engines' keyed priorities choose uniform
  subsets; docs/queries-engines.md steps 4-5), up to the lattice rounding of each row
  (at most half a step, ``2^-21`` of the bound). For a mean it is ``E[sum] / E[count]``
  (the ratio of expectations). The spread of the bounding's random choice is not counted
  (it is small beside the noise when units have few groups; it errs low).
* A mean's noise std is the delta method's, ``sqrt(s_S^2 + (m - mid)^2 s_N^2) / N``
  (``N`` the expected bounded count), and its clamped error is taken over a normal law
  of that std: accurate when ``N`` is many times ``s_N``; for groups whose noisy count
  is often near 0 it errs high (on causaldata's restaurant inspections at eps 0.1 it
  predicted 53 against a realized 44; counts 1,334 against 1,281, benchmarks/RESULTS.md).
  A count's or sum's clamped error is taken over the continuous Laplace or Gaussian law
  of the preview's std (the discrete noise's, to within its lattice). With DP key
  selection a group's release probability is evaluated at its
  expected bounded statistic rounded down (not averaged over the bounding), and the
  released count of a kept group is taken as unbiased (selection on it is ignored).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from dpsieve._validation import check_int, fail
from dpsieve.accounting.events import Neighbouring
from dpsieve.queries.engine import Level, Op, Predicate
from dpsieve.queries.kinds import UNIT_ROW_FACTOR
from dpsieve.queries.plan import Contribution, Count, Mean, Query, Sum, concrete
from dpsieve.queries.prepare import Prepared, prepare
from dpsieve.queries.schema import Schema

__all__ = ["MAX_CANDIDATES", "Candidate", "analyze", "candidates_from"]

#: The most candidates one analysis evaluates (each is a prepare and a pass over the cells).
MAX_CANDIDATES = 1000
_OWNER = "utility_analysis"
_CAND_KEYS = ("max_groups", "max_rows", "lower", "upper")


@dataclass(frozen=True, slots=True)
class Candidate:
    """Contribution bounds and clamping bounds to try (``None``: the plan's own). ``lower``
    and ``upper`` replace the bounds of every sum and mean of the plan."""

    max_groups: int | None = None
    max_rows: int | None = None
    lower: float | None = None
    upper: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in _CAND_KEYS if getattr(self, k) is not None}


def _number(v: Any, name: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise fail(name, _OWNER, "a finite number", v)
    return float(v)


def _candidate(d: Any) -> Candidate:
    if isinstance(d, Candidate):
        return d
    if not isinstance(d, Mapping):
        raise fail("candidates", _OWNER, "a list of {max_groups, max_rows, lower, upper} "
                   "objects or one object of lists (a grid)", d)
    extra = sorted(set(d) - set(_CAND_KEYS))
    if extra:
        raise fail(extra[0], _OWNER, f"one of {list(_CAND_KEYS)} (unknown key)", d[extra[0]])
    mg, mr = d.get("max_groups"), d.get("max_rows")
    if mg is not None:
        check_int("max_groups", mg, _OWNER, minimum=1)
    if mr is not None:
        check_int("max_rows", mr, _OWNER, minimum=1)
    return Candidate(mg, mr, _number(d.get("lower"), "lower"), _number(d.get("upper"), "upper"))


def candidates_from(spec: Any) -> list[Candidate]:
    """Candidates from JSON: a list of objects ``{max_groups, max_rows, lower, upper}``
    (any subset), or one object of lists, a grid (its cartesian product), e.g.
    ``{"max_groups": [1, 2, 4], "max_rows": [5, 20], "upper": [50, 100]}``. ``None``: the
    plan's own bounds only. At most :data:`MAX_CANDIDATES`."""
    if spec is None:
        out = [Candidate()]
    elif isinstance(spec, Mapping) and any(isinstance(v, list | tuple) for v in spec.values()):
        extra = sorted(set(spec) - set(_CAND_KEYS))
        if extra:
            raise fail(extra[0], _OWNER, f"one of {list(_CAND_KEYS)} (unknown key)",
                       spec[extra[0]])
        axes = [(k, list(v) if isinstance(v, list | tuple) else [v]) for k, v in spec.items()]
        size = math.prod(len(v) for _, v in axes)
        if size > MAX_CANDIDATES or size == 0:
            raise fail("candidates", _OWNER, f"a grid of 1 to {MAX_CANDIDATES} candidates",
                       size)
        out = [_candidate(dict(zip([k for k, _ in axes], combo, strict=True)))
               for combo in itertools.product(*(v for _, v in axes))]
    elif isinstance(spec, Mapping | Candidate):
        out = [_candidate(spec)]
    elif isinstance(spec, list | tuple) and 0 < len(spec) <= MAX_CANDIDATES:
        out = [_candidate(d) for d in spec]
    else:
        raise fail("candidates", _OWNER, f"a list of 1 to {MAX_CANDIDATES} candidate objects "
                   "or one object of lists (a grid)", spec)
    return out


def _apply(plan: Query, c: Candidate) -> Query:
    """``plan`` with the candidate's bounds."""
    aggs = []
    for a in plan.aggregations:
        if isinstance(a, Sum | Mean) and (c.lower is not None or c.upper is not None):
            a = replace(a, lower=a.lower if c.lower is None else c.lower,
                        upper=a.upper if c.upper is None else c.upper)
        aggs.append(a)
    old = plan.contribution or Contribution()
    mg = old.max_groups if c.max_groups is None else c.max_groups
    mr = old.max_rows if c.max_rows is None else c.max_rows
    return replace(plan, aggregations=tuple(aggs), contribution=Contribution(mg, mr))


# -- the data: rows, cells ------------------------------------------------------------------

def _missing(s: pd.Series) -> np.ndarray:
    return np.asarray(s.isna().to_numpy(), dtype=bool)


def _holds(s: pd.Series, p: Predicate) -> np.ndarray:
    """The engines' predicate semantics (docs/queries-engines.md step 1): a missing value
    makes every comparison false; only ``is_null`` holds for it."""
    miss = _missing(s)
    if p.op == Op.IS_NULL:
        return miss
    if p.op == Op.NOT_NULL:
        return ~miss
    if p.op in (Op.IN, Op.NOT_IN):
        vals = list(p.value) if isinstance(p.value, tuple) else [p.value]
        inside = np.asarray(s.isin(vals).to_numpy(), dtype=bool)
        held: np.ndarray = (inside if p.op == Op.IN else ~inside) & ~miss
        return held
    v = p.value
    ops = {Op.EQ: s.__eq__, Op.NE: s.__ne__, Op.LT: s.__lt__, Op.LE: s.__le__,
           Op.GT: s.__gt__, Op.GE: s.__ge__}
    got: np.ndarray = np.asarray(ops[p.op](v).to_numpy(), dtype=bool) & ~miss
    return got


def _values(s: pd.Series) -> np.ndarray:
    """A numeric column as doubles, missing as 0 (the engines' ValueSum)."""
    x = pd.to_numeric(s, errors="coerce").astype(np.float64).to_numpy()
    return np.where(np.isnan(x), 0.0, x)


@dataclass(frozen=True, slots=True)
class _Cells:
    """One row per (unit, group) cell: ``group`` (index into ``keys``), ``unit`` (index),
    ``n`` rows, ``groups_of_unit``; plus the rows (``row_cell``, the cell of each kept row)
    to sum values by cell."""

    keys: list[tuple[Any, ...]]
    group: np.ndarray
    n: np.ndarray
    groups_of_unit: np.ndarray
    row_cell: np.ndarray
    rows: pd.DataFrame


def _cells(frame: pd.DataFrame, p: Prepared) -> _Cells:
    spec = p.spec
    mask = np.ones(len(frame), dtype=bool)
    for pred in spec.where:
        mask &= _holds(frame[pred.column], pred)
    if spec.unit is not None:
        mask &= ~_missing(frame[spec.unit])
    rows = frame.loc[mask].reset_index(drop=True)
    n_rows = len(rows)
    if spec.group_by:
        key_frame = rows[list(spec.group_by)].astype(object).where(
            rows[list(spec.group_by)].notna(), None)
        row_keys = [tuple(t) for t in key_frame.itertuples(index=False, name=None)]
    else:
        row_keys = [()] * n_rows
    if spec.keys is not None:
        index = {k: i for i, k in enumerate(spec.keys)}
        # a row whose key is not public is dropped (a missing value equals no key)
        gidx = np.asarray([index.get(k, -1) if None not in k else -1 for k in row_keys],
                          dtype=np.int64)
        keys = list(spec.keys)
    else:
        seen: dict[tuple[Any, ...], int] = {}
        gidx = np.asarray([seen.setdefault(k, len(seen)) for k in row_keys], dtype=np.int64)
        keys = list(seen)
    keep = gidx >= 0
    rows = rows.loc[keep].reset_index(drop=True)
    gidx = gidx[keep]
    if spec.unit is not None:
        uidx = pd.factorize(rows[spec.unit].astype(object))[0].astype(np.int64)
    else:  # every row is its own unit
        uidx = np.arange(len(rows), dtype=np.int64)
    pairs = pd.DataFrame({"u": uidx, "g": gidx})
    cell_of_row, uniq = pd.factorize(pd.MultiIndex.from_frame(pairs))
    cu = np.asarray(uniq.get_level_values(0), dtype=np.int64)
    cg = np.asarray(uniq.get_level_values(1), dtype=np.int64)
    n = np.bincount(cell_of_row, minlength=len(uniq)).astype(np.float64)
    per_unit = np.bincount(cu, minlength=int(cu.max()) + 1 if cu.size else 0)
    return _Cells(keys, cg, n, per_unit[cu].astype(np.float64),
                  np.asarray(cell_of_row, dtype=np.int64), rows)


def _by_cell(cells: _Cells, x: np.ndarray) -> np.ndarray:
    return np.asarray(np.bincount(cells.row_cell, weights=x, minlength=cells.n.size),
                      dtype=np.float64)


def _by_group(cells: _Cells, x: np.ndarray) -> np.ndarray:
    return np.asarray(np.bincount(cells.group, weights=x, minlength=len(cells.keys)),
                      dtype=np.float64)


# -- one candidate ----------------------------------------------------------------------------

def _rms(x: np.ndarray) -> float:
    return math.sqrt(float(np.mean(np.square(x)))) if x.size else 0.0


def _noise_std(p: Prepared, i: int) -> dict[str, float]:
    """Each released part's std of aggregation ``i`` (the preview's figures)."""
    parts = iter(p.charge.parts)
    out: dict[str, float] = {}
    for j, plan in enumerate(p.plans):
        for part in plan.parts:
            c = next(parts)
            if j == i:
                out[part.release.name.split(".", 1)[1]] = float(c.noise().std)
    return out


#: Quantile midpoints of the standardized noise (unit variance): the expectation over the
#: noise of a clamped answer's squared error is their average (a few 1e-3 relative, low:
#: the midpoints cut the tails).
_POINTS = 2000
_U = (np.arange(_POINTS) + 0.5) / _POINTS


def _standard(family: str) -> np.ndarray:
    if family == "laplace":  # scale 1/sqrt(2): unit variance
        c = _U - 0.5
        out: np.ndarray = -np.sign(c) * np.log1p(-2.0 * np.abs(c)) / math.sqrt(2.0)
        return out
    from statistics import NormalDist

    nd = NormalDist()
    return np.asarray([nd.inv_cdf(float(u)) for u in _U])


_STANDARD: dict[str, np.ndarray] = {}


def _clamped_mse(est: np.ndarray, sd: np.ndarray, true: np.ndarray, floor: float | None,
                 ceil: float | None, family: str) -> np.ndarray:
    """E[(clamp(est + sd X) - true)^2] per group, X the standardized noise (Laplace or
    normal: the continuous law of the discrete noise, or the delta method's for a mean),
    the answer clamped into [floor, ceil] as the query clamps it by default. Without a
    clamp it is bias^2 + sd^2 exactly."""
    if floor is None and ceil is None:
        out: np.ndarray = (est - true) ** 2 + sd**2
        return out
    if family not in _STANDARD:
        _STANDARD[family] = _standard(family)
    x = _STANDARD[family]
    with np.errstate(invalid="ignore"):
        v = est[:, None] + np.where(np.isinf(sd), np.inf, sd)[:, None] * x[None, :]
    v = np.where(np.isnan(v), est[:, None], v)
    if floor is not None:
        v = np.maximum(v, floor)
    if ceil is not None:
        v = np.minimum(v, ceil)
    got: np.ndarray = np.mean((v - true[:, None]) ** 2, axis=1)
    return got


def _family(p: Prepared, i: int, j: int) -> str:
    """The noise family of part ``j`` of aggregation ``i``."""
    flat = 0
    for k, plan in enumerate(p.plans):
        if k == i:
            break
        flat += len(plan.parts)
    c = p.charge.parts[flat + j]
    return c.family


def _release_probability(p: Prepared, units: np.ndarray, rows: np.ndarray) -> np.ndarray:
    sel = p.charge.selection
    if sel is None:
        return np.ones(units.size)
    if sel.statistic == "rows":
        return np.asarray([sel.probability(1, math.floor(r))  # type: ignore[call-arg]
                           for r in rows])
    return np.asarray([sel.probability(math.floor(u)) for u in units])


def _one(cells: _Cells, p: Prepared, has_unit: bool, cache: dict[Any, np.ndarray]
         ) -> dict[str, Any]:
    q = p.query
    c = q.contribution or Contribution()
    G = cells.n.size
    keep_cell = (np.minimum(1.0, c.groups / cells.groups_of_unit) if has_unit
                 else np.ones(G))
    rows_kept = (np.minimum(cells.n, c.rows) if has_unit and c.rows is not None
                 else cells.n)
    e_units = _by_group(cells, keep_cell)
    e_rows = _by_group(cells, keep_cell * rows_kept)
    t_units = _by_group(cells, np.ones(G))
    t_rows = _by_group(cells, cells.n)
    prob = _release_probability(p, e_units, e_rows)
    dropped_rows = 1.0 - float(e_rows.sum()) / float(t_rows.sum()) if t_rows.sum() else 0.0
    dropped_cells = 1.0 - float(e_units.sum()) / float(t_units.sum()) if G else 0.0
    out_aggs = []
    scores = []
    for i, (a, label) in enumerate(zip(q.aggregations, p.labels, strict=True)):
        std = _noise_std(p, i)
        per = getattr(a, "per", Level.ROW)
        if isinstance(a, Count):
            est = e_units if per == Level.UNIT else e_rows
            true = t_units if per == Level.UNIT else t_rows
            sd = np.full(est.size, std["count"])
            family = _family(p, i, 0)
            floor, ceil = (None if q.raw else 0.0), None
        else:
            assert isinstance(a, Sum | Mean)
            lo, hi = concrete(a.lower, "lower", a.kind), concrete(a.upper, "upper", a.kind)
            assert lo is not None
            assert hi is not None
            raw_key = ("raw", a.column)
            if raw_key not in cache:
                cache[raw_key] = _values(cells.rows[a.column])
            x = cache[raw_key]
            s_true = _by_group(cells, _by_cell(cells, x))
            if per == Level.ROW:
                ck = ("row", a.column, lo, hi)
                if ck not in cache:
                    cache[ck] = _by_cell(cells, np.clip(x, lo, hi))
                share = np.divide(rows_kept, cells.n, out=np.zeros(G), where=cells.n > 0)
                s_est = _by_group(cells, keep_cell * share * cache[ck])
                n_est, n_true = e_rows, t_rows
            else:
                ck = ("unit", a.column, lo, hi)
                if ck not in cache:
                    pre = UNIT_ROW_FACTOR * max(abs(lo), abs(hi))
                    cache[ck] = np.clip(_by_cell(cells, np.clip(x, -pre, pre)), lo, hi)
                s_est = _by_group(cells, keep_cell * cache[ck])
                n_est, n_true = e_units, t_units
            if isinstance(a, Sum):
                est, true = s_est, s_true
                sd = np.full(est.size, std["sum"])
                family = _family(p, i, 0)
                floor = 0.0 if lo >= 0 and not q.raw else None
                ceil = 0.0 if hi <= 0 and not q.raw else None
            else:
                mid = (lo + hi) / 2.0
                with np.errstate(divide="ignore", invalid="ignore"):
                    est = np.where(n_est > 0, s_est / n_est, mid)
                    true = np.where(n_true > 0, s_true / n_true, np.nan)
                    sd = np.where(n_est > 0, np.sqrt(std["sum"] ** 2 + (est - mid) ** 2
                                                     * std["count"] ** 2) / n_est, np.inf)
                family = "gaussian"  # the ratio's normal approximation (delta method)
                floor, ceil = (None, None) if q.raw else (lo, hi)
        bias = est - true
        defined = ~np.isnan(true)
        mse = np.where(defined, _clamped_mse(est, sd, np.nan_to_num(true), floor, ceil,
                                             family), 0.0)
        mse = prob * mse + (1.0 - prob) * np.where(defined, np.nan_to_num(true) ** 2, 0.0)
        m = int(defined.sum())
        rmse = math.sqrt(float(mse[defined].mean())) if m else 0.0
        scale = _rms(true[defined]) if m else 0.0
        scores.append(rmse / scale if scale > 0 else rmse)
        out_aggs.append({
            "label": label, "groups": m,
            "bias_rms": _rms(bias[defined]), "bias_mean": float(bias[defined].mean())
            if m else 0.0, "noise_std_rms": _rms(np.where(np.isfinite(sd), sd, 0.0)[defined])
            if np.isfinite(sd[defined]).all() else math.inf,
            "noise_std": std, "rmse": rmse, "relative_rmse": scores[-1],
            "per_group": [{"key": list(cells.keys[g]), "truth": _num(true[g]),
                           "bounded": _num(est[g]), "bias": _num(bias[g]),
                           "noise_std": _num(sd[g]), "rmse": _num(math.sqrt(mse[g])),
                           "release_probability": float(prob[g])}
                          for g in range(len(cells.keys))]})
    sel = p.charge.selection
    return {"aggregations": out_aggs, "score": float(np.mean(scores)),
            "rows_dropped": dropped_rows, "cells_dropped": dropped_cells,
            "groups_released": float(prob.sum()) if sel is not None else None,
            "selection": None if sel is None else sel.info(),
            "charge": p.charge.description.to_dict()}


def _num(v: Any) -> float | None:
    f = float(v)
    return f if math.isfinite(f) else None


def analyze(frame: pd.DataFrame, schema: Schema, plan: Query,
            candidates: Sequence[Candidate] | Any = None,
            neighbouring: Neighbouring = Neighbouring.ADD_REMOVE, *,
            per_group: bool = False) -> dict[str, Any]:
    """The utility analysis of ``plan`` on ``frame`` for each candidate (module
    docstring): ``candidates`` (each the candidate's bounds, ``score``, ``rows_dropped``,
    ``cells_dropped``, ``groups_released`` with DP key selection, and per aggregation
    ``bias_rms``, ``bias_mean``, ``noise_std`` (each released part's, as the preview
    states it), ``noise_std_rms``, ``rmse``, ``relative_rmse`` and with ``per_group`` each
    group's ``truth``, ``bounded``, ``bias``, ``noise_std``, ``rmse``,
    ``release_probability``), ``recommended`` (the index of the smallest score) and
    ``private: False``. A candidate the plan's checks refuse is reported with its
    ``error`` (the parameter it names) and never recommended. **Not private**: for the
    data owner only."""
    if not isinstance(plan, Query):
        raise fail("plan", _OWNER, "a Query", type(plan).__name__)
    for a in plan.aggregations:
        if not isinstance(a, Count | Sum | Mean):
            raise fail("aggregations", _OWNER, "count, sum and mean aggregations (the "
                       "analysis computes their bias exactly)", a.kind)
    cands = (list(candidates) if isinstance(candidates, list | tuple) and all(
        isinstance(c, Candidate) for c in candidates) else candidates_from(candidates))
    if not cands:
        raise fail("candidates", _OWNER, "at least one candidate", cands)
    if not isinstance(frame, pd.DataFrame):
        raise fail("frame", _OWNER, "a pandas DataFrame", type(frame).__name__)
    from dpsieve.errors import ValidationError

    cells: _Cells | None = None
    cache: dict[Any, np.ndarray] = {}
    rows: list[dict[str, Any]] = []
    best: int | None = None
    for i, c in enumerate(cands):
        try:
            p = prepare(_apply(plan, c), schema, neighbouring)
        except ValidationError as e:
            rows.append({"candidate": c.to_dict(), "error": str(e), "parameter": e.parameter})
            continue
        if cells is None:  # rows, keys and units are the same for every candidate
            cells = _cells(frame, p)
        got = _one(cells, p, schema.privacy_unit is not None, cache)
        if not per_group:
            for agg in got["aggregations"]:
                agg.pop("per_group")
        rows.append({"candidate": c.to_dict(), **got})
        if best is None or got["score"] < rows[best]["score"]:
            best = i
    if best is None:  # every candidate refused: the first refusal is the plan's error
        first = rows[0]
        raise fail(first["parameter"], _OWNER, "bounds the plan's checks admit (every "
                   "candidate was refused; the first: " + first["error"] + ")",
                   first["candidate"])
    return {"private": False, "plan": _plan_dict(plan), "candidates": rows,
            "recommended": best,
            "note": "Not differentially private: computed from every row, for the data "
                    "owner only, to choose public bounds (never released to an analyst)."}


def _plan_dict(plan: Query) -> dict[str, Any]:
    from dpsieve.queries.plan import query_to_dict

    return query_to_dict(plan)
