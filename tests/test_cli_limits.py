"""Issue 11 defect 6 (CLI): `dpsieve account ... --grid 1e-8` grew to 11.7 GB before being
killed. It is refused before any work, with the estimate and the limit (a setting:
--max-points / DPSIEVE_MAX_PLD_POINTS). (`--grid 0` is one line on stderr:
tests/test_cli_package.py, "bad --grid".)"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dpsieve.cli.account import app, estimated_points


@pytest.mark.parametrize("mech", ["laplace:scale=1", "pure:eps=1", "approx:eps=1,delta=1e-6",
                                  "rr:eps=1"])
def test_fine_grid_is_refused_with_the_estimate(mech: str) -> None:
    r = CliRunner().invoke(app, ["epsilon", "-m", mech, "--delta", "1e-6", "--grid", "1e-8"])
    assert r.exit_code == 2
    assert "2e+08 support points" in r.output
    assert "--max-points 20000000" in r.output
    assert "Traceback" not in r.output


def test_the_limit_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["epsilon", "-m", "pure:eps=1", "--delta", "1e-6", "--grid", "1e-4"]
    assert CliRunner().invoke(app, args).exit_code == 0  # 20,001 points
    r = CliRunner().invoke(app, [*args, "--max-points", "1000"])
    assert r.exit_code == 2
    assert "2e+04 support points" in r.output
    monkeypatch.setenv("DPSIEVE_MAX_PLD_POINTS", "1000")
    assert CliRunner().invoke(app, args).exit_code == 2


def test_estimate_adds_compositions() -> None:
    assert estimated_points(["pure:eps=1"], 10, 1e-3) == pytest.approx(10 * 2001)
    assert estimated_points(["gaussian:sigma=1", "laplace:scale=2"], 1, 0.1) == 11


def test_large_lattice_request_is_still_refused_with_the_estimate() -> None:
    r = CliRunner().invoke(app, ["epsilon", "-m", "rr:eps=0.1", "--compose", "2000000000",
                                 "--delta", "1e-6"])
    assert r.exit_code == 2
    assert "4e+09 lattice points" in r.output
    # a dense spec (Laplace) next to it: no lattice, the grid-point estimate
    r = CliRunner().invoke(app, ["epsilon", "-m", "rr:eps=0.1", "-m", "laplace:scale=10",
                                 "--compose", "20000", "--delta", "1e-6"])
    assert r.exit_code == 2
    assert "support points" in r.output


def test_lattice_step_of_mixed_atoms() -> None:
    from dpsieve.accounting import PLD
    from dpsieve.cli.account import lattice_points, lattice_step

    parts = [PLD.randomized_response(0.1), PLD.pure_dp(0.5)]
    assert lattice_step(parts) == 1000
    assert lattice_points(parts, 10, 1000) == 10 * (2 + 10) + 1
    assert lattice_step([PLD.pure_dp(0.5), PLD.laplace(1.0)]) == 1
