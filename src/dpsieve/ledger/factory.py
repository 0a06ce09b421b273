"""Open a ledger from a URL: ``memory://``, ``sqlite:///path`` (or a bare path), ``postgresql://``."""

from __future__ import annotations

from dpsieve._validation import Redacted, fail
from dpsieve.ledger.base import BudgetStore, FilterLoader
from dpsieve.ledger.redact import redact

__all__ = ["open_store"]


def open_store(
    url: str, *, schema: str = "dpsieve", loads: FilterLoader | None = None
) -> BudgetStore:
    """The store a database URL names.

    * ``memory://`` -- :class:`~dpsieve.ledger.memory.MemoryStore` (nothing persists);
    * ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a plain file path --
      :class:`~dpsieve.ledger.sqlite.SQLiteStore`;
    * ``postgresql://...`` or ``postgres://...`` --
      :class:`~dpsieve.ledger.postgres.PostgresStore` in ``schema``.
    """
    if not isinstance(url, str) or not url:
        raise fail("url", "open_store", "a non-empty database URL",
                   url if not isinstance(url, str) else Redacted(redact(url)))
    if url == "memory://":
        from dpsieve.ledger.memory import MemoryStore

        return MemoryStore(loads=loads)
    if url.startswith(("postgresql://", "postgres://")):
        from dpsieve.ledger.postgres import PostgresStore

        return PostgresStore(url, schema=schema, loads=loads)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///"):]
    elif "://" in url:
        raise fail("url", "open_store", "memory://, sqlite:///<path> or postgresql://...",
                   Redacted(redact(url)))
    else:
        path = url
    from dpsieve.ledger.sqlite import SQLiteStore

    return SQLiteStore(path, loads=loads)
