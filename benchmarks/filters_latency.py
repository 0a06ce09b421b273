"""Filters: GDP residue decision latency only, one JSON line (for before/after comparisons).

Run: ``python -m benchmarks.filters_latency``. To compare two commits side by side on a busy
machine, alternate runs of the two source trees and compare medians and minima::

    git worktree add --detach /tmp/before <commit>
    for r in 1 2 3 4 5 6 7 8; do
      PYTHONPATH=/tmp/before/src python -m benchmarks.filters_latency >> before.jsonl
      python -m benchmarks.filters_latency >> after.jsonl
    done

Each value: median of 101 dry runs of one GDPResidueFilter decision (ms; the query's
atoms memoised), the median of 200 PureDP(0.01) spends in sequence against G_2, and the
2,000-query workload of benchmarks/filters_workload.py (admitted count and seconds).
"""

from __future__ import annotations

import json
import statistics
import time

from dpsieve.accounting.events import PureDP
from dpsieve.accounting.gdp import gdp_mu_for
from dpsieve.accounting.pld import PLD
from dpsieve.filters import GDPResidueFilter


def main() -> None:
    mu0 = gdp_mu_for(10.0, 1e-6)
    out: dict[str, float] = {}
    qs = {
        "Laplace(10)": PLD.laplace(10.0),
        "Gaussian(10)": PLD.gaussian(10.0),
        "RR(0.1)": PLD.randomized_response(0.1),
    }
    for name, q in qs.items():
        for mu in (mu0, 0.5):
            f = GDPResidueFilter(mu)
            f.dry_run(q)
            ts = []
            for _ in range(101):
                t0 = time.perf_counter()
                f.dry_run(q)
                ts.append(time.perf_counter() - t0)
            out[f"{name}@{mu:.4f}"] = statistics.median(ts) * 1e3
    f = GDPResidueFilter(2.0)
    pure = PureDP(0.01)
    f.dry_run(pure)
    ts = []
    for _ in range(200):
        t0 = time.perf_counter()
        f.try_spend(pure)
        ts.append(time.perf_counter() - t0)
    out["PureDP(0.01)@G2 seq"] = statistics.median(ts) * 1e3
    t0 = time.perf_counter()
    g = GDPResidueFilter(mu0)
    ql = list(qs.values())
    out["workload admitted"] = sum(g.try_spend(ql[i % 3]).admitted for i in range(2000))
    out["workload s"] = time.perf_counter() - t0
    print(json.dumps(out))


if __name__ == "__main__":
    main()
