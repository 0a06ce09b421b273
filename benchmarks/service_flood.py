"""Valid-query throughput of the HTTP service with a flood beside it: wrong keys (each
one new, so the failure limiter has not seen it; the worker's set of key hashes refuses
it without a ledger lookup), ``/readyz`` or ``/healthz`` sent as fast as a separate
process's connections can, against the same server's quiet runs, interleaved.

Run: ``python -m benchmarks.service_flood [--seconds S] [--rounds R] [--flooders N]
[--clients C]``. Writes the section service_flood of results/system.md. The flood comes
from another process (its own interpreter, so its client work does not hold the
benchmark's GIL; raw sockets and prepared bytes, so it takes little CPU) but shares the 2
cores with the server and the valid clients; the analyst quota is lifted (one analyst
sends every valid query). The server process's CPU per valid query and per flood
request is measured too (psutil): the cost of the code, less sensitive to the load.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import threading
import time
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


def _request(kind: str, host: str) -> bytes:
    """One flood request's bytes (a wrong key: a new random one each time)."""
    if kind == "wrong keys":
        return (f"GET /v1/me HTTP/1.1\r\nHost: {host}\r\nX-API-Key: dps_{uuid.uuid4().hex}"
                "\r\n\r\n").encode()
    return f"GET {kind} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()


def _answer(sock: Any, buf: bytes) -> bytes:
    """Read one HTTP response (headers and a Content-Length body) from ``sock``; the
    bytes after it."""
    while b"\r\n\r\n" not in buf:
        got = sock.recv(65536)
        if not got:
            raise ConnectionError("the server closed the connection")
        buf += got
    head, _, rest = buf.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    while len(rest) < length:
        got = sock.recv(65536)
        if not got:
            raise ConnectionError("the server closed the connection")
        rest += got
    return rest[length:]


def _flood(base: str, kind: str, threads: int, stop: Any, sent: Any, ready: Any,
           rate: float = 0.0) -> None:
    """The flooding process: ``threads`` keep-alive connections, each sending its next
    request when the last is answered, as fast as they go. Raw sockets and prepared
    bytes (a few tens of microseconds of client CPU per request, not httpx's
    ~1 ms): on 2 shared cores the flood's client would otherwise take the CPU the
    server needs and the ratio would measure the client. ``ready`` is set once every
    connection has had its first answer (the process's start-up, slow on a loaded
    machine, is not part of any window). ``rate`` > 0: at most that many requests a
    second in all (each connection paced to ``rate / threads``)."""
    import socket
    from urllib.parse import urlsplit

    u = urlsplit(base)
    host, port = str(u.hostname), int(u.port or 80)
    answered = threading.Barrier(threads + 1)

    def one(i: int) -> None:
        n = 0
        with socket.create_connection((host, port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf, first = b"", True
            gap, due = (threads / rate if rate > 0 else 0.0), time.monotonic()
            while not stop.is_set():
                if gap:
                    due += gap
                    time.sleep(max(0.0, due - time.monotonic()))
                sock.sendall(_request(kind, host))
                buf = _answer(sock, buf)
                if first:
                    first = False
                    answered.wait()
                    continue  # counted from the window on
                n += 1
        with sent.get_lock():
            sent.value += n

    ts = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    answered.wait()
    ready.set()
    for t in ts:
        t.join()


def measure(base: str, hdr: dict[str, str], kind: str | None, clients: int,
            seconds: float, flooders: int, pid: int, rate: float = 0.0) -> dict[str, float]:
    """One cell: valid req/s, valid requests sent, flood req/s, and the server process's
    CPU time (user + system, ms) over the valid clients' window."""
    import psutil

    proc = psutil.Process(pid)

    def cpu() -> float:
        return float(sum(proc.cpu_times()[:2])) * 1e3

    if kind is None:
        c0 = cpu()
        r = run(base, hdr, clients, seconds, QUERY)
        return {"rps": r["rps"], "sent": r["sent"], "flood": 0.0, "cpu": cpu() - c0}
    ctx = mp.get_context("spawn")
    stop, sent, ready = ctx.Event(), ctx.Value("q", 0), ctx.Event()
    proc_f = ctx.Process(target=_flood, args=(base, kind, flooders, stop, sent, ready,
                                                        rate))
    proc_f.start()
    try:
        # the flood under way before the window opens (was: a fixed 1 s, shorter than the
        # flooding process's start-up on the loaded machine: windows ran with no flood)
        if not ready.wait(300):
            raise RuntimeError(f"the {kind} flood did not start within 300 s")
        threading.Event().wait(0.5)
        t0, c0 = time.perf_counter(), cpu()
        r = run(base, hdr, clients, seconds, QUERY)
        c1 = cpu()
    finally:
        stop.set()
        t1 = time.perf_counter()
        proc_f.join(60)
    if not sent.value:
        raise RuntimeError(f"the {kind} flood sent nothing")
    return {"rps": r["rps"], "sent": r["sent"], "flood": sent.value / (t1 - t0 + 0.5),
            "cpu": c1 - c0, "window": t1 - t0}


def _rps(cells: list[dict[str, float]]) -> str:
    return ", ".join(f"{m['rps']:.0f}" for m in cells)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--flooders", type=int, default=10)
    ap.add_argument("--flood-rate", type=float, default=0.0,
                    help="flood requests a second in all (0: as fast as they go)")
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
                cells: dict[str | None, list[dict[str, float]]] = {
                    k: [] for k in (None, *KINDS)}
                for i in range(args.rounds):
                    order: list[str | None] = [None, *KINDS]
                    for kind in order if i % 2 == 0 else order[::-1]:
                        m = measure(srv.base, hdr, kind, args.clients, args.seconds,
                                    args.flooders, srv.proc.pid, args.flood_rate)
                        cells[kind].append(m)
                        print(name, kind, {k: round(v, 1) for k, v in m.items()}, flush=True)
                quiet = statistics.median(m["rps"] for m in cells[None])
                # the server's CPU per valid query, quiet; what is left of a flooded
                # window's CPU after its valid queries, per flood request
                per_q = statistics.median(m["cpu"] / max(m["sent"], 1) for m in cells[None])
                for kind in KINDS:
                    med = statistics.median(m["rps"] for m in cells[kind])
                    # the server's CPU per valid query in the flooded windows (the flood's
                    # cost included): does the flood raise the server's work per query?
                    per_qf = statistics.median(m["cpu"] / max(m["sent"], 1) for m in cells[kind])
                    per_f = statistics.median(
                        max(0.0, m["cpu"] - m["sent"] * per_q) / max(m["flood"] * m["window"], 1)
                        for m in cells[kind])
                    rows.append(
                        f"| {name} | {kind} | "
                        f"{statistics.median(m['flood'] for m in cells[kind]):.0f} | "
                        f"{quiet:.0f} | {med:.0f} | {med / quiet:.2f} | {per_q:.2f} | "
                        f"{per_qf:.2f} | {per_q / per_qf:.2f} | "
                        f"{per_f:.3f} | {per_f / per_q:.3f} | "
                        f"{_rps(cells[None])} / {_rps(cells[kind])} |")
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
             "of another process send wrong keys (each new: refused by the worker's set of "
             "key hashes, without a ledger lookup), `/readyz` "
             "or `/healthz` "
             + (f"at {args.flood_rate:g} requests a second in all" if args.flood_rate > 0
                else "as fast as they can") + ". Median valid req/s against the quiet "
             "cells of the same server, then every cell (quiet / flooded). The flood's "
             "client process shares the 2 cores with the server, so req/s measures the "
             "contention for the machine as much as the server's work; the CPU columns "
             "are the server process's own (psutil, user + system): ms per valid query in "
             "the quiet cells, and ms per flood request (a flooded window's CPU less its "
             "valid queries at the quiet cost, over the flood requests in it; the "
             "PostgreSQL backends' CPU is not in it); and the server's CPU per valid "
             "query in the flooded windows (flood included), and quiet / flooded of it "
             "(the valid throughput the server's own work allows, beside the flood).", "",
             "| ledger | flood | flood req/s | quiet req/s | flooded req/s | ratio | "
             "server CPU ms / query | flooded: server CPU ms / query | CPU ratio | "
             "server CPU ms / flood request | flood request / query | req/s cells "
             "(quiet / flooded) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|", *rows, "",
             "Load average (1, 5, 15 min) before: " + ", ".join(f"{x:.1f}" for x in load0)
             + "; after: " + ", ".join(f"{x:.1f}" for x in load1) + ".",
             f"Command: `python -m benchmarks.service_flood --seconds {args.seconds:g} "
             f"--rounds {args.rounds} --clients {args.clients} --flooders {args.flooders}"
             + (f" --flood-rate {args.flood_rate:g}" if args.flood_rate > 0 else "") + "`."]
    _write("service_flood", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
