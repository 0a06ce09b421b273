"""``BlockSession.preview``: what a query on a data set with blocks would be charged, to
which blocks and quotas, and whether each would admit it now, for free (nothing read,
spent, counted or written).

The request is prepared exactly as :meth:`~dpsieve.session.blocks.BlockSession.execute`
prepares it (the blocks its ``where`` may read, the plan restricted to them, the charge),
then each budget -- every block charged and the analyst's quotas -- decides on a copy of
its state; a block with unlocking also compares the fraction it would have used with the
fraction unlocked now. The figures (each released number's noise) are the plan's own,
from public values. What it cannot foresee: this request's own arrival, which unlocks more
of a block that unlocks per arriving analyst or request (the real spend counts it), and
what other requests spend before this one runs.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from dpsieve.blocks.currency import used_fraction
from dpsieve.filters.summary import describe_query
from dpsieve.ledger.passes import label
from dpsieve.queries.requests import Request, request_from_json
from dpsieve.session.block_budgets import parse_block_value

if TYPE_CHECKING:
    from dpsieve.session.blocks import BlockSession

__all__ = ["preview_blocks"]


def preview_blocks(session: BlockSession, request: Any) -> dict[str, Any]:
    """The preview of ``request`` (a typed request or a query's JSON) on ``session``
    (module docstring): ``kind``, ``charge``, ``charged`` (in words), ``requested``,
    ``blocks`` (the blocks charged), ``admitted`` (every budget admits it now), ``reason``
    (the first refusal's, or None), ``budgets`` (per block and quota: ``label``,
    ``admitted``, ``reason``, ``used_after`` and, for a block with unlocking,
    ``unlocked``) and the request's figures (``noise``)."""
    from dpsieve.filters import filter_from_json

    typed = request if isinstance(request, Request) else request_from_json(
        request, session.neighbouring)
    req = session._plan(typed)
    chosen = session.charged_blocks(req)
    ready = session._ready(req, chosen)
    st: Any = session.store
    now = time.time()
    gates = {b.budget_id: b for b in session.blocks() if b.unlock.kind != "none"}
    rows, reason = [], None
    for b in session._budgets(chosen):
        current, initial = st.load_filter(b), st.initial_filter(b)
        copy = filter_from_json(current.to_json())
        d = copy.try_spend(ready.charge)
        row: dict[str, Any] = {"label": label(b), "admitted": d.admitted,
                               "reason": d.reason if not d.admitted else None}
        if d.admitted:
            row["used_after"] = float(used_fraction(copy, initial))
            g = gates.get(b)
            if g is not None:
                row["unlocked"] = unlocked = float(g.unlocked(now))
                if row["used_after"] > unlocked:
                    row["admitted"] = False
                    row["reason"] = (f"locked: {label(b)} has {unlocked * 100:.4g} % of its "
                                     "budget unlocked now; this query would bring its use "
                                     f"to {row['used_after'] * 100:.4g} %.")
        if not row["admitted"] and reason is None:
            reason = f"{label(b)}: {row['reason']}"
        rows.append(row)
    figures = ready.figures() if ready.figures is not None else {"noise": None}
    return {"kind": typed.kind, **figures, "charge": ready.charge.to_dict(),
            "charged": describe_query(ready.charge), "requested": ready.requested.to_dict(),
            "blocks": [parse_block_value(b) for b in session._budgets(chosen)
                       if "/block:" in b],
            "admitted": reason is None, "reason": reason, "budgets": rows}
