"""DP key selection: groups kept by dpsieve and by PipelineDP on a 10M-row skewed table.

Usage::

    python -m benchmarks.queries_selection_kept            # 10M rows, eps 1 and 0.1
    python -m benchmarks.queries_selection_kept --rows 1000000 --no-write

The table (DuckDB, generated once into ``--data``): ``--rows`` rows of 100,000 units with
skewed activity (unit ``floor(1e5 U^3)``) over 1,000 groups of skewed popularity (group
``floor(1000 U^2)``). The query: rows per group with DP key selection, ``L0 = 4`` groups and
``L-inf = 10`` rows per unit and group, delta 1e-6.

What is compared is the **expected** number of groups kept, computed exactly from each
library's keep probability and the bounded counts (one bounding by dpsieve's DuckDB engine;
both libraries bound a unit to L0 uniformly chosen groups and L-inf rows):
dpsieve's selection as :func:`dpsieve.queries.prepare.prepare` chooses it for the plan
(``Selection.probability`` of each group's bounded statistic), PipelineDP 0.3.1's default
(its budget split evenly between the count and the selection, truncated geometric on the
privacy-id count: ``pydp``'s ``probability_of_keep``, the function PipelineDP calls). One
real dpsieve run is reported beside it. (Running PipelineDP's LocalBackend on 10M rows
takes tens of minutes per run; the expectation is exact where a few runs would not be.)
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

DELTA = 1e-6
L0, LINF = 4, 10
OUT = Path(__file__).parent / "results" / "queries-selection-kept.md"


def _data(root: Path, rows: int) -> Path:
    path = root / f"kept-{rows}.parquet"
    if path.exists():
        return path
    import duckdb

    root.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("SELECT setseed(0.24)")
    con.execute(
        "COPY (SELECT CAST(floor(100000 * pow(random(), 3)) AS BIGINT) AS u, "
        "CAST(floor(1000 * pow(random(), 2)) AS BIGINT) AS g "
        f"FROM range({rows})) TO '{path}' (FORMAT parquet)")
    return path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 0.1])
    ap.add_argument("--data", type=Path, default=Path("/tmp/dpsieve-selbench"))
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args(argv)
    import pydp.algorithms.partition_selection as ps

    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries import Schema
    from dpsieve.queries.engines.duckdb import DuckDBEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare

    path = _data(args.data, args.rows)
    schema = Schema.of([("u", "integer"), ("g", "integer")], "u")
    engine = DuckDBEngine(path)
    lines = ["| eps | per | dpsieve method | dpsieve expected kept | dpsieve one run | "
             "PipelineDP expected kept | units for 1/2: dpsieve / PipelineDP |",
             "|---|---|---|---|---|---|---|"]
    bounded: dict[str, Any] = {}
    for eps in args.eps:
        for per in ("row", "unit"):
            plan = {"type": "query", "privacy": {"type": "pure", "eps": eps},
                    "aggregations": [{"type": "count", "per": per}], "group_by": ["g"],
                    "select": {"delta": DELTA},
                    "contribution": {"max_groups": L0, "max_rows": LINF}}
            p = prepare(from_spec(plan), schema, Neighbouring.ADD_REMOVE)
            if per not in bounded:
                t = time.perf_counter()
                from dataclasses import replace

                aggs = engine.aggregate(replace(p.spec, seed=24))
                bounded[per] = (np.asarray(aggs.units),
                                np.asarray(aggs.values[p.plans[0].parts[0].release.name]))
                print(f"bounded {per} counts in {time.perf_counter() - t:.1f} s", flush=True)
            units, stat = bounded[per]
            sel = p.charge.selection
            assert sel is not None
            info = sel.info()
            if info["statistic"] == "rows":
                mine = sum(_p_rows(sel, int(r)) for r in stat)
            else:
                mine = sum(sel.probability(int(n)) for n in units)
            run = p.run(engine, np.random.default_rng(1))
            pdp = ps.create_partition_strategy("truncated_geometric", eps / 2, DELTA, L0)
            theirs = sum(pdp.probability_of_keep(int(n)) for n in units)
            from dpsieve.queries.selection import units_for

            line = (f"| {eps:g} | {per} | {info['method']} ({info['statistic']}) | "
                    f"{mine:.1f} | {len(run.groups)} | {theirs:.1f} | "
                    f"{info['units_50']} / {units_for(pdp.probability_of_keep, 0.5)} |")
            print(line, flush=True)
            lines.append(line)
    header = (f"Groups kept of {len(bounded['row'][0])} observed, {args.rows:,} rows "
              f"(`python -m benchmarks.queries_selection_kept`), L0 {L0}, L-inf {LINF}, "
              f"delta {DELTA:g}, load {os.getloadavg()[0]:.1f}. A row statistic's units "
              f"for 1/2 assume each unit gives L-inf rows.")
    text = "\n".join([header, "", *lines, ""])
    print(text)
    if not args.no_write:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text("# DP key selection: groups kept\n\n" + text)


def _p_rows(sel: Any, rows: int) -> float:
    """P[rows + Z >= threshold] for a selection thresholding a row count."""
    from dpsieve.mechanisms import DiscreteLaplaceMechanism
    from dpsieve.queries._selection_math import dgauss_sf, dlap_sf

    m = sel.threshold - rows
    if isinstance(sel.mechanism, DiscreteLaplaceMechanism):
        return dlap_sf(sel.mechanism.scale, m)
    return dgauss_sf(float(sel.mechanism.sampled_sigma2), m)


if __name__ == "__main__":
    main()
