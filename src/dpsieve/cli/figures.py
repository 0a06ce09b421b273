"""``dpsieve figures --out DIR`` and ``dpsieve reproduce filters|robust``: the papers' claims,
reproduced (PNG figures and a markdown summary in DIR).

The code ships with the package (:mod:`dpsieve.reproduce`), so these run from an installed
wheel. ``figures`` takes 15-60 s (``--quick``: a few seconds); ``reproduce robust`` needs
the ``data`` extra for its offline data sets.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["app", "figures", "register"]

app = typer.Typer(help="Reproduce the papers' claims (figures and tables).",
                  no_args_is_help=True)

OUT = Annotated[Path, typer.Option(help="Output directory (PNG figures + summary).")]


def figures(
    out: OUT,
    quick: Annotated[bool, typer.Option(help="Reduced grids (smoke test).")] = False,
) -> None:
    """Reproduce Figures 1-3 and the tables of the privacy-filters paper."""
    from dpsieve.reproduce.filters import main

    path = main(out, quick=quick)
    typer.echo(f"wrote {path} and the figures next to it")


@app.command("filters")
def filters(
    out: OUT,
    quick: Annotated[bool, typer.Option(help="Reduced grids (smoke test).")] = False,
) -> None:
    """The privacy-filters paper: Figures 1-3 and its tables (same as ``dpsieve figures``)."""
    figures(out, quick)


@app.command("robust")
def robust(
    out: OUT,
    reps: Annotated[int, typer.Option(help="Repetitions per point.")] = 20,
    quick: Annotated[bool, typer.Option(help="Two repetitions per point (smoke test).")]
    = False,
) -> None:
    """Propose-Filter-Release against its baselines (needs the ``data`` extra)."""
    from dpsieve.reproduce.robust import main

    path = main(out, reps=2 if quick else reps)
    typer.echo(f"wrote {path} and the figures next to it")


def register(app_: typer.Typer) -> None:
    """Add ``dpsieve figures`` to the top-level app."""
    app_.command("figures")(figures)
