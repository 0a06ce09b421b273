"""``dpsieve serve``: run the HTTP service (SQLite by default, PostgreSQL by URL)."""

from __future__ import annotations

import math

import typer

__all__ = ["register", "serve"]

#: Seconds a connection may take to send a request's headers (then it is closed); the
#: default of the setting ``header_timeout`` (``DPSIEVE_HEADER_TIMEOUT``).
HEADER_TIMEOUT = 10.0
#: Seconds a connection may take to send a request's body once its headers are complete;
#: the default of ``body_timeout`` (``DPSIEVE_BODY_TIMEOUT``).
BODY_TIMEOUT = 30.0


def serve(
    database_url: str = typer.Option(
        "sqlite:///dpsieve.db", "--database-url", envvar="DPSIEVE_DATABASE_URL",
        help="sqlite:///<path> (default), postgresql://user@host/db, or memory://."),
    host: str = typer.Option("127.0.0.1", help="Interface to bind."),
    port: int = typer.Option(8000, help="TCP port."),
    owner_key: str | None = typer.Option(
        None, envvar="DPSIEVE_OWNER_KEY", help="The data owner's API key (generated if unset)."),
    schema: str = typer.Option("dpsieve", help="PostgreSQL schema for the ledger."),
    example: bool = typer.Option(
        False, "--example", help="Register the bundled diabetes data set and a demo analyst."),
) -> None:
    """Serve the dpsieve HTTP API (docs at /docs, budget page at /ui)."""
    import uvicorn

    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact_url
    from dpsieve.service import Settings, create_app
    from dpsieve.service.auth import new_key, owner_key_problem
    from dpsieve.service.example import setup_example, usage

    generated = owner_key is None
    owner = owner_key or new_key()
    weak = owner_key_problem(owner)
    if weak is not None:  # refused at start-up: the owner key must be long and random
        raise typer.BadParameter(f"the owner key is too weak: {weak}. Omit --owner-key to "
                                 "have one generated.", param_hint="--owner-key")
    settings = Settings.from_env(database_url=database_url, owner_key=owner, schema=schema)
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
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=5,
                http=request_timeout_protocol(settings.header_timeout,
                                                 settings.body_timeout))


def register(app: typer.Typer) -> None:
    """Add ``serve`` to the ``dpsieve`` command."""
    app.command("serve")(serve)
