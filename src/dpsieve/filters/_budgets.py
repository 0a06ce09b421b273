"""Budgets the auditor and natural filters compare against, with sound order checks.

A budget is a finite PLD given by its piecewise-linear tradeoff curve
(:class:`~dpsieve.accounting.tradeoff.PiecewiseLinearTradeoff`, exact order), or the
analytic curve of R_{0,delta} (+) G_mu (:class:`GaussianBudget`; delta = 0 is G_mu).

For a piecewise-linear L and a convex budget curve f_B (every tradeoff curve is convex),
L <= B iff f_L >= f_B everywhere, and since f_L is linear between its breakpoints and f_B
is convex, iff f_L(a_i) >= f_B(a_i) at L's breakpoints a_i (a convex function lies below a
segment iff it does at the segment's ends). The check is therefore finite; it is made
sound by evaluating f_B at a point rounded *down* (f_B is non-increasing) plus a margin.

The tradeoff curve of R_{0,delta} (+) G_mu is f(a) = (1-delta) f_mu(a/(1-delta)) for
a <= 1-delta and 0 beyond (with probability delta the pair is told apart), where
f_mu(a) = Phi(Phi^{-1}(1-a) - mu) (Dong, Roth, Su 2022).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_up, toward_zero
from dpsieve._validation import check_in_closed, check_nonnegative
from dpsieve.accounting.gdp import gdp_hockey_stick, gdp_tradeoff
from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff

__all__ = [
    "MARGIN",
    "GaussianBudget",
    "approx_curve",
    "pl_leq_budget",
    "pl_maybe_leq_budget",
    "pl_supremum",
]

#: Absolute margin on every float evaluation of an analytic curve (errors are ~1e-15).
MARGIN = 1e-12

FloatArray = npt.NDArray[np.float64]
Budget = PiecewiseLinearTradeoff


@dataclass(frozen=True, slots=True)
class GaussianBudget:
    """The budget R_{0,delta} (+) G_mu (approximate GDP); ``delta = 0`` is G_mu."""

    mu: float
    delta: float = 0.0

    def __post_init__(self) -> None:
        check_nonnegative("mu", self.mu, "GaussianBudget")
        check_in_closed("delta", self.delta, 0.0, 1.0, "GaussianBudget")

    def tradeoff(self, alpha: npt.ArrayLike) -> FloatArray:
        a = np.asarray(alpha, dtype=np.float64)
        keep = 1.0 - self.delta
        inner = np.clip(a / keep, 0.0, 1.0) if keep > 0 else np.ones_like(a)
        out: FloatArray = np.where(a <= keep, keep * gdp_tradeoff(self.mu, inner), 0.0)
        return out

    def hockey_stick(self, x: npt.ArrayLike) -> FloatArray:
        out: FloatArray = self.delta + (1.0 - self.delta) * gdp_hockey_stick(self.mu, x)
        return out

    def describe(self) -> dict[str, float]:
        return {"mu": self.mu, "delta": self.delta}


#: Beyond this eps, R_{eps,delta} is charged as R_{inf,delta} (the pair told apart: the top
#: of the Blackwell order, so pessimistic); e^eps would overflow a float.
EPS_CAP = 700.0


def approx_curve(eps: float, delta: float = 0.0) -> PiecewiseLinearTradeoff:
    """Tradeoff curve of R_{eps,delta}, pessimistic (e^eps bracketed upward; eps above
    ``EPS_CAP`` read as +inf)."""
    eps, delta = float(eps), float(delta)
    if eps > EPS_CAP:
        eps = math.inf
    if delta > 0.0 or eps == math.inf:
        return PiecewiseLinearTradeoff.from_approx_dp(eps, delta)
    if eps == 0.0:
        return PiecewiseLinearTradeoff.identity()
    big = Fraction(next_up(math.exp(eps)))
    c = 1 / (1 + big)
    return PiecewiseLinearTradeoff.from_segments([c, c * big], [big, 1 / big])


def pl_leq_budget(curve: PiecewiseLinearTradeoff, budget: Budget | GaussianBudget) -> bool:
    """Sound check of L <= B for a piecewise-linear L (exact when B is piecewise linear)."""
    if isinstance(budget, PiecewiseLinearTradeoff):
        return curve.leq(budget)
    keep = Fraction(1) - Fraction(budget.delta)
    for a, f in zip(curve.alphas, curve.betas, strict=True):
        if a == 0:
            if f < keep:
                return False
            continue
        if a >= keep:
            continue  # f_B = 0 there (and at a = 1)
        a_dn = toward_zero(float(a))
        fb = float(budget.tradeoff(a_dn))
        if not fb + MARGIN <= f:
            return False
    return True


def pl_maybe_leq_budget(curve: PiecewiseLinearTradeoff, budget: Budget | GaussianBudget) -> bool:
    """False only if L <= B is certainly false (the other side of :func:`pl_leq_budget`).

    Exact for a piecewise-linear B. For an analytic B, L is certainly not <= B when at a
    breakpoint f_L(a) < f_B(a_up) - MARGIN (f_B evaluated at a rounded *up* is at most the
    true f_B(a), and its float error is far below MARGIN). So
    ``pl_leq_budget(L, B) <= L <= B <= pl_maybe_leq_budget(L, B)``: the auditor uses the
    first to certify overspends and the second to certify "free".
    """
    if isinstance(budget, PiecewiseLinearTradeoff):
        return curve.leq(budget)
    keep = Fraction(1) - Fraction(budget.delta)
    for a, f in zip(curve.alphas, curve.betas, strict=True):
        if a == 0:
            if f < keep:
                return False
            continue
        if a >= keep:
            continue
        a_up = next_up(float(a))
        fb = float(budget.tradeoff(a_up))
        if f < fb - MARGIN:
            return False
    return True


def pl_supremum(curves: list[PiecewiseLinearTradeoff]) -> PiecewiseLinearTradeoff:
    """sup of finite PLDs: the lower convex envelope of their tradeoff curves (Prop. 11), exact.

    The envelope's vertices are breakpoints of the curves, so the lower convex hull of all
    breakpoints is the envelope.
    """
    if len(curves) == 1:
        return curves[0]
    pts = sorted({(a, b) for c in curves for a, b in zip(c.alphas, c.betas, strict=True)})
    hull: list[tuple[Fraction, Fraction]] = []
    for p in pts:
        if hull and hull[-1][0] == p[0]:
            continue  # same alpha: the smaller beta came first (sorted)
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            # drop (x2, y2) if it is on or above the segment (x1,y1)-(p)
            if (y2 - y1) * (p[0] - x1) >= (p[1] - y1) * (x2 - x1):
                hull.pop()
            else:
                break
        hull.append(p)
    return PiecewiseLinearTradeoff(tuple(a for a, _ in hull), tuple(b for _, b in hull))
