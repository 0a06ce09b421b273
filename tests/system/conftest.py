"""Fixtures for the system tests: ledgers on every backend, PostgreSQL detection."""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

PG_URL = os.environ.get("DPSIEVE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def pg_available() -> str | None:
    """None when PostgreSQL answers at 127.0.0.1:5432, else the reason it cannot be used."""
    try:
        with socket.create_connection(("127.0.0.1", 5432), timeout=1.0):
            pass
    except OSError as e:
        return f"no PostgreSQL server answers at 127.0.0.1:5432 ({e})"
    try:
        import psycopg

        with psycopg.connect(PG_URL, connect_timeout=2):
            pass
    except Exception as e:  # any failure means: skip with the reason
        return f"PostgreSQL at {PG_URL} refused the connection ({e})"
    return None


def unique_schema() -> str:
    return "t_" + uuid.uuid4().hex[:16]


StoreFactory = Callable[..., Any]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        reason = pg_available()
        if reason:
            pytest.skip(reason)
    return str(request.param)


@pytest.fixture
def make_store(backend: str, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of stores sharing one database (each call: a new connection set)."""
    from dpsieve.ledger import MemoryStore, PostgresStore, SQLiteStore

    made: list[Any] = []
    schema = unique_schema()
    shared_memory: list[Any] = []

    def factory(**kw: Any) -> Any:
        if backend == "memory":
            if not shared_memory:
                shared_memory.append(MemoryStore(**kw))
            return shared_memory[0]
        if backend == "sqlite":
            s: Any = SQLiteStore(tmp_path / "ledger.db", **kw)
        else:
            s = PostgresStore(PG_URL, schema=schema, **kw)
        made.append(s)
        return s

    yield factory
    for s in made:
        s.close()
    if backend == "postgres":
        cleanup = PostgresStore(PG_URL, schema=schema)
        cleanup.drop_schema()
        cleanup.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str]]:
    """(database URL, schema) of a durable ledger: a SQLite file (the schema is not used
    there), or a fresh schema on PostgreSQL, dropped afterwards (skipped without a server)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}", "dpsieve"
        return
    reason = pg_available()
    if reason:
        pytest.skip(reason)
    schema = unique_schema()
    yield PG_URL, schema
    from dpsieve.ledger import PostgresStore

    s = PostgresStore(PG_URL, schema=schema)
    s.drop_schema()
    s.close()
