"""``make run`` on a fresh clone to a first answer: seconds and the virtual environment's size.

Run: ``python -m benchmarks.service_first_answer [--rounds N] [--pip] [--no-write]``. Writes
a section of results/system.md.

The committed tree (``git clone`` of this checkout's HEAD, into a temporary directory) runs
``make run SERVE_ARGS="--port P"``: a new ``.venv`` with the ``service`` extra, then
``dpsieve serve --example``. The clock starts with ``make`` and stops when the first query
the server prints (a private mean) is answered 200 over HTTP. A first, untimed round fills
the package caches (the goal is for a warm package cache: wheels already downloaded); each
timed round removes ``.venv`` first, so the install is done again from the cache. The
Makefile installs with uv (pip brings it into the venv when it is not on PATH); ``--pip``
times the same rounds with ``make run UV=no`` (pip alone) after them, side by side.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _du(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def one_run(clone: Path, timeout: float = 900.0, make_args: tuple[str, ...] = ()
            ) -> dict[str, Any]:
    """``make run`` in ``clone`` (its .venv removed first) until the first answer."""
    import httpx

    shutil.rmtree(clone / ".venv", ignore_errors=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    log = clone / "make-run.log"
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(["make", "run", f"SERVE_ARGS=--port {port}", *make_args], cwd=clone,
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        key = served = None
        deadline = t0 + timeout
        while time.perf_counter() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"make run exited: {log.read_text()[-2000:]}")
            text = log.read_text()
            m = re.search(r"Analyst key \(shown once\): (\S+)", text)
            if m and served is None:
                key = m.group(1)
                served = time.perf_counter() - t0
            if key is not None:
                try:
                    r = httpx.post(f"http://127.0.0.1:{port}/v1/datasets/diabetes/queries",
                                   headers={"Authorization": f"Bearer {key}"}, timeout=30,
                                   json={"type": "mean", "column": "bmi", "lower": 15,
                                         "upper": 45, "privacy": {"type": "pure", "eps": 0.2}})
                    if r.status_code == 200:
                        return {"seconds": time.perf_counter() - t0, "printed": served,
                                "venv_bytes": _du(clone / ".venv"),
                                "load": os.getloadavg()[0]}
                except httpx.HTTPError:
                    pass
            time.sleep(0.2)
        raise RuntimeError("no answer before the timeout")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pip", action="store_true",
                    help="also time the rounds with pip alone (make run UV=no)")
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    installers = [("uv", ())] + ([("pip", ("UV=no",))] if a.pip else [])
    runs: list[tuple[str, int, dict[str, Any]]] = []
    warm: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="dpsieve-first-answer-") as tmp:
        clone = Path(tmp) / "dpsieve"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for name, make_args in installers:
            warm[name] = one_run(clone, make_args=make_args)["seconds"]  # fills the cache
            print(f"{name}: warm-up (cache filled): {warm[name]:.1f} s", flush=True)
            for i in range(a.rounds):
                r = one_run(clone, make_args=make_args)
                runs.append((name, i + 1, r))
                print(f"{name} round {i + 1}: first answer after {r['seconds']:.1f} s (usage "
                      f"printed at {r['printed']:.1f} s), .venv "
                      f"{r['venv_bytes'] / 2**20:,.0f} MiB (load {r['load']:.1f})", flush=True)
    medians = []
    for name, _ in installers:
        secs = sorted(r["seconds"] for n, _, r in runs if n == name)
        medians.append(f"{name} {secs[len(secs) // 2]:.1f} s")
    body = "\n".join([
        "### `make run` to a first answer (benchmarks/service_first_answer.py)", "",
        "Command: `" + " ".join(["python -m benchmarks.service_first_answer",
                                 *(sys.argv[1:] if argv is None else argv)]) + "`"
        + f" on a clone of `{head}`; a fresh `.venv` each round, the package cache warm "
        "(filled by an untimed round: "
        + ", ".join(f"{n} {s:.0f} s" for n, s in warm.items()) + ").", "",
        "| installer | round | seconds to the first answer | of it until the usage was "
        "printed | .venv MiB | load (1 min) |", "|---|---|---:|---:|---:|---:|",
        *[f"| {n} | {i} | {r['seconds']:.1f} | {r['printed']:.1f} | "
          f"{r['venv_bytes'] / 2**20:,.0f} | {r['load']:.1f} |" for n, i, r in runs], "",
        f"Median: {'; '.join(medians)} (goal <= 60 s).", ""])
    print(body)
    if not a.no_write:
        from benchmarks.service_throughput import write_section

        write_section("service_first_answer", body)


if __name__ == "__main__":
    main()
