"""Algorithm 3: the additive discretized privacy-loss-profile filter (paper, Sec. 7.2).

Buckets [eps_{i-1}, eps_i) of |privacy loss| (the last one [eps_{n-1}, inf], +inf
included) each hold a budget l_i. A symmetric query L is charged its discretized profile
p_i = P_{Z~L}[eps_{i-1} <= |Z| < eps_i]; it is admitted iff every bucket stays >= 0.
The filter also stops after k admitted queries (the theorem is for k rounds).

Charges are pessimistic: mass may only move to *higher* buckets (RR_{p,eps} with mass
moved up dominates, since RR_{eps_i} <= RR_{eps_j} for i < j and the bucket index is
revealed), so float round-off in p_i for i < n is moved to bucket n. A PLD query's profile
is read from its (pessimistic) atoms and accepted only once its dominance is verified
(:func:`_pld_profile`; docs/proofs/filters.md, Sec. 7).

Guarantee: with the budgets of Theorem 9 (:func:`dpsieve.filters.theorem9.theorem9`),
the paper states (eps', delta'); we also report the certified (eps'', delta'') of
:func:`dpsieve.filters.theorem9.certified_epsilon`, which uses only the proof's
post-processing and concentration steps.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve.accounting.events import GDP, ApproxDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.errors import UnsupportedError
from dpsieve.filters._common import (
    FilterBase,
    StateReader,
    float_down,
    float_up,
    frac_from_json,
    frac_to_json,
)
from dpsieve.filters._queries import as_query, is_pld, query_to_dict
from dpsieve.filters.base import BudgetLeft, Charge, Decision
from dpsieve.filters.theorem9 import Theorem9, certified_epsilon, theorem9

__all__ = ["AdditiveProfileFilter", "discretized_profile"]


def _bucket(grid: tuple[float, ...], v: float) -> int:
    """Index i (0-based) with grid[i] <= v < grid[i+1]; +inf and v >= grid[n-1] -> n-1."""
    n = len(grid) - 1
    for i in range(n - 1):
        if grid[i] <= v < grid[i + 1]:
            return i
    return n - 1


def discretized_profile(query: Charge, grid: tuple[float, ...]) -> list[Fraction]:
    """The pessimistic discretized profile of a symmetric query (one entry per bucket)."""
    q = as_query(query)
    n = len(grid) - 1
    out = [Fraction(0)] * n
    if isinstance(q, PureDP | ApproxDP):
        d = q.delta if isinstance(q, ApproxDP) else 0.0
        out[_bucket(grid, q.eps)] += Fraction(1) - Fraction(d)
        out[n - 1] += Fraction(d)
        return out
    if isinstance(q, GDP):
        if not math.isfinite(q.mu):
            raise UnsupportedError("discretized_profile(): GDP(inf) has no finite profile")
        if q.mu == 0.0:
            out[0] = Fraction(1)
            return out
        m, s = float(q.mu) * float(q.mu) / 2.0, float(q.mu)
        lo = np.array(grid[: n - 1])
        hi = np.array(grid[1:n])
        with np.errstate(over="ignore", invalid="ignore"):
            # a tiny s sends the arguments to +-inf (ndtr is then exactly 0 or 1); a huge one
            # makes m infinite and the masses NaN, which the clip below sends to bucket n
            pos = special.ndtr((hi - m) / s) - special.ndtr((lo - m) / s)
            neg = special.ndtr((-lo - m) / s) - special.ndtr((-hi - m) / s)
            vals = np.nan_to_num((pos + neg) * (1.0 - 1e-12) - 1e-15, nan=0.0)
        # round each finite bucket down (relative 1e-12 + absolute 1e-15, above the ~1e-16
        # error of a difference of ndtr values); the rest goes to bucket n (moved up)
        vals = np.clip(vals, 0.0, None)
        for i in range(n - 1):
            out[i] = Fraction(float(vals[i]))
        out[n - 1] = Fraction(1) - sum(out[: n - 1], Fraction(0))
        return out
    if is_pld(q):
        return _pld_profile(q, grid)
    raise UnsupportedError("discretized_profile(): the query has no symmetric discrete form")


def _pld_profile(q: PLD, grid: tuple[float, ...]) -> list[Fraction]:
    """A verified profile of a symmetric, non-optimistic PLD D (+) G_mu (mu = 0, or D = Id).

    The PLD L' is a pessimistic discretization of the (symmetric) query L: h_L <= h_L'. A
    candidate profile c is read off L''s atoms by |z| (+inf mass and any float shortfall in
    the top bucket), and accepted only if L' <= RR_{v,eps} is *verified*, v = c / max(1, sum c)
    (a probability vector below c): then L <= L' <= RR_{v,eps}, the guarantee Algorithm 3
    needs, and charging c >= v only costs more. If the check fails, the atoms are moved up
    by 1, 2, 4, ... grid steps and checked again; at worst everything goes to the top bucket
    (RR_inf dominates every PLD). Proof: docs/proofs/filters.md, Sec. 7 (bucketing
    by |z| + grid alone is not enough for composed PLDs, whose knots can sit several grid
    steps below the true loss).
    """
    if not bool(getattr(q, "symmetric", False)) or q.direction == "optimistic":
        raise UnsupportedError("discretized_profile(): the PLD must be symmetric, not optimistic")
    z = np.asarray(q.losses, dtype=np.float64)
    p = np.asarray(q.probs, dtype=np.float64)
    keep = p > 0
    z, p = z[keep], p[keep]
    if q.mu > 0.0:
        if z.size == 1 and z[0] == 0.0:
            return discretized_profile(GDP(float(q.mu)), grid)
        raise UnsupportedError(
            "discretized_profile(): a PLD with both a discrete and a Gaussian part has no "
            "additive profile; discretize() it first"
        )
    n = len(grid) - 1
    inf_mass = float(q.inf_mass)
    g = float(q.grid)
    top_edge = grid[n - 1]
    shift = 0.0
    while True:
        c = _bucketed(np.abs(z) + shift, p, inf_mass, grid)
        if _verified(c, grid, z, p, inf_mass):
            return c
        if shift >= top_edge:
            break
        shift = g if shift == 0.0 else 2.0 * shift
    total = sum((Fraction(float(x)) for x in p), Fraction(inf_mass))
    return [Fraction(0)] * (n - 1) + [max(Fraction(1), total)]


def _bucketed(
    a: npt.NDArray[np.float64], p: npt.NDArray[np.float64], inf_mass: float, grid: tuple[float, ...]
) -> list[Fraction]:
    """Masses p at |loss| a summed per bucket, +inf mass and any shortfall on top."""
    n = len(grid) - 1
    idx = np.searchsorted(np.asarray(grid[1:n]), a, side="right")  # grid[i] <= a < grid[i+1]
    # correctly rounded bucket sums: the check verifies the profile actually charged, and
    # any rounding of these sums is covered by it (docs/proofs/filters.md, Sec. 7)
    out = [Fraction(math.fsum(p[idx == i].tolist())) for i in range(n)]
    out[n - 1] += Fraction(inf_mass)
    total = sum(out, Fraction(0))
    if total < 1:
        out[n - 1] += 1 - total  # float shortfall goes to the top bucket (moved up)
    return out


#: Relative slack of the dominance check per term (each float term is within a few ulp).
_REL = 1e-12


def _verified(
    c: list[Fraction],
    grid: tuple[float, ...],
    z: npt.NDArray[np.float64],
    p: npt.NDArray[np.float64],
    inf_mass: float,
) -> bool:
    """Certified h_L'(x) <= h_{RR_{v,eps}}(x) for all x >= 1, v = c / max(1, sum c).

    On x >= 1, h of RR_{v,eps} is sum_{i<n} v_i (e^{eps_i} - x)_+/(1 + e^{eps_i}) + v_n:
    linear between consecutive e^{eps_i} and constant after e^{eps_{n-1}}, while h_L' is
    convex and decreasing; so h_L' - h_RR is convex on each piece and non-increasing on the
    last, and the check at x = 1 and x = e^{eps_i} (i < n) covers every x >= 1. In log form
    at t = log x: h_L'(e^t) = inf + sum_j p_j (-expm1(t - z_j))_+ and
    h_RR(e^t) = sum_{eps_i > t} v_i (-expm1(t - eps_i)) / (1 + e^{-eps_i}) + v_n. Each term is
    within a few ulp (positive terms, no cancellation), so the left side is raised and the
    right lowered by (N + 16) 2^-52 + 1e-12 relative, N the number of terms.
    """
    n = len(grid) - 1
    total = sum(c, Fraction(0))
    scale = max(Fraction(1), total)
    v = [float_down(ci / scale) for ci in c]
    eps_in = np.asarray(grid[1:n], dtype=np.float64)
    rel = (z.size + n + 16) * 2.0**-52 + _REL
    with np.errstate(over="ignore", under="ignore"):
        for t in [0.0, *grid[1:n]]:
            live = z > t
            lhs = inf_mass + float(np.sum(p[live] * -np.expm1(t - z[live])))
            above = eps_in > t
            terms = -np.expm1(t - eps_in[above]) / (1.0 + np.exp(-eps_in[above]))
            rhs = float(np.sum(np.asarray(v[: n - 1])[above] * terms)) + v[n - 1]
            if not lhs * (1.0 + rel) <= rhs * (1.0 - rel):
                return False
    return True


class AdditiveProfileFilter(FilterBase):
    """Algorithm 3 with Theorem 9's buckets and budgets for (eps, delta, k)."""

    KIND = "additive_profile"

    def __init__(self, eps: float, delta: float, k: int) -> None:
        t9 = theorem9(eps, delta, k)
        self._params = (t9.eps, t9.delta, t9.k)
        self._t9: Theorem9 | None = t9
        self._spent = [Fraction(0)] * t9.n
        self._count = 0

    @property
    def constants(self) -> Theorem9:
        if self._t9 is None:
            self._t9 = theorem9(*self._params)
        return self._t9

    def guarantee(self) -> dict[str, Any]:
        t9 = self.constants
        e2, d2 = certified_epsilon(t9)
        return {
            "paper_theorem9": {"eps": t9.eps_prime, "delta": t9.delta_prime},
            "certified": {"eps": e2, "delta": d2},
        }

    def _state(self) -> dict[str, Any]:
        e, d, k = self._params
        return {
            "eps": e,
            "delta": d,
            "k": k,
            "spent": [frac_to_json(s) for s in self._spent],
            "count": self._count,
        }

    def _load(self, state: dict[str, Any]) -> None:
        self._params = (float(state["eps"]), float(state["delta"]), int(state["k"]))
        self._t9 = None
        self._spent = [frac_from_json(s, "spent") for s in state["spent"]]
        self._count = int(state["count"])

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        eps = r.number("eps", lo=0.0, lo_open=True)
        delta = r.number("delta", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        k = r.integer("k", lo=1)
        try:
            t9 = theorem9(eps, delta, k)
        except (ValueError, ArithmeticError):
            raise r.error("k", "parameters for which Theorem 9's constants exist", k) from None
        spent = r.listed("spent", r.frac_item(lo=0), size=t9.n)
        for i, (s, b) in enumerate(zip(spent, t9.ell, strict=True)):
            r.require(s <= Fraction(b), f"spent[{i}]", f"<= the bucket budget {b!r}", float(s))
        r.integer("count", lo=0, hi=k)

    def _remaining(self) -> BudgetLeft:
        ell = self.constants.ell
        return BudgetLeft({
            "buckets": [float(Fraction(b) - s) for b, s in zip(ell, self._spent, strict=True)],
            "rounds_left": self._params[2] - self._count,
        })

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        t9 = self.constants
        qd = query_to_dict(q)
        if self._count >= t9.k:
            return Decision.of(False, "k rounds used", self.remaining(), {"query": qd}), None
        try:
            prof = discretized_profile(q, t9.eps_grid)
        except UnsupportedError as err:
            return Decision.of(False, str(err), self.remaining(), {"query": qd}), None
        new = [s + p for s, p in zip(self._spent, prof, strict=True)]
        cost = {
            "profile": [float_up(p) for p in prof],
            "exact": [frac_to_json(p) for p in prof],
            "query": qd,
        }
        if any(v > Fraction(b) for v, b in zip(new, t9.ell, strict=True)):
            return Decision.of(False, "a bucket would go negative", self.remaining(), cost), None
        state = dict(self._state(), spent=[frac_to_json(v) for v in new], count=self._count + 1)
        rem = {
            "buckets": [float(Fraction(b) - v) for b, v in zip(t9.ell, new, strict=True)],
            "rounds_left": t9.k - self._count - 1,
        }
        return Decision.of(True, "admitted", rem, cost), state
