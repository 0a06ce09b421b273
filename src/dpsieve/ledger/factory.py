"""Open a ledger from a location: ``memory://``, ``sqlite:///path`` (or a bare path), or a
PostgreSQL URL or libpq key=value string (:func:`dpsieve.ledger.location.parse_location`)."""

from __future__ import annotations

from dpsieve.ledger.base import BudgetStore, FilterLoader
from dpsieve.ledger.location import parse_location

__all__ = ["open_store"]


def open_store(
    url: str, *, schema: str = "dpsieve", loads: FilterLoader | None = None
) -> BudgetStore:
    """The store a database location names.

    * ``memory://`` -- :class:`~dpsieve.ledger.memory.MemoryStore` (nothing persists);
    * ``sqlite:///relative.db``, ``sqlite:////abs/path.db`` or a plain file path --
      :class:`~dpsieve.ledger.sqlite.SQLiteStore`;
    * ``postgresql://...``, ``postgres://...`` or libpq pairs (``host=... dbname=...``) --
      :class:`~dpsieve.ledger.postgres.PostgresStore` in ``schema``.

    A string naming none of them is a ValidationError naming ``url``, its password
    withheld; a libpq string is never taken for a file name.
    """
    loc = parse_location(url)
    if loc.kind == "memory":
        from dpsieve.ledger.memory import MemoryStore

        return MemoryStore(loads=loads)
    if loc.kind == "postgresql":
        from dpsieve.ledger.postgres import PostgresStore

        return PostgresStore(url, schema=schema, loads=loads)
    from dpsieve.ledger.sqlite import SQLiteStore

    return SQLiteStore(loc.target, loads=loads)
