"""``"auto"`` bounds against dpsieve's own best fixed bounds from a small grid (issue 24).

Usage::

    python -m benchmarks.queries_auto                 # 200 runs, eps 1 and 0.1
    python -m benchmarks.queries_auto --runs 20 --no-write

Data and queries as :mod:`benchmarks.queries_accuracy` (causaldata's
``restaurant_inspections``: 27,178 inspections of 1,618 businesses, the privacy unit), at
delta 1e-6, through dpsieve's query layer on pandas:

* ``count``: inspections per year (15 public years);
* ``mean``: the mean inspection score per year (the same years);
* ``select``: inspections per ``NumberofLocations`` (DP key selection).

For each query and eps: the **auto** plan (``contribution: "auto"``, and for the mean
``lower`` / ``upper`` ``"auto"``; ``auto_share`` its default, or ``--auto-share``) against
every plan of a small grid of fixed bounds -- ``max_groups`` in {4, 8, 14} (1 for select,
whose businesses each have one value) x ``max_rows`` in {4, 8, 16, 32} (for the mean {4,
8}, x the score bounds [0, 100] and [70, 100]) -- each with the whole privacy. The best
fixed plan is picked on ``--select-runs`` runs of each, then run ``--runs`` times on fresh
seeds (as auto is): error is RMSE against the unbounded truth (bias included) over every
group and run (select: a group not released counts as 0), with its standard error; the
ratio is auto's RMSE over the best fixed plan's, with its standard error (delta method,
independent runs).
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.queries_accuracy import DELTA, Estimates, load, score, truth

OUT = Path(__file__).parent / "results" / "queries-auto.md"
GROUPS = (4, 8, 14)
ROWS = (4, 8, 16, 32)
MEAN_ROWS = (4, 8)
SCORE_BOUNDS = ((0, 100), (70, 100))


def _plan(query: str, eps: float, years: list[int], contribution: Any,
          bounds: tuple[Any, Any], share: float | None = None) -> dict[str, Any]:
    privacy = {"type": "pure", "eps": eps}
    base: dict[str, Any] = {"type": "query", "privacy": privacy,
                            "contribution": contribution}
    if share is not None:
        base["auto_share"] = share
    if query == "select":
        return {**base, "aggregations": [{"type": "count"}], "group_by": ["locations"],
                "select": {"delta": DELTA}}
    agg = ({"type": "count"} if query == "count" else
           {"type": "mean", "column": "score", "lower": bounds[0], "upper": bounds[1]})
    return {**base, "aggregations": [agg], "group_by": ["year"],
            "keys": [[y] for y in years]}


def runner(d: pd.DataFrame, plan: dict[str, Any]
           ) -> tuple[Callable[[np.random.Generator], Estimates], list[dict[str, Any]]]:
    """One run of ``plan`` per call (its estimates per group); auto plans also append the
    bounds each run used to the returned list."""
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries import Schema
    from dpsieve.queries.auto import plan_auto
    from dpsieve.queries.engines.frames import PandasEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare

    nb = Neighbouring.ADD_REMOVE
    schema = Schema.of([("unit", "string"), ("score", "integer"), ("year", "integer"),
                        ("locations", "integer")], "unit")
    q = from_spec(plan, "add_remove")
    engine = PandasEngine(d)
    used: list[dict[str, Any]] = []

    def estimates(a: Any) -> Estimates:
        return {g.key[0]: float(g.estimates[0].value) for g in a.groups}

    if not q.auto_fields():
        p = prepare(q, schema, nb)
        return (lambda rng: estimates(p.run(engine, rng))), used
    auto = plan_auto(q, schema, nb)

    def run(rng: np.random.Generator) -> Estimates:
        released = auto.release(engine, rng)
        p, bounds, _ = auto.main(released, schema, nb)
        used.append(bounds)
        return estimates(p.run(engine, rng))
    return run, used


def _default_share() -> str:
    from dpsieve.queries.plan import DEFAULT_AUTO_SHARE

    return f"{DEFAULT_AUTO_SHARE:g} (the default)"


def _ratio(a: dict[str, float], b: dict[str, float]) -> tuple[float, float]:
    r = a["rmse"] / b["rmse"]
    return r, r * math.hypot(a["se"] / a["rmse"], b["se"] / b["rmse"])


def _spread(used: list[dict[str, Any]]) -> str:
    parts = []
    for k in sorted(used[0]) if used else []:
        v = np.asarray([u[k] for u in used], dtype=np.float64)
        q = np.quantile(v, [0.1, 0.5, 0.9])
        name = {"0.lower": "lower", "0.upper": "upper"}.get(k, k)
        parts.append(f"{name} {q[1]:g} ({q[0]:g}-{q[2]:g})")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--select-runs", type=int, default=50)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 0.1])
    ap.add_argument("--queries", nargs="+", default=["count", "mean", "select"])
    ap.add_argument("--auto-share", type=float, default=None,
                    help="the auto plans' auto_share (default: the library's default)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    d = load()
    years = sorted(d["year"].unique().tolist())
    tr = truth(d)
    lines = ["| query | eps | auto RMSE (se) | best fixed | its RMSE (se) | auto / best (se) "
             "| auto's bounds: median (10-90 %) | s / auto run |",
             "|---|---|---|---|---|---|---|---|"]
    for query, eps in itertools.product(args.queries, args.eps):
        grid: list[tuple[Any, tuple[Any, Any]]] = []
        groups = (1,) if query == "select" else GROUPS
        bounds = SCORE_BOUNDS if query == "mean" else ((None, None),)
        rows = MEAN_ROWS if query == "mean" else ROWS
        for g, r, b in itertools.product(groups, rows, bounds):
            grid.append(({"max_groups": g, "max_rows": r}, b))
        fixed, plans = {}, {}
        for contribution, b in grid:
            label = (f"L0 {contribution['max_groups']}, Linf {contribution['max_rows']}"
                     + (f", [{b[0]}, {b[1]}]" if b[0] is not None else ""))
            plans[label] = _plan(query, eps, years, contribution, b)
            run, _ = runner(d, plans[label])
            rng = np.random.default_rng(20261207)
            fixed[label] = score([run(rng) for _ in range(args.select_runs)], tr[query],
                                 query == "select")
        best = min(fixed, key=lambda k: fixed[k]["rmse"])
        run, _ = runner(d, plans[best])
        rng = np.random.default_rng(20261209)
        fixed[best] = score([run(rng) for _ in range(args.runs)], tr[query],
                            query == "select")
        auto_b = ("auto", "auto") if query == "mean" else (None, None)
        run, used = runner(d, _plan(query, eps, years, "auto", auto_b, args.auto_share))
        rng = np.random.default_rng(20261208)
        t = time.perf_counter()
        s = score([run(rng) for _ in range(args.runs)], tr[query], query == "select")
        took = (time.perf_counter() - t) / args.runs
        r, rse = _ratio(s, fixed[best])
        line = (f"| {query} | {eps:g} | {s['rmse']:.2f} ({s['se']:.2f}) | {best} | "
                f"{fixed[best]['rmse']:.2f} ({fixed[best]['se']:.2f}) | {r:.3f} ({rse:.3f}) "
                f"| {_spread(used)} | {took:.3f} |")
        print(line, flush=True)
        lines.append(line)
        if not args.no_write:
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text("# Auto bounds against the best fixed bounds (partial)\n\n"
                           + "\n".join(lines) + "\n")
    header = (f"Auto bounds on causaldata's restaurant_inspections ({len(d):,} rows, "
              f"{d['unit'].nunique():,} businesses), delta {DELTA:g}, {args.runs} runs per "
              f"plan, load {os.getloadavg()[0]:.1f}; auto_share "
              f"{_default_share() if args.auto_share is None else args.auto_share}; "
              "`python -m benchmarks.queries_auto`. "
              "RMSE against the unbounded truth (bias included) over every group; the best "
              f"fixed plan of {len(GROUPS)} x {len(ROWS)} contribution bounds (mean: "
              f"{len(GROUPS)} x {len(MEAN_ROWS)} x {len(SCORE_BOUNDS)} score bounds) at the same "
              f"eps, picked on {args.select_runs} runs each and scored on {args.runs} fresh ones.")
    text = "\n".join([header, "", *lines, ""])
    print(text)
    if not args.no_write:
        args.out.write_text("# Auto bounds against the best fixed bounds\n\n" + text)


if __name__ == "__main__":
    main()
