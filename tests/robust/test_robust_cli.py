"""``dpsieve robust ...`` end to end through the Typer app."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()


def _csv(tmp_path: Path, arr: np.ndarray, header: bool = False) -> Path:
    p = tmp_path / "d.csv"
    np.savetxt(p, arr, delimiter=",", header="a,b,c"[: 2 * arr.shape[1] - 1] if header else "",
               comments="")
    return p


def test_mean_json(tmp_path: Path) -> None:
    x = np.random.default_rng(0).normal(5, 1, (2000, 1))
    p = _csv(tmp_path, x, header=True)
    res = runner.invoke(app, ["robust", "mean", "--data", str(p), "--eps", "1", "--delta",
                              "1e-6", "--bound", "1e4", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["refused"] is False
    assert abs(d["value"] - 5) < 1
    assert d["privacy"]["neighbouring"] == "replace_one"


def test_mean_refusal_is_a_result(tmp_path: Path) -> None:
    p = tmp_path / "x.npy"
    np.save(p, np.ones(30))
    res = runner.invoke(app, ["robust", "mean", "--data", str(p), "--eps", "1", "--bound", "10",
                              "--method", "friendly", "--json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout)["refused"] is True
    res = runner.invoke(app, ["robust", "mean", "--data", str(p), "--eps", "1", "--bound", "10",
                              "--json"])
    assert res.exit_code == 0
    d = json.loads(res.stdout)
    assert d.get("stage") != "public"  # the row-wise mean has no public n0
    assert d["privacy"]["type"] == "pure"
    res = runner.invoke(app, ["robust", "clipped-mean", "--data", str(p), "--eps", "1",
                              "--bound", "10", "--json"])
    assert res.exit_code == 0, res.output
    assert math.isfinite(json.loads(res.stdout)["value"])  # n = 30: noisy, but released


def test_bad_input_exits_2(tmp_path: Path) -> None:
    p = tmp_path / "x.npy"
    np.save(p, np.array([1.0, np.nan] * 600))
    res = runner.invoke(app, ["robust", "mean", "--data", str(p), "--eps", "1", "--bound", "10"])
    assert res.exit_code == 2
    assert "'data'" in res.output
    res = runner.invoke(app, ["robust", "mean", "--data", str(tmp_path / "nope.csv"), "--eps",
                              "1", "--bound", "10"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["robust", "mean", "--data", str(p), "--eps", "-1", "--bound", "1"])
    assert res.exit_code == 2


def test_other_commands(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    x = rng.normal(0, 1, (3000, 1))
    p = _csv(tmp_path, x)
    res = runner.invoke(app, ["robust", "median", "--data", str(p), "--eps", "1", "--bound",
                              "100", "--json"])
    assert res.exit_code == 0, res.output
    h = tmp_path / "h.npy"
    np.save(h, rng.multinomial(20, [0.5, 0.3, 0.2], size=2000).astype(float))
    res = runner.invoke(app, ["robust", "kl", "--data", str(h), "--eps", "1", "--reference",
                              "0.4,0.4,0.2", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["privacy"]["type"] == "pure"
    n = 3000
    cov = rng.normal(size=(n, 2))
    t = rng.integers(0, 2, n)
    y = np.where(t == 1, np.sign(cov[:, 0]), 0.0)
    pol = tmp_path / "p.npy"
    np.save(pol, np.column_stack([cov, t, y]))
    res = runner.invoke(app, ["robust", "policy", "--data", str(pol), "--eps", "1",
                              "--treatment-col", "2", "--outcome-col", "3", "--bound", "10",
                              "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["value"] in range(4)
    a = tmp_path / "a.npy"
    np.save(a, rng.normal(size=(2000, 3)))
    res = runner.invoke(app, ["robust", "pca", "--data", str(a), "--eps", "1", "--k", "1",
                              "--json"])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["robust", "resistance", "--data", str(a), "--eps", "1", "--json"])
    assert res.exit_code == 3
    assert json.loads(res.stdout)["available"] is False
