"""What each filter charges a query: sound conversions from a query to a filter's currency.

A query is a privacy description (:mod:`dpsieve.accounting.events`) or a PLD
(:class:`dpsieve.accounting.pld.PLD`). Each conversion returns a cost that is *at least*
the query's true cost in that currency (rounded up), or ``None`` when no finite cost in
that currency follows from what the query states. Sources:

* eps-DP => (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4); its RDP at order a is that of
  R_eps (the dominating pair of eps-DP), computed exactly and rounded up.
* mu-GDP => its RDP curve is a mu^2/2 exactly (G_mu is a Gaussian pair), so mu^2/2-zCDP.
* (eps, delta)-DP => delta-approximate (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4 on the
  good event; Whitehouse et al. 2023 use the same translation).
* rho-zCDP => RDP a * rho at every order a.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    PureDP,
    description_from_dict,
)
from dpsieve.errors import ValidationError
from dpsieve.filters._gdp_core import Atoms

__all__ = [
    "as_query",
    "is_pld",
    "pure_eps_of",
    "query_to_dict",
    "rdp_of",
    "rr_atoms",
    "symmetric_atoms",
    "zcdp_of",
]

_UP = 1.0 + 1e-12  # relative widening of float results that feed a charge


def is_pld(q: Any) -> bool:
    """True for a PLD object (duck-typed on the accounting contract, no import cycle)."""
    return hasattr(q, "hockey_stick") and hasattr(q, "compose") and hasattr(q, "to_dict")


_DESC = (PureDP, ApproxDP, ZCDP, ApproxZCDP, GDP, RDP)


def as_query(q: Any) -> Any:
    """Validate a query: a privacy description, a PLD, or a description dict."""
    if isinstance(q, _DESC) or is_pld(q):
        return q
    if isinstance(q, dict):
        if q.get("type") == "pld" or "pld" in q:
            from dpsieve.accounting.pld import PLD

            return PLD.from_dict(q.get("pld", q))
        return description_from_dict(q)
    raise ValidationError(
        "The 'query' parameter must be a PLD, a privacy description "
        f"(PureDP, ApproxDP, ZCDP, ApproxZCDP, GDP, RDP) or its dict. Got {q!r} instead.",
        parameter="query",
        constraint="a PLD or a privacy description",
        value=q,
    )


def query_to_dict(q: Any) -> dict[str, Any]:
    """JSON-ready description of a query (for decisions and audit logs)."""
    if is_pld(q):
        return {"type": "pld"}
    d: dict[str, Any] = q.to_dict()
    return d


def _rr_rdp(eps: float, alpha: float) -> float:
    """RDP of R_{eps,0} at order alpha, exactly: log(p e^{(a-1)eps} + q e^{-(a-1)eps})/(a-1)."""
    if eps == 0.0:
        return 0.0
    log_p = -math.log1p(math.exp(-eps))
    log_q = -eps + log_p
    a1 = alpha - 1.0
    lse = np.logaddexp(log_p + a1 * eps, log_q - a1 * eps)
    return float(lse) / a1


def pure_eps_of(q: Any) -> float | None:
    """Smallest eps with q <= R_eps that q states (``None``: not pure DP)."""
    if isinstance(q, PureDP):
        return q.eps
    if isinstance(q, ApproxDP):
        return q.eps if q.delta == 0.0 else None
    if isinstance(q, GDP | ZCDP | ApproxZCDP | RDP):
        zero = (
            (isinstance(q, GDP) and q.mu == 0.0)
            or (isinstance(q, ZCDP) and q.rho == 0.0)
            or (isinstance(q, ApproxZCDP) and q.rho == 0.0 and q.delta == 0.0)
        )
        return 0.0 if zero else None
    if is_pld(q):
        from dpsieve.accounting.order import smallest_pure_eps

        e = float(smallest_pure_eps(q))
        return e if math.isfinite(e) else None
    return None


def zcdp_of(q: Any) -> tuple[float, float] | None:
    """(rho, delta): q is delta-approximately rho-zCDP (``None`` if no finite rho follows)."""
    if isinstance(q, ZCDP):
        return (q.rho, 0.0)
    if isinstance(q, ApproxZCDP):
        return (q.rho, q.delta)
    if isinstance(q, GDP):
        return (q.mu * q.mu / 2.0 * _UP, 0.0)
    if isinstance(q, PureDP):
        return (q.eps * q.eps / 2.0 * _UP, 0.0)
    if isinstance(q, ApproxDP):
        return (q.eps * q.eps / 2.0 * _UP, q.delta)
    if isinstance(q, RDP):
        return None
    if is_pld(q):
        # D (+) G_mu: D is eps_D-DP, so (eps_D^2/2)-zCDP; G_mu is (mu^2/2)-zCDP; they add
        from dpsieve.filters._pld_bridge import without_gauss

        mu = float(getattr(q, "mu", 0.0))
        e = pure_eps_of(without_gauss(q)) if mu > 0.0 else pure_eps_of(q)
        return None if e is None else ((e * e + mu * mu) / 2.0 * _UP, 0.0)
    return None


def rdp_of(q: Any, alpha: float) -> float | None:
    """An upper bound on the order-alpha RDP of q (``None`` if none follows)."""
    if isinstance(q, RDP):
        for a, v in zip(q.orders, q.values, strict=True):
            if a == alpha:
                return v
        # RDP is non-decreasing in the order: use the next listed order above alpha
        above = [(a, v) for a, v in zip(q.orders, q.values, strict=True) if a >= alpha]
        return min(above)[1] if above else None
    if isinstance(q, PureDP | ApproxDP):
        if isinstance(q, ApproxDP) and q.delta > 0.0:
            return None
        if q.eps == 0.0 or not math.isfinite(q.eps):
            return q.eps
        return min(q.eps, _rr_rdp(q.eps, alpha) * _UP)
    if isinstance(q, ZCDP):
        return alpha * q.rho * _UP
    if isinstance(q, GDP):
        return alpha * q.mu * q.mu / 2.0 * _UP
    if isinstance(q, ApproxZCDP):
        return alpha * q.rho * _UP if q.delta == 0.0 else None
    if is_pld(q):
        v = float(q.rdp(alpha))
        return v * _UP if math.isfinite(v) else None
    return None


def rr_atoms(eps: float, delta: float = 0.0) -> Atoms:
    """Atoms of R_{eps,delta} (paper, Sec. 7): +inf w.p. delta, +-eps with RR masses."""
    if eps == 0.0:
        return Atoms(np.array([0.0]), np.array([1.0 - delta]), delta)
    p = (1.0 - delta) / (1.0 + math.exp(-eps))
    q = (1.0 - delta) / (1.0 + math.exp(eps))
    return Atoms(np.array([-eps, eps]), np.array([q, p]), delta)


def symmetric_atoms(q: Any) -> tuple[Atoms, float] | None:
    """(atoms, q_mu): a symmetric PLD D (+) G_{q_mu} dominating q, for the GDP residue check.

    Pure and approximate DP queries are charged as R_{eps,delta} (their tight dominating
    pair, which is symmetric); GDP queries as Id (+) G_mu. A PLD query must declare itself
    symmetric and not be optimistic; its atoms are the PLD's own (pessimistically
    discretized, merged upwards) atoms. Other descriptions: ``None``.
    """
    if isinstance(q, PureDP):
        return (rr_atoms(q.eps), 0.0) if math.isfinite(q.eps) else None
    if isinstance(q, ApproxDP):
        return (rr_atoms(q.eps, q.delta), 0.0) if math.isfinite(q.eps) else None
    if isinstance(q, GDP):
        return (Atoms(np.array([0.0]), np.array([1.0]), 0.0), q.mu)
    if is_pld(q):
        from dpsieve.filters._pld_bridge import pld_symmetric_atoms

        return pld_symmetric_atoms(q)
    return None
