"""Sparse vector questions on the paths an analyst takes, in process.

Run: ``python -m benchmarks.interactive_session [--questions 10000]``. Writes
``benchmarks/results/interactive_session.md``.

The same Laplace sparse vector child (eps 1, never exhausted: every value is far below the
threshold) answers N questions three ways, each question's time measured:

* **child**: ``SparseVector.ask`` on the object (the mechanism alone);
* **ledger**: ``interactive.store.ask_child`` on a ``MemoryStore`` (state rebuilt from its
  JSON, the answer, the new state and an audit row stored before it returns);
* **session**: ``Session.children.ask`` with a count plan the session evaluates on a
  pandas frame of 10,000 rows (plan checked against the schema, its sensitivity, the
  engine's aggregate, then the ledger path).

Goal (issue 28): >= 10,000 questions at <= 1 ms each in process.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from dpsieve import Session
from dpsieve.accounting.events import PureDP
from dpsieve.filters import PureDPFilter
from dpsieve.interactive import LaplaceSVT, SparseVector
from dpsieve.interactive.store import ask_child, open_child
from dpsieve.ledger import MemoryStore

OUT = Path(__file__).resolve().parent / "results" / "interactive_session.md"
SPEC = LaplaceSVT(1.0, positives=10)


def _row(name: str, times: list[float], cpu: float) -> str:
    n = len(times)
    times.sort()
    return (f"| {name} | {n:,} | {cpu / n * 1e6:.0f} us | {times[n // 2] * 1e6:.0f} us | "
            f"{times[int(0.99 * n)] * 1e6:.0f} us | {times[-1] * 1e3:.2f} ms |")


def _timed(n: int, ask: object) -> tuple[list[float], float]:
    times = []
    cpu = time.process_time()
    for i in range(n):
        t = time.perf_counter()
        ask(i)  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return times, time.process_time() - cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--questions", type=int, default=10_000)
    n = ap.parse_args().questions
    rows = []
    sv = SparseVector.open(SPEC)
    rows.append(_row("child: SparseVector.ask", *_timed(n, lambda i: sv.ask(-1e9, 0.0))))
    store = MemoryStore()
    store.create_budget("b", PureDPFilter(10.0))
    open_child(store, "b", "sv", SparseVector.open(SPEC), key="open")
    req = {"op": "ask", "threshold": 0.0}
    rows.append(_row("ledger: ask_child (MemoryStore)", *_timed(
        n, lambda i: ask_child(store, "b", "sv", req, -1e9, key=f"q{i}"))))
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"age": rng.integers(18, 90, 10_000)})
    s = Session(frame, budget=PureDP(10.0))
    s.children.open("sv", "sparse_vector", {"eps": 1.0, "positives": 10})
    plan = {"type": "count", "where": [{"column": "age", "op": ">=", "value": 60}]}
    rows.append(_row("session: children.ask(count plan, 10,000 rows)", *_timed(
        n, lambda i: s.children.ask("sv", plan, threshold=1e9, key=f"q{i}"))))
    lines = ["# Sparse vector questions on an analyst's paths", "",
             f"Command: `python -m benchmarks.interactive_session --questions {n}` (secure "
             f"source, in process; load {os.getloadavg()[0]:.1f} at the start on the shared "
             "2-core machine: wall percentiles follow it, the CPU time is the process's).",
             "", "| path | questions | CPU per question | wall median | wall 99th "
             "percentile | wall worst |", "|---|---|---|---|---|---|", *rows, ""]
    OUT.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
