"""The SQL ledger's cursor wrapper: ``?``-placeholder SQL on a DB-API cursor of SQLite or
PostgreSQL (``%s`` substituted).

Kept apart from :mod:`dpsieve.ledger.sql_registry` so a backend's transaction
(:meth:`dpsieve.ledger.sqlite.SQLiteStore._tx`), entered from the registry, builds its
cursor here and never calls back into ``sql_registry`` (issue 27: no module entered
twice on one query's route).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

__all__ = ["Cursor"]


class Cursor:
    """A thin wrapper running ``?``-placeholder SQL on a DB-API cursor of either dialect."""

    def __init__(self, raw: Any, paramstyle: str) -> None:
        self.raw = raw
        self._pg = paramstyle == "format"

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> Cursor:
        self.raw.execute(sql.replace("?", "%s") if self._pg else sql, params)
        return self

    def one(self) -> tuple[Any, ...] | None:
        row = self.raw.fetchone()
        return None if row is None else tuple(row)

    def all(self) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in self.raw.fetchall()]

    def rows(self, batch: int = 1000) -> Iterator[tuple[Any, ...]]:
        """The result's rows, fetched ``batch`` at a time (a long audit log is never
        held whole)."""
        while chunk := self.raw.fetchmany(batch):
            for r in chunk:
                yield tuple(r)
