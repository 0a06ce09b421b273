"""``dpsieve query``: run private queries, locally on a ledger or through the service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["query", "register"]


def _local(dataset: str, specs: list[dict[str, Any]], database_url: str, schema: str,
           key: str | None, spark: str | None = None,
           spark_table: str | None = None, preview: bool = False
           ) -> Iterator[dict[str, Any]]:
    """Each query's answer, refusal or error, as soon as it is known (a generator: an
    answer already paid for is printed before a later query can fail); with ``preview``
    each query's preview instead (nothing spent or logged)."""
    from dpsieve.errors import (
        BudgetExceededError,
        DPError,
        IncompatiblePrivacyError,
        ValidationError,
    )
    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact_url
    from dpsieve.queries.requests import request_from_json
    from dpsieve.session import load_frame
    from dpsieve.session.blocks_declared import block_session_for, declared_blocks
    from dpsieve.session.datasets import session_for

    store = open_store(database_url, schema=schema)
    try:
        src = store.dataset(dataset)
        if src is None:
            raise typer.BadParameter(
                f"No data set named {dataset!r} in {redact_url(database_url)}.")
        data: Any = src.get("path")
        if spark is not None:  # the rows stay on the executors; query plans only
            from dpsieve.queries.engines.spark_connect import open_spark, spark_source

            data = spark_source(spark_table or str(src.get("spark_table") or data),
                                open_spark(spark))
        elif data is None:
            raise typer.BadParameter(f"The data set {dataset!r} is the Spark table "
                                     f"{src.get('spark_table')!r}: give --spark URL.")
        # plans and the one-aggregation shapes run inside the engine (DuckDB for a file),
        # checked against the registered public schema and its privacy unit
        declared = declared_blocks(store, dataset)  # read once: passed on
        session = session_for(src, data, store, dataset, "cli", None, load_frame) \
            if declared is None else block_session_for(  # a budget per block
                src, data, store, dataset, "cli", declared=declared)

        for i, spec in _progress(specs):
            k = f"{key}-{i}" if key and len(specs) > 1 else key
            try:
                typed = request_from_json(spec, session.neighbouring)  # JSON mapped once
                if preview:
                    yield {"dataset": dataset, "preview": True, **session.preview(typed)}
                    continue
                yield session.execute(typed, key=f"cli/{k}" if k else None).to_dict()
            except BudgetExceededError as e:
                left = None if e.remaining is None else e.remaining.to_dict()  # JSON here
                yield {"refused": str(e), "remaining": left, "summary": e.summary}
            except IncompatiblePrivacyError as e:  # as the service's 422: more budget won't help
                yield {"error": "incompatible_privacy", "message": str(e), "fits": e.fits}
            except ValidationError as e:  # this query is refused before any spend; go on
                yield {"error": "invalid_parameter", "message": str(e),
                       "parameter": e.parameter}
            except DPError as e:
                yield {"error": type(e).__name__, "message": str(e)}
    finally:
        store.close()


def _schema(dataset: str, url: str | None, api_key: str | None, database_url: str,
            schema: str) -> dict[str, Any]:
    """The data set's public schema: from the service (``GET .../schema``) or the ledger's
    registry (column names and types, declared categories and bounds, privacy unit)."""
    if url is not None:
        import httpx

        r = httpx.get(f"{url.rstrip('/')}/v1/datasets/{dataset}/schema", timeout=60,
                      headers={"Authorization": f"Bearer {api_key}"})
        body = r.json() if r.headers.get("content-type", "").startswith(
            "application/json") else {"message": r.text[:300]}
        if r.status_code >= 400:
            raise typer.BadParameter(f"the service answered {r.status_code}: "
                                     f"{body.get('message', '')}")
        return dict(body)
    from dpsieve.ledger import open_store
    from dpsieve.ledger.redact import redact_url
    from dpsieve.session.datasets import stored_schema

    store = open_store(database_url, schema=schema)
    try:
        src = store.dataset(dataset)
    finally:
        store.close()
    if src is None:
        raise typer.BadParameter(f"No data set named {dataset!r} in {redact_url(database_url)}.")
    return {"dataset": dataset, **stored_schema(src).to_dict(),
            "neighbouring": src.get("neighbouring", "add_remove")}


def _remote(dataset: str, specs: list[dict[str, Any]], url: str, api_key: str,
            key: str | None, preview: bool = False) -> Iterator[dict[str, Any]]:
    """Each query's answer (its preview with ``preview``) or the service's error, as soon
    as it arrives."""
    import httpx

    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {api_key}"},
                      timeout=60) as client:
        for i, spec in _progress(specs):
            k = f"{key}-{i}" if key and len(specs) > 1 else key
            r = client.post(f"/v1/datasets/{dataset}/queries", json=spec,
                            params={"preview": "true"} if preview else None,
                            headers={"Idempotency-Key": k} if k and not preview else {})
            try:
                body = r.json()
            except ValueError:
                body = {"error": "http_error", "message": r.text[:300]}
            if r.status_code >= 400:
                body = {"status": r.status_code, **(body if isinstance(body, dict) else {
                    "error": "http_error", "message": str(body)[:300]})}
            yield body


def _failure(r: dict[str, Any]) -> str | None:
    """Why a result is not an answer (a refusal or a service error), or None."""
    if "refused" in r:
        return str(r["refused"])
    if "status" in r:
        return f"the service answered {r['status']} {r.get('error', '')}: {r.get('message', '')}"
    if "error" in r:
        return f"{r['error']}: {r.get('message', '')}"
    return None


def _progress(specs: list[dict[str, Any]]) -> Any:
    if len(specs) < 5:
        return enumerate(specs)
    from rich.progress import track

    return track(list(enumerate(specs)), description="queries", transient=True)


def query(
    dataset: str = typer.Argument(..., help="The data set's name."),
    spec: str | None = typer.Argument(
        None, help='A query plan, e.g. \'{"type":"query","privacy":{"type":"pure","eps":0.1},'
        '"aggregations":[{"type":"count"}],"group_by":["city"],"keys":[["a"],["b"]]}\', or a '
        'one-query shape such as \'{"type":"count","privacy":{"type":"pure","eps":0.1}}\' '
        '(docs/queries.md).'),
    file: Annotated[Path | None, typer.Option(
        "--file", help="Run every query of a JSON-lines file.")] = None,
    key: str | None = typer.Option(None, "--idempotency-key", help="Retry-safe request key."),
    url: str | None = typer.Option(None, help="Query a running service (else the ledger)."),
    api_key: str | None = typer.Option(None, envvar="DPSIEVE_API_KEY", help="Key for --url."),
    database_url: str = typer.Option("sqlite:///dpsieve.db", "--database-url",
                                     envvar="DPSIEVE_DATABASE_URL"),
    schema: str = typer.Option(
        "dpsieve", "--ledger-schema", help="PostgreSQL schema of the ledger (--schema in "
        "the other commands; here --schema prints the data set's schema)."),
    spark: str | None = typer.Option(
        None, "--spark", help="Run on Spark: a master URL (local[2], spark://host:7077) or a "
        "Spark Connect URL (sc://host:15002). The data set's path is read by Spark, or "
        "--spark-table names a catalog table. Query plans only."),
    spark_table: str | None = typer.Option(
        None, "--spark-table", help="With --spark: a table of the Spark catalog to query "
        "instead of the data set's registered path."),
    show_schema: bool = typer.Option(
        False, "--schema", help="Print the data set's public schema (column names and types, "
        "declared categories and bounds, privacy unit; never a value) and exit."),
    preview: bool = typer.Option(
        False, "--preview", help="Print what each query would cost (the charge, whether the "
        "budget admits it, the budget after it) and each released number's noise, for free: "
        "nothing is read, spent or logged."),
) -> None:
    """Run a private query (or a file of them) and print the answers as JSON lines.

    A query is a plan or a one-query shape, checked against the data set's public schema
    (``--schema`` prints it) before any spend; ``--preview`` prints its cost and noise
    instead, for free."""
    from dpsieve.errors import DPError

    if show_schema:
        if url is not None and not api_key:
            raise typer.BadParameter("--url needs --api-key (or DPSIEVE_API_KEY).")
        typer.echo(json.dumps(_schema(dataset, url, api_key, database_url, schema)))
        return

    try:
        if file is not None:
            specs = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        elif spec is not None:
            specs = [json.loads(spec)]
        else:
            raise typer.BadParameter("give a query or --file.")
    except (OSError, json.JSONDecodeError) as e:
        raise typer.BadParameter(f"cannot read the queries: {e}") from None
    if spark_table is not None and spark is None:
        raise typer.BadParameter("--spark-table needs --spark URL.")
    if spark is not None and url is not None:
        raise typer.BadParameter("--spark runs locally on a ledger; the service opens its "
                                 "own data sources: give --spark or --url, not both.")
    if url is not None and not api_key:
        raise typer.BadParameter("--url needs --api-key (or DPSIEVE_API_KEY).")
    results: list[dict[str, Any]] = []
    try:
        stream = (_remote(dataset, specs, url, str(api_key), key, preview) if url is not None
                  else _local(dataset, specs, database_url, schema, key, spark, spark_table,
                              preview))
        for r in stream:  # printed at once: an answer paid for is never lost to a later error
            typer.echo(json.dumps(r))
            results.append(r)
    except DPError as e:
        typer.echo(f"Error: {e}", err=True)
        raise typer.Exit(code=2) from None
    failed = [f for f in (_failure(r) for r in results) if f is not None]
    if failed:  # the answers above are printed; the exit code says not all were answered
        typer.echo(f"Error: {len(failed)} of {len(specs)} queries not answered; first: "
                   f"{' '.join(failed[0].split())}", err=True)
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    """Add ``query`` to the ``dpsieve`` command."""
    app.command("query")(query)
