"""``dpsieve blocks declare|add|quota|group|show|schedule|queue|status``: budgets over time
in a ledger directly (the steward's side, and the queue; analysts query with ``dpsieve
query``, which charges a data set with blocks to every block its ``where`` may read and to
the analyst's quotas).

A data set with blocks has a budget per block instead of one of its own: ``declare``
registers it (its file and public schema, as ``dpsieve budget set`` does) with a block
column and the budget each block arrives with; ``add`` makes blocks arrive (each with a
fresh budget); ``quota`` and ``group`` set analysts' and groups' quotas; ``show`` prints
each block's and each quota's budget, unlocking and the queue; ``schedule`` runs a pass
over the queue; ``queue`` queues a query (principal ``cli``, as ``dpsieve query``) and
``status`` gives its position and reason, or its answer once admitted
(docs/proofs/blocks.md). With ``--url`` (and ``--api-key``) each command acts on a
running service instead, as that key (:mod:`dpsieve.cli.blocks_remote`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dpsieve.cli.budget import DB, SCHEMA, _fail, _schema_of

if TYPE_CHECKING:
    from dpsieve.ledger import BudgetStore

__all__ = ["app"]

app = typer.Typer(help="Data blocks, quotas and the queue (budgets over time) in a ledger.",
                  no_args_is_help=True)

JSON_OUT = typer.Option(False, "--json", help="Print one JSON object.")
URL = typer.Option(None, "--url", help="Act on a running service (else the ledger): its "
                   "block routes, as the key given (docs/service.md).")
API_KEY = typer.Option(None, "--api-key", envvar="DPSIEVE_API_KEY", help="Key for --url.")


def _remote(url: str | None, api_key: str | None) -> Any:
    """The service's client for ``--url`` (None: act on the ledger)."""
    if url is None:
        return None
    from dpsieve.cli.blocks_remote import Remote, check_key

    check_key(url, api_key)
    return Remote(url, str(api_key))


def _json(text: str | None, option: str) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _fail(f"{option} is not JSON ({e}).") from None


@contextmanager
def _ledger(database_url: str, schema: str) -> Iterator[BudgetStore]:
    """The ledger a local command acts on, closed after it; a refusal (``DPError``) is the
    command's one-line error."""
    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store

    store = open_store(database_url, schema=schema)
    try:
        yield store
    except DPError as e:
        raise _fail(str(e)) from None
    finally:
        store.close()


def _session(store: Any, dataset: str, principal: str = "owner") -> Any:
    from dpsieve.session.blocks_declared import block_session_for, declared_blocks

    src = store.dataset(dataset)
    declared = None if src is None else declared_blocks(store, dataset)  # read once
    if src is None or declared is None:
        raise _fail(f"The data set {dataset!r} declares no blocks (dpsieve blocks declare).")
    return block_session_for(src, src.get("path"), store, dataset, principal,
                             declared=declared)


@app.command("declare")
def declare(
    dataset: str = typer.Argument(..., help="The data set's name."),
    column: str = typer.Option(..., help="The block column (integer or string): a day, a "
                               "month, a partition key."),
    budget: str = typer.Option(..., help='Each block\'s budget, e.g. \'{"type":"approx",'
                               '"eps":10,"delta":1e-7}\'.'),
    unlock: str | None = typer.Option(None, help='Unlocking, e.g. \'{"type":"periodic",'
                                      '"fraction":0.1,"period":86400}\' or \'{"type":'
                                      '"arrivals","n":10,"by":"analyst"}\' (default: none).'),
    scheduler: str = typer.Option("dpf", help="dpf, dpack or fcfs (the queue's order)."),
    recompute: int = typer.Option(0, help="dpack only: re-rank the waiting requests after "
                                  "every this many admissions within a pass (0: rank once)."),
    unit_in_one_block: bool = typer.Option(
        False, "--unit-in-one-block", help="State that every privacy unit's rows lie in one "
        "block: each unit is then protected at its block's budget."),
    path: str | None = typer.Option(None, help="Register the data set from this CSV/Parquet "
                                    "(with --url: a path on the server)."),
    privacy_unit: str | None = typer.Option(None, "--privacy-unit",
                                            help="The column identifying a person."),
    columns: str | None = typer.Option(None, "--columns",
                                       help="Public column declarations (a JSON list)."),
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """Declare a data set's blocks (registering its file and public schema with --path):
    checked in full before anything is written."""
    from pathlib import Path

    from dpsieve.blocks.spec import block_spec_from_dict
    from dpsieve.ledger.base import has_budget
    from dpsieve.queries.blocks import BLOCK_TYPES
    from dpsieve.queries.schema import Schema
    from dpsieve.session.block_budgets import block_budget_filter
    from dpsieve.session.blocks_declared import check_redeclaration

    spec_in: dict[str, Any] = {"column": column, "budget": _json(budget, "--budget"),
                               "scheduler": scheduler, "unit_in_one_block": unit_in_one_block}
    if recompute:
        spec_in["recompute"] = recompute
    if unlock is not None:
        spec_in["unlock"] = _json(unlock, "--unlock")
    declared = _json(columns, "--columns")
    remote = _remote(url, api_key)
    if remote is not None:  # the service checks it in full before anything is written
        typer.echo(json.dumps(remote.declare(dataset, spec_in, path, privacy_unit,
                                             declared)))
        return
    with _ledger(database_url, schema) as store:
        spec = block_spec_from_dict(spec_in)
        block_budget_filter(spec)
        src = store.dataset(dataset)
        if path is not None:
            p = Path(path).expanduser().resolve()
            if not p.is_file():
                raise _fail(f"--path {path!r} is not a file.")
            src = {**(src or {}), "path": str(p)}
        if src is None:
            raise _fail(f"No data set named {dataset!r}; give --path to register it.")
        if path is not None or privacy_unit is not None or declared is not None:
            src = {**src, **_schema_of(store, dataset, src, path is not None, privacy_unit,
                                       declared)}
            cols = src["schema"]["columns"]
            src["columns"] = [c["name"] for c in cols]
            src["column_types"] = {c["name"]: c["type"] for c in cols}
        if not isinstance(src.get("schema"), dict):
            raise _fail(f"The data set {dataset!r} has no public schema: give --path.")
        col = {c.name: c for c in Schema.from_dict(src["schema"]).columns}.get(column)
        if col is None or col.type not in BLOCK_TYPES:
            raise _fail(f"--column {column!r}: a column of the data set of type integer or "
                        "string is needed.")
        if has_budget(store, dataset):
            raise _fail(f"The data set {dataset!r} has a budget of its own; a data set with "
                        "blocks has a budget per block (register it under a new name).")
        check_redeclaration(store, dataset, spec.to_dict())  # before the registration
        store.register_dataset(dataset, {**src, "neighbouring": spec.budget.get(
            "neighbouring", "add_remove")})
        store.declare_blocks(dataset, spec.to_dict())  # type: ignore[attr-defined]
    typer.echo(json.dumps({"dataset": dataset, "blocks": spec.to_dict()}))


@app.command("add")
def add(
    dataset: Annotated[str, typer.Argument(help="The data set's name.")],
    values: Annotated[list[str], typer.Argument(help="Block values that arrive (each gets "
                                                "a fresh budget); integers for an integer "
                                                "column.")],
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """New blocks, each with a fresh budget and the declaration's unlocking."""

    remote = _remote(url, api_key)
    if remote is not None:
        typer.echo(json.dumps(remote.add(dataset, values)))
        return

    with _ledger(database_url, schema) as store:
        s = _session(store, dataset)
        integer = s.column().type.value == "integer"
        out = []
        for v in values:
            try:
                value: Any = int(v) if integer else v
            except ValueError:
                raise _fail(f"block {v!r}: an integer is needed (the block column "
                            f"{s.spec.column!r} is an integer column).") from None
            out.append(s.add_block(value).value)
    typer.echo(json.dumps({"dataset": dataset, "added": out}))


@app.command("quota")
def quota(
    dataset: str = typer.Argument(..., help="The data set's name."),
    budget: str = typer.Option(..., help="The quota, a privacy description."),
    analyst: str | None = typer.Option(None, help="The analyst whose quota this is."),
    group: str | None = typer.Option(None, help="The group whose quota this is."),
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """Set an analyst's or a group's quota on a data set with blocks."""

    if (analyst is None) == (group is None):
        raise _fail("give exactly one of --analyst and --group.")
    desc = _json(budget, "--budget")
    remote = _remote(url, api_key)
    if remote is not None:
        typer.echo(json.dumps(remote.quota(dataset, "analyst" if analyst else "group",
                                           str(analyst or group), desc)))
        return
    with _ledger(database_url, schema) as store:
        rec = _session(store, dataset).set_quota(
            "analyst" if analyst else "group", str(analyst or group), desc)
    typer.echo(json.dumps({"dataset": dataset, "scope": rec.scope, "name": rec.name,
                           "budget": desc}))


@app.command("group")
def group(
    name: Annotated[str, typer.Argument(help="The group's name.")],
    members: Annotated[list[str], typer.Argument(help="Its members (analysts), replacing "
                                                 "the previous list.")],
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """Set a group's members (their queries are charged to the group's quotas)."""

    remote = _remote(url, api_key)
    if remote is not None:
        typer.echo(json.dumps(remote.group(name, members)))
        return

    with _ledger(database_url, schema) as store:
        store.set_group(name, members)  # type: ignore[attr-defined]
    typer.echo(json.dumps({"group": name, "members": sorted(set(members))}))


@app.command("show")
def show(
    dataset: str = typer.Argument(..., help="The data set's name."),
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
    as_json: bool = JSON_OUT,
) -> None:
    """Each block's and each quota's budget, unlocking, and the queue."""

    remote = _remote(url, api_key)
    if remote is not None:  # as the key sees it: an analyst's quotas and requests only
        view = remote.show(dataset)
    else:
        with _ledger(database_url, schema) as store:
            view = _session(store, dataset).view()
    if as_json:
        typer.echo(json.dumps(view, default=str))
        return
    every = view.get("recompute") or 0
    again = f" (re-ranked every {every} admissions)" if every else ""
    typer.echo(f"{dataset}: blocks by {view['column']!r}, scheduler {view['scheduler']}"
               f"{again}; {view['unlock']}.\n{view['guarantee']}")
    for b in view["blocks"]:
        typer.echo(f"  block {json.dumps(b['block'])}: {b['text']}; {b['unlocked_text']} "
                   f"unlocked, {b['used_text']} used; {b['admitted']} queries")
    for q in view["quotas"]:
        typer.echo(f"  {q['label']}: {q['text']}")
    for h in view.get("history") or []:  # each query with the blocks it was charged to
        typer.echo(f"  query {h['key'] or '(another analyst)'}: {h['charged']} on blocks "
                   + ", ".join(json.dumps(b) for b in h["blocks"]))
    for r in view["queue"]:
        typer.echo(f"  queued {r['key']}: {r['status']}, {r['reason']}")


@app.command("schedule")
def schedule(
    dataset: str = typer.Argument(..., help="The data set's name."),
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """Run one scheduling pass over the data set's queue (admit what fits, time out what
    waited too long)."""

    remote = _remote(url, api_key)
    if remote is not None:
        typer.echo(json.dumps(remote.schedule(dataset)))
        return

    with _ledger(database_url, schema) as store:
        changed = _session(store, dataset).schedule()
    typer.echo(json.dumps({"dataset": dataset, "changed": changed}))


def _outcome(out: Any) -> dict[str, Any]:
    from dpsieve.ledger.blockset import PendingRecord

    if isinstance(out, PendingRecord):
        return {**out.to_dict(public=False), "key": out.key.removeprefix("cli/")}
    return {"status": "admitted", **out.to_dict()}


@app.command("queue")
def queue(
    dataset: Annotated[str, typer.Argument(help="The data set's name.")],
    spec: Annotated[str, typer.Argument(help="The query (a plan or a shape) as JSON.")],
    key: Annotated[str, typer.Option(help="The request's key (to ask for it later).")],
    wait: Annotated[float, typer.Option(help="How long it may wait for budget (s).")
                    ] = 3600.0,
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """Queue a query until budget for it is unlocked: its answer if a pass admits it now,
    else its position and the reason it waits (nothing is charged until it is admitted)."""

    query = _json(spec, "QUERY")
    remote = _remote(url, api_key)
    if remote is not None:  # queued as the key's analyst, under --key
        typer.echo(json.dumps(remote.queue(dataset, query, key, wait), default=str))
        return
    with _ledger(database_url, schema) as store:
        out = _session(store, dataset, "cli").submit(query, wait=wait, key=f"cli/{key}")
    typer.echo(json.dumps(_outcome(out), default=str))


@app.command("status")
def status(
    dataset: Annotated[str, typer.Argument(help="The data set's name.")],
    key: Annotated[str, typer.Argument(help="The key the query was queued with.")],
    database_url: str = DB,
    schema: str = SCHEMA,
    url: str | None = URL,
    api_key: str | None = API_KEY,
) -> None:
    """A queued query after a scheduling pass: its answer once admitted, else its status,
    position and reason."""

    remote = _remote(url, api_key)
    if remote is not None:
        typer.echo(json.dumps(remote.status(dataset, key), default=str))
        return

    with _ledger(database_url, schema) as store:
        out = _session(store, dataset, "cli").status(f"cli/{key}")
    typer.echo(json.dumps(_outcome(out), default=str))
