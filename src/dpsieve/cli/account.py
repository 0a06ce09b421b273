"""``dpsieve account epsilon|delta|gdp``: privacy accounting of composed mechanisms.

Each ``--mechanism`` is composed ``--compose`` times and all of them together; the result is a
pessimistic PLD (it dominates the truth), so the printed epsilon and delta are upper bounds.
Mechanism specs::

    gaussian:sigma=S[,sensitivity=D]   laplace:scale=B[,sensitivity=D]   rr:eps=E[,k=K]
    approx:eps=E,delta=D               gdp:mu=M                          pure:eps=E
"""

from __future__ import annotations

import json
import math
from typing import Any

import typer

from dpsieve.cli._specs import SpecKind, parse_spec

__all__ = ["app", "parse_mechanism"]

app = typer.Typer(help="Privacy accounting of composed mechanisms (PLDs).", no_args_is_help=True)

#: The mechanism specs this command takes (parsed by the one strict parser, cli._specs).
MECHANISMS: dict[str, SpecKind] = {
    "gaussian": SpecKind(("sigma",), ("sensitivity",)),
    "laplace": SpecKind(("scale",), ("sensitivity",)),
    "rr": SpecKind(("eps",), ("k",), integers=("k",)),
    "approx": SpecKind(("eps", "delta")),
    "pure": SpecKind(("eps",)),
    "gdp": SpecKind(("mu",)),
}

MECH = typer.Option(
    ...,
    "--mechanism",
    "-m",
    help="Mechanism spec (repeatable), e.g. "
    "gaussian:sigma=20, laplace:scale=10, rr:eps=0.1, approx:eps=1,delta=1e-6, "
    "gdp:mu=1.",
)
COMPOSE = typer.Option(1, "--compose", "-k", min=0, help="Compose each mechanism this often.")
GRID = typer.Option(1e-4, "--grid", help="Discretization step of the privacy-loss axis.")
JSON = typer.Option(False, "--json", help="Print one JSON object.")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(code=2)


def parse_mechanism(spec: str, grid: float) -> Any:
    """Build the (pessimistic) PLD of one mechanism spec; ValueError (SpecError) on a bad
    spec: unknown kind or key, a key given twice, a missing key (cli._specs)."""
    from dpsieve.accounting import PLD

    kind, params = parse_spec(spec, MECHANISMS, "mechanism")
    if kind == "gaussian":
        return PLD.gaussian(params["sigma"], params.get("sensitivity", 1.0), grid=grid)
    if kind == "laplace":
        return PLD.laplace(params["scale"], params.get("sensitivity", 1.0), grid=grid)
    if kind == "rr":
        return PLD.randomized_response(params["eps"], int(params.get("k", 2.0)), grid=grid)
    if kind == "approx":
        return PLD.approx_dp(params["eps"], params["delta"], grid=grid)
    if kind == "pure":
        return PLD.pure_dp(params["eps"], grid=grid)
    return PLD.gdp(params["mu"], grid=grid)


def _composed(mechanisms: list[str], compose: int, grid: float) -> Any:
    from dpsieve.accounting import PLD
    from dpsieve.errors import DPError

    total = PLD.identity(grid=grid)
    try:
        for spec in mechanisms:
            total = total.compose(parse_mechanism(spec, grid).self_compose(compose))
    except (ValueError, DPError) as e:
        raise _fail(str(e)) from None
    return total


def _num(x: float) -> float | str:
    return x if math.isfinite(x) else "inf"


def _summary(pld: Any, mechanisms: list[str], compose: int) -> dict[str, Any]:
    return {
        "mechanisms": mechanisms,
        "compose": compose,
        "grid": pld.grid,
        "direction": pld.direction,
        "gaussian_mu": pld.mu,
        "inf_mass": pld.inf_mass,
        "support_points": int(pld.probs.size),
    }


@app.command("epsilon")
def epsilon(
    mechanism: list[str] = MECH,
    compose: int = COMPOSE,
    delta: float = typer.Option(..., "--delta", help="Target delta in [0, 1]."),
    grid: float = GRID,
    as_json: bool = JSON,
) -> None:
    """The smallest epsilon (certified upper bound) with delta(epsilon) <= DELTA."""
    from dpsieve.errors import DPError

    pld = _composed(mechanism, compose, grid)
    try:
        eps = float(pld.epsilon(delta))
    except DPError as e:
        raise _fail(str(e)) from None
    out = {"epsilon": _num(eps), "delta": delta, **_summary(pld, mechanism, compose)}
    typer.echo(json.dumps(out) if as_json else f"epsilon = {eps!r} at delta = {delta!r}")


@app.command("delta")
def delta(
    mechanism: list[str] = MECH,
    compose: int = COMPOSE,
    eps: float = typer.Option(..., "--epsilon", help="Target epsilon."),
    grid: float = GRID,
    as_json: bool = JSON,
) -> None:
    """delta(epsilon) of the composition (certified upper bound)."""
    from dpsieve.errors import DPError

    pld = _composed(mechanism, compose, grid)
    try:
        d = float(pld.delta(eps))
    except DPError as e:
        raise _fail(str(e)) from None
    out = {"delta": d, "epsilon": eps, **_summary(pld, mechanism, compose)}
    typer.echo(json.dumps(out) if as_json else f"delta = {d!r} at epsilon = {eps!r}")


@app.command("gdp")
def gdp(
    mechanism: list[str] = MECH,
    compose: int = COMPOSE,
    grid: float = GRID,
    as_json: bool = JSON,
) -> None:
    """The smallest mu (certified upper bound) such that the composition is mu-GDP."""
    from dpsieve.accounting import smallest_gdp_mu

    pld = _composed(mechanism, compose, grid)
    mu = smallest_gdp_mu(pld)
    out = {"mu": _num(mu), **_summary(pld, mechanism, compose)}
    typer.echo(json.dumps(out) if as_json else f"mu = {mu!r}")
