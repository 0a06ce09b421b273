"""Valid-query throughput of the HTTP service with a flood beside it: wrong keys (each
one new, so each is looked up), ``/readyz`` or ``/healthz`` sent as fast as a separate
process's connections can, against the same server's quiet runs, interleaved.

Run: ``python -m benchmarks.service_flood [--seconds S] [--rounds R] [--flooders N]
[--clients C]``. Writes the section service_flood of results/system.md. The flood comes
from another process (its own interpreter, so its client work does not hold the
benchmark's GIL) but shares the 2 cores with the server and the valid clients; the
analyst quota is lifted (one analyst sends every valid query).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from benchmarks.service_throughput import (
    OWNER,
    PG_URL,
    PURE,
    QUERY,
    QUOTA,
    Server,
    _setup,
    run,
)
from benchmarks.service_throughput import write_section as _write

ENV = QUOTA  # the one benchmark analyst's quota lifted (the check still runs)
KINDS = ("wrong keys", "/readyz", "/healthz")


def _flood(base: str, kind: str, threads: int, stop: Any, sent: Any) -> None:
    """The flooding process: ``threads`` keep-alive connections, as fast as they go."""
    import httpx

    def one(i: int) -> None:
        n = 0
        with httpx.Client(base_url=base, timeout=30) as c:
            while not stop.is_set():
                if kind == "wrong keys":
                    c.get("/v1/me", headers={"X-API-Key": f"dps_{uuid.uuid4().hex}"})
                else:
                    c.get(kind)
                n += 1
        with sent.get_lock():
            sent.value += n

    ts = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def measure(base: str, hdr: dict[str, str], kind: str | None, clients: int,
            seconds: float, flooders: int) -> tuple[float, float]:
    """(valid req/s, flood req/s) of one cell."""
    if kind is None:
        return run(base, hdr, clients, seconds, QUERY)["rps"], 0.0
    ctx = mp.get_context("spawn")
    stop, sent = ctx.Event(), ctx.Value("q", 0)
    proc = ctx.Process(target=_flood, args=(base, kind, flooders, stop, sent))
    proc.start()
    try:
        threading.Event().wait(1.0)  # the flood under way before the window opens
        rps = run(base, hdr, clients, seconds, QUERY)["rps"]
    finally:
        stop.set()
        proc.join(60)
    return rps, sent.value / (seconds + 1.0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--flooders", type=int, default=10)
    args = ap.parse_args()
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, url, pg in (("SQLite", f"sqlite:///{Path(d) / 'f.db'}", False),
                              ("PostgreSQL", PG_URL, True)):
            schema = "flood_" + uuid.uuid4().hex[:8] if pg else "dpsieve"
            try:
                srv = Server(url, OWNER, schema=schema, env=ENV)
            except Exception as e:
                rows.append(f"| {name} | not run: {e} | | | | |")
                continue
            with srv:
                hdr = _setup(srv.base, PURE)
                got: dict[str | None, list[float]] = {k: [] for k in (None, *KINDS)}
                rate: dict[str, list[float]] = {k: [] for k in KINDS}
                for i in range(args.rounds):
                    order: list[str | None] = [None, *KINDS]
                    for kind in order if i % 2 == 0 else order[::-1]:
                        rps, fl = measure(srv.base, hdr, kind, args.clients, args.seconds,
                                          args.flooders)
                        got[kind].append(rps)
                        if kind is not None:
                            rate[kind].append(fl)
                        print(name, kind, f"{rps:.0f}", f"{fl:.0f}", flush=True)
                quiet = statistics.median(got[None])
                for kind in KINDS:
                    med = statistics.median(got[kind])
                    rows.append(
                        f"| {name} | {kind} | {statistics.median(rate[kind]):.0f} | {quiet:.0f}"
                        f" | {med:.0f} | {med / quiet:.2f} | "
                        f"{', '.join(f'{x:.0f}' for x in got[None])} / "
                        f"{', '.join(f'{x:.0f}' for x in got[kind])} |")
                    print(rows[-1], flush=True)
            if pg:
                from dpsieve.ledger import PostgresStore

                s = PostgresStore(PG_URL, schema=schema)
                s.drop_schema()
                s.close()
    load1 = os.getloadavg()
    lines = ["### HTTP service: valid throughput beside a flood", "",
             f"Admitted `count` queries (eps = 1e-4, pure budget) from {args.clients} "
             f"clients of one analyst, {args.seconds:g} s per cell, {args.rounds} cells per "
             f"condition, conditions interleaved; beside them, {args.flooders} connections "
             "of another process send wrong keys (each new: each is looked up), `/readyz` "
             "or `/healthz` as fast as they can. Median valid req/s against the quiet "
             "cells of the same server, then every cell (quiet / flooded).", "",
             "| ledger | flood | flood req/s | quiet req/s | flooded req/s | ratio | cells |",
             "|---|---|---:|---:|---:|---:|---|", *rows, "",
             "Load average (1, 5, 15 min) before: " + ", ".join(f"{x:.1f}" for x in load0)
             + "; after: " + ", ".join(f"{x:.1f}" for x in load1) + ".",
             f"Command: `python -m benchmarks.service_flood --seconds {args.seconds:g} "
             f"--rounds {args.rounds} --clients {args.clients} --flooders {args.flooders}`."]
    _write("service_flood", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
