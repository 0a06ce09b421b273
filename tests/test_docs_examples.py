"""Every code block of README.md and docs/ runs, each one alone.

A reader may copy any one block. Blocks tagged ``bash``/``sh``/``console`` are run
command by command, a ``python`` block as one script, each block in a directory of its
own holding only the bundled data sets (``dpsieve data --copy .``), outside the source
tree: no block may use another's names or files. ``text``/``json`` blocks are not run
(synopses, output); an untagged block is an error (say which it is). ``dpsieve serve``
commands are started on a free port and stopped once ``/healthz`` answers (a PostgreSQL
one only when a server is up).

The default test runs them with this environment's ``dpsieve``, except the commands in
:data:`SLOW` (long reproductions) and docs/spark.md (its slow parameter); the slow test
builds a wheel, installs it in a fresh virtual environment and runs everything, and the
reproduction commands, from there.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
RUN = {"bash", "sh", "console", "shell"}
SKIP = {"text", "json", "pyi", "sql"}
#: Commands too long for the default suite (run by the slow test).
SLOW = ("dpsieve figures",)


def blocks(path: Path) -> list[tuple[str, str, int]]:
    """(language, code, line) of each fenced block."""
    out, lang, start, buf = [], None, 0, []  # type: ignore[var-annotated]
    for i, line in enumerate(path.read_text().splitlines(), 1):
        m = re.match(r"^```(\S*)", line)
        if m and lang is None:
            lang, start, buf = m.group(1), i, []
        elif line.startswith("```") and lang is not None:
            out.append((lang, "\n".join(buf), start))
            lang = None
        elif lang is not None:
            buf.append(line)
    return out


def commands(code: str) -> list[str]:
    """Shell commands of a block: continuation lines joined, comments and blanks dropped."""
    joined = re.sub(r"\\\n\s*", " ", code)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        out.append(line.split("  #")[0].strip())
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pg_down() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1.0):
            return False
    except OSError:
        return True


def _serve(cmd: str, cwd: Path, env: dict[str, str]) -> None:
    """Start a ``dpsieve serve`` command on a free port; it must answer /healthz."""
    import httpx

    port = _free_port()
    proc = subprocess.Popen([*shlex.split(cmd), "--port", str(port)], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, f"{cmd!r} exited: {proc.stderr.read().decode()}"  \
                if proc.stderr else cmd
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.2)
        raise AssertionError(f"{cmd!r} did not answer /healthz within 60 s")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def _spark_missing(python: str) -> str | None:
    """Why a block using pyspark cannot run here (the ``spark`` extra or a Java runtime
    missing), or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime"
    r = subprocess.run([python, "-c", "import pyspark"], capture_output=True, timeout=120)
    return None if r.returncode == 0 else "pyspark not installed (the spark extra)"


def _train_missing(python: str) -> str | None:
    """Why a block using torch/Opacus cannot run here (the ``train`` extra missing: the
    fresh wheel's venv has the service and data extras only), or None."""
    r = subprocess.run([python, "-c", "import torch, opacus"], capture_output=True,
                       timeout=300)
    return None if r.returncode == 0 else "torch/opacus not installed (the train extra)"


def run_file(path: Path, cwd: Path, bindir: Path, python: str, *, slow: bool) -> list[str]:
    """Run every block of ``path``, each alone in a copy of ``cwd`` (the bundled data
    sets only); returns the commands run (for the report)."""
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
           "MPLBACKEND": "Agg"}
    env.pop("PYTHONPATH", None)
    ran: list[str] = []
    for lang, code, line in blocks(path):
        where = f"{path.name}:{line}"
        assert lang, f"{where}: untagged code block (tag it bash/python to run, text not to)"
        if lang in SKIP:
            continue
        assert lang in RUN or lang == "python", f"{where}: unknown block language {lang!r}"
        here = cwd.parent / f"{cwd.name}-{path.stem}-{line}"
        shutil.copytree(cwd, here)
        if lang == "python":
            missing = (_spark_missing(python) if "pyspark" in code
                       else _train_missing(python) if "torch" in code or "opacus" in code
                       else None)
            if missing is not None:  # Spark (a package and a JVM) or the train extra
                ran.append(f"skipped ({where}): {missing}")
                continue
            r = subprocess.run([python, "-c", code], cwd=here, env=env, capture_output=True,
                               text=True, timeout=900)
            assert r.returncode == 0, f"{where}: the python block failed alone:\n" \
                                      f"{r.stderr[-3000:]}"
            ran.append(f"python ({where})")
            continue
        for cmd in commands(code):
            if cmd.startswith("dpsieve serve"):
                if "postgresql://" in cmd and _pg_down():
                    continue
                _serve(cmd, here, env)
            elif not slow and cmd.startswith(SLOW):
                continue
            else:
                r = subprocess.run(cmd, shell=True, cwd=here, env=env, capture_output=True,
                                   text=True, timeout=900)
                assert r.returncode == 0, f"{where}: {cmd!r} failed:\n{r.stdout[-2000:]}" \
                                          f"\n{r.stderr[-2000:]}"
            ran.append(cmd)
    return ran


def _scratch(tmp: Path, bindir: Path) -> Path:
    cwd = tmp / "work"
    cwd.mkdir()
    subprocess.run([str(bindir / "dpsieve"), "data", "--copy", "."], cwd=cwd, check=True,
                   capture_output=True)
    return cwd


def test_every_block_is_tagged_and_blocks_exist() -> None:
    langs = [(p.name, lang) for p in DOCS for lang, _, _ in blocks(p)]
    assert ("README.md", "bash") in langs
    assert ("README.md", "python") in langs
    assert all(lang for _, lang in langs), [x for x in langs if not x[1]]


#: The docs run by the default test; docs/spark.md's one block (a JVM started and a Spark job
#: run in a fresh process: 30-40 s, the default test's slowest) in the slow suite, with this
#: environment's pyspark (the fresh wheel's has none). The default suite keeps a Session on a
#: Spark DataFrame: tests/queries/test_session_spark.py.
_DEFAULT_DOCS = [pytest.param(p, marks=pytest.mark.slow) if p.name == "spark.md" else p
                 for p in DOCS]


@pytest.mark.parametrize("path", _DEFAULT_DOCS, ids=lambda p: p.name)
def test_docs_examples_run(path: Path, tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    run_file(path, _scratch(tmp_path, bindir), bindir, sys.executable, slow=False)


@pytest.mark.slow
@pytest.mark.timeout(3600)  # building, installing the wheel with its extras: minutes
def test_examples_and_reproductions_from_a_fresh_wheel(tmp_path: Path) -> None:
    """Build a wheel, install it with the service and data extras (and dp-accounting) in a
    new virtual environment, and run every README/docs block and the reproduction commands
    (figures, reproduce robust, release-experiments, training-figures) there, away from the
    source tree."""
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(ROOT)], check=True, timeout=600)
    (wheel,) = dist.glob("dpsieve-*.whl")
    venv = tmp_path / "venv"
    # A venv without its own pip (ensurepip: ~50 s on a loaded 2-core machine; no block
    # uses pip), filled by this environment's pip; --no-compile: byte-compiling every
    # installed module (numpy, pandas, scipy, ...) up front is what `make run` skips too
    # (without PYTHONPATH, here and below: a checkout's src/ on it made pip find dpsieve
    # "already satisfied" and install its dependencies only, and the commands import it)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "-q",
                    "--prefer-binary", "--no-compile", "--disable-pip-version-check",
                    f"{wheel}[service,data]", "dp-accounting==0.6.0"],  # training-figures
                   check=True, timeout=2400, env=clean)
    bindir = venv / "bin"
    out = subprocess.run([str(bindir / "dpsieve"), "--version"], capture_output=True,
                         text=True, check=True, env=clean)
    assert out.stdout.strip() == f"dpsieve {_version()}"
    for path in DOCS:
        cwd = tmp_path / f"work-{path.stem}"
        cwd.mkdir()
        subprocess.run([str(bindir / "dpsieve"), "data", "--copy", "."], cwd=cwd, check=True,
                       env=clean)
        run_file(path, cwd, bindir, str(py), slow=True)
    repro = tmp_path / "repro"
    repro.mkdir()
    for cmd in (["figures", "--out", "fig", "--quick"],
                ["reproduce", "robust", "--out", "robust", "--quick"],
                ["release-experiments", "--out", "release", "--quick"],
                ["training-figures", "--out", "training", "--quick"]):
        r = subprocess.run([str(bindir / "dpsieve"), *cmd], cwd=repro, capture_output=True,
                           text=True, timeout=1800, env=clean)
        assert r.returncode == 0, (cmd, r.stdout[-2000:], r.stderr[-2000:])
    assert (repro / "fig" / "summary.md").exists()
    assert (repro / "robust" / "report.md").exists()
    assert (repro / "release" / "results.json").exists()
    assert (repro / "training" / "summary.md").exists()


def _version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


#: What belongs to CONTRIBUTING.md or docs/architecture.md (the maintainers' pages), not to
#: the user docs (issue 15, item 4): the project's own test runner, CI, type checker, linter
#: and test settings.
MAINTAINER = re.compile(r"\.ci/|\bpytest\b|\bconftest\b|\bmypy\b|\bruff\b|DPSIEVE_TEST_|"
                        r"tests/\w+\.py")


@pytest.mark.parametrize("path", [p for p in sorted((ROOT / "docs").glob("*.md"))
                                  if p.name != "architecture.md"], ids=lambda p: p.name)
def test_user_docs_hold_no_maintainer_notes(path: Path) -> None:
    hits = [f"{path.name}:{i}: {line.strip()}"
            for i, line in enumerate(path.read_text().splitlines(), 1) if MAINTAINER.search(line)]
    assert hits == [], "move these to CONTRIBUTING.md:\n" + "\n".join(hits)


def _json_blocks() -> list[tuple[str, dict[str, Any]]]:
    import json

    out = []
    for p in DOCS:
        for lang, code, line in blocks(p):
            if lang == "json":
                out.append((f"{p.name}:{line}", json.loads(code)))
    return out


@pytest.mark.parametrize(("where", "spec"), _json_blocks(), ids=lambda x: x
                         if isinstance(x, str) else "")
def test_json_queries_in_the_docs_run(where: str, spec: dict[str, Any]) -> None:
    """Each JSON block is a query a reader may post or pass to ``dpsieve query``: it runs
    as it stands on a table with the columns it names (a plan with a contribution bound
    under a privacy unit; a one-aggregation shape on rows). The release example of
    docs/service.md is posted to the service on the bundled data by
    tests/system/test_docs_service_release.py."""
    import numpy as np
    import pandas as pd

    from dpsieve import Session
    from dpsieve.accounting.events import PureDP

    assert isinstance(spec, dict), where
    assert "type" in spec, where
    if spec["type"] == "release":
        assert "service.md" in where
        return
    rng = np.random.default_rng(0)
    n = 3000
    frame = pd.DataFrame({"patient_id": rng.integers(0, 300, n),
                          "ward": rng.choice(["A", "B", "C", "D"], n),
                          "cost": rng.gamma(2.0, 400.0, n), "age": rng.uniform(0, 100, n),
                          "year": rng.integers(2015, 2025, n)})
    unit = "patient_id" if "contribution" in spec else None
    s = Session(frame, budget=PureDP(10.0), privacy_unit=unit)
    r = s.run(spec)
    assert r.value is not None, where
