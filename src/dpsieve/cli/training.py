"""``dpsieve training-figures --out DIR``: training under filters (PNG + summary.md).

Runs :mod:`dpsieve.reproduce.training` (it ships with the package): uniform vs adaptive
(TrainingFilter, loss-driven noise) vs per-record filters on offline scikit-learn data.
Needs scikit-learn (the ``data`` extra) and dp-accounting (the ``train`` extra). A few
minutes; ``--quick`` is a smoke test. ``--opacus`` runs :mod:`dpsieve.reproduce.training_opacus`
instead (the same settings with Opacus on a small CPU MLP; the ``train`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "training_figures"]


def training_figures(
    out: Annotated[Path, typer.Option(help="Output directory (PNG figure + summary.md).")],
    quick: Annotated[bool, typer.Option(help="Few runs, short schedule (smoke test).")] = False,
    opacus: Annotated[bool, typer.Option(
        help="Instead: a small CPU MLP with Opacus (uniform, TrainingFilter, per-record); "
             "needs the train extra.")] = False,
    seeds: Annotated[int, typer.Option(min=2, help="Seeds for --opacus.")] = 3,
) -> None:
    """Train logistic regression under uniform, adaptive and per-record accounting."""
    if opacus:
        from dpsieve.reproduce.training_opacus import run

        path = run(out, seeds=seeds, max_steps=40 if quick else None)
    else:
        from dpsieve.reproduce.training import main

        path = main(out, quick=quick)
    typer.echo(f"wrote {path} and the figure next to it")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve training-figures`` to the top-level app."""
    app.command("training-figures")(training_figures)
