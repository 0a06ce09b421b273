"""``Session.preview``: a plan's charge, the budget after it and its noise, for free.

The plan is prepared exactly as :meth:`Session.query` prepares it (every check, the
charge) and offered to the budget's filter as a **dry run** (``PrivacyFilter.dry_run``:
no state changes; nothing is written to the ledger, no spend is logged). No data is read:
the figures are those of :func:`dpsieve.queries.preview.preview`, public values only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpsieve._validation import fail
from dpsieve.queries.prepare import prepare
from dpsieve.queries.preview import preview
from dpsieve.queries.requests import PlanRequest, request_from_json

if TYPE_CHECKING:
    from dpsieve.session.core import Session

__all__ = ["preview_plan"]


def preview_plan(session: Session, plan: Any) -> dict[str, Any]:
    """The preview of ``plan`` (a Query, its JSON, or a one-aggregation shape) on
    ``session``: :func:`~dpsieve.queries.preview.preview`'s figures, and ``admitted``,
    ``reason``, ``budget`` (left now) and ``budget_after`` (left after it, if admitted)."""
    request = request_from_json(plan, session.neighbouring)
    if not isinstance(request, PlanRequest):
        raise fail("plan", "Session.preview", "a query plan or a count, sum, mean, histogram "
                   "or linear query", request.kind)
    prepared = prepare(request.plan, session.schema(), session.neighbouring)
    flt = session.store.load_filter(session.budget_id)
    decision = flt.dry_run(prepared.charge.description)
    return {**preview(prepared), "admitted": decision.admitted, "reason": decision.reason,
            "budget": flt.remaining().to_dict(),
            "budget_after": decision.remaining.to_dict() if decision.admitted else None}
