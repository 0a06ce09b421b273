"""What each filter charges a query: the typed query (:func:`as_query`), its JSON, and the
symmetric atoms the GDP residue check compares (:func:`symmetric_atoms`). The conversions
of a query to a filter's currency (pure eps, zCDP, RDP, GDP of R_eps) are
:mod:`dpsieve.accounting.conversions`' (one dispatch).
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

import numpy as np
from scipy import special

from dpsieve._rounding import next_up
from dpsieve.accounting.events import (
    GDP,
    ApproxDP,
    ApproxZCDP,
    PureDP,
)
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ChargeTypeError
from dpsieve.filters._gdp_core import Atoms
from dpsieve.filters.charge import (
    Charge,
    PrivacyCharge,
    charge_to_dict,
    check_charge,
    is_privacy_charge,
)

__all__ = ["as_query", "delta_refusal", "is_pld", "query_to_dict", "rr_atoms", "symmetric_atoms"]

def is_pld(q: object) -> TypeGuard[PLD]:
    """True for a PLD object."""
    return isinstance(q, PLD)


def as_query(q: Charge) -> PrivacyCharge:
    """A budget filter's query: a privacy description or a PLD, typed (a dict or a training
    step is refused here: JSON is mapped at the edges, :mod:`dpsieve.filters.charge`)."""
    q = check_charge(q)
    if is_privacy_charge(q):
        return q
    raise ChargeTypeError(
        "The 'query' parameter must be a PLD or a privacy description (PureDP, ApproxDP, "
        f"ZCDP, ApproxZCDP, GDP, RDP); a training step goes to a training filter. Got {q!r} "
        "instead.",
        parameter="query",
        constraint="a PLD or a privacy description",
        value=q,
    )


def query_to_dict(q: Charge) -> dict[str, Any]:
    """JSON-ready description of a query (for decisions and audit logs)."""
    return charge_to_dict(q)


def rr_atoms(eps: float, delta: float = 0.0) -> Atoms:
    """Atoms of R_{eps,delta} (paper, Sec. 7): +inf w.p. delta, +-eps with RR masses.

    Masses from ``expit`` (no overflow for any eps); the mass at +eps is rounded up (a larger
    mass at a positive loss only raises h on x >= 1, where symmetric queries are compared).
    """
    eps = float(eps)
    delta = float(delta)
    if eps == 0.0:
        return Atoms(np.array([0.0]), np.array([1.0 - delta]), delta)
    p = min(1.0 - delta, next_up((1.0 - delta) * float(special.expit(eps))))
    q = (1.0 - delta) * float(special.expit(-eps))
    return Atoms(np.array([-eps, eps], dtype=np.float64), np.array([q, p]), delta)


def symmetric_atoms(q: Charge) -> tuple[Atoms, float] | None:
    """(atoms, q_mu): a symmetric PLD D (+) G_{q_mu} dominating q, for the GDP residue check.

    Pure and approximate DP queries are charged as R_{eps,delta} (their tight dominating
    pair, which is symmetric); GDP queries as Id (+) G_mu. A PLD query must declare itself
    symmetric and not be optimistic; its atoms are the PLD's own (pessimistically
    discretized, merged upwards) atoms. Other descriptions: ``None``.
    """
    if isinstance(q, PureDP):
        return (rr_atoms(q.eps), 0.0) if math.isfinite(q.eps) else None
    if isinstance(q, ApproxDP):
        if q.delta >= 1.0:
            return None
        return (rr_atoms(q.eps, q.delta), 0.0) if math.isfinite(q.eps) else None
    if isinstance(q, GDP):
        mu = float(q.mu)
        return (Atoms(np.array([0.0]), np.array([1.0]), 0.0), mu) if math.isfinite(mu) else None
    if is_pld(q):
        from dpsieve.filters._pld_bridge import pld_symmetric_atoms

        return pld_symmetric_atoms(q)
    return None


def delta_refusal(q: Charge, budget: str) -> str:
    """Why a ``budget`` (pure, zCDP, RDP, GDP) can never admit ``q`` if it has a delta > 0
    (an ``ApproxDP``/``ApproxZCDP`` query, e.g. DP key selection's charge), else "".

    Such a query may put mass delta on infinite privacy loss (its PLD is dominated by, and
    may equal, R_{eps,delta}); a pure, zCDP, Renyi or Gaussian budget has no such mass, so
    no budget left can pay it (a residue U with U (+) L <= B needs L's mass at +inf in B).
    """
    dq = getattr(q, "delta", 0.0) if isinstance(q, ApproxDP | ApproxZCDP) else 0.0
    if not dq > 0:
        return ""
    return (f": the query has delta {dq:.4g} > 0, i.e. may lose all privacy with probability "
            f"delta, and a {budget} budget has no delta to pay it; open an (eps, delta) "
            "budget (ApproxDP) or an approximate-zCDP one (ApproxZCDP)")

