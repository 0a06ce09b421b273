"""Tradeoff curves of remaining budgets, for the budget page (display, not accounting).

Given a budget left (a typed :class:`~dpsieve.filters.base.BudgetLeft`, read by
:func:`description_of`) as a privacy description, return beta = f(alpha) on a grid: the
smallest type-II error of any test at type-I error alpha (Dong, Roth, Su 2022, Def. 2.1).

* GDP(mu): f = G_mu, exact (:func:`dpsieve.accounting.gdp.gdp_tradeoff`).
* (eps, delta): f(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a))
  (Kairouz, Oh, Viswanath 2015; Dong et al. Prop. 2.5), exact.
* a mixed budget R_a (+) G_mu (:class:`dpsieve.filters.MixedFilter`), and zCDP rho,
  approximate zCDP, RDP: the curve of the (eps, delta(eps)) family they imply,
  max over an eps grid -- zCDP: delta(eps) = exp(-(eps - rho)^2 / (4 rho)) (Bun & Steinke
  2016, Prop. 1.3); RDP: delta(eps) = min_a exp(-(a - 1)(eps - r_a)) (Mironov 2017,
  Prop. 3); mixed: delta(eps) is the certified upper bound of docs/proofs/mixed.md §3.
  These lie *below* the true curves (a weaker claim than the budget): the picture never
  overstates the privacy left.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    PrivacyDescription,
    PureDP,
)
from dpsieve.accounting.gdp import gdp_tradeoff
from dpsieve.filters.base import BudgetLeft

__all__ = ["ALPHAS", "MixedBudget", "description_of", "tradeoff_curve"]

ALPHAS: npt.NDArray[np.float64] = np.linspace(0.0, 1.0, 101)
_EPS_GRID = np.concatenate([np.linspace(0.0, 2.0, 81)[1:], np.geomspace(2.0, 200.0, 80)])


def _approx(eps: float, delta: float, a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    if math.isinf(eps):
        return np.zeros_like(a)
    one = 1.0 - delta
    if eps > 709.0:  # e^eps overflows a float: f is 1 - delta at alpha = 0, else 0 (exact
        return np.where(a == 0.0, max(0.0, one), 0.0)  # on any grid with alpha >= 1e-300)
    out: npt.NDArray[np.float64] = np.maximum.reduce([np.zeros_like(a), one - math.exp(eps) * a,
                              math.exp(-eps) * (one - a)])
    return out


def _family(deltas: npt.NDArray[np.float64], extra: float,
            a: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    out = np.zeros_like(a)
    for e, d in zip(_EPS_GRID, deltas, strict=True):
        dd = min(1.0, float(d) + extra)
        if dd < 1.0:
            out = np.maximum(out, _approx(float(e), dd, a))
    return out


@dataclass(frozen=True, slots=True)
class MixedBudget:
    """The budget R_a (+) G_mu of a mixed filter (a pure part a, a Gaussian part mu)."""

    pure: Fraction
    mu: float


def description_of(left: BudgetLeft) -> PrivacyDescription | MixedBudget | None:
    """What a budget left states, for its curve: a mixed budget's split as
    :class:`MixedBudget`, else :meth:`BudgetLeft.description
    <dpsieve.filters.base.BudgetLeft.description>` (None where no description states it)."""
    parts = left.mixed_split()
    return MixedBudget(*parts) if parts is not None else left.description()


def tradeoff_curve(desc: Any, alphas: npt.NDArray[np.float64] = ALPHAS) -> list[float] | None:
    """f(alpha) on ``alphas`` for a description (see module docstring), or None."""
    a = np.asarray(alphas, dtype=np.float64)
    if isinstance(desc, GDP):
        f = gdp_tradeoff(desc.mu, a) if math.isfinite(desc.mu) else np.zeros_like(a)
    elif isinstance(desc, PureDP):
        f = _approx(desc.eps, 0.0, a)
    elif isinstance(desc, ApproxDP):
        f = _approx(desc.eps, desc.delta, a)
    elif isinstance(desc, ZCDP | ApproxZCDP):
        rho = max(desc.rho, 1e-300)
        # only where rho < eps (np.where would evaluate both branches: at rho = 1e308 the
        # unused square overflows, a 500 under warnings-as-errors); for a tiny rho the
        # quotient may overflow to inf, whose exp(-inf) = 0 is the exact limit
        d = np.ones_like(_EPS_GRID)
        m = rho < _EPS_GRID
        with np.errstate(over="ignore", under="ignore"):
            d[m] = np.exp(-((_EPS_GRID[m] - rho) ** 2) / (4 * rho))
        f = _family(d, desc.delta if isinstance(desc, ApproxZCDP) else 0.0, a)
    elif isinstance(desc, MixedBudget):
        from dpsieve.filters.mixed import delta_upper

        d = np.array([delta_upper(desc.pure, desc.mu, float(e)) for e in _EPS_GRID])
        f = _family(d, 0.0, a)
    elif isinstance(desc, RDP):
        orders = np.asarray(desc.orders)[:, None]
        vals = np.asarray(desc.values)[:, None]
        with np.errstate(over="ignore"):
            d = np.min(np.exp(-(orders - 1) * (_EPS_GRID[None, :] - vals)), axis=0)
        f = _family(d, 0.0, a)
    else:
        return None
    return [round(float(x), 6) for x in np.clip(f, 0.0, 1.0)]
