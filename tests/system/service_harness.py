"""Helpers for the system tests that run processes: an example CSV, ``dpsieve serve`` in a
subprocess on a free port (and killed between a durable spend and its answer), a script
on the ledger in a subprocess that is SIGKILLed mid-burst."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent
SRC = str(HERE.parents[1] / "src")


def write_csv(path: Path, n: int = 200) -> Path:
    rows = ["age,income,city"]
    cities = ["a", "b", "c"]
    for i in range(n):
        rows.append(f"{20 + i % 50},{1000 + 37 * i % 900},{cities[i % 3]}")
    path.write_text("\n".join(rows) + "\n")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``dpsieve serve`` in a subprocess, on a free loopback port."""

    def __init__(self, url: str, owner: str, *, schema: str = "dpsieve",
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        # the owner key through the environment: never on the command line (ps shows it)
        full_env = {**os.environ, "DPSIEVE_OWNER_KEY": owner, **(env or {})}
        # stderr to a file, not a pipe nobody reads: the server writes one access-log
        # line per request there, and a full pipe (64 KiB, ~400 requests) would block it
        self._err = tempfile.TemporaryFile()  # noqa: SIM115 (closed by stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from dpsieve.cli import main; main()", "serve",
             "--database-url", url, "--port", str(self.port),
             "--schema", schema, "--host", "127.0.0.1"],
            env=full_env, stdout=subprocess.DEVNULL, stderr=self._err,
        )
        deadline = time.monotonic() + 120  # a loaded 2-core CI machine: start-up can take a minute
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited early: {self.stderr()}")
            try:
                if httpx.get(self.base + "/healthz", timeout=0.5).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("service did not start within 120 s")

    def stderr(self) -> str:
        """What the server wrote to stderr so far (its access log and errors)."""
        self._err.seek(0)
        return self._err.read().decode(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers run (a crash)."""
        self.proc.kill()
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()
        self._err.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def crash_after_spend(url: str, owner: str, spent: Path, setup: Callable[[str], dict[str, str]],
                      query: dict[str, Any], key: str = "crash-1") -> dict[str, str]:
    """A server on ``url`` that pauses after each durable spend (it touches ``spent`` then):
    ``setup(base)`` returns an analyst's headers, the analyst sends ``query`` with
    Idempotency-Key ``key``, and the server is SIGKILLed between the spend and the answer.
    Asserts that no answer was released; returns the headers (with the key) to retry with."""
    env = {"DPSIEVE_TEST_SPEND_MARKER": str(spent), "DPSIEVE_TEST_PAUSE_AFTER_SPEND": "120"}
    srv = Server(url, owner, env=env)
    try:
        hdr = {**setup(srv.base), "Idempotency-Key": key}
        outcome: list[Any] = []

        def send() -> None:
            try:
                outcome.append(httpx.post(srv.base + "/v1/datasets/d/queries", json=query,
                                          headers=hdr, timeout=60))
            except httpx.HTTPError as e:
                outcome.append(e)

        t = threading.Thread(target=send)
        t.start()
        deadline = time.monotonic() + 60
        while not spent.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert spent.exists(), "the service never reached the spend"
        srv.kill()  # SIGKILL between the durable spend and the answer
        t.join(timeout=30)
        assert isinstance(outcome[0], httpx.HTTPError)  # no answer was released
    finally:
        srv.stop()
    return hdr


def open_ledger(url: str, schema: str) -> Any:
    """The ledger at ``url`` (``schema`` is used on PostgreSQL only)."""
    from dpsieve.ledger import open_store

    return open_store(url, schema=schema)


def start_script(script: str, *args: str) -> subprocess.Popen[str]:
    """``python -c script args`` with this checkout's src/ on PYTHONPATH; its output piped."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_when(proc: subprocess.Popen[str], enough: Callable[[list[str]], bool],
              deadline: float) -> str:
    """Hand each line ``proc`` prints, split into words, to ``enough`` until it says so, the
    output ends or the ``deadline`` (time.monotonic) passes; then SIGKILL ``proc`` (a crash:
    no handler runs) and reap it. Returns what it wrote to stderr (for failure messages)."""
    assert proc.stdout is not None
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line or enough(line.split()):
            break
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    return proc.stderr.read()


def race(client: Callable[[int, Callable[[], object]], None], n: int,
         during: Callable[[], object] | None = None) -> None:
    """Run ``client(i, start)`` for i in 0..n-1, each in its own thread; every client calls
    ``start()`` once it is ready, and none goes past it until all have (a barrier), so the
    work after it races for real. ``during``: the calling thread passes the barrier with
    the clients and runs it while they work (e.g. a SIGKILL or a revocation mid-burst).
    Raises if any client raised (the first three named); a client that raises before
    ``start()`` breaks the barrier, so the others fail at once rather than wait."""
    barrier = threading.Barrier(n + (during is not None))
    errors: list[BaseException] = []

    def run(i: int) -> None:
        try:
            client(i, barrier.wait)
        except BaseException as e:  # surfaced below
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    try:
        if during is not None:
            try:
                barrier.wait()
            except threading.BrokenBarrierError:
                pass  # a client failed before its start: named below
            else:
                during()
    finally:
        for t in threads:
            t.join()
    assert errors == [], errors[:3]
