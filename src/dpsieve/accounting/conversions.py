"""Conversions between privacy descriptions, one dispatch: what a query -- a privacy
description (:mod:`dpsieve.accounting.events`) or a PLD (:class:`dpsieve.accounting.pld.PLD`)
-- implies in another family: pure eps (:func:`pure_eps_of`), (rho, delta)-zCDP
(:func:`zcdp_of`), RDP at an order (:func:`rdp_of`), mu-GDP of R_eps
(:func:`smallest_gdp_mu_rr_up`). :func:`convert` looks each (type, family) up in one table
(:data:`CONVERSIONS`); the filters charge queries in their currency through it.

Each conversion returns a cost that is *at least* the query's true cost in that family
(rounded up), or ``None`` when no finite cost in that family follows from what the query
states. Sources:

* eps-DP => (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4); its RDP at order a is that of
  R_eps (the dominating pair of eps-DP), computed in a cancellation-free form and rounded
  up, never above the exact bounds eps and a eps^2/2 (:func:`rr_rdp_up`).
* mu-GDP => its RDP curve is a mu^2/2 exactly (G_mu is a Gaussian pair), so mu^2/2-zCDP.
* (eps, delta)-DP => delta-approximate (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4 on the
  good event; Whitehouse et al. 2023 use the same translation).
* rho-zCDP => RDP a * rho at every order a.
* eps-DP => mu-GDP with mu = 2 Phi^{-1}(1/(1 + e^{-eps})), exactly the smallest
  (:func:`smallest_gdp_mu_rr_up`).

Costs that are polynomial in the stated parameters (eps^2/2, a rho, a mu^2/2) are exact
``Fraction``s: no rounding at all, so a positive parameter always costs a positive amount,
even when its square underflows in floating point. Transcendental costs are widened by
1e-12 relative and one ulp, and a tiny float result (below 1e-290, where relative accuracy
may be lost) is replaced by an exact rational bound.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any, Literal

import numpy as np
from scipy import special

from dpsieve._rounding import next_up, rel_up, round_up
from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    PureDP,
)
from dpsieve.accounting.pld import PLD

__all__ = ["CONVERSIONS", "Family", "convert", "discrete_part", "pure_eps_of", "rdp_of",
           "rr_rdp_up", "smallest_gdp_mu_rr_up", "zcdp_of"]

#: Relative widening of a transcendental float result that feeds a charge. Each such result
#: below is computed in a stable form with a relative error of at most ~100 ulp (2e-14).
_UP = 1.0 + 1e-12
#: Below this a float result may have lost its relative accuracy (subnormal intermediates):
#: it is not used, and an exact rational bound is charged instead.
_TINY = 1e-290
#: sqrt(2 pi) / 2 rounded up (the slope of the smallest GDP mu of R_eps at eps = 0).
_SQRT_2PI_HALF_UP = Fraction(1.2533141373155004)


def _widen_up(x: float) -> Fraction | None:
    """x (1 + 1e-12), one float step further up, exactly; ``None`` if x is not usable
    (not finite, below the tiny threshold, or widened past the largest float: at
    eps = 1.8e308 the widening overflowed to inf and Fraction(inf) raised, a 500 on the
    service; callers then use their exact bounds)."""
    if not (x >= _TINY) or not math.isfinite(x):
        return None
    up = rel_up(x, _UP - 1.0)
    return Fraction(up) if math.isfinite(up) else None


def _order_minus_one_up(alpha: float) -> float:
    """A float >= alpha - 1 (exact unless the subtraction rounded; then one step up)."""
    x = alpha - 1.0
    if Fraction(x) < Fraction(alpha) - 1:
        x = next_up(x)
    return x


def rr_rdp_up(eps: float, alpha: float) -> Fraction:
    """An upper bound on the order-alpha RDP of R_eps (the pair of eps-DP), exactly.

    D_a(R_eps) = log(p e^{x eps} + q e^{-x eps}) / x, x = a - 1, p = 1/(1 + e^{-eps}),
    q = 1 - p (Mironov 2017, Prop. 5). Computed without cancellation:

    * x eps <= 1: p e^{x e} + q e^{-x e} - 1 = tanh(e/2) sinh(x e) + 2 sinh(x e / 2)^2, a sum
      of non-negative terms, so D = log1p(that) / x to a few ulp;
    * x eps > 1: D = eps + (log1p(e^{-(2x + 1) eps}) - log1p(e^{-eps})) / x (here D >= 0.3 eps,
      so the subtraction costs at most a factor ~10 in relative error).

    The float result is widened by 1e-12 relative and one ulp, and the charge is the smallest
    of it and two exact bounds that hold at every order: eps (pure DP) and a eps^2/2 (eps-DP
    implies (eps^2/2)-zCDP, Bun & Steinke 2016, Prop. 1.4). A tiny eps (float result below
    1e-290) is charged the exact a eps^2/2, so a positive eps always costs a positive amount.
    """
    e = Fraction(eps)
    best = min(e, Fraction(alpha) * e * e / 2)
    if eps == 0.0:
        return Fraction(0)
    x = _order_minus_one_up(alpha)
    xe = x * eps
    if xe <= 1.0:
        u = math.tanh(eps / 2.0) * math.sinh(xe) + 2.0 * math.sinh(xe / 2.0) ** 2
        d = math.log1p(u) / x
    else:
        d = eps + (math.log1p(math.exp(-(2.0 * xe + eps))) - math.log1p(math.exp(-eps))) / x
    up = _widen_up(d)
    return best if up is None else min(best, up)


def discrete_part(pld: PLD, direction: str | None = None) -> PLD:
    """The discrete part D of D (+) G_mu as a new PLD (fresh cache; same masses)."""
    return type(pld)(pld.grid, pld.offset, pld.probs, pld.inf_mass, 0.0,
                     pld.direction if direction is None else direction, pld.symmetric)


def _finite(x: float) -> Fraction | None:
    return Fraction(x) if math.isfinite(x) else None


# -- pure eps: the smallest eps with q <= R_eps that q states ------------------------------
def _pure_of_pld(q: PLD) -> float | None:
    from dpsieve.accounting.order import smallest_pure_eps

    e = float(smallest_pure_eps(q))
    return e if math.isfinite(e) else None


# -- zCDP: (rho, delta), exact ---------------------------------------------------------------
def _zcdp_of_eps(q: PureDP | ApproxDP) -> tuple[Fraction, Fraction] | None:
    e = _finite(float(q.eps))
    d = Fraction(q.delta) if isinstance(q, ApproxDP) else Fraction(0)
    return None if e is None else (e * e / 2, d)


def _zcdp_of_pld(q: PLD) -> tuple[Fraction, Fraction] | None:
    # D (+) G_mu: D is eps_D-DP, so (eps_D^2/2)-zCDP; G_mu is (mu^2/2)-zCDP; they add
    mu = float(getattr(q, "mu", 0.0))
    ed = pure_eps_of(discrete_part(q)) if mu > 0.0 else pure_eps_of(q)
    if ed is None or not math.isfinite(mu):
        return None
    return ((Fraction(ed) ** 2 + Fraction(mu) ** 2) / 2, Fraction(0))


# -- RDP at an order, exact ------------------------------------------------------------------
def _rdp_of_rdp(q: RDP, alpha: float) -> Fraction | None:
    for a, v in zip(q.orders, q.values, strict=True):
        if a == alpha:
            return _finite(float(v))
    # RDP is non-decreasing in the order: use the next listed order above alpha
    above = [(a, v) for a, v in zip(q.orders, q.values, strict=True) if a >= alpha]
    return _finite(float(min(above)[1])) if above else None


def _rdp_of_eps(q: PureDP | ApproxDP, alpha: float) -> Fraction | None:
    if isinstance(q, ApproxDP) and q.delta > 0.0:
        return None
    eps = float(q.eps)
    return rr_rdp_up(eps, alpha) if math.isfinite(eps) else None


def _rdp_of_rho(q: ZCDP | ApproxZCDP, alpha: float) -> Fraction | None:
    if isinstance(q, ApproxZCDP) and q.delta > 0.0:
        return None
    r = _finite(float(q.rho))
    return None if r is None else Fraction(alpha) * r


def _rdp_of_gdp(q: GDP, alpha: float) -> Fraction | None:
    m = _finite(float(q.mu))
    return None if m is None else Fraction(alpha) * m * m / 2


def _rdp_of_pld(q: PLD, alpha: float) -> Fraction | None:
    v = float(q.rdp(alpha))
    if not math.isfinite(v):
        return None
    if v > 0.0:
        return Fraction(rel_up(v, _UP - 1.0))
    # the accounting layer's bound is already rounded up; a non-positive value is only
    # believed for the identity (no loss at all); anything else has no certified charge
    z = np.asarray(q.losses)[np.asarray(q.probs) > 0]
    identity = float(q.mu) == 0.0 and q.inf_mass == 0.0 and bool(np.all(z == 0.0))
    return Fraction(0) if identity else None


#: A family a description converts to.
Family = Literal["pure", "zcdp", "rdp"]

#: The one dispatch: (type of the query, family) -> conversion(query, order). A pair that is
#: absent converts to nothing (``None``): e.g. RDP to pure eps, RDP to zCDP.
CONVERSIONS: dict[tuple[type, Family], Callable[[Any, float], Any]] = {
    (PureDP, "pure"): lambda q, _: float(q.eps),
    (ApproxDP, "pure"): lambda q, _: float(q.eps) if q.delta == 0.0 else None,
    (GDP, "pure"): lambda q, _: 0.0 if q.mu == 0.0 else None,
    (ZCDP, "pure"): lambda q, _: 0.0 if q.rho == 0.0 else None,
    (ApproxZCDP, "pure"): lambda q, _: 0.0 if q.rho == 0.0 and q.delta == 0.0 else None,
    (PLD, "pure"): lambda q, _: _pure_of_pld(q),
    (ZCDP, "zcdp"): lambda q, _: (None if (r := _finite(float(q.rho))) is None
                                  else (r, Fraction(0))),
    (ApproxZCDP, "zcdp"): lambda q, _: (None if (r := _finite(float(q.rho))) is None
                                        else (r, Fraction(q.delta))),
    (GDP, "zcdp"): lambda q, _: (None if (m := _finite(float(q.mu))) is None
                                 else (m * m / 2, Fraction(0))),
    (PureDP, "zcdp"): lambda q, _: _zcdp_of_eps(q),
    (ApproxDP, "zcdp"): lambda q, _: _zcdp_of_eps(q),
    (PLD, "zcdp"): lambda q, _: _zcdp_of_pld(q),
    (RDP, "rdp"): _rdp_of_rdp,
    (PureDP, "rdp"): _rdp_of_eps,
    (ApproxDP, "rdp"): _rdp_of_eps,
    (ZCDP, "rdp"): _rdp_of_rho,
    (ApproxZCDP, "rdp"): _rdp_of_rho,
    (GDP, "rdp"): _rdp_of_gdp,
    (PLD, "rdp"): _rdp_of_pld,
}


def convert(q: object, family: Family, alpha: float = 0.0) -> Any:
    """What ``q`` implies in ``family`` (at order ``alpha`` for RDP), rounded up, or
    ``None`` when nothing finite follows (or ``q`` is not a description or a PLD)."""
    for t in type(q).__mro__:
        f = CONVERSIONS.get((t, family))
        if f is not None:
            return f(q, alpha)
    return None


def pure_eps_of(q: object) -> float | None:
    """Smallest eps with q <= R_eps that q states (``None``: not pure DP)."""
    out: float | None = convert(q, "pure")
    return out


def zcdp_of(q: object) -> tuple[Fraction, Fraction] | None:
    """(rho, delta), exact: q is delta-approximately rho-zCDP (``None``: no finite rho follows).

    Every value is an exact rational (squares of floats are not rounded), so a positive
    parameter always costs a positive amount, however small.
    """
    out: tuple[Fraction, Fraction] | None = convert(q, "zcdp")
    return out


def rdp_of(q: object, alpha: float) -> Fraction | None:
    """An upper bound on the order-alpha RDP of q, exact (``None`` if none follows).

    Non-negative always, and positive whenever the query's parameter is: a query with a
    real privacy cost is never charged 0 (so an exhausted budget refuses it).
    """
    out: Fraction | None = convert(q, "rdp", float(alpha))
    return out


def smallest_gdp_mu_rr_up(eps: float, p_plus: float | None = None) -> float:
    """A float >= the smallest mu with L <= G_mu, for a symmetric L whose only positive loss
    is ``eps`` with mass ``p_plus`` (``None``: L = R_eps, mass 1/(1 + e^{-eps})).

    On x >= 1 (enough for symmetric pairs, paper Lemma 8), h_L(x) = p_plus (1 - x e^{-eps})_+
    is linear up to e^eps and 0 after, and h_{G_mu} is convex, so it lies above its tangent at
    x = 1, which is above h_L on [1, e^eps] iff it is at both ends:
    (i) 2 Phi(mu/2) - 1 >= p_plus (1 - e^{-eps}) and (ii) Phi(-mu/2) <= 1/(1 + e^eps).
    For R_eps both read mu >= 2 Phi^{-1}(1/(1 + e^{-eps})), which is also necessary at x = 1:
    the exact smallest mu. Computed stably (erfinv of tanh(eps/2) near 0, ndtri_exp of
    log q in the tail), widened by 1e-12 relative and one ulp; for eps < 1e-150 the exact
    bound mu <= sqrt(2 pi) eps / 2 (1 + 1e-200) (Phi(z) - 1/2 >= z phi(z)) is used.
    """
    if eps == 0.0:
        return 0.0
    if not math.isfinite(eps):
        return math.inf
    if eps < 1e-150:
        # 2 Phi^{-1}(1/2 + y/2) <= sqrt(2 pi) y e^{z^2/2} (Phi(z) - 1/2 >= z phi(z)); (i) has
        # y = s <= p_plus eps, (ii) has y = tanh(eps/2) <= eps/2; e^{z^2/2} < 1 + 1e-200
        # here, and the float p_plus may sit below the true 1/2 + eps/4: factor 1 + 1e-100
        lead = Fraction(1) if p_plus is None else max(Fraction(1), 2 * Fraction(p_plus))
        return round_up(_SQRT_2PI_HALF_UP * Fraction(eps) * lead * (1 + Fraction(1, 10**100)))
    # (ii): mu >= -2 Phi^{-1}(1/(1 + e^eps))
    if eps < 1.0:
        mu2 = 2.0 * math.sqrt(2.0) * float(special.erfinv(math.tanh(eps / 2.0)))
    else:
        mu2 = -2.0 * float(special.ndtri_exp(-eps - math.log1p(math.exp(-eps))))
    mu1 = 0.0
    if p_plus is not None:
        # (i): mu >= 2 Phi^{-1}((1 + s)/2) = 2 sqrt(2) erfinv(s), s = p_plus (1 - e^{-eps})
        # (for R_eps itself s = tanh(eps/2) and (i) is (ii): only (ii) is computed, from eps,
        # since 1 - p_plus would carry the float error of p_plus at large eps)
        if p_plus > 1.0:
            return math.inf  # h_L(1) > 1: no GDP bound
        s = p_plus * -math.expm1(-eps)
        if s < 0.5:
            mu1 = 2.0 * math.sqrt(2.0) * float(special.erfinv(s))
        else:
            # log((1 - s)/2) = log((1 - p_plus) + p_plus e^{-eps}) - log 2, no cancellation
            # (1 - p_plus is exact for p_plus >= 1/2) and no underflow
            lq = math.log(1.0 - p_plus) if p_plus < 1.0 else -math.inf
            la = float(np.logaddexp(lq, math.log(p_plus) - eps)) - math.log(2.0)
            mu1 = -2.0 * float(special.ndtri_exp(la))
    mu = max(mu1, mu2)
    if not math.isfinite(mu):
        return math.inf
    return rel_up(mu, _UP - 1.0)
