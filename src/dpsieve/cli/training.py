"""``dpsieve training-figures --out DIR``: training under filters (PNG + summary.md).

Runs ``experiments/training/run.py`` from the source checkout: uniform vs adaptive
(TrainingFilter, loss-driven noise) vs per-record filters on offline scikit-learn data.
A few minutes; ``--quick`` is a smoke test.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["register", "training_figures"]


def _script() -> Path:
    for base in (Path.cwd(), *Path(__file__).resolve().parents):
        script = base / "experiments" / "training" / "run.py"
        if script.exists():
            return script
    raise typer.BadParameter(
        "experiments/training/run.py not found: the experiments ship with the source checkout."
    )


def training_figures(
    out: Annotated[Path, typer.Option(help="Output directory (PNG figure + summary.md).")],
    quick: Annotated[bool, typer.Option(help="Few runs, short schedule (smoke test).")] = False,
) -> None:
    """Train logistic regression under uniform, adaptive and per-record accounting."""
    spec = importlib.util.spec_from_file_location("dpsieve_training_experiments", _script())
    if spec is None or spec.loader is None:
        raise typer.BadParameter("could not load experiments/training/run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.main(out, quick=quick)
    typer.echo(f"wrote {path} and the figure next to it")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve training-figures`` to the top-level app."""
    app.command("training-figures")(training_figures)
