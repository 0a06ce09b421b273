"""How fast the service refuses a registration it must refuse (issue 25: a 20,000-column
CSV or a 10 GiB sparse file held a worker 24-44 s before a 422; a symlink loop was a 500),
side by side with an ordinary registration in the same run.

Run: ``python -m benchmarks.service_register_bounds [--rounds R]``. The app runs in
process (``create_app`` over an SQLite ledger, FastAPI's TestClient), so the time is the
route's own: the request, the bounded header or footer read, the answer. Writes the
section service_register_bounds of results/system.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.service_throughput import write_section

OWNER = "dps_bench-owner-key_Tq7RmZ2vK9pLw4sN8bYc3FhJ6t"


def _files(d: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    import duckdb

    plain = d / "plain.csv"
    plain.write_text("age,income,city\n" + "".join(
        f"{20 + i % 50},{1000 + 37 * i % 900},{'abc'[i % 3]}\n" for i in range(1000)))
    wide = d / "wide.csv"
    row = ",".join("1" for _ in range(20_000))
    wide.write_text(",".join(f"c{i}" for i in range(20_000)) + "\n"
                    + "\n".join(row for _ in range(100)) + "\n")
    sparse = d / "sparse.csv"
    with sparse.open("wb") as f:
        f.truncate(10 << 30)  # 10 GiB of zeros, no block written
    loop_a, loop_b = d / "a.csv", d / "b.csv"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    pq = d / "wide.parquet"
    cols = ", ".join(f"1 AS c{i}" for i in range(1200))
    duckdb.connect().execute(f"COPY (SELECT {cols}) TO '{pq}' (FORMAT parquet)")
    return [("3-column CSV, 1,000 rows (admitted)", plain, {}),
            ("3-column CSV, infer_types (admitted)", plain, {"infer_types": True}),
            ("20,000-column CSV, 100 rows", wide, {}),
            ("20,000-column CSV, infer_types", wide, {"infer_types": True}),
            ("1,200-column Parquet", pq, {}),
            ("10 GiB sparse file (no line end)", sparse, {}),
            ("symlink loop", loop_a, {})]


def main() -> None:
    from fastapi.testclient import TestClient

    from dpsieve.ledger import SQLiteStore
    from dpsieve.service import Settings, create_app

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    load0 = os.getloadavg()
    own = {"Authorization": f"Bearer {OWNER}"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        cases = _files(d)
        store = SQLiteStore(d / "l.db")
        times: dict[str, list[float]] = {c[0]: [] for c in cases}
        answers: dict[str, tuple[int, str]] = {}
        with TestClient(create_app(Settings(owner_key=OWNER), store=store),
                        raise_server_exceptions=False) as c:
            for i in range(args.rounds):  # the cases interleaved, each round
                for n, (label, path, extra) in enumerate(cases):
                    body = {"name": f"d{i}_{n}", "path": str(path), **extra}
                    t0 = time.perf_counter()
                    r = c.post("/v1/datasets", headers=own, json=body)
                    times[label].append(time.perf_counter() - t0)
                    js = r.json()
                    answers[label] = (r.status_code, str(js.get("parameter", "")))
        (d / "sparse.csv").unlink()
        base = statistics.median(times[cases[0][0]])
        for label, _, _ in cases:
            med = statistics.median(times[label])
            status, param = answers[label]
            rows.append(f"| {label} | {status}{f' naming `{param}`' if param else ''} | "
                        f"{med * 1e3:.1f} | {med / base:.2f} | "
                        f"{', '.join(f'{x * 1e3:.0f}' for x in times[label])} |")
    load1 = os.getloadavg()
    lines = ["### Registration refused in bounded time (benchmarks/service_register_bounds.py)",
             "",
             f"`POST /v1/datasets` in process (SQLite ledger), {args.rounds} rounds, the cases "
             "interleaved in each; median wall ms, ratio to the ordinary 3-column "
             "registration of the same run, then every round. Before issue 25 the wide "
             "CSV and the sparse file held a worker 24-44 s before a 422 and the loop was "
             "a 500.", "",
             "| file | answer | median ms | ratio | rounds (ms) |",
             "|---|---|---:|---:|---|", *rows, "",
             "Load average (1, 5, 15 min) before: " + ", ".join(f"{x:.1f}" for x in load0)
             + "; after: " + ", ".join(f"{x:.1f}" for x in load1)
             + " (the 2 cores shared with other jobs).",
             f"Command: `python -m benchmarks.service_register_bounds --rounds {args.rounds}`."]
    write_section("service_register_bounds", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
