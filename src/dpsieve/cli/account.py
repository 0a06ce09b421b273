"""``dpsieve account epsilon|delta|gdp|tuning``: privacy accounting of composed mechanisms
(and of a hyperparameter search over DP-SGD runs, ``tuning``).

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
#: Default of --max-points: about 160 MB per float64 array of the composed PLD.
DEFAULT_MAX_POINTS = 20_000_000
MAX_POINTS = typer.Option(
    DEFAULT_MAX_POINTS, "--max-points", envvar="DPSIEVE_MAX_PLD_POINTS", min=1,
    help="Refuse (before any work) a composition whose PLD would hold more support points.")


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


def estimated_points(mechanisms: list[str], compose: int, grid: float) -> float:
    """Support points of the composed PLD, from the public specs alone.

    A loss bounded by eps (pure, approx, rr, laplace with eps = sensitivity/scale) spans
    2 eps / grid points; k-fold composition adds the spans. Gaussian and GDP specs are
    counted as 0 (they are carried in closed form). An estimate, used only to refuse."""
    if not (isinstance(grid, float | int) and math.isfinite(grid) and grid > 0):
        return 0.0  # the PLD refuses the grid itself, with its own message
    total = 0.0
    for spec in mechanisms:
        kind, params = parse_spec(spec, MECHANISMS, "mechanism")
        if kind == "laplace":
            eps = params.get("sensitivity", 1.0) / params["scale"] if params["scale"] > 0 \
                else math.inf
        elif kind in ("pure", "approx", "rr"):
            eps = params["eps"]
        else:
            continue
        total += max(compose, 1) * (2.0 * abs(eps) / grid + 1.0)
    return total


def _lattice_parts(mechanisms: list[str], grid: float, max_points: int) -> list[Any] | None:
    """The discrete PLDs of the specs when every one has atoms only (rr, pure, approx; Gaussian
    and GDP specs carry no discrete part and are skipped), each small enough to build on its
    own (at most ``max_points`` points); None otherwise (a Laplace spec is dense)."""
    parts = []
    for spec in mechanisms:
        kind, params = parse_spec(spec, MECHANISMS, "mechanism")
        if kind in ("gaussian", "gdp"):
            continue
        if kind == "laplace" or not 2.0 * abs(params["eps"]) / grid + 1.0 <= max_points:
            return None
        parts.append(parse_mechanism(spec, grid))
    return parts


def lattice_step(plds: list[Any]) -> int:
    """The largest S >= 1 such that every finite loss of every PLD sits on a multiple of S grid
    steps (the gcd of the knot indices carrying mass; 1 when there is none). The composition
    of such PLDs lives on the same multiples, so it is computed exactly on the grid S*grid
    (convolution of the compressed vectors: no knot is moved, no mass is rounded)."""
    import numpy as np
    idx = [p.offset + np.flatnonzero(p.probs) for p in plds]
    s = int(np.gcd.reduce(np.abs(np.concatenate([*idx, np.zeros(1, dtype=np.int64)]))))
    return max(s, 1)


def lattice_points(plds: list[Any], compose: int, step: int) -> float:
    """Points of the composed PLD on the lattice of ``step`` grid steps: the composition of
    supports of widths w_i (in grid steps) has width k sum w_i, i.e. k sum w_i / step + 1."""
    import numpy as np
    width = sum(int(np.flatnonzero(p.probs)[-1] - np.flatnonzero(p.probs)[0])
                for p in plds if np.any(p.probs))
    return max(compose, 1) * width / step + 1.0


def _on_lattice(pld: Any, step: int) -> Any:
    """The same PLD on the grid step*grid (every mass sits on a multiple of step grid steps)."""
    import numpy as np

    from dpsieve.accounting import PLD

    nz = np.flatnonzero(pld.probs)
    if nz.size == 0 or step == 1:
        return pld
    first = int(pld.offset + nz[0])
    probs = np.array(pld.probs[nz[0] : nz[-1] + 1 : step])
    return PLD(pld.grid * step, first // step, probs, pld.inf_mass, pld.mu, pld.direction,
               pld.symmetric)


def _composed(mechanisms: list[str], compose: int, grid: float,
              max_points: int = DEFAULT_MAX_POINTS) -> Any:
    """The composed PLD. Atom-only specs whose losses share a lattice (rr:eps=0.1 at grid 1e-4:
    every loss a multiple of 1000 steps) are composed on that lattice, and the resource guard
    counts lattice points (20,000 x RR(0.1) at the default grid is 40,001 points on
    the lattice 0.1, not 4e7 grid points); the result's grid is then the lattice step."""
    from dpsieve.accounting import PLD
    from dpsieve.errors import DPError

    try:
        points = estimated_points(mechanisms, compose, grid)
        step, parts = 1, None
        if points > max_points:
            parts = _lattice_parts(mechanisms, grid, max_points)
            if parts:
                step = lattice_step(parts)
                if step > 1:
                    points = lattice_points(parts, compose, step)
    except (ValueError, DPError) as e:
        raise _fail(str(e)) from None
    if points > max_points:
        what = "lattice points" if step > 1 else "support points"
        raise _fail(f"the composed PLD would hold about {points:.3g} {what} "
                    f"(~{points * 8 / 2**20:.3g} MiB per array) at --grid {grid!r}, over the "
                    f"limit --max-points {max_points} (DPSIEVE_MAX_PLD_POINTS); use a coarser "
                    "--grid or raise the limit")
    total = PLD.identity(grid=grid)
    try:
        for spec in mechanisms:
            one = _on_lattice(parse_mechanism(spec, grid), step)
            total = total.compose(one.self_compose(compose))
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
    max_points: int = MAX_POINTS,
) -> None:
    """The smallest epsilon (certified upper bound) with delta(epsilon) <= DELTA."""
    from dpsieve.errors import DPError

    pld = _composed(mechanism, compose, grid, max_points)
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
    max_points: int = MAX_POINTS,
) -> None:
    """delta(epsilon) of the composition (certified upper bound)."""
    from dpsieve.errors import DPError

    pld = _composed(mechanism, compose, grid, max_points)
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
    max_points: int = MAX_POINTS,
) -> None:
    """The smallest mu (certified upper bound) such that the composition is mu-GDP."""
    from dpsieve.accounting import smallest_gdp_mu

    pld = _composed(mechanism, compose, grid, max_points)
    mu = smallest_gdp_mu(pld)
    out = {"mu": _num(mu), **_summary(pld, mechanism, compose)}
    typer.echo(json.dumps(out) if as_json else f"mu = {mu!r}")


#: Laws of the number of runs of a search (``--runs``).
RUNS: dict[str, SpecKind] = {
    "poisson": SpecKind(("mean",)),
    "geometric": SpecKind(("mean",)),
    "tnb": SpecKind(("eta",), ("mean", "gamma")),
}


def parse_runs(spec: str) -> Any:
    """The law of K of a ``--runs`` spec (SpecError / ValidationError on bad input)."""
    from dpsieve.cli._specs import SpecError
    from dpsieve.training import NegativeBinomialRuns, PoissonRuns

    kind, p = parse_spec(spec, RUNS, "runs")
    if kind == "poisson":
        return PoissonRuns(p["mean"])
    if kind == "geometric":
        return NegativeBinomialRuns.geometric(p["mean"])
    if ("mean" in p) == ("gamma" in p):
        raise SpecError(f"runs {spec!r}: tnb takes exactly one of mean=... and gamma=...")
    if "mean" in p:
        return NegativeBinomialRuns.with_mean(p["eta"], p["mean"])
    return NegativeBinomialRuns(p["eta"], p["gamma"])


@app.command("tuning")
def tuning(
    sigma: float = typer.Option(..., "--sigma", help="Noise multiplier of each DP-SGD step."),
    rate: float = typer.Option(..., "--rate", help="Poisson sampling rate of each step."),
    steps: int = typer.Option(..., "--steps", min=1, help="Steps of one run."),
    runs: str = typer.Option(..., "--runs", help="Law of the number of runs K: "
                             "poisson:mean=M, geometric:mean=M, tnb:eta=E,mean=M (or "
                             "tnb:eta=E,gamma=G)."),
    delta: float = typer.Option(..., "--delta", help="Target delta in (0, 1)."),
    as_json: bool = JSON,
) -> None:
    """eps of a hyperparameter search by random stopping: K runs (K drawn secretly from
    --runs), only the best run and its score released (certified upper bounds)."""
    from dpsieve.errors import DPError
    from dpsieve.training import DPSGDAccountant, TuningAccountant

    try:
        law = parse_runs(runs)
        run = DPSGDAccountant()
        run.step(sigma, rate, count=steps, sampling="full_batch" if rate == 1.0 else "poisson")
        one = float(run.epsilon(delta))
        ta = TuningAccountant(run, law)
        by_rdp, by_profile = ta.epsilon(delta, method="rdp"), ta.epsilon(delta, method="profile")
    except (ValueError, DPError) as e:
        raise _fail(str(e)) from None
    best = min(by_rdp, by_profile)
    out = {"epsilon": _num(best), "delta": delta, "one_run": _num(one), "rdp": _num(by_rdp),
           "profile": _num(by_profile), "runs": law.to_dict(), "mean_runs": law.mean,
           "sigma": sigma, "rate": rate, "steps": steps}
    typer.echo(json.dumps(out) if as_json else
               f"epsilon = {best!r} at delta = {delta!r} for the search "
               f"(one run {one!r}; Papernot-Steinke RDP {by_rdp!r}, profile {by_profile!r})")
