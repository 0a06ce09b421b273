"""Smoke tests of ``dpsieve filter``, ``dpsieve demo`` and ``dpsieve figures --quick``."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()


def test_filter_residue_json() -> None:
    res = runner.invoke(
        app, ["filter", "residue", "--budget", "gdp:mu=3", "--query", "rr:eps=2", "--json"]
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert round(out["mu_naive"], 3) == 1.855
    assert round(out["mu_residue"], 3) == 2.273


def test_filter_run_prints_each_decision() -> None:
    res = runner.invoke(
        app,
        [
            "filter",
            "run",
            "--budget",
            "gdp:mu=1",
            "--json",
            "gdp:mu=0.75",
            "gdp:mu=0.5",
            "gdp:mu=0.5",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.output.strip().splitlines()]
    assert [x.get("admitted") for x in lines[:3]] == [True, True, False]
    assert lines[-1]["final_state"]["kind"] == "gdp_residue"


def test_filter_run_refuses_natural_approx_without_opt_in() -> None:
    res = runner.invoke(app, ["filter", "run", "--filter", "natural_approx", "pure:eps=0.1"])
    assert res.exit_code != 0


def test_demo_seeded() -> None:
    res = runner.invoke(app, ["demo", "--seed", "3", "--json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.strip().splitlines()]
    assert rows[0]["admitted"]
    left = [r["eps_left_at_delta"] for r in rows]
    assert left == sorted(left, reverse=True)
    assert all(r["more_like_this"]["count"] >= 0 for r in rows)


def test_figures_quick(tmp_path: Path) -> None:
    res = runner.invoke(app, ["figures", "--out", str(tmp_path), "--quick"])
    assert res.exit_code == 0, res.output
    text = (tmp_path / "summary.md").read_text()
    assert "0.01345" in text
    assert (tmp_path / "fig1_c.png").exists()
