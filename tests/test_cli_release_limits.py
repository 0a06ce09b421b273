"""Issue 11 defect 6 (CLI release): an envelope release on 36 cells with n = 50 ran 240 s
and 4.9 GB in the service before its refusal; the service now refuses it from public
parameters (tests/system/test_system_release.py), and so does ``dpsieve release``
(--max-group-work, default 1e8 grouping units, about 10 s): one line, the estimate, the
limit, exit code 2, before any grouping work."""

from __future__ import annotations

import json
import random
from pathlib import Path

from typer.testing import CliRunner

from dpsieve.cli import app


def _table(tmp_path: Path, levels: int, n: int) -> list[str]:
    rng = random.Random(1)
    dom = {"a": [f"a{i}" for i in range(levels)], "b": [f"b{i}" for i in range(levels)]}
    (tmp_path / "dom.json").write_text(json.dumps(dom))
    rows = [f"{rng.choice(dom['a'])},{rng.choice(dom['b'])}" for _ in range(n)]
    (tmp_path / "d.csv").write_text("a,b\n" + "\n".join(rows) + "\n")
    return ["release", "--mechanism", "envelope", "--data", str(tmp_path / "d.csv"),
            "--domain", str(tmp_path / "dom.json"), "--workload", "marginals:2", "--json",
            "--seed", "3"]


def test_the_reported_instance_is_refused_with_the_estimate(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, _table(tmp_path, 6, 50))  # 36 cells, n = 50
    assert r.exit_code == 2, r.output
    assert "over the limit 1e+08" in r.output
    assert "work units" in r.output
    assert "Traceback" not in r.output


def test_the_limit_is_an_option(tmp_path: Path) -> None:
    args = _table(tmp_path, 2, 10)  # 4 cells, n = 10: small
    ok = CliRunner().invoke(app, args)
    assert ok.exit_code == 0, ok.output
    assert len(json.loads(ok.output.splitlines()[-1])["answers"]) == 4
    low = CliRunner().invoke(app, [*args, "--max-group-work", "10"])
    assert low.exit_code == 2
    assert "over the limit 10" in low.output
    bad = CliRunner().invoke(app, [*args, "--max-group-work", "nan"])
    assert bad.exit_code == 2
    assert "--max-group-work" in bad.output
