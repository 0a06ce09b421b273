"""``dpsieve budget show|set``: read and set data-set budgets in a ledger directly."""

from __future__ import annotations

import json
from typing import Any

import typer

__all__ = ["app"]

app = typer.Typer(help="Show or set data-set budgets in a ledger.", no_args_is_help=True)

DB = typer.Option("sqlite:///dpsieve.db", "--database-url", envvar="DPSIEVE_DATABASE_URL",
                  help="sqlite:///<path> or postgresql://...")
SCHEMA = typer.Option("dpsieve", help="PostgreSQL schema of the ledger.")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(code=2)


@app.command("show")
def show(
    dataset: str | None = typer.Argument(None, help="One data set (default: all)."),
    database_url: str = DB,
    schema: str = SCHEMA,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """The remaining budget of each data set and how many queries were admitted."""
    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store

    store = open_store(database_url, schema=schema)
    try:
        names = [dataset] if dataset else store.budget_ids()
        rows: list[dict[str, Any]] = []
        for n in names:
            try:
                rows.append({"dataset": n, "remaining": store.load_filter(n).remaining(),
                             "initial": store.initial_filter(n).remaining(),
                             "admitted": len(store.history(n))})
            except DPError as e:
                raise _fail(str(e)) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({"budgets": rows}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("data set", "initial", "remaining", "admitted")
    for r in rows:
        table.add_row(r["dataset"], json.dumps(r["initial"]), json.dumps(r["remaining"]),
                      str(r["admitted"]))
    Console().print(table)


@app.command("set")
def set_budget(
    dataset: str = typer.Argument(..., help="The data set's name."),
    budget: str = typer.Option(..., help='A privacy description, e.g. \'{"type":"gdp","mu":1}\'.'),
    path: str | None = typer.Option(None, help="Register the data set from this CSV/Parquet."),
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Set a data set's budget (refused once queries were admitted against it)."""
    from pathlib import Path

    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store
    from dpsieve.session import (
        data_column_kinds,
        data_columns,
        filter_for_budget,
        parse_description,
    )

    try:
        desc = parse_description(json.loads(budget), "budget")
    except json.JSONDecodeError as e:
        raise _fail(f"--budget is not JSON ({e}).") from None
    except DPError as e:
        raise _fail(str(e)) from None
    store = open_store(database_url, schema=schema)
    try:
        src = store.dataset(dataset)
        if path is not None:
            p = Path(path).expanduser().resolve()
            if not p.is_file():
                raise _fail(f"--path {path!r} is not a file.")
            src = {**(src or {}), "path": str(p), "columns": data_columns(p),
                   "column_types": data_column_kinds(p)}
        if src is None:
            raise _fail(f"No data set named {dataset!r}; give --path to register it.")
        store.register_dataset(dataset, {**src, "neighbouring": desc.neighbouring.value,
                                         "budget": desc.to_dict()})
        store.create_budget(dataset, filter_for_budget(desc), replace=True)
        typer.echo(json.dumps({"dataset": dataset,
                               "remaining": store.load_filter(dataset).remaining()}))
    except DPError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()
