"""``dpsieve keys list|add|revoke``: analysts' API keys in a ledger, directly.

The same operations as ``GET/POST /v1/analysts/{name}/keys`` and ``DELETE
/v1/analysts/{name}/keys/{key_id}``, for an operator with access to the ledger. Rotation:
``add`` a key, hand it over, then ``revoke`` the old one. A revocation is committed before
the command returns: a running service admits no request with that key afterwards (the
key is checked again inside each spend's transaction).
"""

from __future__ import annotations

import json
from typing import Any

import typer

__all__ = ["app"]

app = typer.Typer(help="List, add (rotate) or revoke analysts' API keys in a ledger.",
                  no_args_is_help=True)

DB = typer.Option("sqlite:///dpsieve.db", "--database-url", envvar="DPSIEVE_DATABASE_URL",
                  help="sqlite:///<path> or postgresql://...")
SCHEMA = typer.Option("dpsieve", help="PostgreSQL schema of the ledger.")


def _fail(message: str, code: int = 2) -> typer.Exit:
    typer.echo(f"Error: {message}", err=True)
    return typer.Exit(code=code)


def _keys(store: Any, analyst: str) -> list[tuple[str, str]]:
    keys = store.principal_keys(analyst) if analyst != "owner" else None
    if keys is None:
        raise _fail(f"No analyst named {analyst!r} in this ledger.", 1)
    return list(keys)


def _open(database_url: str, schema: str) -> Any:
    from dpsieve.errors import DPError
    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact

    try:
        store = open_store(database_url, schema=schema)
    except DPError as e:
        raise _fail(redact(str(e)), 1) from None
    if not hasattr(store, "revoke_key"):
        store.close()
        raise _fail("this ledger keeps no API keys (use sqlite:// or postgresql://).")
    return store


@app.command("list")
def list_keys(analyst: str = typer.Argument(..., help="The analyst's name."),
              database_url: str = DB, schema: str = SCHEMA) -> None:
    """The analyst's keys: identifiers and creation times (a key is shown only once)."""
    from dpsieve.service.auth import key_id

    store = _open(database_url, schema)
    try:
        for h, ts in _keys(store, analyst):
            typer.echo(json.dumps({"analyst": analyst, "key_id": key_id(h), "created_at": ts}))
    finally:
        store.close()


@app.command("add")
def add_key(analyst: str = typer.Argument(..., help="The analyst's name (must exist)."),
            database_url: str = DB, schema: str = SCHEMA) -> None:
    """A new key for an existing analyst, printed once (rotation: add, hand over, revoke)."""
    from dpsieve.service.auth import hash_key, key_id, new_key

    store = _open(database_url, schema)
    try:
        _keys(store, analyst)
        key = new_key()
        store.add_principal(analyst, "analyst", hash_key(key))
        typer.echo(json.dumps({"analyst": analyst, "api_key": key,
                               "key_id": key_id(hash_key(key))}))
    finally:
        store.close()


@app.command("revoke")
def revoke_key(analyst: str = typer.Argument(..., help="The analyst's name."),
               key: str = typer.Argument(..., metavar="KEY_ID",
                                         help="The key's identifier (16 hex digits)."),
               database_url: str = DB, schema: str = SCHEMA) -> None:
    """Revoke a key: once this returns, no request with it is admitted."""
    import re

    if not re.fullmatch(r"[0-9a-f]{16}", key):
        raise _fail(f"KEY_ID must be 16 lower-case hex digits (as 'keys list' shows). "
                    f"Got {key!r} instead.")
    store = _open(database_url, schema)
    try:
        _keys(store, analyst)
        if not store.revoke_key(analyst, key):
            raise _fail(f"Analyst {analyst!r} has no key {key!r}.", 1)
        typer.echo(json.dumps({"analyst": analyst, "revoked": key}))
    finally:
        store.close()
