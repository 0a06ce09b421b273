"""DP key selection's memory with many observed groups: streamed batches vs all at once.

Usage::

    python -m benchmarks.queries_selection                  # 2M one-unit groups + 4 big ones
    python -m benchmarks.queries_selection --keys 500000 --repeats 1

A Parquet table (generated once by DuckDB into ``--data``, default
``/tmp/dpsieve-selbench``) has ``--keys`` groups of one unit each (none survives the
threshold but with probability ~delta) and four groups of 1,000 units (all survive). The
plan (a unit count and a per-unit sum, DP key selection at delta 1e-6) runs through
``Prepared.run`` on a ``DuckDBEngine`` under its default memory limit, in a fresh process
per measurement: ``stream`` with the default ``SELECTION_BATCH`` (65,536 groups per
``fetchmany``), ``all`` with one batch as large as the table (every observed group in Python
at once: the path before streaming), and ``stream-<size>`` for each ``--batch``.
Reported: wall time of the run, the process's peak
resident set (``ru_maxrss``, DuckDB's buffers included) and its growth over the resident
set before the run, and the groups selected. Medians over ``--repeats``; the load average
is printed (the machine is shared). The full run writes its table to
``benchmarks/results/queries-selection.md`` (merged into RESULTS.md by ``run_all``);
``--no-write`` only prints.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
        "aggregations": [{"type": "count", "per": "unit"},
                         {"type": "sum", "column": "v", "lower": 0, "upper": 20,
                          "per": "unit"}],
        "group_by": ["g"], "select": {"delta": 1e-6},
        "contribution": {"max_groups": 1, "max_rows": 2}}


def _data(root: Path, keys: int) -> Path:
    path = root / f"sel-{keys}.parquet"
    if path.exists():
        return path
    import duckdb

    root.mkdir(parents=True, exist_ok=True)
    duckdb.connect().execute(
        "COPY (SELECT i AS u, 'k' || i::VARCHAR AS g, CAST(i % 17 AS DOUBLE) AS v "
        f"FROM range({keys}) t(i) UNION ALL SELECT {keys} + i AS u, 'big' || (i % 4)::VARCHAR"
        f" AS g, 1.0 AS v FROM range(4000) t(i)) TO '{path}' (FORMAT parquet)")
    return path


def _child(path: str, mode: str) -> None:
    import numpy as np

    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries import Schema
    from dpsieve.queries.engines.duckdb import DuckDBEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare

    schema = Schema.of([("u", "integer"), ("g", "string"), ("v", "float")], "u")
    p = prepare(from_spec(PLAN), schema, Neighbouring.ADD_REMOVE)
    engine = DuckDBEngine(path)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t = time.perf_counter()
    kw = {"batch": 2**62} if mode == "all" else {} if mode == "stream" else {
        "batch": int(mode.removeprefix("stream-"))}
    answer = p.run(engine, np.random.default_rng(0), **kw)
    took = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"seconds": took, "peak_mib": peak / 1024,
                      "growth_mib": (peak - before) / 1024, "selected": len(answer.groups)}))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--data", default="/tmp/dpsieve-selbench")
    ap.add_argument("--batch", type=int, nargs="*", default=[],
                    help="also stream with these batch sizes (rows 'stream-<size>')")
    ap.add_argument("--no-write", action="store_true", help="print only")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        _child(*a.child)
        return
    path = _data(Path(a.data), a.keys)
    load0 = os.getloadavg()[0]
    out = ["| path | seconds | peak RSS MiB | RSS growth in the run MiB | selected |",
           "|---|---|---|---|---|"]
    for mode in ("stream", *(f"stream-{b}" for b in a.batch), "all"):
        runs = []
        for _ in range(a.repeats):
            got = subprocess.run([sys.executable, "-m", "benchmarks.queries_selection",
                                  "--child", str(path), mode], check=True,
                                 capture_output=True, text=True).stdout
            runs.append(json.loads(got.strip().splitlines()[-1]))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        out.append(f"| {mode} | {med['seconds']:.2f} | {med['peak_mib']:.0f} | "
                   f"{med['growth_mib']:.0f} | {int(med['selected'])} |")
    text = "\n".join([
        "## Queries: DP key selection with many observed groups (streamed)", "",
        f"`python -m benchmarks.queries_selection --keys {a.keys} --repeats {a.repeats}`: "
        f"{a.keys:,} one-unit groups and 4 groups of 1,000 units, DP key selection at "
        "delta 1e-6 on DuckDB (default memory limit), medians of fresh processes; load "
        f"average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end. `stream`: "
        "batches of 65,536 groups (`SELECTION_BATCH`), each thresholded before the next "
        "is fetched; `all`: one batch (every observed group in Python at once, the path "
        "before streaming). Selected groups differ by seed-level noise only (a one-unit "
        "group passes with probability <= delta).", "", *out, ""])
    print(text)
    if not a.no_write:
        (Path(__file__).resolve().parent / "results" / "queries-selection.md").write_text(text)

if __name__ == "__main__":
    main()
