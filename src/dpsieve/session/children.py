"""Interactive children of a session's budget, questioned with the session's data.

``session.children`` (:class:`Children`) opens children under the session's budget and
asks them questions whose private values the session computes from its data set, on the
query engine, so an analyst never holds the data:

* a **sparse vector** (``kind="sparse_vector"``) is asked a query plan whose answer is one
  number (one ``count`` or ``sum``, no ``group_by``) and a public threshold; the plan's
  sensitivity under the budget's relation, from public values only, must be at most the
  child's declared ``sensitivity`` (a ``monotonic`` child takes counts and sums of values
  >= 0 under add/remove only);
* a **continual counter** (``kind="counter"``) is stepped either by the steward's count
  of new events (``count=``: the library user, or the service's owner key) or, when it
  was opened with a ``time_column`` (and optional ``where``), by ``until=``: the step
  counts the rows with ``previous until <= time < until`` (the first step: ``time <
  until``), so the windows are disjoint and each row is counted in one step at most
  (event level; refused for a data set with a privacy unit, whose rows could fall in many
  windows);
* an **answer cache** (``kind="cache"``) is bound to one column and its public categories
  (its domain); a question is one weight in [0, 1] per category, its true answer
  ``sum_c weight_c * rows in c`` (for a data set with a privacy unit, one row of each unit,
  so the sensitivity is 1 under both relations), computed in exact rationals and put on
  the cache's lattice before it is compared.

Everything a refusal depends on is public (the kind, the plan against the schema, the
child's counters, the previous ``until``), and is checked before the data is read. The
charge is the child's declared privacy, spent once when it is opened, in the ledger
transaction that creates it (:mod:`dpsieve.ledger.children`); a question is answered
inside the ledger's transaction on the child's row, and its answer, the child's new state
and an audit row are stored before it is returned. The binding of a child to the data
(its time column, where, last ``until``, or its column and categories) is public and is
kept with its state (``binding``).

A failure to evaluate a question on the data after the public checks is one fixed
refusal (:class:`~dpsieve.errors.QueryFailedError`), nothing asked.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dpsieve import _budget_view
from dpsieve._validation import fail
from dpsieve.interactive.base import Child, ChildExhaustedError, child_from_state
from dpsieve.interactive.cache import AnswerCache
from dpsieve.interactive.counter import ContinualCounter
from dpsieve.interactive.sparse_vector import SparseVector
from dpsieve.interactive.store import as_child_store
from dpsieve.session import child_values as values
from dpsieve.session.child_specs import (
    KINDS,
    child_name,
    child_spec,
    not_exhausted,
    wrong_operation,
)

if TYPE_CHECKING:
    from dpsieve.ledger.children import ChildRecord
    from dpsieve.queries.plan import Query
    from dpsieve.session.core import Session

__all__ = ["KINDS", "Children", "child_spec"]

class Children:
    """The children of one session's budget (module docstring). Every method acts as the
    session's ``principal``: it owns the children it opens; it may question those it owns
    or was granted (``""``, library use without authentication, may question any)."""

    def __init__(self, session: Session) -> None:
        self._s = session
        self._store = as_child_store(session.store)

    # -- opening ---------------------------------------------------------------------
    def open(self, child: str, kind: str, spec: Mapping[str, Any], *,
             key: str | None = None) -> dict[str, Any]:
        """Open a child named ``child`` of ``kind`` (:data:`KINDS`) with ``spec`` (its
        parameters as JSON; a counter may add ``time_column`` and ``where``, a cache
        names its ``column`` and, unless the schema declares them, its ``categories``).
        Everything is checked from public values, then the declared privacy is charged
        and the child stored in one transaction; refused (budget): nothing exists,
        :class:`~dpsieve.errors.BudgetExceededError` names what is left."""
        child_name(child)
        if kind not in KINDS:
            raise fail("kind", "child", f"one of {list(KINDS)}", kind)
        if not isinstance(spec, Mapping):
            raise fail("spec", "child", "a JSON object of the child's parameters", spec)
        binding = values.binding(self._s, kind, spec)
        size = len(binding.get("categories", ())) or 1
        c = child_spec(kind, spec, self._s.neighbouring, domain_size=size)
        declared = c.declared()
        key = key or uuid.uuid4().hex
        request = {"open_child": child, "kind": kind, "declared": declared.to_dict(),
                   "binding": binding}
        out = self._store.open_child(
            self._s.budget_id, child, declared, {**c.to_state(), "binding": binding},
            {**c.public(), "binding": binding}, key=key, principal=self._s.principal,
            request=request)
        d = out.decision
        left = d.remaining.under(self._s.neighbouring)
        if not d.admitted:
            raise _budget_view.refused(self._s.store, self._s.budget_id, declared, declared,
                                       left)
        return {"child": child, "kind": kind, "owner": self._s.principal,
                "declared": declared.to_dict(), "public": {**c.public(), "binding": binding},
                "cost": d.cost.to_dict(), "remaining": left.to_dict(), "key": key,
                "replayed": out.replayed}

    # -- questions -------------------------------------------------------------------
    def ask(self, child: str, question: Query | Mapping[str, Any], *, threshold: float,
            key: str | None = None) -> dict[str, Any]:
        """Ask a sparse vector child whether the answer of ``question`` (a plan with one
        ``count`` or ``sum`` and no ``group_by``; its ``privacy`` is not used) is above
        ``threshold``: ``{"above", "value", "question", "positives_left"}``."""
        from dpsieve.queries.plan import Query, query_to_dict

        if isinstance(question, Query):
            plan: dict[str, Any] = query_to_dict(question)
        elif isinstance(question, Mapping):
            plan = {k: v for k, v in question.items() if k != "privacy"}
        else:
            raise fail("question", "ask", "a query plan (a Query or its JSON)", question)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
                or not math.isfinite(threshold):
            raise fail("threshold", "ask", "a finite number", threshold)
        plan.pop("privacy", None)
        request = {"op": "ask", "question": plan, "threshold": float(threshold)}

        def run(c: Child, binding: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(c, SparseVector):
                raise wrong_operation(c, "a question with a threshold")
            not_exhausted(c)
            prepared, part = values.one_number(self._s, plan, c)
            value = values.value(lambda: values.plan_value(self._s, prepared, part))
            a = c.ask(value, float(threshold))
            return {"above": a.above, "value": a.value, "question": a.question,
                    "positives_left": a.positives_left}

        return self._act(child, request, run, key)

    def step(self, child: str, *, until: float | None = None, count: int | None = None,
             key: str | None = None) -> dict[str, Any]:
        """One step of a continual counter: the steward's ``count`` of new events (never
        stored apart from the running count), or the rows up to ``until`` (a counter
        opened with a ``time_column``; ``until`` above the previous step's). Returns
        ``{"step", "value", "until"}``, the noisy running count."""
        if (until is None) == (count is None):
            raise fail("until", "step", "given, or 'count' instead (exactly one of them)",
                       until)
        if until is not None and (isinstance(until, bool) or not isinstance(
                until, int | float) or not math.isfinite(until)):
            raise fail("until", "step", "a finite number", until)
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 0):
            raise fail("count", "step", "an int >= 0", "<withheld>")
        request: dict[str, Any] = ({"op": "step", "until": float(until)} if until is not None
                                   else {"op": "step", "by": "count"})

        def run(c: Child, binding: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(c, ContinualCounter):
                raise wrong_operation(c, "a step")
            events = count
            if until is not None:
                col = binding.get("time_column")
                if col is None:
                    raise fail("until", "step", "given only to a counter opened with a "
                               "'time_column' (this one is stepped by counts)", until)
                prev = binding.get("until")
                if prev is not None and not float(until) > prev:
                    raise fail("until", "step", f"above the previous step's {prev!r}",
                               until)
                plan = values.window(self._s, col, binding.get("where", []), prev,
                                     float(until))
                got = values.value(lambda: values.count(self._s, plan))
                events = got
                binding["until"] = float(until)
            assert events is not None
            v = c.step(int(events))
            return {"step": c.steps, "value": v, "until": binding.get("until")}

        return self._act(child, request, run, key)

    def query(self, child: str, weights: Sequence[float], *, key: str | None = None
              ) -> dict[str, Any]:
        """A linear counting query to an answer cache: one weight in [0, 1] per category
        of its column. ``{"value", "updated", "updates_left"}``: an estimate from the
        cache's state (free) or, when it is off by more than the tolerance, an update."""
        if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
            raise fail("weights", "query", "a list of numbers in [0, 1]", weights)
        w = list(weights)
        if not all(not isinstance(x, bool) and isinstance(x, int | float)
                   and 0.0 <= x <= 1.0 for x in w):
            raise fail("weights", "query", "numbers in [0, 1]", w[:20])
        request = {"op": "ask", "weights": [float(x) for x in w]}

        def run(c: Child, binding: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(c, AnswerCache):
                raise wrong_operation(c, "a query's weights")
            cats = binding.get("categories", [])
            if len(w) != len(cats):
                raise fail("weights", "query", f"{len(cats)} numbers (one per category of "
                           f"{binding.get('column')!r})", len(w))
            if c.exhausted:
                raise ChildExhaustedError(f"this answer cache has used its "
                                          f"{c.spec.updates} updates")
            value = values.value(lambda: values.weighted(self._s, binding, w))
            a = c.ask(w, value)
            return {"value": a.value, "updated": a.updated, "updates_left": a.updates_left}

        return self._act(child, request, run, key)

    # -- views -----------------------------------------------------------------------
    def visible(self) -> list[ChildRecord]:
        """The children the principal may question, public views only."""
        return self._store.children(self._s.budget_id, self._s.principal)

    def get(self, child: str) -> ChildRecord:
        """One child's public record (absent or not granted: not found)."""
        from dpsieve.ledger.base import BudgetNotFoundError

        for r in self.visible():
            if r.child_id == child:
                return r
        raise BudgetNotFoundError(f"No child named {child!r} on {self._s.budget_id!r} is "
                                  "visible to this principal.")

    def grant(self, child: str, analyst: str) -> None:
        """Let ``analyst`` question ``child`` (its owner only; ``""`` may grant any)."""
        child_name(analyst, "analyst")
        self._store.grant_child(self._s.budget_id, child, analyst, by=self._s.principal)

    # -- inside ----------------------------------------------------------------------
    def _act(self, child: str, request: dict[str, Any], run: Any, key: str | None
             ) -> dict[str, Any]:
        rng = self._s._source.rng

        def act(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any],
                                                dict[str, Any]]:
            binding = dict(state.pop("binding", None) or {})
            c = child_from_state(state, rng)
            answer = {"child": child, **run(c, binding)}
            return ({**c.to_state(), "binding": binding}, {**c.public(), "binding": binding},
                    answer)

        return self._store.child_act(self._s.budget_id, child, act,
                                     key=key or uuid.uuid4().hex,
                                     principal=self._s.principal, request=request)


