"""``dpsieve filter``: the GDP residue update of one query, and replays against any filter.

Specs are ``kind:key=value,key=value``::

    queries  rr:eps=2   laplace:scale=10   gaussian:sigma=10   pure:eps=0.5
             approx:eps=1,delta=1e-6   gdp:mu=0.3   zcdp:rho=0.1   zero_delta:delta=1e-6
    budgets  gdp:mu=3   approx:eps=10,delta=1e-6   pure:eps=1   zcdp:rho=0.5
             approx_gdp:mu=1,delta=1e-6

The CLI is thin: it parses, calls :mod:`dpsieve.filters` and prints.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

__all__ = ["app", "make_filter", "parse_query", "parse_spec"]

app = typer.Typer(help="Privacy filters: residue updates and replays.", no_args_is_help=True)

FILTERS = (
    "gdp_residue",
    "gdp_naive",
    "approx_gdp_residue",
    "pure_dp",
    "zcdp",
    "approx_zcdp",
    "rdp",
    "natural_gdp",
    "natural_zero_delta",
    "natural_approx",
    "additive_profile",
)
RDP_ORDERS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0, 128.0, 256.0)


def parse_spec(spec: str) -> tuple[str, dict[str, float]]:
    """``"kind:a=1,b=2"`` -> ``("kind", {"a": 1.0, "b": 2.0})``."""
    kind, _, rest = spec.partition(":")
    params: dict[str, float] = {}
    for part in filter(None, rest.split(",")):
        key, eq, val = part.partition("=")
        if not eq:
            raise typer.BadParameter(f"{spec!r}: expected key=value, got {part!r}.")
        try:
            params[key.strip()] = float(val)
        except ValueError:
            raise typer.BadParameter(f"{spec!r}: {val!r} is not a number.") from None
    return kind.strip(), params


def parse_query(spec: str) -> Any:
    """A query object (PLD or privacy description) from a spec."""
    from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, PureDP
    from dpsieve.accounting.pld import PLD

    kind, p = parse_spec(spec)
    try:
        if kind == "rr":
            return PLD.randomized_response(p["eps"])
        if kind == "laplace":
            return PLD.laplace(p["scale"], p.get("sensitivity", 1.0))
        if kind == "gaussian":
            return PLD.gaussian(p["sigma"], p.get("sensitivity", 1.0))
        if kind == "pure":
            return PureDP(p["eps"])
        if kind == "approx":
            return ApproxDP(p["eps"], p["delta"])
        if kind == "zero_delta":
            return ApproxDP(0.0, p["delta"])
        if kind == "gdp":
            return GDP(p["mu"])
        if kind == "zcdp":
            return ZCDP(p["rho"])
    except KeyError as err:
        raise typer.BadParameter(f"{spec!r}: missing parameter {err}.") from None
    raise typer.BadParameter(
        f"{spec!r}: query kind must be rr, laplace, gaussian, pure, approx, zero_delta, gdp "
        "or zcdp."
    )


def _target(p: dict[str, float], spec: str) -> tuple[float, float]:
    if "eps" not in p or "delta" not in p:
        raise typer.BadParameter(f"{spec!r}: this filter needs eps and delta.")
    return p["eps"], p["delta"]


def make_filter(name: str, budget: str, *, rounds: int = 10, allow_general: bool = False) -> Any:
    """Build filter ``name`` from a budget spec (an (eps, delta) target where it applies)."""
    from dpsieve import filters as flt
    from dpsieve.accounting.gdp import gdp_mu_for

    kind, p = parse_spec(budget)

    def gdp_mu() -> float:
        if kind == "gdp":
            return p["mu"]
        eps, delta = _target(p, budget)
        return gdp_mu_for(eps, delta)

    if name == "gdp_residue":
        return flt.GDPResidueFilter(gdp_mu())
    if name == "gdp_naive":
        return flt.NaiveGDPFilter(gdp_mu())
    if name == "natural_gdp":
        return flt.NaturalGDPFilter(gdp_mu())
    if name == "approx_gdp_residue":
        return flt.ApproxGDPResidueFilter(p["mu"], p["delta"])
    if name == "pure_dp":
        return flt.PureDPFilter(p["eps"])
    if name == "zcdp":
        return (
            flt.ZCDPFilter(p["rho"])
            if kind == "zcdp"
            else flt.ZCDPFilter.for_target(*_target(p, budget))
        )
    if name == "approx_zcdp":
        return flt.ApproxZCDPFilter.for_target(*_target(p, budget))
    if name == "rdp":
        return flt.RDPFilter.for_target(*_target(p, budget), RDP_ORDERS)
    if name == "natural_zero_delta":
        return flt.NaturalZeroDeltaFilter(p["delta"])
    if name == "natural_approx":
        eps, delta = _target(p, budget)
        return flt.NaturalApproxFilter(eps, delta, rounds, allow_general=allow_general)
    if name == "additive_profile":
        return flt.AdditiveProfileFilter(*_target(p, budget), rounds)
    raise typer.BadParameter(f"--filter must be one of {', '.join(FILTERS)}; got {name!r}.")


@app.command("residue")
def residue(
    budget: Annotated[
        str, typer.Option(help="GDP budget, e.g. gdp:mu=3 or approx:eps=10,delta=1e-6")
    ],
    query: Annotated[str, typer.Option(help="The query, e.g. rr:eps=2")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Remaining GDP budget after one query: naive update vs the GDP residue filter."""
    from dpsieve.filters import gdp_residue_update, naive_gdp_cost
    from dpsieve.filters.gdp import sqrt_down

    f = make_filter("gdp_residue", budget)
    mu = f.remaining()["mu"]
    q = parse_query(query)
    nu = naive_gdp_cost(q)
    from fractions import Fraction

    left = Fraction(mu) ** 2 - Fraction(nu) ** 2 if math.isfinite(nu) else Fraction(-1)
    mu_naive = sqrt_down(left) if left >= 0 else None
    m = gdp_residue_update(mu, q)
    out = {
        "budget_mu": mu,
        "query": query,
        "nu_naive": nu if math.isfinite(nu) else None,
        "mu_naive": mu_naive,
        "mu_residue": m if m >= 0 else None,
    }
    if as_json:
        typer.echo(json.dumps(out))
        return
    typer.echo(f"budget G_{mu:.6g}; query {query}")
    typer.echo(f"  naive GDP filter:   charged G_{nu:.6g}, remaining mu = {mu_naive}")
    typer.echo(f"  GDP residue filter: remaining mu = {out['mu_residue']}")


@app.command("run")
def run(
    queries: Annotated[list[str], typer.Argument(help="Query specs, in order.")],
    filter_name: Annotated[str, typer.Option("--filter", help=f"One of {', '.join(FILTERS)}")] = (
        "gdp_residue"
    ),
    budget: Annotated[str, typer.Option(help="Budget spec")] = "approx:eps=1,delta=1e-6",
    rounds: Annotated[
        int, typer.Option(help="Declared rounds (natural_approx, additive_profile)")
    ] = 10,
    allow_general: Annotated[
        bool, typer.Option(help="Allow the (not free) natural (eps,delta) filter.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Replay queries against a filter and print each decision."""
    from dpsieve.errors import DPError

    try:
        f = make_filter(filter_name, budget, rounds=rounds, allow_general=allow_general)
    except DPError as err:
        raise typer.BadParameter(str(err)) from None
    if not as_json:
        typer.echo(f"{f.kind}: budget left {json.dumps(f.remaining())}")
    for i, spec in enumerate(queries, 1):
        d = f.try_spend(parse_query(spec))
        if as_json:
            typer.echo(json.dumps({"step": i, "query": spec, **d.to_dict()}))
        else:
            mark = "ADMIT " if d.admitted else "REFUSE"
            typer.echo(f"{i:3d} {mark} {spec:28s} {d.reason}; left {json.dumps(d.remaining)}")
    if as_json:
        typer.echo(json.dumps({"final_state": json.loads(f.to_json())}))
