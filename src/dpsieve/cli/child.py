"""``dpsieve child open|ask|step|list|grant``: interactive children kept in a ledger, for the
data steward (who holds the data: the value of each question is given here).

``open`` charges the child's declared privacy to the data set's budget and stores the child
in one transaction; ``ask`` (a sparse vector's question or an answer cache's query) and
``step`` (a continual counter's new events) run one operation on the stored child and print
the answer once its new state is stored. Every answer is in the budget's audit log;
``list`` shows what an analyst may see (never a child's secret).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import typer

__all__ = ["app"]

app = typer.Typer(help="Interactive children (sparse vector, continual counter, answer "
                  "cache) in a ledger.", no_args_is_help=True)

DB = typer.Option("sqlite:///dpsieve.db", "--database-url", envvar="DPSIEVE_DATABASE_URL",
                  help="sqlite:///<path> or postgresql://...")
SCHEMA = typer.Option("dpsieve", help="PostgreSQL schema of the ledger.")
KEY = typer.Option(None, "--key", help="Idempotency key (default: a fresh one). A retry "
                   "with the same key is answered once and charged once.")
PRINCIPAL = typer.Option("", "--principal", help="Who acts (the owner, or a granted "
                         "analyst; empty: the steward).")
KINDS = ("sparse_vector", "counter", "cache")


def _fail(message: str) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(code=2)


def _child(kind: str, spec: dict[str, Any]) -> Any:
    """A fresh child of ``kind`` from its spec's JSON (secure source)."""
    from dpsieve.interactive import (
        AnswerCache,
        CacheSpec,
        ContinualCounter,
        CounterSpec,
        SparseVector,
    )
    from dpsieve.interactive.sparse_vector import spec_from_dict

    if kind == "sparse_vector":
        return SparseVector.open(spec_from_dict(spec))
    if kind == "counter":
        body = dict(spec)
        mu = body.pop("mu", None)
        cs = CounterSpec.for_mu(float(mu), **body) if mu is not None else CounterSpec(**body)
        return ContinualCounter(cs)
    if kind == "cache":
        return AnswerCache.open(CacheSpec(**spec))
    raise _fail(f"--kind must be one of {', '.join(KINDS)}; got {kind!r}.")


def _no_blocks(store: Any, dataset: str) -> None:
    """A data set with blocks has no children (docs/proofs/blocks.md §6): refused before
    anything is written."""
    from dpsieve.session.block_budgets import CHILDREN_ON_BLOCKS
    from dpsieve.session.blocks_declared import has_blocks

    if has_blocks(store, dataset):
        store.close()
        raise _fail(CHILDREN_ON_BLOCKS)


def _run(fn: Any) -> Any:
    from dpsieve.errors import DPError

    try:
        return fn()
    except (DPError, TypeError, json.JSONDecodeError) as e:
        raise _fail(str(e)) from None


@app.command("open")
def open_(
    dataset: str = typer.Argument(..., help="The data set whose budget is charged."),
    child_id: str = typer.Argument(..., help="A name for the child (unique per data set)."),
    kind: str = typer.Option(..., "--kind", help="sparse_vector, counter or cache."),
    spec: str = typer.Option(..., "--spec", help='The child\'s parameters as JSON, e.g. '
                             '\'{"noise":"laplace","eps":0.5,"positives":3}\', '
                             '\'{"mu":1.0}\' for a counter.'),
    owner: str = typer.Option("", "--owner", help="The analyst who owns the child."),
    key: str | None = KEY,
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Open a child: its declared privacy is charged to the budget in the same
    transaction that stores it (refused: nothing exists, nothing is charged)."""
    from dpsieve.interactive.store import as_child_store, open_child
    from dpsieve.ledger import open_store

    child = _run(lambda: _child(kind, json.loads(spec)))
    store = as_child_store(open_store(database_url, schema=schema))
    _no_blocks(store, dataset)
    try:
        out = _run(lambda: open_child(store, dataset, child_id, child,
                                      key=key or uuid.uuid4().hex, principal=owner))
    finally:
        store.close()
    d = out.decision
    typer.echo(json.dumps({"dataset": dataset, "child": child_id, "admitted": d.admitted,
                           "replayed": out.replayed, "declared": child.declared().to_dict(),
                           "reason": d.reason, "remaining": d.remaining.to_dict()}))
    if not d.admitted:
        raise typer.Exit(code=2)


def _act(dataset: str, child_id: str, request: dict[str, Any], value: Any, key: str | None,
         principal: str, database_url: str, schema: str) -> None:
    from dpsieve.interactive.store import as_child_store, ask_child
    from dpsieve.ledger import open_store

    store = as_child_store(open_store(database_url, schema=schema))
    try:
        answer = _run(lambda: ask_child(store, dataset, child_id, request, value,
                                        key=key or uuid.uuid4().hex, principal=principal))
    finally:
        store.close()
    typer.echo(json.dumps({"dataset": dataset, "child": child_id, **answer}))


@app.command("ask")
def ask(
    dataset: str = typer.Argument(...),
    child_id: str = typer.Argument(...),
    value: float = typer.Option(..., "--value", help="The true answer on the data (private: "
                                "never stored)."),
    threshold: float | None = typer.Option(None, "--threshold", help="A sparse vector "
                                           "question's public threshold."),
    query: str | None = typer.Option(None, "--query", help="An answer cache's query: a JSON "
                                     "list of coefficients in [0, 1] over its domain."),
    key: str | None = KEY,
    principal: str = PRINCIPAL,
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Ask a sparse vector (--threshold) or an answer cache (--query) one question."""
    if (threshold is None) == (query is None):
        raise _fail("give exactly one of --threshold (sparse vector) and --query (cache).")
    request: dict[str, Any] = {"op": "ask"}
    if threshold is not None:
        request["threshold"] = threshold
    else:
        request["query"] = _run(lambda: json.loads(query or ""))
    _act(dataset, child_id, request, value, key, principal, database_url, schema)


@app.command("step")
def step(
    dataset: str = typer.Argument(...),
    child_id: str = typer.Argument(...),
    count: int = typer.Option(..., "--count", min=0, help="Events in this time step "
                              "(private: never stored apart from the running count)."),
    key: str | None = KEY,
    principal: str = PRINCIPAL,
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Append one time step to a continual counter and print its release."""
    _act(dataset, child_id, {"op": "step"}, count, key, principal, database_url, schema)


@app.command("list")
def list_(
    dataset: str = typer.Argument(...),
    principal: str = PRINCIPAL,
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """The children of a data set the principal may question (public views, JSON lines)."""
    from dpsieve.interactive.store import as_child_store
    from dpsieve.ledger import open_store

    store = as_child_store(open_store(database_url, schema=schema))
    try:
        rows = _run(lambda: store.children(dataset, principal))
    finally:
        store.close()
    for r in rows:
        typer.echo(json.dumps({"child": r.child_id, "owner": r.owner, "kind": r.kind,
                               "declared": r.declared, "public": r.public,
                               "version": r.version}))


@app.command("grant")
def grant(
    dataset: str = typer.Argument(...),
    child_id: str = typer.Argument(...),
    analyst: str = typer.Argument(..., help="The analyst who may question the child."),
    by: str = typer.Option("", "--by", help="The owner granting (empty: the steward)."),
    database_url: str = DB,
    schema: str = SCHEMA,
) -> None:
    """Let another analyst question a child."""
    from dpsieve.interactive.store import as_child_store
    from dpsieve.ledger import open_store

    store = as_child_store(open_store(database_url, schema=schema))
    try:
        _run(lambda: store.grant_child(dataset, child_id, analyst, by=by))
    finally:
        store.close()
    typer.echo(json.dumps({"dataset": dataset, "child": child_id, "granted": analyst}))
