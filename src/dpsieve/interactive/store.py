"""Children kept in a ledger: open one with its charge, question it durably.

The functions take any store with ``open_child`` and ``child_act`` (the ledger's
:mod:`dpsieve.ledger.children`: the memory, SQLite and PostgreSQL stores), so this layer
does no I/O itself. A question is split in two: ``request``, its public part (what was
asked: the operation, a threshold, a query vector), which identifies it for idempotency;
and ``value``, the private number the data gave (a count, a step's events), which is never
stored or hashed.

``open_child`` charges the child's declared privacy and stores its state in one
transaction; ``ask_child`` runs one operation on the stored state inside the ledger's
transaction and returns the answer only after the new state is stored.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from dpsieve._validation import fail
from dpsieve.interactive.base import Child, child_from_state
from dpsieve.interactive.cache import AnswerCache
from dpsieve.interactive.counter import ContinualCounter
from dpsieve.interactive.sparse_vector import SparseVector
from dpsieve.mechanisms import RNG

__all__ = ["ChildStore", "answer_of", "as_child_store", "ask_child", "open_child"]


class ChildStore(Protocol):
    """What a ledger offers for children (:mod:`dpsieve.ledger.children`)."""

    def open_child(self, budget_id: str, child_id: str, charge: Any, state: dict[str, Any],
                   public: dict[str, Any], *, key: str, principal: str = "",
                   request: dict[str, Any] | None = None) -> Any: ...

    def child_act(self, budget_id: str, child_id: str, act: Any, *, key: str,
                  principal: str = "", request: dict[str, Any] | None = None
                  ) -> dict[str, Any]: ...

    def child_state(self, budget_id: str, child_id: str) -> dict[str, Any]: ...

    def children(self, budget_id: str, principal: str = "") -> list[Any]: ...

    def grant_child(self, budget_id: str, child_id: str, principal: str, *,
                    by: str = "") -> None: ...

    def close(self) -> None: ...


_METHODS = ("open_child", "child_act", "child_state", "children", "grant_child", "close")


def as_child_store(store: Any) -> ChildStore:
    """``store`` typed as a :class:`ChildStore`, or a clear error if it keeps no children."""
    if not all(callable(getattr(store, m, None)) for m in _METHODS):
        raise fail("store", "as_child_store", "a ledger that keeps children (memory, SQLite "
                   "or PostgreSQL)", type(store).__name__)
    out: ChildStore = store
    return out


def open_child(store: ChildStore, budget_id: str, child_id: str, child: Child, *, key: str,
               principal: str = "") -> Any:
    """Charge ``child.declared()`` to the budget and store the child, in one transaction.
    Returns the store's spend outcome (``decision.admitted`` False: no child exists)."""
    declared = child.declared()
    request = {"open_child": child_id, "kind": child.kind, "declared": declared.to_dict()}
    return store.open_child(budget_id, child_id, declared, child.to_state(), child.public(),
                            key=key, principal=principal, request=request)


def answer_of(child: Child, request: dict[str, Any], value: Any) -> dict[str, Any]:
    """Run one operation on ``child`` (its state changes) and return the answer's JSON."""
    op = request.get("op")
    if isinstance(child, SparseVector) and op == "ask":
        a = child.ask(value, request["threshold"])
        return {"above": a.above, "value": a.value, "question": a.question,
                "positives_left": a.positives_left}
    if isinstance(child, ContinualCounter) and op == "step":
        return {"step": child.steps + 1, "value": child.step(value)}
    if isinstance(child, AnswerCache) and op == "ask":
        c = child.ask(np.asarray(request["query"], dtype=np.float64), value)
        return {"value": c.value, "updated": c.updated, "updates_left": c.updates_left}
    raise fail("op", "ask_child", f"an operation of a {child.kind} child ('ask' or 'step')",
               op)


def ask_child(store: ChildStore, budget_id: str, child_id: str, request: dict[str, Any],
              value: Any, *, key: str, principal: str = "", rng: RNG = None) -> dict[str, Any]:
    """Question a stored child: ``request`` public (identifies the question for
    idempotency), ``value`` private (never stored). The answer is returned once the
    child's new state is durably stored."""

    def act(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        # a child opened by a session keeps its public binding to the data beside its
        # state (dpsieve.session.children): kept as it is
        extra = {"binding": state.pop("binding")} if "binding" in state else {}
        child = child_from_state(state, rng)
        answer = answer_of(child, request, value)
        return {**child.to_state(), **extra}, {**child.public(), **extra}, answer

    return store.child_act(budget_id, child_id, act, key=key, principal=principal,
                           request=request)
