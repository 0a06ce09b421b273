"""``dpsieve release`` (pure-DP query release) and ``dpsieve release-experiments``.

The CLI does the I/O: it reads a categorical CSV (header = attribute names), a public
domain (JSON object attribute -> list of levels), builds the workload and calls
:mod:`dpsieve.release`. What it prints on stdout is the release (covered by the printed
privacy) and public parameters only. Two things are NOT private and are opt-in, for the
data owner's eyes:

* ``--diagnostics``: the exact expected error at the true data and log Z (functions of
  the data, outside the guarantee), printed to **stderr** as one JSON object
  ``{"diagnostics_not_private": {...}}``, never mixed into the release;
* ``--domain-from-data``: the levels read from the data instead of ``--domain`` (the query
  names then reveal which levels occur); the output says ``domain_derived_from_data``.

Errors name the parameter and the constraint; a value of the data is never shown.
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register", "release", "release_experiments", "release_theory"]

MECHANISMS = ("envelope", "mwem", "pmw", "laplace", "identity", "blr")
#: Exact expected error is computed when the enumeration costs at most this many units.
EXACT_ERROR_MAX_COST = 2.0e8
#: Default of --max-group-work (the service's setting is 1e7; the CLI runs for its owner).
CLI_MAX_GROUP_WORK = 1.0e8


def _read_table(path: Path) -> tuple[list[str], list[list[str]]]:
    with path.open(newline="") as fh:
        reader = csv.reader(fh)
        try:
            header = [h.strip() for h in next(reader)]
        except StopIteration:
            raise typer.BadParameter(f"{path} is empty.") from None
        rows = [[v.strip() for v in r] for r in reader if r and any(v.strip() for v in r)]
    if not rows:
        raise typer.BadParameter(f"{path} has a header but no rows.")
    return header, rows


def _domain(header: list[str], rows: list[list[str]], domain_file: Path | None) -> Any:
    from dpsieve.release import Domain

    if domain_file is not None:
        spec = json.loads(domain_file.read_text())
        missing = [h for h in header if h not in spec]
        if missing:
            raise typer.BadParameter(f"--domain lacks attributes {missing}.")
        return Domain(tuple(header), tuple(tuple(str(v) for v in spec[h]) for h in header))
    levels = tuple(tuple(sorted({r[i] for r in rows})) for i in range(len(header)))
    return Domain(tuple(header), levels)


def _workload(spec: str, domain: Any) -> Any:
    from dpsieve.release import marginals, random_counting, range_1d, range_2d

    kind, _, rest = spec.partition(":")
    args = [a for a in rest.split(":") if a]
    if kind == "marginals":
        return marginals(domain, int(args[0]) if args else 1)
    if kind == "random":
        k = int(args[0]) if args else 10
        return random_counting(domain.size, k, seed=int(args[1]) if len(args) > 1 else 0)
    if kind == "range1d":
        return range_1d(domain.size)
    if kind == "range2d":
        if len(domain.shape) != 2:
            raise typer.BadParameter("range2d needs exactly two attributes.")
        return range_2d((domain.shape[0], domain.shape[1]))
    raise typer.BadParameter(
        f"--workload must be marginals[:W], random[:K[:SEED]], range1d or range2d; got {spec!r}.")


def release(
    mechanism: Annotated[str, typer.Option(
        help="envelope | mwem | pmw | laplace | identity | blr")],
    data: Annotated[Path, typer.Option(help="Categorical CSV with a header row.",
                                       exists=True, dir_okay=False)],
    workload: Annotated[str, typer.Option(
        help="marginals[:W] | random[:K[:SEED]] | range1d | range2d")] = "marginals:1",
    eps: Annotated[float, typer.Option(help="Privacy parameter (pure eps-DP, replace-one).")]
    = 1.0,
    domain: Annotated[Path | None, typer.Option(
        help="Public domain JSON {attribute: [levels]} (required unless "
             "--domain-from-data).")] = None,
    domain_from_data: Annotated[bool, typer.Option(
        "--domain-from-data", help="Derive the levels from the data (NOT private: the "
        "query names reveal which levels occur; flagged in the output).")] = False,
    diagnostics: Annotated[bool, typer.Option(
        "--diagnostics", help="Also print non-private diagnostics (exact expected error "
        "at the true data, log Z) to stderr, for the data owner only.")] = False,
    rounds: Annotated[int | None, typer.Option(help="PMW/MWEM rounds J.")] = None,
    eta: Annotated[float | None, typer.Option(help="Envelope selection strength.")] = None,
    gamma: Annotated[float | None, typer.Option(help="Envelope Hedge step.")] = None,
    method: Annotated[str, typer.Option(help="envelope sampler: exact | rejection")] = "exact",
    seed: Annotated[int | None, typer.Option(
        help="Seed for a SIMULATION (not private); default: secure randomness.")] = None,
    max_cost: Annotated[float, typer.Option(help="Refuse enumerations above this cost.")]
    = 2.0e10,
    max_group_work: Annotated[float, typer.Option(
        help="Refuse envelope releases whose grouping of histograms (DP states x (queries "
             "+ 1), from n and the workload only) exceeds this; about 1 s per 1e7.")]
    = CLI_MAX_GROUP_WORK,
    progress: Annotated[bool, typer.Option(help="Progress bar for long enumerations.")]
    = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Release a workload of counting queries on a categorical table under pure eps-DP."""
    import numpy as np

    from dpsieve import release as rel
    from dpsieve.errors import DPError

    if mechanism not in MECHANISMS:
        raise typer.BadParameter(f"--mechanism must be one of {MECHANISMS}; got {mechanism!r}.")
    if domain is None and not domain_from_data:
        raise typer.BadParameter("give the public domain (--domain DOMAIN.json); "
                                 "--domain-from-data derives it from the data, which is "
                                 "not private.")
    header, rows = _read_table(data)
    dom = _domain(header, rows, domain)
    try:
        ds = rel.Dataset.from_table(dom, rows)
        wl = _workload(workload, dom)
        rng = np.random.default_rng(seed) if seed is not None else None
        if not (max_cost > 0 and max_group_work > 0):  # NaN too
            raise typer.BadParameter(f"--max-cost and --max-group-work must be > 0; got "
                                     f"{max_cost!r}, {max_group_work!r}.")
        out = _run(rel, mechanism, wl, ds, eps, rounds, eta, gamma, method, rng,
                   (max_cost, max_group_work), progress, diagnostics)
    except DPError as e:
        if as_json:  # the error as JSON on stdout too, for a program reading it
            typer.echo(json.dumps({"error": type(e).__name__, "message": str(e)}))
        typer.echo(f"Error: {' '.join(str(e).split())}", err=True)
        raise typer.Exit(2) from None
    payload: dict[str, Any] = {
        "mechanism": out.mechanism, "answers": [float(a) for a in out.answers],
        "privacy": out.privacy.to_dict(), "queries": list(wl.names), "n": ds.n,
        "universe_size": dom.size, "domain_derived_from_data": domain is None,
        "details": out.public_details()}
    if seed is not None:
        payload["simulation_seed"] = seed
    if diagnostics:
        typer.echo(json.dumps({"diagnostics_not_private": out.diagnostics()}), err=True)
    if domain is None:
        typer.echo("warning: domain derived from the data (not private); pass --domain",
                   err=True)
    if as_json:
        typer.echo(json.dumps(payload))
        return
    from rich.console import Console
    from rich.table import Table

    priv = out.privacy.to_dict()
    title = f"{mechanism}: {priv['type']} eps={priv['eps']:g}" + (
        f", delta={priv['delta']:.2g}" if "delta" in priv else "") + " (replace-one)"
    table = Table(title=title)
    table.add_column("query")
    table.add_column("answer", justify="right")
    for name, a in zip(wl.names, out.answers, strict=True):
        table.add_row(name, f"{a:.6f}")
    Console().print(table)


def _run(R: Any, mechanism: str, wl: Any, ds: Any, eps: float, rounds: int | None,
         eta: float | None, gamma: float | None, method: str, rng: Any,
         limits: tuple[float, float], progress: bool, diagnostics: bool) -> Any:
    max_cost, max_group_work = limits
    if mechanism == "laplace":
        return R.laplace_release(wl, ds, eps, rng=rng)
    if mechanism == "identity":
        return R.identity_release(wl, ds, eps, rng=rng)
    if mechanism == "blr":
        return R.blr_release(wl, ds, eps, rng=rng)
    if mechanism == "mwem":
        return R.mwem_release(wl, ds, eps, rounds=rounds or 4, rng=rng)
    if mechanism == "pmw":
        J = rounds or 4
        cost = R.enumeration_cost(R.collapse(wl).signed_classes, J - 1, 1)
        return R.pmw_release(wl, ds, eps, rounds=J, rng=rng,
                             compute_error=diagnostics and cost <= EXACT_ERROR_MAX_COST)
    cw = R.collapse(wl)
    # the group count is data-independent (n and the workload only); refused with the
    # estimate before the work when it would exceed max_group_work
    groups = R.group_histograms(cw, cw.counts(ds), max_work=max_group_work).size
    J = rounds or (20 if method == "rejection" else
                   R.auto_rounds(cw.signed_classes, groups, R.AUTO_ROUNDS_COST))
    params = R.practical_parameters(wl.universe_size, ds.n, eps, J)
    if eta is not None or gamma is not None:
        params = R.PMWParams(J, eta if eta is not None else params.eta,
                             gamma if gamma is not None else params.gamma)
    cb = None
    bar: Any = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=0, unit="transcripts", file=sys.stderr)

        def cb(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()
    try:
        small = R.enumeration_cost(cw.signed_classes, J - 1, groups) <= EXACT_ERROR_MAX_COST
        return R.envelope_release(wl, ds, eps, params, method=method, rng=rng,
                                  compute_error=diagnostics and small and method == "exact",
                                  max_cost=max_cost, progress=cb)
    finally:
        if bar is not None:
            bar.close()


def release_experiments(
    out: Annotated[Path, typer.Option(help="Output directory (PNG plots + markdown).")]
    = Path("experiments/release/results"),
    quick: Annotated[bool, typer.Option(help="Small grid (about a minute).")] = True,
) -> None:
    """Run the query-release experiments."""
    from dpsieve.reproduce.release import main

    main(out, quick=quick)


def release_theory(
    universe_size: Annotated[int, typer.Option("--universe-size", "-T", help="|D| = T")],
    k: Annotated[int, typer.Option(help="Number of queries.")],
    n: Annotated[int, typer.Option(help="Database size.")],
    eps: Annotated[float, typer.Option(help="Privacy parameter.")] = 1.0,
) -> None:
    """Theorem 1.1 calculator: section 8 parameters, C min{1, tau}, nontrivial branch."""
    from dataclasses import asdict

    from dpsieve.errors import DPError
    from dpsieve.release import smallest_nontrivial_n, theorem_parameters

    try:
        tp = theorem_parameters(universe_size, k, n, eps)
        out = asdict(tp)
        out["bound_below_one"] = tp.bound_below_one
        out["smallest_nontrivial_n"] = smallest_nontrivial_n(universe_size, k, eps)
    except DPError as e:
        typer.echo(json.dumps({"error": type(e).__name__, "message": str(e)}))
        typer.echo(f"Error: {' '.join(str(e).split())}", err=True)
        raise typer.Exit(2) from None
    typer.echo(json.dumps(out))


def register(app: typer.Typer) -> None:
    """Add ``release``, ``release-experiments`` and ``release-theory`` to the app."""
    app.command("release")(release)
    app.command("release-experiments")(release_experiments)
    app.command("release-theory")(release_theory)
