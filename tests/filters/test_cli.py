"""Smoke tests of ``dpsieve filter``, ``dpsieve demo`` and ``dpsieve figures --quick`` (and
the reproduction's witness values against mpmath)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mpmath
import pytest
from typer.testing import CliRunner

from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff as PL  # noqa: N814
from dpsieve.cli import app
from dpsieve.filters import GaussianBudget
from dpsieve.filters._budgets import approx_curve, pl_leq_budget
from dpsieve.reproduce.filters import _exact_mu

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
    # issue 18 (docs): verdicts, budgets to full precision, the composition bound
    assert "| budget | verdict |" in text
    assert "| G_2.1003 | free |" in text  # the rounded witness budget is free
    assert "mu = 2.100342089" in text
    assert "(mu* = 2.1003420893753)" in text
    assert "| R(0,0.05)+G_0.6649917799953612 | not shown not free |" in text
    assert "| eps' composition | guarantee (best) |" in text
    assert "| 3080 | 1772 | 67.6 | 67.6 (composition (Prop. 3)) |" in text


def _mp_ndtri(p: mpmath.mpf) -> mpmath.mpf:
    return -mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * p)


@pytest.mark.parametrize("delta", [0.0, 0.05])
def test_smallest_witness_mu_against_mpmath(delta: float) -> None:
    """The reproduction's mu* (float closed form) matches mpmath at 40 digits, and the
    budget is certified just above it and not just below (the docs' witness values)."""
    la, l2 = approx_curve(0.5), approx_curve(0.1, 0.05)
    curves = [la.compose(la), la.compose(l2)]
    if delta == 0.0:
        g1, g2, g3 = _gdp_witness()
        curves = [g1.compose(g2), g1.compose(g3)]
    mu = _exact_mu(curves, delta)
    with mpmath.workdps(40):
        keep = 1 - mpmath.mpf(delta)
        best = mpmath.mpf(0)
        for c in curves:
            for a, b in zip(c.alphas, c.betas, strict=True):
                a1 = mpmath.mpf(a.numerator) / a.denominator / keep
                b1 = mpmath.mpf(b.numerator) / b.denominator / keep
                if a1 < 1 and b1 < 1:
                    best = max(best, _mp_ndtri(1 - a1) - _mp_ndtri(b1))
        assert abs(mpmath.mpf(mu) - best) < mpmath.mpf(1e-13) * best
        exact = float(best)
    expected = {0.0: "2.10034208937531", 0.05: "0.66499177999310"}[delta]
    assert mpmath.nstr(best, 20).startswith(expected)
    above, below = (
        GaussianBudget(exact * (1 + 1e-9), delta),
        GaussianBudget(exact * (1 - 1e-9), delta),
    )
    assert all(pl_leq_budget(c, above) for c in curves)
    assert not all(pl_leq_budget(c, below) for c in curves)


def _gdp_witness() -> tuple[PL, PL, PL]:
    def rr(e: float) -> list[float]:
        return [math.exp(e) / (1 + math.exp(e)), 1 / (1 + math.exp(e))]

    p = [0.5 * x for x in rr(0.5)] + [0.5 * x for x in rr(3.0)]
    q = [0.5 * x for x in rr(0.5)[::-1]] + [0.5 * x for x in rr(3.0)[::-1]]
    return approx_curve(1.0), PL.from_distributions(p, q), approx_curve(1.75)
