"""Accuracy on real data with many rows per person, side by side with OpenDP and PipelineDP.

Usage::

    python -m benchmarks.queries_accuracy                # 200 runs, eps 1 and 0.1
    python -m benchmarks.queries_accuracy --runs 20 --no-write

Data: ``restaurant_inspections`` of the PyPI package ``causaldata`` 0.1.5 (the ``bench``
extra): 27,178 health inspections of 1,618 businesses in 2000-2019 (a business is the
privacy unit: 1 to 349 inspections each, median 12; chains span many years). Queries, at
delta 1e-6 and the same bounds for every library:

* ``count``: inspections per year (15 public years), at most ``L0 = 14`` years and
  ``L-inf = 8`` inspections per business and year (the best pair of a small grid);
* ``mean``: the mean inspection score per year, scores in [0, 100], the same bounds;
* ``select``: inspections per ``NumberofLocations`` (135 values, not public: DP key
  selection), each business in one group (``L0 = 1``), ``L-inf = 16``.

Error is RMSE against the **unbounded** truth (all rows: bias of the bounds included) over
every group and ``--runs`` runs, with its standard error (delta method over runs); for
``select`` also the groups kept (mean and standard error) and the RMSE over kept groups.
Peers as their documentation recommends, at their best: OpenDP 0.16's Polars Context
(integer data, ``truncate_num_groups(L0 + 1, keep="first")`` -- its dense rank keeps
``k - 1`` groups -- and ``truncate_per_group``; the measurement resolved once and invoked
per run), PipelineDP 0.3.1 (LocalBackend, Laplace and Gaussian noise: the better is shown,
NaiveBudgetAccountant, public partitions where public, its default truncated geometric
selection otherwise). dpsieve runs the same plans through the query layer on pandas
(seeded simulations: ``rng``) at pure eps, or with ``--dpsieve-privacy zcdp`` at the
largest rho whose zCDP implies (eps, delta)-DP (Gaussian noise; beside PipelineDP's
``--pipelinedp-noise gaussian`` at (eps, delta)), or with ``--dpsieve-privacy approx`` as
a plan asking for (eps, delta) itself (``{"type": "approx"}``: dpsieve chooses Gaussian or
Laplace noise from public values, docs/proofs/queries.md §8; the choice is printed).
dpsieve's means are clamped into their bounds by default (post-processing); the peers'
are not, so each peer's mean is also scored clamped into [0, 100] (a NaN, from a noisy
count of 0, as 50): the strongest simple baseline.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

DELTA = 1e-6
#: The bounds of every library: the best (L0, L-inf) of a small grid for dpsieve's count at
#: eps 1 ({4, 8, 14} x {4, 8, 16, 32}; bias and noise computed from the data).
L0, LINF = 14, 8
SEL_LINF = 16
OUT = Path(__file__).parent / "results" / "queries-accuracy.md"
Estimates = dict[Any, float]  # group -> estimate (missing: not released)


def load() -> pd.DataFrame:
    from causaldata import restaurant_inspections

    d = restaurant_inspections.load_pandas().data
    return pd.DataFrame({"unit": d["business_name"].astype(str),
                         "score": d["inspection_score"].astype(np.int64),
                         "year": d["Year"].astype(np.int64),
                         "locations": d["NumberofLocations"].astype(np.int64)})


def truth(d: pd.DataFrame) -> dict[str, Estimates]:
    return {"count": d.groupby("year").size().astype(float).to_dict(),
            "mean": d.groupby("year")["score"].mean().to_dict(),
            "select": d.groupby("locations").size().astype(float).to_dict()}


# -- dpsieve -------------------------------------------------------------------------------
#: dpsieve's privacy: ``pure`` (eps, Laplace noise), ``zcdp`` (``--dpsieve-privacy``: the
#: largest rho whose zCDP implies (eps, DELTA)-DP, Gaussian noise: :func:`rho_for`) or
#: ``approx`` (the plan asks for (eps, DELTA); dpsieve chooses the noise).
PRIVACY = "pure"


def rho_for(eps: float, delta: float) -> float:
    """The rho with ``rho + 2 sqrt(rho ln(1/delta)) = eps``: rho-zCDP implies (eps, delta)-DP
    (Bun & Steinke 2016, Prop. 1.3), rounded down (a slightly smaller budget: safe)."""
    lg = math.log(1.0 / delta)
    return float(math.nextafter((math.sqrt(lg + eps) - math.sqrt(lg)) ** 2, 0.0))


def _plan(query: str, eps: float, years: list[int]) -> dict[str, Any]:
    privacy: dict[str, Any] = (
        {"type": "pure", "eps": eps} if PRIVACY == "pure" else
        {"type": "approx", "eps": eps, "delta": DELTA} if PRIVACY == "approx" else
        {"type": "zcdp", "rho": rho_for(eps, DELTA)})
    if query == "select":
        return {"type": "query", "privacy": privacy, "aggregations": [{"type": "count"}],
                "group_by": ["locations"], "select": {"delta": DELTA},
                "contribution": {"max_groups": 1, "max_rows": SEL_LINF}}
    agg = ({"type": "count"} if query == "count" else
           {"type": "mean", "column": "score", "lower": 0, "upper": 100})
    return {"type": "query", "privacy": privacy, "aggregations": [agg],
            "group_by": ["year"], "keys": [[y] for y in years],
            "contribution": {"max_groups": L0, "max_rows": LINF}}


def dpsieve_runner(d: pd.DataFrame, query: str, eps: float, years: list[int]
                   ) -> Callable[[np.random.Generator], Estimates]:
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries import Schema
    from dpsieve.queries.engines.frames import PandasEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare

    schema = Schema.of([("unit", "string"), ("score", "integer"), ("year", "integer"),
                        ("locations", "integer")], "unit")
    p = prepare(from_spec(_plan(query, eps, years)), schema, Neighbouring.ADD_REMOVE)
    if p.calibration is not None:
        c = p.calibration
        print(f"# dpsieve {query} at eps {eps:g}: {c['mechanism']} (rho {c['rho']:.6g}, "
              f"mean variance ratio gaussian/laplace {c['variance_ratio']}), charged "
              f"{p.charge.description.to_dict()}", file=sys.stderr, flush=True)
    engine = PandasEngine(d)

    def run(rng: np.random.Generator) -> Estimates:
        a = p.run(engine, rng)
        return {g.key[0]: float(g.estimates[0].value) for g in a.groups}  # type: ignore[arg-type]
    return run


# -- PipelineDP ----------------------------------------------------------------------------
def pipelinedp_runner(d: pd.DataFrame, query: str, eps: float, years: list[int],
                      noise: str) -> Callable[[np.random.Generator], Estimates]:
    import pipeline_dp

    col = "locations" if query == "select" else "year"
    rows = list(zip(d["unit"], d[col], d["score"], strict=True))
    kind = pipeline_dp.NoiseKind.LAPLACE if noise == "laplace" else \
        pipeline_dp.NoiseKind.GAUSSIAN
    metric = pipeline_dp.Metrics.MEAN if query == "mean" else pipeline_dp.Metrics.COUNT
    l0, linf = (1, SEL_LINF) if query == "select" else (L0, LINF)

    def run(rng: np.random.Generator) -> Estimates:
        budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=eps, total_delta=DELTA)
        engine = pipeline_dp.DPEngine(budget, pipeline_dp.LocalBackend())
        params = pipeline_dp.AggregateParams(
            metrics=[metric], noise_kind=kind, max_partitions_contributed=l0,
            max_contributions_per_partition=linf, min_value=0, max_value=100)
        ex = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                        partition_extractor=lambda r: r[1],
                                        value_extractor=lambda r: r[2])
        out = engine.aggregate(rows, params, ex,
                               public_partitions=None if query == "select" else years)
        budget.compute_budgets()
        name = "mean" if query == "mean" else "count"
        return {k: float(getattr(v, name)) for k, v in out}
    return run


# -- OpenDP --------------------------------------------------------------------------------
def opendp_runner(d: pd.DataFrame, query: str, eps: float, years: list[int]
                  ) -> Callable[[np.random.Generator], Estimates]:
    import opendp.prelude as dp
    import polars as pl

    dp.enable_features("contrib")
    col = "locations" if query == "select" else "year"
    lf = pl.LazyFrame({"unit": d["unit"].tolist(), "score": d["score"].tolist(),
                       col: d[col].tolist()})
    ctx = dp.Context.compositor(
        data=lf, privacy_unit=dp.unit_of(contributions=1, identifier=pl.col("unit")),
        privacy_loss=dp.loss_of(epsilon=eps, delta=DELTA), split_evenly_over=1,
        margins=[dp.polars.Margin(by=[col], max_length=len(d))])
    l0, linf = (1, SEL_LINF) if query == "select" else (L0, LINF)
    q = (ctx.query().truncate_num_groups(l0 + 1, by=[col], keep="first")
         .truncate_per_group(linf, by=[col]).group_by(col))
    q = q.agg(pl.col("score").dp.mean((0, 100))) if query == "mean" else q.agg(dp.len(signed=False))
    if query != "select":
        q = q.with_keys(pl.LazyFrame({col: years}))
    m = q.resolve()
    out_col = "score" if query == "mean" else "len"

    def run(rng: np.random.Generator) -> Estimates:
        df = m(lf).collect()
        return {k: float(v) for k, v in df.select(col, out_col).iter_rows()}
    return run


# -- scoring -------------------------------------------------------------------------------
def _clamp(v: float) -> float:
    """A mean moved into its public bounds [0, 100] (post-processing any user may do; a
    NaN, from a noisy count of 0, becomes the middle)."""
    return 50.0 if math.isnan(v) else min(max(v, 0.0), 100.0)


def score(runs: list[Estimates], true: Estimates, selection: bool) -> dict[str, float]:
    """RMSE over every true group (DP key selection: a group not released counts as 0, so
    dropping a group costs its whole count), its standard error over runs, the bias (the
    root mean square over the true groups of each group's mean error over runs: what
    bounding and selection shift, noise averaged out) and the groups kept."""
    per_run, kept = [], []
    mean_err = {g: float(np.mean([r.get(g, 0.0) - v for r in runs])) for g, v in true.items()}
    bias = math.sqrt(float(np.mean([e * e for e in mean_err.values()])))
    for est in runs:
        groups = sorted(set(true) | set(est)) if selection else list(true)
        errs = [(est.get(g, 0.0) - true.get(g, 0.0)) ** 2 for g in groups]
        per_run.append(float(np.mean(errs)) if errs else 0.0)
        kept.append(float(sum(1 for g in est if g in true)))
    mse = float(np.mean(per_run))
    rmse = math.sqrt(mse)
    se = float(np.std(per_run, ddof=1) / math.sqrt(len(per_run)) / (2 * rmse)) if rmse else 0.0
    return {"rmse": rmse, "se": se, "bias": bias, "kept": float(np.mean(kept)),
            "kept_se": float(np.std(kept, ddof=1) / math.sqrt(len(kept)))}


#: The grid the owner's utility analysis searches (``--utility``).
GRID = {"max_groups": [4, 8, 14], "max_rows": [4, 8, 16, 32]}


def utility_lines(d: pd.DataFrame, years: list[int], eps_list: list[float]) -> list[str]:
    """The owner's utility analysis (not private) of the count and mean plans: its
    predicted RMSE at the benchmark's bounds (to set beside the realized one) and the
    candidate of :data:`GRID` it recommends."""
    from dpsieve import Session
    from dpsieve.accounting.events import PureDP

    s = Session(d, budget=PureDP(1.0), privacy_unit="unit")
    out = [f"| query | eps | predicted RMSE at (L0 {L0}, L-inf {LINF}) (bias RMS) | recommended "
           "(L0, L-inf) | its predicted RMSE |", "|---|---|---|---|---|"]
    for query in ("count", "mean"):
        for eps in eps_list:
            r = s.utility_analysis(_plan(query, eps, years), GRID)
            at = next(c for c in r["candidates"]
                      if c["candidate"] == {"max_groups": L0, "max_rows": LINF})
            best = r["candidates"][r["recommended"]]
            a, b = at["aggregations"][0], best["aggregations"][0]
            out.append(f"| {query} | {eps:g} | {a['rmse']:.2f} ({a['bias_rms']:.2f}) | "
                       f"({best['candidate']['max_groups']}, "
                       f"{best['candidate']['max_rows']}) | {b['rmse']:.2f} |")
    return out


def main(argv: list[str] | None = None) -> None:
    global L0, LINF, PRIVACY  # --bounds, --dpsieve-privacy: read at call time
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 0.1])
    ap.add_argument("--queries", nargs="+", default=["count", "mean", "select"])
    ap.add_argument("--pipelinedp-noise", nargs="+", default=["laplace"],
                    help="PipelineDP's noise kinds (Gaussian: worse for the counts in a "
                    "5-run pilot, better for the mean at eps 1 over 200 runs, RESULTS.md)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--bounds", type=int, nargs=2, metavar=("L0", "LINF"),
                    help=f"the count's and mean's (max_groups, max_rows) (default {L0} {LINF})")
    ap.add_argument("--dpsieve-privacy", choices=["pure", "zcdp", "approx"], default="pure",
                    help="dpsieve's plans: pure eps (Laplace), the rho-zCDP that implies "
                    "(eps, delta)-DP (Gaussian noise), or (eps, delta) itself (dpsieve "
                    "chooses Gaussian or Laplace noise)")
    ap.add_argument("--libraries", nargs="+", default=["dpsieve", "pipelinedp", "opendp"])
    ap.add_argument("--utility", action="store_true",
                    help="print the owner's utility analysis of the count and mean plans "
                    "(predicted RMSE, recommended bounds) and exit")
    args = ap.parse_args(argv)
    if args.bounds is not None:
        L0, LINF = args.bounds
    PRIVACY = args.dpsieve_privacy
    if args.utility:
        d = load()
        print("\n".join(utility_lines(d, sorted(d["year"].unique().tolist()), args.eps)))
        return
    cmd = " ".join(["python -m benchmarks.queries_accuracy",
                    *(sys.argv[1:] if argv is None else argv)])
    d = load()
    years = sorted(d["year"].unique().tolist())
    tr = truth(d)
    lines = ["| query | eps | library | RMSE (se) | bias | groups kept (se) | s / run |",
             "|---|---|---|---|---|---|---|"]
    for query in args.queries:
        for eps in args.eps:
            libs = set(args.libraries)
            me = ("dpsieve" if PRIVACY == "pure" else
                  f"dpsieve (asked (eps, {DELTA:g}))" if PRIVACY == "approx" else
                  f"dpsieve (zCDP rho {rho_for(eps, DELTA):.5g}, Gaussian)")
            runners = {**({me: dpsieve_runner(d, query, eps, years)}
                          if "dpsieve" in libs else {}),
                       **{f"PipelineDP ({k})": pipelinedp_runner(d, query, eps, years, k)
                          for k in args.pipelinedp_noise if "pipelinedp" in libs},
                       **({"OpenDP": opendp_runner(d, query, eps, years)}
                          if "opendp" in libs else {})}
            for name, run in runners.items():
                rng = np.random.default_rng(20261207)
                t = time.perf_counter()
                got = [run(rng) for _ in range(args.runs)]
                took = (time.perf_counter() - t) / args.runs
                variants = [(name, got)]
                if query == "mean" and not name.startswith("dpsieve"):  # dpsieve's are
                    variants.append((f"{name}, clamped to [0, 100]",
                                     [{k: _clamp(v) for k, v in r.items()} for r in got]))
                for label, runs in variants:
                    s = score(runs, tr[query], query == "select")
                    line = (f"| {query} | {eps:g} | {label} | {s['rmse']:.2f} "
                            f"({s['se']:.2f}) | {s['bias']:.2f} | "
                            f"{s['kept']:.1f} ({s['kept_se']:.2f}) | {took:.3f} |")
                    print(line, flush=True)
                    lines.append(line)
                if not args.no_write:  # partial results survive an interrupted run
                    OUT.parent.mkdir(parents=True, exist_ok=True)
                    OUT.write_text("# Query accuracy against the peers (partial: the run "
                                   "goes on)\n\n`" + cmd + "`\n\n"
                                   + "\n".join(lines) + "\n")
    header = (f"Accuracy on causaldata's restaurant_inspections ({len(d):,} rows, "
              f"{d['unit'].nunique():,} businesses), delta {DELTA:g}, {args.runs} runs, "
              f"load {os.getloadavg()[0]:.1f}; `{cmd}`. "
              "RMSE against the unbounded truth (bias included) over every group; select: "
              "a group not released counts as 0.")
    text = "\n".join([header, "", *lines, ""])
    print(text)
    if not args.no_write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("# Query accuracy against the peers\n\n" + text)


if __name__ == "__main__":
    main()
