"""Budget ledgers: a filter's state per budget, idempotent spends and an audit log.

Backends implement :class:`BudgetStore`: :class:`MemoryStore` (tests, sessions),
:class:`SQLiteStore` (the embedded default) and :class:`PostgresStore` (row locks).
:func:`open_store` picks one from a URL.
"""

from __future__ import annotations

from dpsieve.ledger.base import (
    AuditEvent,
    BudgetNotFoundError,
    BudgetStore,
    IdempotencyKeyReuseError,
    Principal,
    SpendOutcome,
    SpendRecord,
)
from dpsieve.ledger.factory import open_store
from dpsieve.ledger.memory import MemoryStore
from dpsieve.ledger.postgres import PostgresStore
from dpsieve.ledger.sqlite import SQLiteStore

__all__ = [
    "AuditEvent",
    "BudgetNotFoundError",
    "BudgetStore",
    "IdempotencyKeyReuseError",
    "MemoryStore",
    "PostgresStore",
    "Principal",
    "SQLiteStore",
    "SpendOutcome",
    "SpendRecord",
    "open_store",
]
