"""Admitted-query throughput of the HTTP service at 1, 10 and 50 concurrent clients,
on SQLite and PostgreSQL (``dpsieve serve`` in a subprocess, loopback, one worker).

Run: ``python -m benchmarks.service_throughput [--seconds S]``. Writes a section of
results/system.md. ``--baseline REV`` instead measures this tree and commit REV side by
side in one run (REV checked out in a temporary git worktree, its server started with
``PYTHONPATH=<worktree>/src``; the two alternate cell by cell, so a change in the load of
the shared machine hits both) and writes the ratios (section service_throughput_compare).
Clients are threads in this process with one keep-alive connection each, so on a small
machine they compete with the server for the CPU: the numbers are a floor for the server
alone.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "system"))
from service_harness import Server

from dpsieve.service.example import example_path

PATH = Path(__file__).resolve().parent / "results" / "system.md"


def write_section(name: str, body: str) -> None:
    PATH.parent.mkdir(parents=True, exist_ok=True)
    text = PATH.read_text() if PATH.exists() else "## System: ledger, service, session\n"
    block = f"<!-- {name} -->\n{body.rstrip()}\n<!-- /{name} -->"
    pat = re.compile(rf"<!-- {re.escape(name)} -->.*?<!-- /{re.escape(name)} -->", re.S)
    text = pat.sub(lambda _: block, text) if pat.search(text) else text.rstrip() + "\n\n" + block
    PATH.write_text(text.rstrip() + "\n")


PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
#: One analyst sends every query: its request quota is lifted (the check still runs) so
#: the numbers are the code's, not the default policy's (100 requests a second); the
#: registration deadline too (a server under valgrind reads metadata ~50x slower).
QUOTA = {"DPSIEVE_ANALYST_REQUESTS_PER_SECOND": "1000000",
         "DPSIEVE_ANALYST_REQUEST_BURST": "1000000", "DPSIEVE_REGISTRATION_TIMEOUT": "3600"}
OWNER = "dps_bench-owner-key_Tq7RmZ2vK9pLw4sN8bYc3FhJ6t"  # dpsieve serve refuses weak keys
QUERY = {"type": "count", "privacy": {"type": "pure", "eps": 1e-4}}
GDP_QUERY = {"type": "count", "privacy": {"type": "pure", "eps": 1e-2}}
PURE = {"type": "pure", "eps": 1e6}
GDP_BUDGET = {"type": "gdp", "mu": 2.0}


def _setup(base: str, budget: dict[str, Any]) -> dict[str, str]:
    own = {"Authorization": f"Bearer {OWNER}"}
    r = httpx.post(base + "/v1/datasets", headers=own, timeout=30, json={
        "name": "d", "path": str(example_path()), "budget": budget})
    r.raise_for_status()
    key = httpx.post(base + "/v1/analysts", headers=own, json={"name": "a"}).json()["api_key"]
    httpx.post(base + "/v1/datasets/d/grants", headers=own, json={"analyst": "a"})
    return {"Authorization": f"Bearer {key}"}


def run(base: str, hdr: dict[str, str], clients: int, seconds: float,
        query: dict[str, Any]) -> dict[str, Any]:
    """Requests completed inside a window that opens once every client is connected."""
    lat: list[float] = []
    errors = [0]
    sent = [0]
    lock = threading.Lock()
    window: list[float] = []

    def open_window() -> None:
        now = time.monotonic()
        window[:] = [now, now + seconds]

    barrier = threading.Barrier(clients, action=open_window)

    def client() -> None:
        mine: list[float] = []
        bad = 0
        total = 0
        with httpx.Client(base_url=base, headers=hdr, timeout=60) as c:
            c.get("/healthz")  # connect before the window opens
            barrier.wait()
            while True:
                t = time.perf_counter()
                ok = c.post("/v1/datasets/d/queries", json=query).status_code == 200
                total += 1
                if time.monotonic() > window[1]:
                    break
                if ok:
                    mine.append(time.perf_counter() - t)
                else:
                    bad += 1
        with lock:
            lat.extend(mine)
            errors[0] += bad
            sent[0] += total

    ts = [threading.Thread(target=client) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lat.sort()
    return {"rps": len(lat) / seconds, "n": len(lat), "errors": errors[0], "sent": sent[0],
            "p50": lat[len(lat) // 2] * 1e3 if lat else float("nan"),
            "p95": lat[int(len(lat) * 0.95)] * 1e3 if lat else float("nan")}


def compare(baseline: str, seconds: float, rounds: int) -> None:
    """This tree against commit ``baseline``, alternating, ``rounds`` cells each."""
    import os
    import statistics
    import subprocess

    import psutil

    repo = Path(__file__).resolve().parent.parent
    sha = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", baseline],
                         check=True, capture_output=True, text=True).stdout.strip()
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", "HEAD"],
                          check=True, capture_output=True, text=True).stdout.strip()
    load0 = os.getloadavg()
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as d:
        old = Path(d) / "baseline"
        subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach", str(old), sha],
                       check=True, capture_output=True)
        try:
            trees = {"current": QUOTA, "baseline": {**QUOTA, "PYTHONPATH": str(old / "src")}}
            for name, url_of, pg in (("SQLite", lambda t: f"sqlite:///{Path(d) / t}.db",
                                      False),
                                     ("PostgreSQL", lambda t: PG_URL, True)):
                servers = {}
                for tree, env in trees.items():
                    schema = "bench_" + uuid.uuid4().hex[:8] if pg else "dpsieve"
                    try:
                        srv = Server(url_of(tree), OWNER, schema=schema, env=env)
                    except Exception as e:
                        rows.append(f"| {name} | — | not run ({tree}): {e} | | | | | | |")
                        break
                    servers[tree] = (srv, schema, _setup(srv.base, PURE))
                if len(servers) < 2:
                    for srv, _, _ in servers.values():
                        srv.stop()
                    continue
                for clients in (1, 10, 50):
                    got: dict[str, list[float]] = {"current": [], "baseline": []}
                    cpu: dict[str, list[float]] = {"current": [], "baseline": []}
                    for i in range(rounds):
                        order = ["current", "baseline"][:: 1 if i % 2 == 0 else -1]
                        for tree in order:
                            srv, _, hdr = servers[tree]
                            proc = psutil.Process(srv.proc.pid)
                            t0 = sum(proc.cpu_times()[:2])
                            r = run(srv.base, hdr, clients, seconds, QUERY)
                            got[tree].append(r["rps"])
                            cpu[tree].append((sum(proc.cpu_times()[:2]) - t0) * 1e3
                                             / max(r["sent"], 1))
                    cur, base = (statistics.median(got[t]) for t in ("current", "baseline"))
                    ccur, cbase = (statistics.median(cpu[t]) for t in ("current", "baseline"))
                    rows.append(f"| {name} | {clients} | {cur:.0f} | {base:.0f} | "
                                f"{cur / base:.2f} | {ccur:.2f} | {cbase:.2f} | "
                                f"{ccur / cbase:.2f} | "
                                f"{', '.join(f'{x:.0f}' for x in got['current'])} / "
                                f"{', '.join(f'{x:.0f}' for x in got['baseline'])} |")
                    print(rows[-1], flush=True)
                for srv, schema, _ in servers.values():
                    srv.stop()
                    if pg:
                        from dpsieve.ledger import PostgresStore

                        s = PostgresStore(PG_URL, schema=schema)
                        s.drop_schema()
                        s.close()
        finally:
            subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                            str(old)], check=False, capture_output=True)
    load1 = os.getloadavg()
    lines = ["### HTTP service throughput: this commit against a baseline, same run", "",
             f"`{head}` (current) against `{sha}` (baseline), admitted `count` queries "
             f"(eps = 1e-4, pure budget), {seconds:g} s per cell, {rounds} cells per tree "
             "and client count, the trees alternating; median req/s, ratio current / "
             "baseline, then every cell. Clients are threads of the benchmark process "
             "sharing the 2 cores with the server and with other jobs.", "",
             "The CPU columns are the server process's user + system CPU time per request"
             " sent (psutil), far less sensitive to the machine's load than req/s: the "
             "cost of the code itself.", "",
             "| ledger | clients | current req/s | baseline req/s | ratio | current CPU "
             "ms/req | baseline CPU ms/req | CPU ratio | req/s cells (current / baseline)"
             " |", "|---|---:|---:|---:|---:|---:|---:|---:|---|", *rows, "",
             "Load average (1, 5, 15 min) before: " + ", ".join(f"{x:.1f}" for x in load0)
             + "; after: " + ", ".join(f"{x:.1f}" for x in load1) + ".",
             f"Command: `python -m benchmarks.service_throughput --baseline {sha} "
             f"--seconds {seconds:g} --rounds {rounds}`."]
    write_section("service_throughput_compare", "\n".join(lines))
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--baseline", help="a commit to measure side by side with this tree")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if args.baseline:
        compare(args.baseline, args.seconds, args.rounds)
        return
    lines = ["### HTTP service: admitted-query throughput", "",
             f"`count` queries (Laplace, eps = 1e-4; 1e-2 on the GDP budget), "
             f"{args.seconds:g} s per cell, every "
             "request admitted (durable spend + answer record per request). Pure-DP budget "
             "(additive filter) unless stated; the GDP rows pay the residue filter's "
             "certified search on every Laplace query. Clients share the 2 cores with the "
             "server (and with other jobs).", "",
             "| ledger | clients | admitted req/s | p50 latency | p95 latency | errors |",
             "|---|---:|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory() as d:
        backends = [("SQLite", f"sqlite:///{Path(d) / 'bench.db'}", "dpsieve", PURE),
                    ("PostgreSQL", PG_URL, "bench_" + uuid.uuid4().hex[:8], PURE),
                    ("SQLite, GDP(2) budget", f"sqlite:///{Path(d) / 'gdp.db'}", "dpsieve",
                     GDP_BUDGET)]
        for name, url, schema, budget in backends:
            try:
                srv = Server(url, OWNER, schema=schema, env=QUOTA)
            except Exception as e:
                lines.append(f"| {name} | — | not run: {e} | | | |")
                continue
            with srv:
                hdr = _setup(srv.base, budget)
                for clients in (1, 10, 50):
                    q = GDP_QUERY if budget is GDP_BUDGET else QUERY
                    r = run(srv.base, hdr, clients, args.seconds, q)
                    lines.append(f"| {name} | {clients} | {r['rps']:.0f} | {r['p50']:.1f} ms"
                                 f" | {r['p95']:.1f} ms | {r['errors']} |")
                    print(lines[-1], flush=True)
            if url.startswith("postgresql"):
                from dpsieve.ledger import PostgresStore

                s = PostgresStore(url, schema=schema)
                s.drop_schema()
                s.close()
    import os

    lines += ["", "Load average during the run (other jobs share the 2 cores): "
              + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + "."]
    write_section("service_throughput", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
