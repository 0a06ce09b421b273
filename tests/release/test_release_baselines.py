"""Baselines: closed forms, Monte Carlo agreement, refusals, CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from dpsieve.cli import app
from dpsieve.errors import ValidationError
from dpsieve.release import (
    Dataset,
    Domain,
    InstanceTooLargeError,
    blr_release,
    envelope_release,
    laplace_release,
    marginals,
    mwem_release,
    pmw_release,
)
from dpsieve.release.baselines import laplace_expected_max_error

DATA = Path(__file__).parent / "data"
WL = marginals(Domain.from_sizes([2, 2]), 1)
X = Dataset.from_rows([0, 0, 0, 1, 1, 2, 3, 3, 3, 3], 4)


def test_laplace_expected_error_closed_form_matches_simulation() -> None:
    rng = np.random.default_rng(0)
    f = WL.answers(X)
    errs = [np.abs(laplace_release(WL, X, 1.0, rng=rng, clip=False).answers - f).max()
            for _ in range(3000)]
    exact = laplace_expected_max_error(0.4, 4)
    assert exact == pytest.approx(0.4 * (1 + 1 / 2 + 1 / 3 + 1 / 4))
    se = np.std(errs) / np.sqrt(len(errs))
    assert abs(np.mean(errs) - exact) < 4 * se


def test_pmw_exact_error_matches_simulation() -> None:
    rng = np.random.default_rng(1)
    f = WL.answers(X)
    rel = pmw_release(WL, X, 1.0, rounds=4, compute_error=True, rng=rng)
    assert rel.expected_error is not None
    errs = [np.abs(pmw_release(WL, X, 1.0, rounds=4, rng=rng).answers - f).max()
            for _ in range(1000)]
    se = np.std(errs) / np.sqrt(len(errs))
    assert abs(np.mean(errs) - rel.expected_error) < 4 * se


def test_envelope_exact_error_matches_simulation() -> None:
    rng = np.random.default_rng(2)
    f = WL.answers(X)
    rel = envelope_release(WL, X, 1.0, rounds=5, compute_error=True, rng=rng)
    assert rel.expected_error is not None
    errs = [np.abs(envelope_release(WL, X, 1.0, rounds=5, rng=rng).answers - f).max()
            for _ in range(400)]
    se = np.std(errs) / np.sqrt(len(errs))
    assert abs(np.mean(errs) - rel.expected_error) < 4 * se


def test_mwem_and_blr_run_and_validate() -> None:
    rng = np.random.default_rng(3)
    assert mwem_release(WL, X, 1.0, rounds=3, rng=rng).answers.shape == (4,)
    b = blr_release(WL, X, 1.0, rng=rng)
    assert b.expected_error is not None
    assert 0 <= b.expected_error <= 1
    with pytest.raises(ValidationError, match="'eps'"):
        mwem_release(WL, X, -1.0)
    with pytest.raises(ValidationError, match="'rounds'"):
        mwem_release(WL, X, 1.0, rounds=0)


def test_envelope_refuses_too_large_with_cost() -> None:
    with pytest.raises(InstanceTooLargeError) as ei:
        envelope_release(WL, X, 1.0, rounds=40, max_cost=1e9)
    assert ei.value.estimated_cost > 1e9
    assert ei.value.estimated_seconds is not None
    assert "4^39" in str(ei.value)


def test_envelope_trivial_regime_samples_plain_pmw() -> None:
    from dpsieve.release import PMWParams

    rel = envelope_release(WL, X, 1.0, PMWParams(3, 0.5, 0.5), compute_error=True,
                           rng=np.random.default_rng(4))
    assert rel.details["trivial_regime"] is True
    assert rel.details["log_z"] == 0.0


@pytest.mark.parametrize("mech", ["envelope", "mwem", "pmw", "laplace", "identity", "blr"])
def test_cli_release_json(mech: str) -> None:
    res = CliRunner().invoke(app, [
        "release", "--mechanism", mech, "--data", str(DATA / "release_toy.csv"),
        "--workload", "marginals:1", "--eps", "1", "--json",
        "--domain", str(DATA / "release_toy.domain.json"), "--seed", "7", "--diagnostics",
        *(["--rounds", "6"] if mech == "envelope" else [])])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["mechanism"] == (f"{mech}_simplex" if mech == "identity" else mech)
    assert len(out["answers"]) == 4
    assert out["privacy"] == {"type": "pure", "eps": 1.0, "neighbouring": "replace_one"}
    assert out["queries"] == ["sex=F", "sex=M", "smoker=no", "smoker=yes"]
    assert "not_private" not in res.stdout  # diagnostics go to stderr, on request only
    if mech not in ("mwem", "identity"):
        diag = json.loads(res.stderr)["diagnostics_not_private"]
        assert 0 < diag["expected_error"] < 1


def test_cli_refusal_is_clear() -> None:
    res = CliRunner().invoke(app, [
        "release", "--mechanism", "envelope", "--data", str(DATA / "release_toy.csv"),
        "--workload", "marginals:2", "--eps", "1", "--rounds", "30", "--json",
        "--domain", str(DATA / "release_toy.domain.json")])
    assert res.exit_code == 2
    out = json.loads(res.stdout)  # JSON on stdout, and one "Error:" line on stderr
    assert out["error"] == "InstanceTooLargeError"
    assert res.stderr.startswith("Error: ")
    assert "work units" in out["message"]


def test_cli_release_theory() -> None:
    res = CliRunner().invoke(app, ["release-theory", "-T", "2", "--k", "1", "--n", "5000000"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["nontrivial"] is True
    assert out["smallest_nontrivial_n"] <= 5_000_000
    res = CliRunner().invoke(app, ["release-theory", "-T", "2", "--k", "1", "--n", "0"])
    assert res.exit_code == 2
    assert "'n'" in json.loads(res.stdout)["message"]
    assert res.stderr.startswith("Error: ")
