"""``Session.preview``: what a query will be charged, the budget after it and its noise,
for free, for every kind of query.

The request is prepared exactly as :meth:`Session.execute` prepares it (every check, the
charge; :mod:`dpsieve.queries.requests`) and its charge offered to the budget's filter as
a **dry run** (``PrivacyFilter.dry_run``: no state changes; nothing is written to the
ledger, no spend is logged). No data is read: the figures are the request's own
(``Ready.figures``; for plans :func:`dpsieve.queries.preview.preview`), from public values
only. What preparing reads is what a refused query reads too: the public schema and, for
the replace-one kinds whose ``n`` is public, the row count.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpsieve.filters.summary import describe_query, display_delta, eps_of
from dpsieve.queries.requests import Request, request_from_json

if TYPE_CHECKING:
    from dpsieve.session.core import Session

__all__ = ["preview_request"]


def preview_request(session: Session, request: Any) -> dict[str, Any]:
    """The preview of ``request`` (a typed request, a :class:`~dpsieve.queries.plan.Query`
    or the JSON of any registered kind) on ``session``: ``kind``, ``charge`` (what the
    filter would be charged), ``requested``, ``admitted`` and ``reason`` (the filter's dry
    run), ``budget`` (left now) and ``budget_after`` (left after it, if admitted), the
    same as eps at ``delta`` (``eps_left``, ``eps_left_after``: rounded up, as the budget
    page states them; None where no single eps states the budget), ``charged`` (the
    charge in words), and the request's figures (``noise``: each released number's ``std``
    and ``ci95``, None where the kind states none before it runs; for plans also
    ``labels``, ``intervals`` and ``selection``)."""
    typed = request if isinstance(request, Request) else request_from_json(
        request, session.neighbouring)
    ready = typed.prepare(session._source)
    flt = session.store.load_filter(session.budget_id)
    decision = flt.dry_run(ready.charge)
    figures = ready.figures() if ready.figures is not None else {"noise": None}
    nb = session.neighbouring
    kind = str(getattr(flt, "kind", ""))
    now = flt.remaining().under(nb)
    after = decision.remaining.under(nb) if decision.admitted else None
    delta = display_delta(kind, now)
    return {"kind": typed.kind, **figures, "charge": ready.charge.to_dict(),
            "charged": describe_query(ready.charge),
            "requested": ready.requested.to_dict(),
            "admitted": decision.admitted, "reason": decision.reason,
            "budget": now.to_dict(),
            "budget_after": None if after is None else after.to_dict(),
            "eps_left": eps_of(kind, now, delta),
            "eps_left_after": None if after is None else eps_of(kind, after, delta),
            "delta": delta}
