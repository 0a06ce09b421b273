"""``dpsieve data``: the bundled example data sets, listed or copied into a directory.

The README's and docs' examples use them, so they run from an installed package too:
``dpsieve data --copy .`` puts ``diabetes.csv``, ``release_toy.csv`` and
``release_toy.domain.json`` in the current directory (existing files are kept unless
``--force``).
"""

from __future__ import annotations

import json
import shutil
from importlib import resources
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["FILES", "data", "register"]

#: The bundled files and what each is (src/dpsieve/data/README.md says more).
FILES = {
    "diabetes.csv": "442 patients, 10 baseline variables and disease progression (numeric)",
    "release_toy.csv": "a small categorical table for query release",
    "release_toy.domain.json": "the public domain of release_toy.csv's columns",
}


def data(
    copy: Annotated[Path | None, typer.Option(
        "--copy", help="Copy the data sets into this directory.")] = None,
    force: Annotated[bool, typer.Option(help="Overwrite files that exist.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """List the bundled example data sets, or copy them into a directory."""
    root = resources.files("dpsieve").joinpath("data")
    rows = []
    for name, what in FILES.items():
        src = Path(str(root.joinpath(name)))
        path = src
        if copy is not None:
            copy.mkdir(parents=True, exist_ok=True)
            path = copy / name
            if path.exists() and not force:
                rows.append({"file": name, "path": str(path), "what": what, "copied": False})
                continue
            shutil.copyfile(src, path)
        rows.append({"file": name, "path": str(path), "what": what,
                     "copied": copy is not None})
    if as_json:
        typer.echo(json.dumps({"files": rows}))
        return
    for r in rows:
        note = "" if copy is None or r["copied"] else "  (exists, kept; --force overwrites)"
        typer.echo(f"{r['path']}  -- {r['what']}{note}")


def register(app: typer.Typer) -> None:
    """Add ``dpsieve data`` to the top-level app."""
    app.command("data")(data)
