"""The ``dpsieve`` command line. Each command (group) lives in its own module, imported only
when that command runs, so ``dpsieve --help`` and ``dpsieve --version`` answer at once.

The CLI is thin: it parses, calls the library and prints (``--json`` prints one JSON object).
:func:`main` is the only place errors reach the user: every error is one line on stderr
(``Error: ...``) and a non-zero exit code, never a traceback (``DPSIEVE_DEBUG=1`` shows one):

* 2 for bad input (a usage error, an invalid parameter, a refused or impossible request);
* 1 for an environment failure (a file or a service that cannot be reached, a service
  error) or anything unexpected;
* 130 when interrupted.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from typer.core import TyperGroup

__all__ = ["COMMANDS", "app", "main"]

#: name -> (module, kind, one-line help). kind "group": the module's ``app`` (a Typer group);
#: kind "command": a top-level command the module's ``register(app)`` adds. The help lines
#: are what ``dpsieve --help`` lists without importing anything (tests/test_cli_package.py
#: checks they match each command's own help).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "serve": ("dpsieve.cli.serve", "command", "Serve the dpsieve HTTP API (docs at /docs, "
              "budget page at /ui)."),
    "budget": ("dpsieve.cli.budget", "group", "Show or set data-set budgets in a ledger."),
    "keys": ("dpsieve.cli.keys", "group", "List, add (rotate) or revoke analysts' API keys "
             "in a ledger."),
    "blocks": ("dpsieve.cli.blocks", "group", "Data blocks, quotas and the queue (budgets "
               "over time) in a ledger."),
    "child": ("dpsieve.cli.child", "group", "Interactive children (sparse vector, continual "
              "counter, answer cache) in a ledger."),
    "query": ("dpsieve.cli.query", "command", "Run a private query (or a file of them) and "
              "print the answers as JSON lines."),
    "release": ("dpsieve.cli.release", "command", "Release a workload of counting queries on a "
                "categorical table under pure eps-DP."),
    "release-experiments": ("dpsieve.cli.release", "command", "Run the query-release "
                            "experiments."),
    "release-theory": ("dpsieve.cli.release", "command", "Theorem 1.1 calculator: section 8 "
                       "parameters, C min{1, tau}, nontrivial branch."),
    "account": ("dpsieve.cli.account", "group", "Privacy accounting of composed mechanisms "
                "(PLDs)."),
    "robust": ("dpsieve.cli.robust", "group", "Robust statistics by Propose-Filter-Release."),
    "filter": ("dpsieve.cli.filter", "group", "Privacy filters: residue updates and replays."),
    "demo": ("dpsieve.cli.demo", "command", "An adaptive analysis of the bundled diabetes "
             "data under an (eps, delta) budget."),
    "figures": ("dpsieve.cli.figures", "command", "Reproduce Figures 1-3 and the tables of the "
                "privacy-filters paper."),
    "reproduce": ("dpsieve.cli.figures", "group", "Reproduce the papers' claims (figures and "
                  "tables)."),
    "training-figures": ("dpsieve.cli.training", "command", "Train logistic regression under "
                         "uniform, adaptive and per-record accounting."),
    "analyze": ("dpsieve.cli.analyze", "command", "Bias and noise of candidate bounds on "
                "the owner's own data (NOT private: for the data owner only, to choose the "
                "public bounds to declare)."),
    "data": ("dpsieve.cli.data", "command", "List the bundled example data sets, or copy "
             "them into a directory."),
}


def _load(name: str) -> Any:
    """The click command for ``name``, importing its module now."""
    module_name, kind, _ = COMMANDS[name]
    module = importlib.import_module(module_name)
    if kind == "group":
        module.app.rich_markup_mode = None  # plain help: rich costs ~0.3 s to import
        module.app._add_completion = False
        cmd = typer.main.get_command(module.app)
        cmd.name = name
        return cmd
    holder = typer.Typer(rich_markup_mode=None)
    module.register(holder)
    return typer.main.get_group(holder).commands[name]


class _LazyGroup(TyperGroup):
    """A group whose commands are imported on first use; help lists them from COMMANDS."""

    _listing = False

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *COMMANDS]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        if cmd is not None or cmd_name not in COMMANDS:
            return cmd
        if self._listing:  # the top-level help: a placeholder with the static help line
            from typer.core import TyperCommand

            return TyperCommand(cmd_name, help=COMMANDS[cmd_name][2])
        return _load(cmd_name)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self._listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self._listing = False


def _version(value: bool) -> None:
    if value:
        from dpsieve import __version__

        typer.echo(f"dpsieve {__version__}")
        raise typer.Exit()


app = typer.Typer(
    name="dpsieve",
    cls=_LazyGroup,
    help="Differential privacy with exact, adaptive privacy accounting.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Differential privacy with exact, adaptive privacy accounting."""


def _fail(message: str, code: int) -> int:
    line = " ".join(str(message).split())  # one line, whatever the message holds
    sys.stderr.write(f"Error: {line}\n")
    return code


def _environment_error(exc: BaseException) -> str | None:
    """A one-line message for an unreachable service or file, else None."""
    try:
        import httpx
    except ImportError:  # the service extra is not installed: no httpx errors either
        httpx = None  # type: ignore[assignment]
    if httpx is not None and isinstance(exc, httpx.HTTPError):
        url = getattr(getattr(exc, "request", None), "url", "")
        reason = str(exc) or type(exc).__name__
        return f"cannot reach the service at {url}: {reason}" if isinstance(
            exc, httpx.TransportError) else f"the service request failed: {reason}"
    if isinstance(exc, ImportError):  # an optional package missing: the message says which
        return str(exc)
    if type(exc).__module__.split(".")[0] in ("sqlite3", "psycopg"):  # the ledger's database
        return f"the ledger database: {exc}"
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if getattr(exc, "filename", None) else ""
        return f"{exc.strerror or exc}{where}"
    return None


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of the ``dpsieve`` script and ``python -m dpsieve`` (see module docstring)."""
    from typer._click.exceptions import ClickException, NoArgsIsHelpError, UsageError

    from dpsieve.errors import DPError

    args = list(sys.argv[1:] if argv is None else argv)
    debug = os.environ.get("DPSIEVE_DEBUG", "") not in ("", "0")
    try:
        rv = app(args=args, prog_name="dpsieve", standalone_mode=False)
        code = rv if isinstance(rv, int) else 0
    except typer.Exit as e:
        code = e.exit_code
    except typer.Abort:
        code = _fail("aborted.", 130)
    except KeyboardInterrupt:
        code = _fail("interrupted.", 130)
    except NoArgsIsHelpError as e:  # "dpsieve" or a group alone: its help, not an error
        sys.stdout.write(e.format_message().rstrip() + "\n")
        code = 0
    except ClickException as e:  # usage errors, bad parameters
        hint = ""
        ctx = getattr(e, "ctx", None)
        if isinstance(e, UsageError) and ctx is not None:
            hint = f" (see '{ctx.command_path} --help')"
        code = _fail(e.format_message() + hint, e.exit_code)
    except DPError as e:
        if debug:
            raise
        from dpsieve.ledger.base import LedgerUnavailableError
        from dpsieve.ledger.redact import redact

        # an unreachable or unwritable ledger is the environment's fault, not the input's
        code = _fail(redact(str(e)), 1 if isinstance(e, LedgerUnavailableError) else 2)
    except Exception as e:
        if debug:
            raise
        env = _environment_error(e)
        code = _fail(env if env is not None else (
            f"unexpected {type(e).__name__}: {e} (set DPSIEVE_DEBUG=1 for a traceback)"), 1)
    sys.exit(code)
