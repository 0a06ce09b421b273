"""``dpsieve account``: JSON output and errors."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

from dpsieve.accounting import gdp_delta, gdp_epsilon
from dpsieve.cli import app

runner = CliRunner()


def test_epsilon_of_composed_gaussian_is_the_gdp_value() -> None:
    res = runner.invoke(
        app,
        [
            "account",
            "epsilon",
            "--mechanism",
            "gaussian:sigma=20",
            "--compose",
            "1000",
            "--delta",
            "1e-6",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    mu = math.sqrt(1000) / 20
    assert gdp_epsilon(mu, 1e-6, upper=False) <= out["epsilon"] <= gdp_epsilon(mu, 1e-6) + 1e-9


def test_delta_with_repeated_mechanisms() -> None:
    res = runner.invoke(
        app,
        [
            "account",
            "delta",
            "-m",
            "gaussian:sigma=2",
            "-m",
            "gdp:mu=0.5",
            "-k",
            "2",
            "--epsilon",
            "1",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    mu = math.sqrt(2 * 0.25 + 2 * 0.25)
    assert out["delta"] >= float(gdp_delta(mu, 1.0))
    assert out["delta"] <= float(gdp_delta(mu, 1.0)) + 1e-12


def test_mixed_mechanisms_and_gdp_command() -> None:
    res = runner.invoke(
        app,
        [
            "account",
            "delta",
            "-m",
            "laplace:scale=10",
            "-m",
            "rr:eps=0.1",
            "-m",
            "approx:eps=0.5,delta=1e-6",
            "--epsilon",
            "0.5",
            "--grid",
            "1e-3",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert 1e-6 <= json.loads(res.stdout)["delta"] < 1
    res = runner.invoke(app, ["account", "gdp", "-m", "gdp:mu=0.7", "--json"])
    assert json.loads(res.stdout)["mu"] == 0.7


def test_bad_specs_exit_2_with_a_message() -> None:
    for spec in ("laplace:scal=10", "gaussian:sigma=-1", "foo:x=1", "rr:eps=abc", "approx:eps=1"):
        res = runner.invoke(app, ["account", "delta", "-m", spec, "--epsilon", "1"])
        assert res.exit_code == 2, (spec, res.output)
    res = runner.invoke(app, ["account", "delta", "-m", "gaussian:sigma=-1", "--epsilon", "1"])
    assert "'sigma'" in res.output
