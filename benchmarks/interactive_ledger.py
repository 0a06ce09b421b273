"""Children's charges: in process under every budget kind, and durable on SQLite/PostgreSQL.

Run: ``python -m benchmarks.interactive_ledger [--sizes 500,5000,50000] [--in-process N]``.
Writes ``benchmarks/results/interactive_ledger.md``.

* **In process**: N (default 10,000) child charges interleaved over three kinds of child
  (a Laplace sparse vector declaring ``PureDP``, a continual counter declaring ``GDP``, a
  Gaussian sparse vector declaring ``ApproxDP``), with ``remaining()`` after each, on one
  filter of each budget kind; a budget takes the kinds it admits (a pure budget only the
  pure child). Goal: <= 5 s for 10,000.
* **Durable**: children opened with ``open_child`` (the charge and the child's row in one
  transaction) on SQLite and PostgreSQL; the time per charge over a window of 200 charges
  once the budget holds 500, 5,000 and 50,000 charges (goal: flat).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from dpsieve.accounting.events import PrivacyDescription
from dpsieve.filters import (
    ApproxZCDPFilter,
    GDPResidueFilter,
    MixedFilter,
    PureDPFilter,
    ZCDPFilter,
)
from dpsieve.interactive import CounterSpec, GaussianSVT, LaplaceSVT, SparseVector
from dpsieve.interactive.store import open_child

OUT = Path(__file__).resolve().parent / "results" / "interactive_ledger.md"
PG_URL = os.environ.get("DPSIEVE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
WINDOW = 200


def _declared() -> list[PrivacyDescription]:
    return [LaplaceSVT(1e-3, positives=3).declared(), CounterSpec.for_mu(0.01).declared(),
            GaussianSVT.calibrate(0.01, 1e-10, 100).declared()]


def _in_process(n: int) -> list[str]:
    kinds = _declared()
    rows = []
    budgets: list[tuple[str, Any, list[PrivacyDescription]]] = [
        ("pure eps 1e4", PureDPFilter(1e4), kinds[:1]),
        ("zCDP rho 1e4", ZCDPFilter(1e4), kinds[:2]),
        ("approx zCDP (1e4, 1e-3)", ApproxZCDPFilter(1e4, 1e-3), kinds),
        ("GDP residue mu 100", GDPResidueFilter(100.0), kinds[1:2]),
        ("GDP residue mu 100, pure and GDP children", GDPResidueFilter(100.0), kinds[:2]),
        ("mixed (1e4, 1e-3)", MixedFilter(1e4, 1e-3), kinds),
    ]
    for name, flt, ds in budgets:
        t0, c0 = time.perf_counter(), time.process_time()
        admitted = done = 0
        for i in range(n):
            admitted += flt.try_spend(ds[i % len(ds)]).admitted
            flt.remaining()
            done += 1
            if time.perf_counter() - t0 > 300.0:
                break
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        rows.append(f"| {name} | {', '.join(type(d).__name__ for d in ds)} | {done:,} | "
                    f"{admitted:,} | {cpu:.2f} s | {cpu / done * 1e3:.3f} ms | {dt:.2f} s |")
    return ["| budget | children's declarations | charges | admitted | CPU time | CPU per "
            "charge | wall time |", "|---|---|---|---|---|---|---|", *rows]


def _durable(store: Any, sizes: list[int], window: int) -> list[tuple[float, float]]:
    """(wall, this process's CPU) seconds per charge over ``window`` charges after each
    size."""
    store.create_budget("b", PureDPFilter(1e6))
    spec = LaplaceSVT(1e-3, positives=3)
    out: list[tuple[float, float]] = []
    done = 0
    for size in sizes:
        while done < size:
            open_child(store, "b", f"c{done}", SparseVector.open(spec), key=f"k{done}")
            done += 1
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(window):
            open_child(store, "b", f"c{done}", SparseVector.open(spec), key=f"k{done}")
            done += 1
        out.append(((time.perf_counter() - t0) / window, (time.process_time() - c0) / window))
    return out


def _cells(t: list[tuple[float, float]]) -> str:
    return " | ".join(f"{w * 1e3:.2f} ms ({c * 1e3:.2f} ms CPU)" for w, c in t)


def _backend(name: str, sizes: list[int], window: int) -> str:
    from dpsieve.ledger import PostgresStore, SQLiteStore

    if name == "sqlite":
        with tempfile.TemporaryDirectory() as d:
            sq = SQLiteStore(Path(d) / "ledger.db")
            try:
                return "| SQLite | " + _cells(_durable(sq, sizes, window)) + " |"
            finally:
                sq.close()
    try:
        pg = PostgresStore(PG_URL, schema="bench_" + uuid.uuid4().hex[:12])
    except Exception as e:  # no server: say so
        return f"| PostgreSQL | not run: {type(e).__name__} |"
    try:
        return "| PostgreSQL | " + _cells(_durable(pg, sizes, window)) + " |"
    finally:
        pg.drop_schema()
        pg.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500,5000,50000")
    ap.add_argument("--in-process", type=int, default=10_000, help="0: not run")
    ap.add_argument("--backends", default="sqlite,postgres", help="'': none")
    ap.add_argument("--window", type=int, default=WINDOW)
    ap.add_argument("--out", default=str(OUT))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    backends = [b for b in args.backends.split(",") if b]
    lines = ["# Children's charges", "",
             f"Command: `python -m benchmarks.interactive_ledger --sizes {args.sizes} "
             f"--window {args.window}` (load {os.getloadavg()[0]:.1f} at the start, shared "
             "2-core machine).", ""]
    if args.in_process:
        lines += [f"## In process: {args.in_process:,} interleaved charges, remaining() "
                  "after each (a row stops after 300 s of wall time; the CPU time is the "
                  "process's, the wall time follows the shared machine's load)", "",
                  *_in_process(args.in_process), ""]
    if backends:
        lines += [f"## Durable: time per charge (open_child) over {args.window} charges "
                  "after N charges (wall; in brackets the client process's CPU)", "",
                  "| backend | " + " | ".join(f"N = {s:,}" for s in sizes) + " |",
                  "|---|" + "---|" * len(sizes),
                  *(_backend(b, sizes, args.window) for b in backends)]
    Path(args.out).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
