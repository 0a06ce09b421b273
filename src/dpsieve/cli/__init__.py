"""The ``dpsieve`` command line. Each command group lives in its own module.

The CLI is thin: it parses, calls the library and prints (``--json`` prints one JSON object).
"""

from __future__ import annotations

import importlib

import typer

__all__ = ["app", "main"]

app = typer.Typer(
    name="dpsieve",
    help="Differential privacy with exact, adaptive privacy accounting.",
    no_args_is_help=True,
    add_completion=False,
)

# (module, attribute) of each sub-application or command registrar, registered in order.
# A module exposes either ``app`` (a Typer group, added under ``name``) or
# ``register(app)`` (adds top-level commands).
_GROUPS: tuple[tuple[str, str | None], ...] = (
    ("dpsieve.cli.serve", None),
    ("dpsieve.cli.budget", "budget"),
    ("dpsieve.cli.query", None),
    ("dpsieve.cli.release", None),
    ("dpsieve.cli.account", "account"),
    ("dpsieve.cli.robust", "robust"),
    ("dpsieve.cli.filter", "filter"),
    ("dpsieve.cli.demo", None),
    ("dpsieve.cli.figures", None),
)


def _register() -> None:
    for module_name, group_name in _GROUPS:
        module = importlib.import_module(module_name)
        if group_name is None:
            module.register(app)
        else:
            app.add_typer(module.app, name=group_name)


_register()


def main() -> None:
    """Entry point of the ``dpsieve`` script."""
    app()
