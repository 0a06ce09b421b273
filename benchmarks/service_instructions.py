"""Instructions the HTTP server executes per admitted ``count`` query, this tree against
other commits: a machine-load-independent companion to service_throughput's CPU columns.

Run: ``python -m benchmarks.service_instructions --baseline 54f8880 [--also REV ...]
[--requests N]`` (needs valgrind). Each tree's ``dpsieve serve`` runs under callgrind with
instrumentation off; after set-up and 20 warm-up queries it is switched on
(``callgrind_control -i on``) for N admitted counts from one client, then off, so start-up
and set-up are not counted. Instruction counts do not depend on what else the machine
runs (CPU time does, through caches and frequency), so a few hundred requests give ratios
within about 1 %; they are not CPU time (a syscall or a cache miss counts once). Writes
section service_instructions of results/system.md.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "system"))
from service_harness import free_port

from benchmarks.service_throughput import (
    OWNER,
    PG_URL,
    PURE,
    QUERY,
    QUOTA,
    _setup,
    write_section,
)


def instructions(src: Path, n: int, pg: bool) -> float:
    """Instructions per admitted count of the server whose package is in ``src``."""
    d = tempfile.mkdtemp()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    out = f"{d}/callgrind.out"
    schema = "instr_" + uuid.uuid4().hex[:8]
    url = PG_URL if pg else f"sqlite:///{d}/ledger.db"
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONHASHSEED": "0",
           "DPSIEVE_OWNER_KEY": OWNER, **QUOTA}
    with open(f"{d}/stderr", "w") as err:
        proc = subprocess.Popen(
            ["valgrind", "--tool=callgrind", "--instr-atstart=no",
             f"--callgrind-out-file={out}", sys.executable, "-c",
             "from dpsieve.cli import main; main()", "serve", "--database-url", url,
             "--schema", schema, "--port", str(port), "--host", "127.0.0.1"], env=env,
            stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 600
        while True:
            try:
                if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the server under valgrind did not start") from None
                time.sleep(0.5)
        hdr = _setup(base, PURE)
        with httpx.Client(base_url=base, headers=hdr, timeout=300) as c:
            for _ in range(20):
                c.post("/v1/datasets/d/queries", json=QUERY).raise_for_status()
            subprocess.run(["callgrind_control", "-i", "on", str(proc.pid)], check=True,
                           capture_output=True)
            for _ in range(n):
                c.post("/v1/datasets/d/queries", json=QUERY).raise_for_status()
            subprocess.run(["callgrind_control", "-i", "off", str(proc.pid)], check=True,
                           capture_output=True)
    finally:
        proc.terminate()
        proc.wait(timeout=600)
        if pg:
            from dpsieve.ledger import PostgresStore

            s = PostgresStore(PG_URL, schema=schema)
            s.drop_schema()
            s.close()
    total = 0
    for f in glob.glob(out + "*"):
        for line in Path(f).read_text().splitlines():
            if line.startswith("totals:"):
                total += int(line.split()[1])
    return total / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--baseline", required=True, help="the commit the ratios are against")
    ap.add_argument("--also", nargs="*", default=[], help="more commits, measured too")
    ap.add_argument("--requests", type=int, default=300)
    args = ap.parse_args()
    repo = Path(__file__).resolve().parent.parent

    def short(rev: str) -> str:
        return subprocess.run(["git", "-C", str(repo), "rev-parse", "--short", rev],
                              check=True, capture_output=True, text=True).stdout.strip()

    head = short("HEAD")
    revs = [short(args.baseline), *[short(r) for r in args.also]]
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        trees = {f"{head} (current)": repo / "src"}
        for r in revs:
            subprocess.run(["git", "-C", str(repo), "worktree", "add", "--detach",
                            f"{d}/{r}", r], check=True, capture_output=True)
            trees[r] = Path(d) / r / "src"
        try:
            for name, pg in (("SQLite", False), ("PostgreSQL", True)):
                got = {t: instructions(src, args.requests, pg) for t, src in trees.items()}
                ref = got[revs[0]]
                for t, v in got.items():
                    rows.append(f"| {name} | {t} | {v / 1e3:,.0f} | {v / ref:.3f} |")
                    print(rows[-1], flush=True)
        finally:
            for r in revs:
                subprocess.run(["git", "-C", str(repo), "worktree", "remove", "--force",
                                f"{d}/{r}"], check=False, capture_output=True)
    load1 = os.getloadavg()
    lines = ["### HTTP service: instructions per admitted count (callgrind)", "",
             f"The server (`dpsieve serve`, one worker) under valgrind's callgrind, counted "
             f"over {args.requests} admitted `count` queries (eps = 1e-4, pure budget) from "
             "one keep-alive client after set-up and 20 warm-up queries; ratio against "
             f"`{revs[0]}`.", "",
             "| ledger | tree | thousand instructions per request | ratio |",
             "|---|---|---:|---:|", *rows, "",
             "Load average (1, 5, 15 min) before: " + ", ".join(f"{x:.1f}" for x in load0)
             + "; after: " + ", ".join(f"{x:.1f}" for x in load1) + " (counts do not "
             "depend on it).",
             f"Command: `python -m benchmarks.service_instructions --baseline {revs[0]}"
             + (f" --also {' '.join(revs[1:])}" if revs[1:] else "")
             + f" --requests {args.requests}`."]
    write_section("service_instructions", "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
