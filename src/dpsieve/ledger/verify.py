"""Verifying a SQL ledger: every chain replayed and compared with the stored budgets and
spends (``dpsieve budget verify``; the service runs it at start-up).

For each budget (and each chain of rows of no budget) in one snapshot of the database:
the chain's links and hashes, the replay of its state (:class:`dpsieve.ledger.chain.
Replay`), the stored state, initial state and spend count against the replay's, and the
spends table against the admitted decisions of the log (each admitted spend has exactly
one spend row, with the same sequence number and decision, and no other spend row
exists). Each check's problems are sentences naming what is wrong, never a value of the
data.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dpsieve.ledger.chain import ChainBroken, Checkpoint, Replay
from dpsieve.ledger.migrations import AUDIT_COLUMNS

if TYPE_CHECKING:
    from dpsieve.ledger.sql import SQLStore

__all__ = ["BudgetCheck", "verify_store"]


@dataclass(frozen=True, slots=True)
class BudgetCheck:
    """The verdict on one chain: ``problems`` empty when it verifies. ``head`` is the
    hash of its last row and ``rows`` its length: copied elsewhere, they detect a log
    rewritten with recomputed hashes."""

    budget_id: str
    is_budget: bool
    rows: int
    admitted: int
    head: str
    problems: list[str] = field(default_factory=list)
    checkpoint: Checkpoint | None = None

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {"budget": self.budget_id, "is_budget": self.is_budget, "ok": self.ok,
                "rows": self.rows, "admitted": self.admitted, "head": self.head,
                "problems": list(self.problems)}


def verify_store(store: SQLStore, budget_id: str | None = None) -> list[BudgetCheck]:
    """Check every chain of ``store`` (or only ``budget_id``'s), in one snapshot."""
    from dpsieve.ledger.sql import _chain_row

    out: list[BudgetCheck] = []
    reps: dict[str, Replay] = {}
    with store._tx(write=False) as cur:
        store._snapshot(cur)
        budgets = {str(r[0]): (str(r[1]), str(r[2]), int(r[3])) for r in cur.run(
            "SELECT budget_id, state, initial, n_spends FROM budgets").all()}
        chains = set(budgets) | {str(r[0]) for r in cur.run(
            "SELECT DISTINCT budget_id FROM audit").all()}
        if budget_id is not None:
            chains &= {budget_id}
        for chain in sorted(chains):
            rep = Replay(chain, store._loads)
            problems: list[str] = []
            rows = 0
            try:
                for r in cur.run(f"SELECT {AUDIT_COLUMNS} FROM audit WHERE budget_id = ?"
                                 " ORDER BY seq", (chain,)).rows():
                    rows += 1
                    rep.feed(_chain_row(r))
                b = budgets.get(chain)
                rep.finish(*(b if b is not None else (None, None, None)))
            except ChainBroken as e:
                problems.append(str(e))
            if chain in budgets and not problems:
                problems += _spends(cur, chain, rep)
            out.append(BudgetCheck(chain, chain in budgets, rows, rep.admitted, rep.head,
                                   problems, None if problems else rep.checkpoint()))
            reps[chain] = rep
    return _all_or_nothing(out, reps)


def _all_or_nothing(checks: list[BudgetCheck], reps: dict[str, Replay]) -> list[BudgetCheck]:
    """Each admitted multi-budget spend admitted, as the same transaction, in every
    budget it names (of those checked): docs/proofs/blocks.md §4."""
    out = []
    for c in checks:
        rep = reps.get(c.budget_id)
        bad = 0
        for key, budgets in (rep.txns.items() if rep is not None else ()):
            for b in budgets:
                other = reps.get(b)
                if other is not None and other.txns.get(key) != budgets:
                    bad += 1
                    break
        if bad:
            c = BudgetCheck(c.budget_id, c.is_budget, c.rows, c.admitted, c.head,
                            [*c.problems, f"{bad} admitted spends charged to several budgets "
                             "are not admitted in all of them (not all or nothing)"], None)
        out.append(c)
    return out


def _spends(cur: Any, budget_id: str, rep: Replay) -> list[str]:
    """The spends table of one budget against the admitted decisions of its log."""
    stored = {str(k): (int(s), hashlib.sha256(str(d).encode()).hexdigest())
              for k, s, d in cur.run("SELECT key, seq, decision FROM spends WHERE"
                                     " budget_id = ?", (budget_id,)).rows()}
    problems = []
    missing = sorted(set(rep.spends) - set(stored))
    extra = sorted(set(stored) - set(rep.spends))
    if missing:
        problems.append(f"{len(missing)} admitted spends of its log have no spend row "
                        "(spend rows deleted)")
    if extra:
        problems.append(f"{len(extra)} spend rows have no admitted decision in its log "
                        "(spend rows inserted)")
    changed = [k for k in set(stored) & set(rep.spends)
               if stored[k][0] != rep.spends[k][0]
               or rep.spends[k][1] not in (None, stored[k][1])]
    if changed:
        problems.append(f"{len(changed)} spend rows differ from their decisions in the log "
                        "(spend rows edited)")
    return problems
