"""Defect 2 of issue 10: one strict spec parser for every CLI command.

``dpsieve filter run --filter zcdp --budget zcdp:rho=20 gaussian:sigma=2,sensitivity=10
gaussian:sigma=2,sensitivty=10`` charged the second query 100x too little (the misspelt
key was ignored, sensitivity defaulted to 1), and ``--budget zcdp:rho=1,foo=3`` was
accepted. Unknown keys, repeated keys, missing keys and unknown kinds are now refused by
``filter`` and ``account`` alike, with the accepted keys listed, before anything is applied.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()


def _filter(*args: str) -> tuple[int, str]:
    r = runner.invoke(app, ["filter", "run", "--json", *args])
    return r.exit_code, r.output


def _account(*mechs: str) -> tuple[int, str]:
    args = ["account", "epsilon", "--delta", "1e-6", "--json"]
    for m in mechs:
        args += ["-m", m]
    r = runner.invoke(app, args)
    return r.exit_code, r.output


def test_the_reported_typo_is_refused_and_nothing_is_applied() -> None:
    code, out = _filter("--filter", "zcdp", "--budget", "zcdp:rho=20",
                        "gaussian:sigma=2,sensitivity=10", "gaussian:sigma=2,sensitivty=10")
    assert code == 2
    assert "sensitivty" in out
    assert "sensitivity" in out
    assert '"step"' not in out  # no decision printed: all specs parse before any applies


def test_the_correct_spelling_is_charged_at_its_sensitivity() -> None:
    code, out = _filter("--filter", "zcdp", "--budget", "zcdp:rho=20",
                        "gaussian:sigma=2,sensitivity=10", "gaussian:sigma=2,sensitivity=10")
    assert code == 0, out
    steps = [json.loads(x) for x in out.strip().splitlines() if '"step"' in x]
    # each costs rho = 10^2 / (2 * 2^2) = 12.5: the first fits in 20, the second does not
    assert [s["admitted"] for s in steps] == [True, False]


@pytest.mark.parametrize("budget", ["zcdp:rho=1,foo=3", "zcdp:rho=1,rho=2", "zcdp:",
                                    "zcdp:rho", "zcdp:rho=nan", "zcdp:rho=1,,", "gdp:mu=1"])
def test_bad_budgets_are_refused(budget: str) -> None:
    code, out = _filter("--filter", "zcdp", "--budget", budget, "zcdp:rho=0.1")
    assert code == 2, out
    assert "rho" in out  # the accepted keys are listed


@pytest.mark.parametrize("spec", [
    "gaussian:sigma=2,sensitivty=10", "gaussian:sigma=2,sigma=3", "gaussian:sensitivity=1",
    "laplace:scale=1,eps=1", "rr:eps=1,k=2.5", "gauss:sigma=1", "pure:eps=inf",
])
def test_filter_and_account_refuse_the_same_bad_mechanism_specs(spec: str) -> None:
    code_f, out_f = _filter("--budget", "gdp:mu=3", spec)
    code_a, out_a = _account(spec)
    assert code_f == 2, out_f
    assert code_a == 2, out_a
    assert "Traceback" not in out_f + out_a


def test_filter_builds_only_from_budget_kinds_it_takes() -> None:
    # approx_gdp_residue once read mu and delta from any spec; pure_dp read eps from an
    # (eps, delta) budget and dropped delta
    assert _filter("--filter", "pure_dp", "--budget", "approx:eps=1,delta=0.1",
                   "pure:eps=0.5")[0] == 2
    assert _filter("--filter", "natural_zero_delta", "--budget", "approx:eps=5,delta=1e-6",
                   "zero_delta:delta=1e-7")[0] == 2
    code, out = _filter("--filter", "natural_zero_delta", "--budget", "zero_delta:delta=1e-6",
                        "zero_delta:delta=1e-7")
    assert code == 0, out


KEYS = st.sampled_from(["sigma", "sensitivity", "scale", "eps", "delta", "mu", "k", "rho",
                        "sensitivty", "", "x"])
VALUES = st.sampled_from(["1", "2.5", "0.5", "3", "nan", "inf", "-1", "abc", ""])


@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["gaussian", "laplace", "rr", "approx", "pure", "gdp", "x"]),
       items=st.lists(st.tuples(KEYS, VALUES), max_size=4))
def test_parser_accepts_exactly_the_well_formed_specs(kind: str, items: list[tuple[str, str]]
                                                     ) -> None:
    """The one parser: a spec parses iff the kind is known, every key is accepted, none
    repeats, every required key is present and every value is a finite number (integral
    where required); then it returns exactly the given keys."""
    from dpsieve.cli._specs import SpecError, parse_spec
    from dpsieve.cli.account import MECHANISMS

    spec = f"{kind}:" + ",".join(f"{k}={v}" for k, v in items)
    form = MECHANISMS.get(kind)
    keys = [k for k, _ in items]
    good = form is not None and all(k in form.required + form.optional for k in keys) \
        and len(set(keys)) == len(keys) and all(k in keys for k in form.required)
    for k, v in items:
        try:
            x = float(v)
            good = good and x == x and abs(x) != float("inf") and (
                form is None or k not in form.integers or x.is_integer())
        except ValueError:
            good = False
    if good:
        got_kind, params = parse_spec(spec, MECHANISMS)
        assert got_kind == kind
        assert params == {k: float(v) for k, v in items}
    else:
        with pytest.raises(SpecError):
            parse_spec(spec, MECHANISMS)
