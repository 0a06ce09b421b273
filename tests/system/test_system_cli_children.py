"""``dpsieve child``: open (charged with the child, refused creates nothing), ask, step,
list and grant on a SQLite ledger, errors as one line with exit code 2.

Each command runs in this process through ``dpsieve.cli.main`` (what ``python -m dpsieve``
calls: the same parsing, error lines and exit codes); 16 interpreter start-ups cost ~40 s on
a loaded 2-core machine. tests/test_cli_package.py runs the real process."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
from pathlib import Path

from dpsieve.cli import main


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(["dpsieve", *args], code, out.getvalue(), err.getvalue())


def test_child_commands(tmp_path: Path) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    csv = tmp_path / "d.csv"
    csv.write_text("x\n1\n2\n")
    assert _cli("budget", "set", "d", *db, "--path", str(csv), "--budget",
                '{"type":"pure","eps":1}').returncode == 0
    spec = '{"noise":"laplace","eps":0.5,"positives":2}'
    out = _cli("child", "open", "d", "sv", *db, "--kind", "sparse_vector", "--spec", spec,
               "--owner", "ana", "--key", "o1")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["remaining"]["exact"] == "1/2"
    again = _cli("child", "open", "d", "sv", *db, "--kind", "sparse_vector", "--spec", spec,
                 "--owner", "ana", "--key", "o1")
    assert json.loads(again.stdout)["replayed"] is True
    refused = _cli("child", "open", "d", "sv2", *db, "--kind", "sparse_vector", "--spec",
                   '{"noise":"laplace","eps":0.6}')
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["admitted"] is False
    a = _cli("child", "ask", "d", "sv", *db, "--value", "1e6", "--threshold", "0",
             "--principal", "ana")
    assert json.loads(a.stdout)["above"] is True
    denied = _cli("child", "ask", "d", "sv", *db, "--value", "1", "--threshold", "0",
                  "--principal", "bob")
    assert denied.returncode == 2
    assert denied.stderr.count("\n") == 1
    assert "may not question" in denied.stderr
    assert _cli("child", "grant", "d", "sv", "bob", *db, "--by", "ana").returncode == 0
    listed = [json.loads(x) for x in _cli("child", "list", "d", *db, "--principal",
                                          "bob").stdout.splitlines()]
    assert [r["child"] for r in listed] == ["sv"]
    assert "threshold_noise" not in json.dumps(listed)
    assert _cli("budget", "set", "g", *db, "--path", str(csv), "--budget",
                '{"type":"gdp","mu":2}').returncode == 0
    assert _cli("child", "open", "g", "ctr", *db, "--kind", "counter", "--spec",
                '{"mu":1.0}').returncode == 0
    s1 = json.loads(_cli("child", "step", "g", "ctr", *db, "--count", "5").stdout)
    assert s1["step"] == 1
    bad = _cli("child", "open", "g", "c2", *db, "--kind", "counter", "--spec", '{"mu":-1}')
    assert bad.returncode == 2
    assert "'mu'" in bad.stderr
    assert _cli("budget", "verify", *db).returncode == 0
