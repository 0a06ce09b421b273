"""``dpsieve figures --out DIR``: the privacy-filters reproductions (PNG + summary.md).

Runs ``experiments/filters/run.py`` from the source checkout (the experiments do not ship
in the wheel). About 15-60 s; ``--quick`` shrinks the tables (smoke test).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["figures", "register"]


def _script() -> Path:
    for base in (Path.cwd(), *Path(__file__).resolve().parents):
        script = base / "experiments" / "filters" / "run.py"
        if script.exists():
            return script
    raise typer.BadParameter(
        "experiments/filters/run.py not found: the experiments ship with the source checkout."
    )


def figures(
    out: Annotated[Path, typer.Option(help="Output directory (PNG figures + summary.md).")],
    quick: Annotated[bool, typer.Option(help="Reduced grids (smoke test).")] = False,
) -> None:
    """Reproduce Figures 1-3 and the tables of the privacy-filters paper."""
    spec = importlib.util.spec_from_file_location("dpsieve_filters_experiments", _script())
    if spec is None or spec.loader is None:
        raise typer.BadParameter("could not load experiments/filters/run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.main(out, quick=quick)
    typer.echo(f"wrote {path} and the figures next to it")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve figures`` to the top-level app."""
    app.command("figures")(figures)
