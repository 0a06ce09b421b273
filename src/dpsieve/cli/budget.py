"""``dpsieve budget show|set|schema|verify``: read, set and verify data-set budgets in a
ledger directly."""

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
    like: str | None = typer.Option(
        None, help='Count "about N more queries like this one", e.g. \'{"type":"pure","eps":0.1}\' '
        "(default: like the last admitted query)."),
) -> None:
    """The budget left of each data set in plain words, and how many queries were admitted;
    a data set with blocks with its blocks and quotas under it (budgets over time)."""
    from dpsieve.accounting.events import description_from_json
    from dpsieve.cli._budget_rows import budget_rows, table_rows
    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store

    try:
        asked = None if like is None else description_from_json(json.loads(like), name="like")
    except json.JSONDecodeError as e:
        raise _fail(f"--like is not JSON ({e}).") from None
    except DPError as e:
        raise _fail(str(e)) from None
    store = open_store(database_url, schema=schema)
    try:
        rows = budget_rows(store, dataset, asked)
    except DPError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()
    if as_json:
        typer.echo(json.dumps({"budgets": rows}))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table("data set", "budget left", "admitted")
    for line in table_rows(rows):
        table.add_row(*line)
    Console().print(table)


@app.command("verify")
def verify(
    dataset: str | None = typer.Argument(None, help="One data set (default: every budget)."),
    database_url: str = DB,
    schema: str = SCHEMA,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Replay each budget's audit log and check its hash chain, its stored state and its
    spends against the replay; exit 1 naming every budget whose state or log was
    altered (the service refuses to serve those). Prints each chain's head hash and
    length: kept elsewhere, they show a log rewritten with recomputed hashes."""
    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact_url

    store = open_store(database_url, schema=schema)
    try:
        check = getattr(store, "verify", None)
        if not callable(check):
            raise _fail(f"{redact_url(database_url)} keeps no audit log to verify.")
        checks = check(dataset)
    finally:
        store.close()
    if dataset is not None and not checks:
        raise _fail(f"No budget named {dataset!r} in {redact_url(database_url)}.")
    bad = [c for c in checks if not c.ok]
    if as_json:
        typer.echo(json.dumps({"ok": not bad, "budgets": [c.to_dict() for c in checks]}))
    else:
        for c in checks:
            name = repr(c.budget_id) if c.is_budget else f"(no budget: {c.budget_id!r})"
            verdict = "ok" if c.ok else "ALTERED: " + "; ".join(c.problems)
            typer.echo(f"{name}: {verdict} ({c.rows} rows, {c.admitted} admitted spends, "
                       f"head {c.head[:16]})")
    if bad:
        typer.echo("Altered: " + ", ".join(repr(c.budget_id) for c in bad)
                   + " (the service will not serve them).", err=True)
        raise typer.Exit(code=1)


def _schema_of(store: Any, dataset: str, src: dict[str, Any], fresh: bool,
               privacy_unit: str | None, declared: list[Any] | None) -> dict[str, Any]:
    """The public schema to register (from the file's metadata, the declarations and the
    privacy unit; ``fresh``: a new registration, else the stored declarations and unit are
    kept unless given), checked before anything is written."""
    from dpsieve.errors import DPError
    from dpsieve.session.data import file_columns
    from dpsieve.session.datasets import declaration_types, registered_schema, unit_conflict

    if not src.get("path"):
        raise _fail(f"The data set {dataset!r} has no file: give --path.")
    old = store.dataset(dataset) or {}
    if not fresh:
        privacy_unit = privacy_unit if privacy_unit is not None else old.get("privacy_unit")
        if declared is None and isinstance(old.get("schema"), dict):
            declared = old["schema"].get("columns")
    types = declaration_types(declared)  # a bad declaration: named, before any read
    try:
        table = file_columns(src["path"], types)  # metadata and declarations only
    except DPError:  # e.g. a CSV file without a header line: named
        raise
    except Exception as e:  # the reader's message is withheld: it may quote a cell
        raise _fail(f"{src['path']!r} could not be read as a table "
                    f"({type(e).__name__}).") from None
    schema = registered_schema(lambda: table, declared, privacy_unit)
    why = unit_conflict(store, dataset, old, privacy_unit)
    if why is not None:
        raise _fail(why)
    return {"schema": schema, "privacy_unit": privacy_unit}


def _warn_unit(path: str, src: dict[str, Any], unit: str | None) -> None:
    """Tell the owner (stderr) when the privacy unit column is all or mostly missing."""
    from dpsieve.session.datasets import source_types, unit_warnings

    try:
        warnings = unit_warnings(path, source_types(src), unit)
    except Exception:  # advice only: the registration itself succeeded
        return
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)


@app.command("set")
def set_budget(
    dataset: str = typer.Argument(..., help="The data set's name."),
    budget: str = typer.Option(..., help='A privacy description, e.g. \'{"type":"gdp","mu":1}\'.'),
    path: str | None = typer.Option(None, help="Register the data set from this CSV/Parquet "
                                    "(a new registration: give --privacy-unit and --columns "
                                    "again if the data set has them)."),
    privacy_unit: str | None = typer.Option(
        None, "--privacy-unit", help="The column identifying a person (user-level DP: queries "
        "bound each person's contribution); absent: one row per person. It cannot change "
        "once queries were admitted."),
    columns: str | None = typer.Option(
        None, "--columns", help='Public column declarations, a JSON list such as \'[{"name": '
        '"age", "type": "integer", "bounds": [0, 120]}, {"name": "ward", "type": "string", '
        '"categories": ["A", "B"]}]\' (checked against the file\'s column types).'),
    infer_types: bool = typer.Option(
        False, "--infer-types", help="A CSV file: declare every column not in --columns "
        "with the type DuckDB's reader guesses from its values (your choice, stored as "
        "declarations and printed). Otherwise a CSV's undeclared columns are text."),
    typical: str | None = typer.Option(
        None, help="An (eps, delta) budget's typical query, e.g. '{\"type\":\"pure\",\"eps\":0.1}' "
        "(or a JSON list): chooses the split between its pure and Gaussian parts."),
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Set a data set's budget (refused once queries were admitted against it), registering
    its file and public schema (column types, declared domains and bounds, privacy unit)."""
    from pathlib import Path

    from dpsieve.accounting.events import description_from_json
    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store
    from dpsieve.session import filter_for_budget

    try:
        desc = description_from_json(json.loads(budget), name="budget")
        raw = None if typical is None else json.loads(typical)
        ts = None if raw is None else [
            description_from_json(t, desc.neighbouring.value, "typical")
            for t in (raw if isinstance(raw, list) else [raw])]
        flt = filter_for_budget(desc, typical=ts)
        declared = None if columns is None else json.loads(columns)
        if declared is not None and not isinstance(declared, list):
            raise _fail("--columns must be a JSON list of column declarations.")
    except json.JSONDecodeError as e:
        raise _fail(f"--budget, --typical or --columns is not JSON ({e}).") from None
    except DPError as e:
        raise _fail(str(e)) from None
    store = open_store(database_url, schema=schema)
    try:
        src = store.dataset(dataset)
        if path is not None:
            p = Path(path).expanduser().resolve()
            if not p.is_file():
                raise _fail(f"--path {path!r} is not a file.")
            src = {**(src or {}), "path": str(p)}
        if src is None:
            raise _fail(f"No data set named {dataset!r}; give --path to register it.")
        if infer_types and src.get("path"):
            from dpsieve.session.datasets import with_inferred

            declared = with_inferred(str(src["path"]), declared)
        if path is not None or privacy_unit is not None or declared is not None:
            src = {**src, **_schema_of(store, dataset, src, path is not None, privacy_unit,
                                       declared)}
            cols = src["schema"]["columns"]
            src["columns"] = [c["name"] for c in cols]
            src["column_types"] = {c["name"]: c["type"] for c in cols}
        # the budget first: refused once queries were admitted, before the record changes
        store.create_budget(dataset, flt, replace=True)
        store.register_dataset(dataset, {**src, "neighbouring": desc.neighbouring.value,
                                         "budget": desc.to_dict()})
        typer.echo(json.dumps({"dataset": dataset,
                               "remaining": store.load_filter(dataset).remaining().to_dict(),
                               **({"declared": declared} if infer_types else {})}))
        if src.get("path") and (path is not None or privacy_unit is not None):
            _warn_unit(str(src["path"]), src, src.get("privacy_unit"))
    except DPError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()


@app.command("schema")
def edit_schema(
    dataset: str = typer.Argument(..., help="The data set's name."),
    columns: str = typer.Option(
        ..., "--columns", help='The public column declarations, replacing the stored ones: a '
        'JSON list such as \'[{"name": "age", "type": "integer", "bounds": [0, 120]}]\' '
        "('[]' for none)."),
    privacy_unit: str | None = typer.Option(
        None, "--privacy-unit", help="The column identifying a person (default: the stored "
        "one)."),
    no_privacy_unit: bool = typer.Option(
        False, "--no-privacy-unit", help="One row per person (drop the stored unit)."),
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Edit a registered data set's declarations (and privacy unit) in place, before any
    query: checked against the file's metadata before anything is written; refused once
    its budget has paid for queries, unless nothing changes."""
    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact_url
    from dpsieve.session.data import file_columns
    from dpsieve.session.datasets import declaration_types, registered_schema, spent

    if no_privacy_unit and privacy_unit is not None:
        raise _fail("give --privacy-unit or --no-privacy-unit, not both.")
    try:
        declared = json.loads(columns)
    except json.JSONDecodeError as e:
        raise _fail(f"--columns is not JSON ({e}).") from None
    if not isinstance(declared, list):
        raise _fail("--columns must be a JSON list of column declarations.")
    store = open_store(database_url, schema=schema)
    try:
        old = store.dataset(dataset)
        if old is None:
            raise _fail(f"No data set named {dataset!r} in {redact_url(database_url)}.")
        if not old.get("path"):
            raise _fail(f"The data set {dataset!r} has no file (a Spark table): edit its "
                        "schema through the service.")
        unit = None if no_privacy_unit else (privacy_unit if privacy_unit is not None
                                             else old.get("privacy_unit"))
        try:
            table = file_columns(old["path"],  # metadata and declarations only
                                 declaration_types(declared))
        except DPError:
            raise
        except Exception as e:  # the reader's message is withheld: it may quote a cell
            raise _fail(f"{old['path']!r} could not be read as a table "
                        f"({type(e).__name__}).") from None
        new = registered_schema(lambda: table, declared, unit)
        if (new != old.get("schema") or unit != old.get("privacy_unit")) and spent(store,
                                                                                   dataset):
            raise _fail(f"The schema of {dataset!r} cannot change: its budget has already "
                        "paid for queries answered under the current declarations. Register "
                        "the data under a new name.")
        store.register_dataset(dataset, {**old, "schema": new, "privacy_unit": unit})
        typer.echo(json.dumps({"dataset": dataset, **new}))
    except DPError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()
