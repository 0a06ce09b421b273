"""``dpsieve serve``: run the HTTP service (SQLite by default, PostgreSQL by URL)."""

from __future__ import annotations

import math
from pathlib import Path

import typer

__all__ = ["register", "serve"]

#: Seconds a connection may take to send a request's headers (then it is closed); the
#: default of the setting ``header_timeout`` (``DPSIEVE_HEADER_TIMEOUT``).
HEADER_TIMEOUT = 10.0
#: Seconds a connection may take to send a request's body once its headers are complete;
#: the default of ``body_timeout`` (``DPSIEVE_BODY_TIMEOUT``).
BODY_TIMEOUT = 30.0

#: ``--trusted-proxy`` (a list option, so a module-level default).
PROXY = typer.Option(
    None, "--trusted-proxy", help="An address or network (repeatable; also "
    "DPSIEVE_TRUSTED_PROXIES, comma-separated) whose X-Forwarded-For is believed. None by "
    "default: the client is the connection's peer.")


def serve(
    database_url: str = typer.Option(
        "sqlite:///dpsieve.db", "--database-url", envvar="DPSIEVE_DATABASE_URL",
        help="sqlite:///<path> (default), postgresql://user@host/db, libpq key=value pairs, "
        "or memory:// (DPSIEVE_DATABASE_URL keeps a password out of the process list)."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="TCP port."),
    owner_key_file: str | None = typer.Option(
        None, "--owner-key-file", help="A file holding the data owner's API key (else "
        "DPSIEVE_OWNER_KEY; generated if neither is set). Never on the command line: "
        "every user of the machine can read it in the process list."),
    owner_key: str | None = typer.Option(None, "--owner-key", hidden=True),
    trusted_proxy: list[str] | None = PROXY,
    schema: str = typer.Option("dpsieve", help="PostgreSQL schema for the ledger."),
    example: bool = typer.Option(
        False, "--example", help="Register the bundled diabetes data set and a demo analyst."),
) -> None:
    """Serve the dpsieve HTTP API (docs at /docs, budget page at /ui)."""
    import os

    import uvicorn

    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact_url
    from dpsieve.service import Settings, create_app
    from dpsieve.service.auth import new_key, owner_key_problem
    from dpsieve.service.example import setup_example, usage

    if owner_key is not None:
        raise typer.BadParameter("the owner key is not taken on the command line (every user "
                                 "of the machine can read it in the process list): set "
                                 "DPSIEVE_OWNER_KEY or give --owner-key-file.",
                                 param_hint="--owner-key")
    given = _owner_key(None if owner_key_file is None else Path(owner_key_file),
                       os.environ.get("DPSIEVE_OWNER_KEY") or None)
    generated = given is None
    owner = given or new_key()
    weak = owner_key_problem(owner)
    if weak is not None:  # refused at start-up: the owner key must be long and random
        raise typer.BadParameter(f"the owner key is too weak: {weak}. Omit it to have one "
                                 "generated.", param_hint="--owner-key-file")
    settings = Settings.from_env(database_url=database_url, owner_key=owner, schema=schema)
    proxies = tuple(trusted_proxy or ()) or settings.trusted_proxies
    for name, value in (("DPSIEVE_HEADER_TIMEOUT", settings.header_timeout),
                        ("DPSIEVE_BODY_TIMEOUT", settings.body_timeout)):
        if not (math.isfinite(value) and 0 < value <= 3600):
            raise typer.BadParameter(f"{name} must be a number of seconds in (0, 3600]; "
                                     f"got {value!r}", param_hint=name)
    store = open_store(database_url, schema=schema)
    base = f"http://{host}:{port}"
    typer.echo(f"dpsieve: ledger {redact_url(database_url)}; serving on {base}")
    if generated:
        typer.echo(f"Owner key (generated, shown once): {owner}")
    if example:
        info = setup_example(store)
        typer.echo(f"Example data set {info['dataset']!r} registered for analyst 'demo'.")
        typer.echo(usage(base, info["api_key"]))
    app = create_app(settings, store=store)  # replays and checks every budget's log first
    altered = getattr(store, "altered", None)
    for name, problem in (altered() if callable(altered) else {}).items():
        typer.echo(f"dpsieve: budget {name!r} fails verification and will not be served: "
                   f"{problem}", err=True)
    import logging

    access = logging.getLogger("dpsieve.service.access")  # one JSON line per request
    access.setLevel(logging.INFO)
    access.addHandler(logging.StreamHandler())
    access.propagate = False
    from dpsieve.service.timeouts import request_timeout_protocol

    # idle kept-alive connections close after 5 s; a connection that has not sent complete
    # request headers within settings.header_timeout seconds, or then its body within
    # settings.body_timeout seconds, is closed too (half-open and trickling connections)
    # proxy headers only from the proxies the owner named: otherwise any client could
    # choose the address its failed attempts are counted under
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=5,
                http=request_timeout_protocol(settings.header_timeout,
                                                 settings.body_timeout),
                proxy_headers=bool(proxies), forwarded_allow_ips=list(proxies) or None)


def _owner_key(path: Path | None, env: str | None) -> str | None:
    """The owner key from ``--owner-key-file`` (stripped of surrounding blanks), else
    from the environment, else None."""
    if path is None:
        return env
    try:
        key = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise typer.BadParameter(f"cannot read the owner key from {str(path)!r} "
                                 f"({type(e).__name__}).", param_hint="--owner-key-file"
                                 ) from None
    if not key:
        raise typer.BadParameter(f"{str(path)!r} holds no key.", param_hint="--owner-key-file")
    return key


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``dpsieve`` command."""
    app.command("serve")(serve)
