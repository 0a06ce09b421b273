"""The command line as a package (issue 15, item 4): version, ``python -m dpsieve``, lazy
imports behind ``--help``, and every error one line on stderr with a non-zero exit code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from dpsieve import __version__
from dpsieve.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
DPSIEVE = str(Path(sys.executable).parent / "dpsieve")


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DPSIEVE_DEBUG"}
    return subprocess.run([DPSIEVE, *args], capture_output=True, text=True, timeout=300,
                          cwd=cwd, env=env)


def test_version_matches_pyproject_and_module_entry_point() -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert __version__ == version
    assert run("--version").stdout.strip() == f"dpsieve {version}"
    out = subprocess.run([sys.executable, "-m", "dpsieve", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"dpsieve {version}"


def test_license_file_matches_pyproject() -> None:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0"  # an SPDX expression (PEP 639)
    assert meta["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text
    assert "Version 2.0, January 2004" in text
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text


def test_help_imports_no_command_and_no_numpy() -> None:
    """``dpsieve --help`` must answer at once: it imports typer and dpsieve.cli only."""
    code = ("import sys\nfrom dpsieve.cli import main\nsys.argv = ['dpsieve', '--help']\n"
            "try:\n    main()\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
            "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('numpy', 'scipy', "
            "'rich', 'pandas', 'fastapi', 'matplotlib') or m.startswith(('dpsieve.cli.', "
            "'dpsieve.accounting', 'dpsieve.filters')))\nprint(heavy, file=sys.stderr)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stderr.strip() == "[]"
    for name in COMMANDS:
        assert name in out.stdout


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_static_help_lines_match_the_commands(name: str) -> None:
    from typer.main import get_command

    from dpsieve.cli import app

    group = get_command(app)
    cmd = group.get_command(None, name)  # type: ignore[arg-type]
    assert cmd is not None
    own = " ".join((cmd.help or "").split("\n\n")[0].split())
    assert own.startswith(COMMANDS[name][2].rstrip(".")), (own, COMMANDS[name][2])


def test_command_help_does_not_import_numpy() -> None:
    for name in ("account", "robust", "demo", "filter", "budget"):
        code = (f"import sys\nfrom dpsieve.cli import main\nsys.argv = ['dpsieve', '{name}', "
                "'--help']\ntry:\n    main()\nexcept SystemExit:\n    pass\n"
                "print('numpy' in sys.modules, file=sys.stderr)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert out.stderr.strip().endswith("False"), (name, out.stderr[-500:])


ERRORS = [
    ("unknown command", ["nope"], 2),
    ("unknown option", ["account", "epsilon", "--nope"], 2),
    ("missing option", ["robust", "mean", "--eps", "1"], 2),
    ("negative budget", ["filter", "run", "--budget", "pure:eps=-1", "pure:eps=0.1"], 2),
    ("negative budget (ledger)", ["budget", "set", "d", "--budget",
                                  '{"type": "pure", "eps": -1}'], 2),
    ("bad --grid", ["account", "epsilon", "-m", "gaussian:sigma=1", "--delta", "1e-6",
                    "--grid", "-1"], 2),
    ("missing file", ["robust", "mean", "--data", "nope.csv", "--eps", "1", "--bound", "1"], 2),
    ("dead --url", ["query", "d", '{"type": "count", "privacy": {"type": "pure", "eps": 0.1}}',
                    "--url", "http://127.0.0.1:9", "--api-key", "k"], 1),
    ("bad JSON", ["query", "d", "{not json"], 2),
    # these printed JSON on stdout only, "Refused: ..." or "unexpected ...Error" before:
    ("release-theory bad size", ["release-theory", "-T", "0", "--k", "1", "--n", "1"], 2),
    ("release negative eps", ["release", "--mechanism", "envelope", "--data", "t.csv",
                              "--domain", "t.json", "--eps", "-1"], 2),
    ("ledger cannot be opened", ["budget", "show", "--database-url",
                                 "sqlite:///no/such/dir/x.db"], 1),
    ("negative seed", ["demo", "--seed", "-1"], 2),
]


@pytest.mark.parametrize(("name", "args", "code"), ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_are_one_line_on_stderr(name: str, args: list[str], code: int,
                                       tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text("a\n0\n1\n")
    (tmp_path / "t.json").write_text('{"a": [0, 1]}')
    r = run(*args, cwd=tmp_path)
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("Error: ")
    assert "Traceback" not in r.stderr + r.stdout


@pytest.fixture
def refusing_service() -> Iterator[str]:
    """A stand-in service whose every query answers 409 budget_exceeded."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.dumps({"error": "budget_exceeded",
                               "message": "Refused: this query asks for pure eps 9."}).encode()
            self.send_response(409)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    srv = HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()


def test_a_service_error_exits_non_zero(refusing_service: str) -> None:
    r = run("query", "d", '{"type": "count", "privacy": {"type": "pure", "eps": 9}}',
            "--url", refusing_service, "--api-key", "k")
    assert r.returncode == 1
    assert json.loads(r.stdout)["status"] == 409  # what the service said is printed
    (line,) = r.stderr.strip().splitlines()
    assert "409 budget_exceeded" in line


def test_debug_shows_the_traceback() -> None:
    env = {**os.environ, "DPSIEVE_DEBUG": "1"}
    r = subprocess.run([DPSIEVE, "account", "epsilon", "-m", "gaussian:sigma=1", "--delta",
                        "1e-6", "--grid", "-1"], capture_output=True, text=True, env=env)
    assert r.returncode != 0
    assert "Traceback" in r.stderr
