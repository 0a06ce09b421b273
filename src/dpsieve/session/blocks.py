"""Sessions on a data set with blocks: every query charged to the blocks it may read and
to its analyst's quotas, all or nothing, in one ledger transaction; requests that cannot
run yet wait in a queue.

A data set with blocks (:class:`~dpsieve.blocks.spec.BlockSpec`: a block column, each
block's budget, unlocking, the scheduler) has no budget of its own: each block has one,
created fresh when the block arrives (:meth:`BlockSession.add_block`, a steward's action),
and each analyst (or group) may have a quota (:meth:`BlockSession.set_quota`). A query
plan runs in this order (docs/proofs/blocks.md):

1. the blocks its ``where`` may read are decided from the plan and the declared block
   values (:func:`dpsieve.queries.blocks.blocks_read`; never the rows), and the plan is
   restricted to them (:func:`~dpsieve.queries.blocks.restrict`): it reads no other row;
2. its charge (from public values only) is spent on every one of those blocks and on the
   analyst's quotas in one transaction (``spend_all``): all admit, or nothing is charged;
3. only then is the data read and the answer recorded (first writer wins), as for any
   session (:mod:`dpsieve.session.core`).

A retry with the same key replays the transaction on the blocks it was charged to, even
if blocks arrived since. :meth:`BlockSession.submit` queues a request that does not fit
yet (unlocking, or budget used by others): scheduling passes admit it in the data set's
policy's order, or it times out; :meth:`BlockSession.status` gives its position and
reason, and its answer once admitted. Only query plans and the one-aggregation shapes run
on a data set with blocks: the kinds that load every row (release, robust statistics)
are refused before any spend, since they could not be restricted to the blocks charged.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NoReturn

from dpsieve import _budget_view
from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription, description_from_json
from dpsieve.blocks.currency import demand
from dpsieve.blocks.spec import BlockSpec, block_spec_from_dict
from dpsieve.errors import BudgetExceededError, QueryFailedError, UnsupportedError, ValidationError
from dpsieve.ledger.blockset import (
    BlockRecord,
    MultiOutcome,
    PendingRecord,
    QuotaRecord,
    block_budget_id,
)
from dpsieve.ledger.passes import label
from dpsieve.queries.blocks import blocks_read, canonical_block, restrict
from dpsieve.queries.requests import PlanRequest, Request, request_from_json
from dpsieve.session.block_budgets import (
    CHILDREN_ON_BLOCKS,
    block_budget_filter,
    budget_of_spec,
    parse_block_value,
    rebuilt,
    used_of,
)
from dpsieve.session.budgets import budget_kind_of, filter_for_budget
from dpsieve.session.core import Session
from dpsieve.session.outcomes import FAILED, FAILED_MESSAGE, total
from dpsieve.session.result import QueryResult
from dpsieve.session.source import SessionData

if TYPE_CHECKING:
    from dpsieve.ledger.base import BudgetStore
    from dpsieve.queries.schema import Column, KeyValue
    from dpsieve.queries.source import BudgetKind

__all__ = ["BlockSession"]

#: The longest a queued request may wait (seconds): 30 days.
MAX_WAIT = 30 * 86400.0


class BlockSession(Session):
    """Queries on a data set with blocks (module docstring). ``data`` and the data
    arguments are :class:`~dpsieve.session.Session`'s; ``dataset`` names the data set in
    ``store`` (its blocks, quotas and queue are keyed by it); ``blocks`` (a
    :class:`BlockSpec` or its JSON) declares the blocks when the store has no declaration
    yet (once a block exists, a declaration already stored may change only its
    unlocking, scheduler and ``recompute``).
    ``registered``: the data set is a registered one (service, CLI): a source that cannot
    be read is refused naming the data set only. ``declared``: the declaration the ledger
    stores, as the caller has just read it
    (:func:`dpsieve.session.blocks_declared.declared_blocks`) to find that the data set has
    blocks -- so one request reads it once; None: read here."""

    def __init__(self, data: Any, *, dataset: str, store: BudgetStore | None = None,
                 blocks: BlockSpec | Mapping[str, Any] | None = None, principal: str = "",
                 after_spend: Callable[[str], None] | None = None, registered: bool = False,
                 declared: Mapping[str, Any] | None = None, **source: Any) -> None:
        from dpsieve.ledger.memory import MemoryStore

        self.store = store if store is not None else MemoryStore()
        self.budget_id = dataset
        self.dataset = dataset
        self.principal = principal
        self._after_spend = after_spend
        stored = declared if declared is not None else self._ledger().block_spec(dataset)
        if blocks is not None:
            spec = blocks if isinstance(blocks, BlockSpec) else block_spec_from_dict(blocks)
            block_budget_filter(spec)  # checked before anything is written
            if stored != spec.to_dict():
                self._ledger().declare_blocks(dataset, spec.to_dict())
        elif stored is None:
            raise fail("blocks", "BlockSession", "a block declaration (the data set "
                       f"{dataset!r} declares none in this ledger)", None)
        else:
            spec = block_spec_from_dict(stored)
        self.spec = spec
        desc, _ = budget_of_spec(spec)
        self.neighbouring: Neighbouring = desc.neighbouring
        self._source = SessionData(data, dataset=dataset if registered else None,
                                   **_source_args(source))
        self._source.neighbouring = self.neighbouring
        self._source.budget_reader = self._budget_kind
        self.privacy_unit = self._source.privacy_unit

    def _budget_kind(self) -> BudgetKind | None:
        """The kind of the budgets a query is charged to, as preparation reads it: a block's
        (a fresh filter of the declaration: every block's kind and parameters) and the
        analyst's quotas (public; :func:`~dpsieve.session.budgets.budget_kind_of`)."""
        quotas = self._ledger().quota_budgets(self.dataset, self.principal)
        return budget_kind_of([block_budget_filter(self.spec),
                               *(self.store.load_filter(q) for q in quotas)])

    # -- the ledger ---------------------------------------------------------------------
    def _ledger(self) -> Any:
        st = self.store
        if not hasattr(st, "spend_all"):
            raise fail("store", "BlockSession", "a ledger that keeps blocks (memory, SQLite "
                       "or PostgreSQL)", type(st).__name__)
        return st

    def column(self) -> Column:
        """The block column as the public schema declares it (integer or string)."""
        for c in self.schema().columns:
            if c.name == self.spec.column:
                return c
        raise fail("column", "blocks", "a column of the data set's schema", self.spec.column)

    def blocks(self) -> list[BlockRecord]:
        """The blocks that have arrived, in arrival order."""
        return list(self._ledger().blocks(self.dataset))

    def add_block(self, value: Any) -> BlockRecord:
        """A new block (a public value of the block column, canonical for its type) with a
        fresh budget and the declaration's unlocking; refused if it exists."""
        v = canonical_block(self.column(), value)
        rec: BlockRecord = self._ledger().add_block(
            self.dataset, v, block_budget_filter(self.spec), self.spec.unlock)
        return rec

    def set_quota(self, scope: str, name: str, budget: PrivacyDescription | Mapping[str, Any]
                  ) -> QuotaRecord:
        """The quota of an analyst (``scope="analyst"``) or a group (``"group"``) on this
        data set: a budget every query of theirs is also charged to."""
        if scope not in ("analyst", "group"):
            raise fail("scope", "quota", "'analyst' or 'group'", scope)
        if not isinstance(name, str) or not name:
            raise fail("name", "quota", "a non-empty name", name)
        desc = description_from_json(budget, self.neighbouring.value, name="budget")
        if desc.neighbouring != self.neighbouring:
            raise fail("neighbouring", "quota", f"the blocks' {self.neighbouring.value!r}",
                       desc.neighbouring.value)
        return self._ledger().set_quota(  # type: ignore[no-any-return]
            self.dataset, scope, name, filter_for_budget(desc))

    def set_group(self, group: str, members: Sequence[str]) -> None:
        """Make ``members`` (existing principals) the members of ``group``."""
        self._ledger().set_group(group, list(members))

    # -- queries ------------------------------------------------------------------------
    def _plan(self, request: Request) -> PlanRequest:
        if not isinstance(request, PlanRequest):
            raise fail("type", request.kind, "a query plan ({'type': 'query', ...}) or a "
                       "one-aggregation shape on a data set with blocks (a "
                       f"{request.kind} query reads every row and cannot be restricted "
                       "to the blocks it is charged to)", request.kind)
        return request

    def charged_blocks(self, request: Request) -> list[KeyValue]:
        """The declared blocks ``request`` would be charged to (and read), from the plan
        and the declared block values only."""
        plan = self._plan(request).plan
        values = [b.value for b in self.blocks()]
        return [values[i] for i in blocks_read(plan.where, self.column(), values)]

    def _budgets(self, chosen: Sequence[Any]) -> list[str]:
        quotas = self._ledger().quota_budgets(self.dataset, self.principal)
        return [block_budget_id(self.dataset, v) for v in chosen] + list(quotas)

    def _ready(self, req: PlanRequest, chosen: Sequence[Any]) -> Any:
        restricted = replace(req, plan=restrict(req.plan, self.spec.column, list(chosen)))
        return restricted.prepare(self._source)

    def execute(self, request: Request, *, key: str | None = None) -> QueryResult:
        """Run ``request`` (module docstring): refused (nothing charged) unless every block
        it may read and every quota of its analyst admit it now."""
        req = self._plan(request)
        chosen = self.charged_blocks(req)
        ready = self._ready(req, chosen)
        key = key or uuid.uuid4().hex
        out: MultiOutcome = self._ledger().spend_all(
            self.dataset, self._budgets(chosen), ready.charge, key=key,
            principal=self.principal, request=req.public)
        return self._finish(req, ready, out, key)

    def _finish(self, req: PlanRequest, ready: Any, out: MultiOutcome, key: str
                ) -> QueryResult:
        if not out.admitted:
            raise self._refusal(out, ready)
        stored = out.answer if out.replayed else None
        if stored is None:
            charged = [parse_block_value(b) for b in out.budgets if "/block:" in b]
            ready = self._ready(req, charged)  # the blocks it was charged to (a retry)
            if self._after_spend is not None:
                self._after_spend(key)
            stored = self._ledger().record_txn_answer(self.dataset, key, total(ready.run))
        if FAILED in stored:
            raise QueryFailedError(FAILED_MESSAGE)
        d = out.decision
        return QueryResult(stored["value"], stored["noise"], d.cost,
                           d.remaining.under(self.neighbouring), key, replayed=out.replayed,
                           query=req.public, budget=self._charged(out),
                           interval=stored.get("interval"),
                           details=dict(stored.get("details") or {}))

    def _charged(self, out: MultiOutcome) -> dict[str, Any]:
        binding = max(out.budgets, key=lambda b: used_of(self.store, b)) if out.budgets else None
        return {"blocks": [parse_block_value(b) for b in out.budgets if "/block:" in b],
                "quotas": [label(b) for b in out.budgets if "/quota:" in b],
                "binding": None if binding is None else label(binding)}

    def _refusal(self, out: MultiOutcome, ready: Any) -> Exception:
        b = out.refused_by or out.budgets[0]
        left = out.decision.remaining.under(self.neighbouring)
        if out.why == "locked":
            return BudgetExceededError(out.decision.reason, remaining=left,
                                       requested=ready.requested)
        err = _budget_view.refused(self.store, b, ready.charge, ready.requested, left)
        if isinstance(err, BudgetExceededError):
            return BudgetExceededError(f"{label(b)}: {err}", remaining=left,
                                       requested=ready.requested, summary=err.summary)
        return err

    # -- the queue ----------------------------------------------------------------------
    def submit(self, request: Request | Mapping[str, Any], *, wait: float,
               key: str | None = None) -> QueryResult | PendingRecord:
        """Queue ``request`` for up to ``wait`` seconds and run a scheduling pass: its
        result if admitted now, else its queue record (position and reason). Nothing is
        charged unless a pass admits it; a request no fresh block or quota could ever
        pay for is refused at once (nothing charged)."""
        import math

        if isinstance(wait, bool) or not isinstance(wait, int | float) or not (
                math.isfinite(wait) and 0 <= wait <= MAX_WAIT):
            raise fail("wait", "queue", f"a number of seconds in [0, {MAX_WAIT:g}]", wait)
        typed = request if not isinstance(request, Mapping) else request_from_json(
            request, self.neighbouring)
        req = self._plan(typed)
        chosen = self.charged_blocks(req)
        ready = self._ready(req, chosen)
        key = key or uuid.uuid4().hex
        budgets = self._budgets(chosen)
        demands = []
        for b in budgets:
            share = demand(ready.charge, self.store.initial_filter(b))
            if share is None:
                raise BudgetExceededError(
                    f"Refused: {label(b)} could not pay for this query even unused (its "
                    "whole budget is less than the query's cost); nothing was queued or "
                    "spent.", requested=ready.requested)
            demands.append(float(share))
        self._ledger().enqueue(self.dataset, key, ready.charge, budgets, demands,
                               principal=self.principal, request=req.public,
                               wait=float(wait))
        return self.status(key)

    def status(self, key: str) -> QueryResult | PendingRecord:
        """A queued request after a scheduling pass: its result once admitted (run and
        recorded on first use; a retry gets the stored answer), else its record."""
        led = self._ledger()
        led.schedule_pass(self.dataset)
        rec: PendingRecord | None = led.pending(self.dataset, key)
        if rec is None:
            raise fail("key", "queue", "the key of a request queued on this data set", key)
        if rec.status != "admitted":
            return rec
        req = self._plan(rebuilt(rec.request, self.neighbouring))
        charged = [parse_block_value(b) for b in rec.budgets if "/block:" in b]
        ready = self._ready(req, charged)
        out = led.spend_all(self.dataset, list(rec.budgets), ready.charge, key=key,
                            principal=rec.principal, request=req.public)
        return self._finish(req, ready, out, key)

    def withdraw(self, key: str) -> PendingRecord:
        """Take a waiting request out of the queue (nothing charged)."""
        return self._ledger().withdraw(  # type: ignore[no-any-return]
            self.dataset, key, "withdrawn by the analyst; nothing was spent.")

    def schedule(self) -> dict[str, str]:
        """One scheduling pass: the keys whose status changed, with the new status."""
        return dict(self._ledger().schedule_pass(self.dataset))

    # -- what the page shows ------------------------------------------------------------
    def remaining(self) -> Any:
        raise ValidationError(f"The data set {self.dataset!r} has a budget per block: see "
                              "BlockSession.view() (blocks, quotas and the queue).")

    def budget(self, like: Any = None, *, cap: int | None = None) -> Any:
        return self.remaining()

    @property
    def children(self) -> NoReturn:  # refused: module block_budgets, CHILDREN_ON_BLOCKS
        raise UnsupportedError(CHILDREN_ON_BLOCKS)

    def preview(self, request: Any) -> dict[str, Any]:
        """Free: the charge, its blocks and quotas, whether each admits it now."""
        from dpsieve.session.blocks_preview import preview_blocks
        return preview_blocks(self, request)

    def view(self, *, analyst: str | None = None) -> dict[str, Any]:
        """The blocks, quotas and queue as the budget page shows them
        (:func:`dpsieve.session.blocks_view.blocks_view`)."""
        from dpsieve.session.blocks_view import blocks_view

        return blocks_view(self.store, self.dataset, self.spec, analyst=analyst)


_SOURCE_KEYS = ("columns", "column_types", "row_count", "schema", "privacy_unit", "table",
                "release_limits", "loader", "memory_limit", "engine", "rng")


def _source_args(kw: dict[str, Any]) -> dict[str, Any]:
    extra = sorted(set(kw) - set(_SOURCE_KEYS))
    if extra:
        raise fail(extra[0], "BlockSession", f"one of {list(_SOURCE_KEYS)}", extra[0])
    return {k: kw.get(k) for k in _SOURCE_KEYS}
