"""The ledger's schema: numbered migrations, the same in SQLite and PostgreSQL.

Each migration is SQL (``{serial}`` and ``{append_only}`` are the dialect's) and, for
version 3, a step in Python: the audit log becomes a hash chain
(:mod:`dpsieve.ledger.chain`). Rows already written cannot be updated (the log is
append-only), so they stay as they are, bound by one digest per budget that a new
``chain_start`` row takes as its predecessor, with the budget's state at the migration.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from dpsieve.ledger.base import canonical_json, utcnow
from dpsieve.ledger.chain import GENESIS, legacy_step, row_hash

__all__ = ["AUDIT_COLUMNS", "LATEST", "MIGRATIONS", "migrate"]


class _Cursor(Protocol):
    def run(self, sql: str, params: tuple[Any, ...] = ()) -> Any: ...


#: Numbered migrations; ``{serial}`` is the dialect's auto-increment primary key.
MIGRATIONS: tuple[tuple[int, tuple[str, ...]], ...] = (
    (
        1,
        (
            "CREATE TABLE budgets (budget_id TEXT PRIMARY KEY, state TEXT NOT NULL,"
            " initial TEXT NOT NULL, n_spends INTEGER NOT NULL DEFAULT 0,"
            " created_at TEXT NOT NULL, updated_at TEXT NOT NULL)",
            "CREATE TABLE spends (budget_id TEXT NOT NULL REFERENCES budgets(budget_id),"
            " key TEXT NOT NULL, seq BIGINT NOT NULL, principal TEXT NOT NULL,"
            " fingerprint TEXT NOT NULL, decision TEXT NOT NULL, request TEXT NOT NULL,"
            " answer TEXT, created_at TEXT NOT NULL, answered_at TEXT,"
            " PRIMARY KEY (budget_id, key))",
            "CREATE TABLE audit (seq {serial}, ts TEXT NOT NULL, budget_id TEXT NOT NULL,"
            " principal TEXT NOT NULL, event TEXT NOT NULL, key TEXT NOT NULL,"
            " payload TEXT NOT NULL)",
            "CREATE INDEX audit_by_budget ON audit (budget_id, seq)",
            "CREATE TABLE principals (name TEXT PRIMARY KEY, role TEXT NOT NULL,"
            " created_at TEXT NOT NULL)",
            "CREATE TABLE api_keys (key_hash TEXT PRIMARY KEY,"
            " principal TEXT NOT NULL REFERENCES principals(name), created_at TEXT NOT NULL)",
            "CREATE TABLE datasets (name TEXT PRIMARY KEY, source TEXT NOT NULL,"
            " created_at TEXT NOT NULL)",
            "CREATE TABLE grants (principal TEXT NOT NULL REFERENCES principals(name),"
            " dataset TEXT NOT NULL REFERENCES datasets(name), created_at TEXT NOT NULL,"
            " PRIMARY KEY (principal, dataset))",
            "{append_only}",
        ),
    ),
    # a table the readiness probe wrote to (it no longer writes; kept for old ledgers)
    (2, ("CREATE TABLE ready (id INTEGER PRIMARY KEY, ts TEXT NOT NULL)",)),
    # the hash chain: position, predecessor's hash, own hash, what a replay needs
    (3, ("ALTER TABLE audit ADD COLUMN chain_n BIGINT",
         "ALTER TABLE audit ADD COLUMN chain_prev TEXT",
         "ALTER TABLE audit ADD COLUMN chain_hash TEXT",
         "ALTER TABLE audit ADD COLUMN chain_data TEXT")),
    # interactive children: opened under a budget (their charge is a spend), their state
    # (secrets included), who may question them, and their answers by idempotency key
    (4, ("CREATE TABLE children (budget_id TEXT NOT NULL REFERENCES budgets(budget_id),"
         " child_id TEXT NOT NULL, owner TEXT NOT NULL, kind TEXT NOT NULL,"
         " declared TEXT NOT NULL, public TEXT NOT NULL, state TEXT NOT NULL,"
         " version BIGINT NOT NULL, open_key TEXT NOT NULL, created_at TEXT NOT NULL,"
         " updated_at TEXT NOT NULL, PRIMARY KEY (budget_id, child_id))",
         "CREATE TABLE child_grants (budget_id TEXT NOT NULL, child_id TEXT NOT NULL,"
         " principal TEXT NOT NULL, created_at TEXT NOT NULL,"
         " PRIMARY KEY (budget_id, child_id, principal))",
         "CREATE TABLE child_answers (budget_id TEXT NOT NULL, child_id TEXT NOT NULL,"
         " key TEXT NOT NULL, principal TEXT NOT NULL, fingerprint TEXT NOT NULL,"
         " answer TEXT NOT NULL, created_at TEXT NOT NULL,"
         " PRIMARY KEY (budget_id, child_id, key))")),
    # budgets over time: block declarations, blocks (each a budget) and their arrivals,
    # quotas (each a budget) and groups, multi-budget transactions, the queue
    (5, ("CREATE TABLE blocksets (dataset TEXT PRIMARY KEY, spec TEXT NOT NULL,"
         " created_at TEXT NOT NULL)",
         "CREATE TABLE blocks (dataset TEXT NOT NULL, block TEXT NOT NULL,"
         " budget_id TEXT NOT NULL REFERENCES budgets(budget_id), unlock TEXT NOT NULL,"
         " created_at TEXT NOT NULL, PRIMARY KEY (dataset, block))",
         "CREATE INDEX blocks_by_budget ON blocks (budget_id)",
         "CREATE TABLE arrivals (budget_id TEXT NOT NULL, who TEXT NOT NULL,"
         " created_at TEXT NOT NULL, PRIMARY KEY (budget_id, who))",
         "CREATE TABLE quotas (dataset TEXT NOT NULL, scope TEXT NOT NULL, name TEXT NOT NULL,"
         " budget_id TEXT NOT NULL REFERENCES budgets(budget_id), created_at TEXT NOT NULL,"
         " PRIMARY KEY (dataset, scope, name))",
         "CREATE TABLE members (grp TEXT NOT NULL,"
         " principal TEXT NOT NULL REFERENCES principals(name), created_at TEXT NOT NULL,"
         " PRIMARY KEY (grp, principal))",
         "CREATE TABLE txns (scope TEXT NOT NULL, key TEXT NOT NULL, principal TEXT NOT NULL,"
         " fingerprint TEXT NOT NULL, budgets TEXT NOT NULL, decision TEXT NOT NULL,"
         " answer TEXT, created_at TEXT NOT NULL, answered_at TEXT, PRIMARY KEY (scope, key))",
         "CREATE TABLE pending (scope TEXT NOT NULL, key TEXT NOT NULL,"
         " principal TEXT NOT NULL, request TEXT NOT NULL, charge TEXT NOT NULL,"
         " budgets TEXT NOT NULL, demands TEXT NOT NULL, status TEXT NOT NULL,"
         " reason TEXT NOT NULL, position BIGINT, created_at TEXT NOT NULL,"
         " deadline TEXT NOT NULL, decided_at TEXT, PRIMARY KEY (scope, key))",
         "CREATE INDEX pending_by_status ON pending (scope, status)")),
)
#: The latest schema version.
LATEST = MIGRATIONS[-1][0]
#: The audit columns a chained row is read with, in :class:`~dpsieve.ledger.chain.ChainRow`
#: order.
AUDIT_COLUMNS = ("seq, ts, budget_id, principal, event, key, payload, chain_n, chain_prev,"
                 " chain_hash, chain_data")


def migrate(cur: _Cursor, dialect: dict[str, str]) -> None:
    """Apply every migration not yet recorded in ``schema_version`` (inside the caller's
    write transaction, so a migration is all or nothing)."""
    cur.run("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER PRIMARY KEY,"
            " applied_at TEXT NOT NULL)")
    done = {int(r[0]) for r in cur.run("SELECT version FROM schema_version").all()}
    for version, statements in MIGRATIONS:
        if version in done:
            continue
        for st in statements:
            for part in st.format(**dialect).split(";;"):
                if part.strip():
                    cur.run(part)
        step = _STEPS.get(version)
        if step is not None:
            step(cur)
        cur.run("INSERT INTO schema_version VALUES (?, ?)", (version, utcnow()))


def _anchor_chains(cur: _Cursor) -> None:
    """Start the hash chain of every budget (and of the rows of no budget) after the rows
    already written: a ``chain_start`` row whose predecessor is their digest, carrying the
    budget's state, initial state and spend count as they are now."""
    budgets = {str(r[0]): (str(r[1]), str(r[2]), int(r[3])) for r in cur.run(
        "SELECT budget_id, state, initial, n_spends FROM budgets").all()}
    chains = sorted(set(budgets) | {str(r[0]) for r in cur.run(
        "SELECT DISTINCT budget_id FROM audit").all()})
    for chain in chains:
        digest, k = GENESIS, 0
        for seq, ts, b, p, e, key, payload in cur.run(
                "SELECT seq, ts, budget_id, principal, event, key, payload FROM audit"
                " WHERE budget_id = ? ORDER BY seq", (chain,)).all():
            digest = legacy_step(digest, int(seq), str(ts), str(b), str(p), str(e), str(key),
                                 str(payload))
            k += 1
        state, initial, n = budgets.get(chain, (None, None, 0))
        payload = canonical_json({"legacy_rows": k})
        data = canonical_json({"legacy_rows": k, "state": state, "initial": initial,
                               "n_spends": n})
        ts = utcnow()
        h = row_hash(digest, 1, ts, chain, "", "chain_start", "", payload, data)
        cur.run("INSERT INTO audit (ts, budget_id, principal, event, key, payload, chain_n,"
                " chain_prev, chain_hash, chain_data) VALUES (?, ?, '', 'chain_start', '', ?,"
                " 1, ?, ?, ?)", (ts, chain, payload, digest, h, data))


_STEPS: dict[int, Callable[[_Cursor], None]] = {3: _anchor_chains}
