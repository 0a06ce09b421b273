"""The CLI commands of the system layer: budget set/show, query (local ledger)."""

from __future__ import annotations

import json
from pathlib import Path

from service_harness import write_csv
from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()


def test_budget_set_show_and_query(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    csv = write_csv(tmp_path / "d.csv")
    r = runner.invoke(app, ["budget", "set", "d", "--path", str(csv), "--infer-types",
        "--database-url", db,
                            "--budget", '{"type": "pure", "eps": 1.0}'])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["remaining"]["exact"] == "1/1"
    q = '{"type": "mean", "column": "age", "lower": 0, "upper": 100, ' \
        '"privacy": {"type": "pure", "eps": 0.5}}'
    r = runner.invoke(app, ["query", "d", q, "--database-url", db, "--idempotency-key", "a"])
    assert r.exit_code == 0, r.output
    first = json.loads(r.output)
    assert 0 <= first["value"] <= 100
    r = runner.invoke(app, ["query", "d", q, "--database-url", db, "--idempotency-key", "a"])
    assert json.loads(r.output)["replayed"] is True
    lines = tmp_path / "q.jsonl"
    lines.write_text("\n".join(
        ['{"type": "count", "privacy": {"type": "pure", "eps": 0.2}}'] * 6) + "\n")
    r = runner.invoke(app, ["query", "d", "--file", str(lines), "--database-url", db])
    assert r.exit_code == 1, r.output  # every answer is printed; refusals make the exit non-zero
    outs = [json.loads(x) for x in r.stdout.strip().splitlines() if x.startswith("{")]
    assert sum("refused" in o for o in outs) == 4  # 0.5 + 2 * 0.2 fits in 1; 4 do not
    r = runner.invoke(app, ["budget", "show", "--database-url", db, "--json"])
    b = json.loads(r.output)["budgets"][0]
    assert (b["dataset"], b["admitted"]) == ("d", 3)
    # setting the budget again is refused once queries were admitted
    r = runner.invoke(app, ["budget", "set", "d", "--database-url", db,
                            "--budget", '{"type": "pure", "eps": 9.0}'])
    assert r.exit_code == 2
    assert "cannot be replaced" in r.output


def test_cli_errors_are_messages(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    r = runner.invoke(app, ["budget", "set", "x", "--database-url", db,
                            "--budget", '{"type": "gdp", "mu": -1}'])
    assert r.exit_code == 2
    assert "'mu'" in r.output
    r = runner.invoke(app, ["budget", "set", "x", "--database-url", db,
                            "--budget", '{"type": "gdp", "mu": 1}'])
    assert r.exit_code == 2
    assert "give --path" in r.output
    r = runner.invoke(app, ["query", "x", '{"type": "count"}', "--database-url", db])
    assert r.exit_code != 0
    assert "Traceback" not in r.output
