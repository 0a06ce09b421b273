"""``dpsieve filter``: the GDP residue update of one query, and replays against any filter.

Specs are ``kind:key=value,key=value``, parsed strictly (:mod:`dpsieve.cli._specs`: an
unknown kind or key, a key given twice or a missing key is refused with the accepted keys)::

    queries  rr:eps=2[,k=K]   laplace:scale=10   gaussian:sigma=10[,sensitivity=D]   pure:eps=0.5
             approx:eps=1,delta=1e-6   gdp:mu=0.3   zcdp:rho=0.1   zero_delta:delta=1e-6
    budgets  gdp:mu=3   approx:eps=10,delta=1e-6   pure:eps=1   zcdp:rho=0.5
             approx_gdp:mu=1,delta=1e-6   zero_delta:delta=1e-6 (each filter takes the
             kinds in FILTER_BUDGETS)

The CLI is thin: it parses, calls :mod:`dpsieve.filters` and prints.
"""

from __future__ import annotations

import json
import math
from typing import Annotated, Any

import typer

from dpsieve.cli._specs import SpecError, SpecKind
from dpsieve.cli._specs import parse_spec as _parse

__all__ = ["app", "make_filter", "parse_query", "parse_spec"]

app = typer.Typer(help="Privacy filters: residue updates and replays.", no_args_is_help=True)

FILTERS = (
    "mixed",
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


#: Query specs (cli._specs: one strict parser for every command).
QUERIES: dict[str, SpecKind] = {
    "rr": SpecKind(("eps",), ("k",), integers=("k",)),
    "laplace": SpecKind(("scale",), ("sensitivity",)),
    "gaussian": SpecKind(("sigma",), ("sensitivity",)),
    "pure": SpecKind(("eps",)),
    "approx": SpecKind(("eps", "delta")),
    "zero_delta": SpecKind(("delta",)),
    "gdp": SpecKind(("mu",)),
    "zcdp": SpecKind(("rho",)),
}
#: Budget specs.
BUDGETS: dict[str, SpecKind] = {
    "gdp": SpecKind(("mu",)),
    "approx": SpecKind(("eps", "delta")),
    "pure": SpecKind(("eps",)),
    "zcdp": SpecKind(("rho",)),
    "approx_gdp": SpecKind(("mu", "delta")),
    "zero_delta": SpecKind(("delta",)),
}
#: The filter ``filter run`` builds for each budget kind without --filter (as a session does).
DEFAULT_FILTER = {"approx": "mixed", "gdp": "gdp_residue", "pure": "pure_dp", "zcdp": "zcdp",
                  "approx_gdp": "approx_gdp_residue", "zero_delta": "natural_zero_delta"}
#: The budget kinds each filter is built from (any other is refused, never reinterpreted).
FILTER_BUDGETS: dict[str, tuple[str, ...]] = {
    "mixed": ("approx",),
    "gdp_residue": ("gdp", "approx"),
    "gdp_naive": ("gdp", "approx"),
    "approx_gdp_residue": ("approx_gdp",),
    "pure_dp": ("pure",),
    "zcdp": ("zcdp", "approx"),
    "approx_zcdp": ("approx",),
    "rdp": ("approx",),
    "natural_gdp": ("gdp", "approx"),
    "natural_zero_delta": ("zero_delta",),
    "natural_approx": ("approx",),
    "additive_profile": ("approx",),
}


def parse_spec(spec: str, kinds: dict[str, SpecKind] | None = None,
               what: str = "query") -> tuple[str, dict[str, float]]:
    """``"kind:a=1,b=2"`` -> ``("kind", {"a": 1.0, "b": 2.0})`` by the strict parser
    (:func:`dpsieve.cli._specs.parse_spec`; query kinds by default), as a
    ``typer.BadParameter`` listing the accepted keys."""
    try:
        return _parse(spec, QUERIES if kinds is None else kinds, what)
    except SpecError as e:
        raise typer.BadParameter(str(e)) from None


def parse_query(spec: str) -> Any:
    """A query object (PLD or privacy description) from a spec."""
    from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, PureDP
    from dpsieve.accounting.pld import PLD

    kind, p = parse_spec(spec)
    if kind == "rr":
        return PLD.randomized_response(p["eps"], int(p.get("k", 2.0)))
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
    return ZCDP(p["rho"])


def make_filter(name: str, budget: str, *, rounds: int = 10, allow_general: bool = False,
                typical: list[Any] | None = None) -> Any:
    """Build filter ``name`` from a budget spec of a kind it takes (:data:`FILTER_BUDGETS`);
    ``typical`` (queries) chooses a mixed budget's split."""
    from dpsieve import filters as flt
    from dpsieve.accounting.gdp import gdp_mu_for

    if name not in FILTER_BUDGETS:
        raise typer.BadParameter(f"--filter must be one of {', '.join(FILTERS)}; got {name!r}.")
    kinds = {k: BUDGETS[k] for k in FILTER_BUDGETS[name]}
    kind, p = parse_spec(budget, kinds, f"budget (for --filter {name})")

    def gdp_mu() -> float:
        return p["mu"] if kind == "gdp" else gdp_mu_for(p["eps"], p["delta"])

    if typical and name != "mixed":
        raise typer.BadParameter("--typical applies to --filter mixed only.")
    if name == "mixed":
        return flt.MixedFilter(p["eps"], p["delta"], typical=typical or None)
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
        if kind == "zcdp":
            return flt.ZCDPFilter(p["rho"])
        return flt.ZCDPFilter.for_target(p["eps"], p["delta"])
    if name == "approx_zcdp":
        return flt.ApproxZCDPFilter.for_target(p["eps"], p["delta"])
    if name == "rdp":
        return flt.RDPFilter.for_target(p["eps"], p["delta"], RDP_ORDERS)
    if name == "natural_zero_delta":
        return flt.NaturalZeroDeltaFilter(p["delta"])
    if name == "natural_approx":
        return flt.NaturalApproxFilter(p["eps"], p["delta"], rounds, allow_general=allow_general)
    return flt.AdditiveProfileFilter(p["eps"], p["delta"], rounds)


@app.command("residue")
def residue(
    budget: Annotated[
        str, typer.Option(help="GDP budget, e.g. gdp:mu=3 or approx:eps=10,delta=1e-6")
    ],
    query: Annotated[str, typer.Option(help="The query, e.g. rr:eps=2")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Remaining GDP budget after one query: naive update vs the GDP residue filter."""
    from dpsieve.errors import DPError
    from dpsieve.filters import gdp_residue_update, naive_gdp_cost
    from dpsieve.filters.gdp import sqrt_down

    try:
        f = make_filter("gdp_residue", budget)
        q = parse_query(query)
    except DPError as err:
        raise typer.BadParameter(str(err)) from None
    mu = f.remaining()["mu"]
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
    if not math.isfinite(nu) and out["mu_residue"] is None:
        from dpsieve.filters.summary import describe_query

        typer.echo(f"  refused by both: a query of this kind ({describe_query(q)}) has no GDP "
                   "bound, so it never fits a GDP budget")
        return
    naive = f"remaining mu = {mu_naive:.6g}" if mu_naive is not None else "refused"
    residue = (f"remaining mu = {out['mu_residue']:.6g}" if out["mu_residue"] is not None
               else "refused")
    typer.echo(f"  naive GDP filter:   charged G_{nu:.6g}, {naive}")
    typer.echo(f"  GDP residue filter: {residue}")


@app.command("run")
def run(
    queries: Annotated[list[str], typer.Argument(help="Query specs, in order.")],
    filter_name: Annotated[str | None, typer.Option(
        "--filter", help=f"One of {', '.join(FILTERS)}; default: the one a session builds for "
        "the budget (mixed for approx, gdp_residue for gdp, pure_dp, zcdp, ...)")] = None,
    typical: Annotated[list[str] | None, typer.Option(
        help="A typical query (repeatable): chooses the mixed budget's split.")] = None,
    budget: Annotated[str, typer.Option(help="Budget spec")] = "approx:eps=1,delta=1e-6",
    like: Annotated[str | None, typer.Option(
        help="Count 'about N more queries like this one' for this query spec at the end "
        "(default: the last query).")] = None,
    rounds: Annotated[
        int, typer.Option(help="Declared rounds (natural_approx, additive_profile)")
    ] = 10,
    allow_general: Annotated[
        bool, typer.Option(help="Allow the (not free) natural (eps,delta) filter.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON lines.")] = False,
) -> None:
    """Replay queries against a filter and print each decision in plain words."""
    from dpsieve.errors import DPError
    from dpsieve.filters.summary import budget_summary

    try:
        parsed = [parse_query(spec) for spec in queries]  # all parsed before any is applied
        typ = [parse_query(spec) for spec in typical or []]
        asked = parse_query(like) if like is not None else None
        filter_name = filter_name or DEFAULT_FILTER.get(budget.partition(":")[0].strip(),
                                                        "mixed")
        f = make_filter(filter_name, budget, rounds=rounds, allow_general=allow_general,
                        typical=typ)
    except DPError as err:
        raise typer.BadParameter(str(err)) from None
    initial = make_filter(filter_name, budget, rounds=rounds, allow_general=allow_general,
                          typical=typ)
    if not as_json:
        s0 = budget_summary(f, initial)
        left0 = (s0.text if s0.eps_left is not None
                 else f"left {json.dumps(f.remaining().to_dict())}")
        typer.echo(f"Budget: {_budget_name(f)}; {left0}")
    for i, (spec, q) in enumerate(zip(queries, parsed, strict=True), 1):
        d = f.try_spend(q)
        if as_json:
            typer.echo(json.dumps({"step": i, "query": spec, **d.to_dict(),
                                   "words": _decision_words(f, initial, q, d)}))
        else:
            mark = "ADMIT " if d.admitted else "REFUSE"
            typer.echo(f"{i:3d} {mark} {spec:28s} {_decision_words(f, initial, q, d)}")
    last = asked if asked is not None else (parsed[-1] if parsed else None)
    summary = budget_summary(f, initial, like=last, cap=_CAP)
    if as_json:
        typer.echo(json.dumps({"final_state": json.loads(f.to_json()),
                               "summary": summary.to_dict()}))
        return
    if summary.eps_left is None:
        typer.echo(f"budget left: {json.dumps(f.remaining().to_dict())}")
    else:
        typer.echo("budget left: " + summary.text)


#: Cap on the final "about N more queries like this one" (exact up to it).
_CAP = 100_000


def _budget_name(f: Any) -> str:
    from dpsieve._budget_view import KIND_NAMES

    return KIND_NAMES.get(f.kind, f"a {f.kind} filter")


def _decision_words(f: Any, initial: Any, q: Any, d: Any) -> str:
    """One decision in plain words: what it charged or why it was refused (the cost asked
    and what is left; a query type the budget can never admit said so, with the types that
    fit), then the eps left at the budget's delta and the fraction used."""
    from dpsieve._budget_view import TYPE_NAMES
    from dpsieve.filters.summary import budget_summary, describe_query, fitting_types, query_fits

    s = budget_summary(f, initial)
    left = s.text if s.eps_left is not None else f"left {json.dumps(f.remaining().to_dict())}"
    if d.admitted:
        how = d.reason if f.kind == "mixed" else "admitted"  # mixed: which part paid
        return f"{how} ({describe_query(q)}); {left}"
    if not query_fits(f, q):
        fits = ", ".join(TYPE_NAMES.get(t, t) for t in fitting_types(f)) or "none"
        return (f"refused: a query of this kind ({describe_query(q)}) can never fit "
                f"{_budget_name(f)}, however small; query types that fit: {fits}. "
                f"Nothing was spent; {left}")
    return (f"refused: it asks for {describe_query(q)}, more than the budget has left "
            f"({left}). Nothing was spent")
