"""``dpsieve budget set --typical``, ``budget show`` and ``query`` state budgets in plain words."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()
DATA = str(Path(__file__).resolve().parents[2] / "src" / "dpsieve" / "data" / "diabetes.csv")
Q = json.dumps({"type": "count", "privacy": {"type": "pure", "eps": 0.2}})


def test_budget_set_show_and_query_in_plain_words(tmp_path: Path) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    r = runner.invoke(app, ["budget", "set", "d", "--path", DATA, "--infer-types", "--budget",
                            '{"type": "approx", "eps": 1, "delta": 1e-6}',
                            "--typical", '{"type": "pure", "eps": 0.2}', *db])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["remaining"]["pure_eps"] >= 0.8  # four eps-0.2 queries fit
    left = []
    for _ in range(4):
        r = runner.invoke(app, ["query", "d", Q, *db])
        assert r.exit_code == 0, r.output
        left.append(json.loads(r.output)["budget"]["more"]["count"])
    assert left == [3, 2, 1, 0]
    r = runner.invoke(app, ["budget", "show", "--json", *db])
    (row,) = json.loads(r.output)["budgets"]
    assert row["admitted"] == 4
    assert row["summary"]["like"] == "pure eps 0.2"
    assert row["summary"]["text"].startswith("eps 0.2")
    r = runner.invoke(app, ["budget", "show", *db, "--like", '{"type": "pure", "eps": 0.01}'])
    assert r.exit_code == 0
    assert "80% used" in r.output


def test_budget_set_refuses_typical_for_other_budgets(tmp_path: Path) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    r = runner.invoke(app, ["budget", "set", "d", "--path", DATA, "--infer-types", "--budget",
                            '{"type": "gdp", "mu": 1}', "--typical",
                            '{"type": "pure", "eps": 0.2}', *db])
    assert r.exit_code != 0
    assert "'typical'" in r.output
