"""``make run`` on a fresh clone to a first answer: seconds and the virtual environment's size.

Run: ``python -m benchmarks.service_first_answer [--rounds N] [--no-write]``. Writes a
section of results/system.md.

The committed tree (``git clone`` of this checkout's HEAD, into a temporary directory) runs
``make run SERVE_ARGS="--port P"``: a new ``.venv`` with the ``service`` extra, then
``dpsieve serve --example``. The clock starts with ``make`` and stops when the first query
the server prints (a private mean) is answered 200 over HTTP. A first, untimed round fills
pip's cache (the goal is for a warm package cache: wheels already downloaded); each timed
round removes ``.venv`` first, so the install is done again from the cache.
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


def one_run(clone: Path, timeout: float = 900.0) -> dict[str, Any]:
    """``make run`` in ``clone`` (its .venv removed first) until the first answer."""
    import httpx

    shutil.rmtree(clone / ".venv", ignore_errors=True)
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    log = clone / "make-run.log"
    t0 = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.Popen(["make", "run", f"SERVE_ARGS=--port {port}"], cwd=clone,
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
                                "venv_bytes": _du(clone / ".venv")}
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
    ap.add_argument("--no-write", action="store_true")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()
    runs = []
    with tempfile.TemporaryDirectory(prefix="dpsieve-first-answer-") as tmp:
        clone = Path(tmp) / "dpsieve"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        warm = one_run(clone)  # fills pip's cache
        print(f"warm-up (cache filled): {warm['seconds']:.1f} s", flush=True)
        for i in range(a.rounds):
            r = one_run(clone)
            runs.append(r)
            print(f"round {i + 1}: first answer after {r['seconds']:.1f} s (usage printed at "
                  f"{r['printed']:.1f} s), .venv {r['venv_bytes'] / 2**20:,.0f} MiB "
                  f"(load {os.getloadavg()[0]:.1f})", flush=True)
    secs = sorted(r["seconds"] for r in runs)
    body = "\n".join([
        "### `make run` to a first answer (benchmarks/service_first_answer.py)", "",
        "Command: `" + " ".join(["python -m benchmarks.service_first_answer",
                                 *(sys.argv[1:] if argv is None else argv)]) + "`"
        + f" on a clone of `{head}`; a fresh `.venv` each round, pip's cache warm (filled "
        f"by an untimed round: {warm['seconds']:.0f} s); load "
        f"{os.getloadavg()[0]:.1f} at the end.", "",
        "| round | seconds to the first answer | of it until the usage was printed | "
        ".venv MiB |", "|---|---:|---:|---:|",
        *[f"| {i + 1} | {r['seconds']:.1f} | {r['printed']:.1f} | "
          f"{r['venv_bytes'] / 2**20:,.0f} |" for i, r in enumerate(runs)], "",
        f"Median {secs[len(secs) // 2]:.1f} s (goal <= 60 s).", ""])
    print(body)
    if not a.no_write:
        from benchmarks.service_throughput import write_section

        write_section("service_first_answer", body)


if __name__ == "__main__":
    main()
