"""Algorithm 3: the additive discretized privacy-loss-profile filter (paper, Sec. 7.2).

Buckets [eps_{i-1}, eps_i) of |privacy loss| (the last one [eps_{n-1}, inf], +inf
included) each hold a budget l_i. A symmetric query L is charged its discretized profile
p_i = P_{Z~L}[eps_{i-1} <= |Z| < eps_i]; it is admitted iff every bucket stays >= 0.
The filter also stops after k admitted queries (the theorem is for k rounds).

Charges are pessimistic: mass may only move to *higher* buckets (RR_{p,eps} with mass
moved up dominates, since RR_{eps_i} <= RR_{eps_j} for i < j and the bucket index is
revealed), so float round-off in p_i for i < n is moved to bucket n.

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
from scipy import special

from dpsieve.accounting.events import GDP, ApproxDP, PureDP
from dpsieve.errors import UnsupportedError
from dpsieve.filters._common import FilterBase, StateReader, frac_from_json, frac_to_json
from dpsieve.filters._queries import as_query, is_pld, query_to_dict
from dpsieve.filters.base import Decision
from dpsieve.filters.theorem9 import Theorem9, certified_epsilon, theorem9

__all__ = ["AdditiveProfileFilter", "discretized_profile"]


def _bucket(grid: tuple[float, ...], v: float) -> int:
    """Index i (0-based) with grid[i] <= v < grid[i+1]; +inf and v >= grid[n-1] -> n-1."""
    n = len(grid) - 1
    for i in range(n - 1):
        if grid[i] <= v < grid[i + 1]:
            return i
    return n - 1


def discretized_profile(query: Any, grid: tuple[float, ...]) -> list[Fraction]:
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


def _pld_profile(q: Any, grid: tuple[float, ...]) -> list[Fraction]:
    """Profile of a symmetric, non-optimistic PLD D (+) G_mu (mu = 0, or D = Id).

    The accounting layer's pessimistic discretization splits each unit of true loss mass
    between the two neighbouring knots, so the true |loss| of mass at knot z is at most
    |z| + grid: bucketing by |z| + grid only moves mass up (docs/proofs/filters.md).
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
    out = [Fraction(0)] * n
    for zi, pi in zip(z, p, strict=True):
        out[_bucket(grid, abs(float(zi)) + float(q.grid))] += Fraction(float(pi))
    out[n - 1] += Fraction(float(q.inf_mass))
    total = sum(out, Fraction(0))
    if total < 1:
        out[n - 1] += 1 - total  # float shortfall goes to the top bucket (moved up)
    return out
    return out


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

    def remaining(self) -> dict[str, Any]:
        ell = self.constants.ell
        return {
            "buckets": [float(Fraction(b) - s) for b, s in zip(ell, self._spent, strict=True)],
            "rounds_left": self._params[2] - self._count,
        }

    def _decide(self, query: Any) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        t9 = self.constants
        qd = query_to_dict(q)
        if self._count >= t9.k:
            return Decision(False, "k rounds used", self.remaining(), {"query": qd}), None
        try:
            prof = discretized_profile(q, t9.eps_grid)
        except UnsupportedError as err:
            return Decision(False, str(err), self.remaining(), {"query": qd}), None
        new = [s + p for s, p in zip(self._spent, prof, strict=True)]
        cost = {"profile": [float(p) for p in prof], "query": qd}
        if any(v > Fraction(b) for v, b in zip(new, t9.ell, strict=True)):
            return Decision(False, "a bucket would go negative", self.remaining(), cost), None
        state = dict(self._state(), spent=[frac_to_json(v) for v in new], count=self._count + 1)
        rem = {
            "buckets": [float(Fraction(b) - v) for b, v in zip(t9.ell, new, strict=True)],
            "rounds_left": t9.k - self._count - 1,
        }
        return Decision(True, "admitted", rem, cost), state
