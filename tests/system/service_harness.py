"""Helpers for the service tests: an example CSV, a uvicorn subprocess on a free port."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).parent


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
