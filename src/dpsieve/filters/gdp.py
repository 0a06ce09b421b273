"""GDP filters: the naive GDP filter, the GDP residue filter, and its approximate-GDP variant.

* Naive GDP filter (Smith & Thakurta 2022; Koskela et al. 2022): charge each query the
  smallest nu with L <= G_nu and admit while sum nu_i^2 <= mu^2; residue
  G_sqrt(mu^2 - nu^2) (paper, Sec. 4).
* GDP residue filter (paper, Def. 7): U(G_mu, L) = G_mu' with mu' the largest value such
  that G_mu' (+) L <= G_mu. Never worse than naive. mu' is found by a sound search
  (:func:`dpsieve.filters._gdp_search.residue_mu`): the returned mu' is at or below the true
  largest value, so the residue condition holds. Gaussian queries compose in closed form.
* Approximate-GDP residue filter (ours, docs/proofs/filters.md): budget R_{0,delta} (+) G_mu.
  A query with mass d at +inf and finite part L_f is admitted with residue
  R_{0,delta'} (+) G_mu', where (1 - delta')(1 - d) >= 1 - delta and G_mu' (+) L_f <= G_mu.

A budget given as an (eps, delta) target is converted to the GDP budget whose curve meets
it, rounded down (:func:`dpsieve.accounting.gdp.gdp_mu_for`), i.e. optimistically.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from dpsieve._rounding import sqrt_down as rd_sqrt_down
from dpsieve._rounding import sqrt_up, toward_zero
from dpsieve._validation import check_in_closed, check_nonnegative
from dpsieve.accounting.conversions import smallest_gdp_mu_rr_up
from dpsieve.accounting.events import ApproxDP, PureDP
from dpsieve.accounting.gdp import gdp_mu_for
from dpsieve.filters._common import FilterBase, StateReader, frac_from_json, frac_to_json
from dpsieve.filters._gdp_core import Atoms
from dpsieve.filters._gdp_search import residue_mu, smallest_gdp_mu_atoms
from dpsieve.filters._queries import as_query, delta_refusal, query_to_dict, symmetric_atoms
from dpsieve.filters.base import BudgetLeft, Charge, Decision

__all__ = [
    "ApproxGDPResidueFilter",
    "GDPResidueFilter",
    "NaiveGDPFilter",
    "gdp_residue_update",
    "naive_gdp_cost",
    "sqrt_down",
]


def sqrt_down(x: Fraction) -> float:
    """A float r >= 0 with r^2 <= x exactly (:func:`dpsieve._rounding.sqrt_down`; 0 for a
    residue x <= 0; OverflowError past the floats: no filter states such a budget).
    Memoised: a decision and the ``remaining()`` after it read the same squared budget
    several times (a pure function of the exact value)."""
    return _sqrt_down_memo(x) if x > 0 else 0.0


@functools.lru_cache(maxsize=256)
def _sqrt_down_memo(x: Fraction) -> float:
    return rd_sqrt_down(x, finite=True)


def naive_gdp_cost(query: Charge) -> float:
    """Smallest nu (rounded up) with query <= G_nu; ``inf`` if no GDP bound follows.

    For D (+) G_q: nu = sqrt(nu_D^2 + q^2) (G_a (+) G_b = G_sqrt(a^2+b^2)), rounded up.
    """
    q = as_query(query)
    if isinstance(q, PureDP) or (isinstance(q, ApproxDP) and q.delta == 0.0):
        return smallest_gdp_mu_rr_up(float(q.eps))  # exact for R_eps, rounded up
    sa = symmetric_atoms(q)
    if sa is None:
        return math.inf
    atoms, g = sa
    nu_d = _smallest_mu(atoms)
    if not math.isfinite(nu_d):
        return math.inf
    if nu_d == 0.0:
        return g
    if g == 0.0:
        return nu_d
    return sqrt_up(Fraction(nu_d) ** 2 + Fraction(g) ** 2, finite=True)


def _smallest_mu(atoms: Atoms) -> float:
    """Certified upper bound on the smallest nu with L <= G_nu (0 for Id, inf if none).

    Memoised on the atoms' value (:func:`_smallest_mu_cached`).
    """
    if atoms.is_identity:
        return 0.0
    if atoms.p_inf > 0.0:
        return math.inf
    zb = np.ascontiguousarray(atoms.z, dtype=np.float64).tobytes()
    pb = np.ascontiguousarray(atoms.p, dtype=np.float64).tobytes()
    return _smallest_mu_cached(zb, pb, float(atoms.p_inf))


def _strip_gauss(m_total: float, g: float) -> float:
    """Largest float m' with m'^2 + g^2 <= m_total^2 (exact); -1.0 if none."""
    if m_total < 0:
        return -1.0
    if g == 0.0:
        return m_total
    left = Fraction(m_total) ** 2 - Fraction(g) ** 2
    return -1.0 if left < 0 else sqrt_down(left)


def gdp_residue_update(mu: float, query: Charge) -> float:
    """mu' of the GDP residue filter for budget G_mu and this query; -1.0 if not admissible.

    The query is read as D (+) G_q (a GDP query is Id (+) G_q). mu_D, the largest value with
    G_{mu_D} (+) D <= G_mu, comes from the certified search (at or below the truth; exactly
    mu for D = Id); then mu' = sqrt(mu_D^2 - q^2) rounded down, since
    G_{mu'} (+) G_q (+) D = G_sqrt(mu'^2 + q^2) (+) D <= G_{mu_D} (+) D <= G_mu.
    """
    sa = symmetric_atoms(as_query(query))
    if sa is None:
        return -1.0
    atoms, g = sa
    return _strip_gauss(residue_mu(atoms, mu, lower=_naive_residue(atoms, mu)), g)


def _naive_residue(atoms: Atoms, mu: float) -> float:
    """sqrt(mu^2 - nu_D^2) rounded down (certified: L <= G_nu exactly composes), or 0."""
    if atoms.is_identity:
        return mu
    nu = _smallest_mu(atoms)
    left = Fraction(mu) ** 2 - Fraction(nu) ** 2 if math.isfinite(nu) else Fraction(-1)
    return sqrt_down(left) if left > 0 else 0.0


@functools.lru_cache(maxsize=256)
def _smallest_mu_cached(z: bytes, p: bytes, p_inf: float) -> float:
    """The naive GDP cost of the atoms (a pure function of their value, memoised).

    A query whose only positive loss z has at least R_z's mass there (randomized response,
    pure DP) has the closed form of :func:`smallest_gdp_mu_rr_up` (exact for R_z); other
    atoms go through the certified bisection :func:`smallest_gdp_mu_atoms`.
    """
    za = np.frombuffer(z, dtype=np.float64)
    pa = np.frombuffer(p, dtype=np.float64)
    live = pa > 0
    pos = za[live] > 0.0
    if int(np.count_nonzero(pos)) == 1:
        zp, pp = float(za[live][pos][0]), float(pa[live][pos][0])
        if pp >= float(special.expit(zp)):
            return smallest_gdp_mu_rr_up(zp, pp)
    return smallest_gdp_mu_atoms(Atoms(za, pa, p_inf))


def _budget_mu(mu: float | None, eps: float | None, delta: float | None, owner: str) -> float:
    if mu is not None:
        return check_nonnegative("mu", mu, owner)
    if eps is None or delta is None:
        from dpsieve._validation import fail

        raise fail("mu", owner, "given, or both 'eps' and 'delta'", mu)
    return gdp_mu_for(eps, delta)


class NaiveGDPFilter(FilterBase):
    """Naive GDP filter: admit while sum nu_i^2 <= mu^2 (exact in ``Fraction``)."""

    KIND = "gdp_naive"

    def __init__(
        self, mu: float | None = None, *, eps: float | None = None, delta: float | None = None
    ) -> None:
        m = _budget_mu(mu, eps, delta, "NaiveGDPFilter")
        self._mu2 = Fraction(m) ** 2
        self._spent2 = Fraction(0)

    def _state(self) -> dict[str, Any]:
        return {"mu2": frac_to_json(self._mu2), "spent2": frac_to_json(self._spent2)}

    def _load(self, state: dict[str, Any]) -> None:
        self._mu2 = frac_from_json(state["mu2"], "mu2")
        self._spent2 = frac_from_json(state["spent2"], "spent2")

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        mu2 = r.frac("mu2", lo=0)
        r.frac("spent2", lo=0, hi=mu2)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({"mu": sqrt_down(self._mu2 - self._spent2)})

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        nu = naive_gdp_cost(q)
        cost = {"mu": nu, "query": query_to_dict(q)}
        if not math.isfinite(nu):
            return Decision.of(False, "the query has no GDP bound" + delta_refusal(q, "GDP"),
                            self.remaining(), cost), None
        new = self._spent2 + Fraction(nu) ** 2
        if new > self._mu2:
            return Decision.of(False, "GDP budget exceeded", self.remaining(), cost), None
        rem = {"mu": sqrt_down(self._mu2 - new)}
        return (Decision.of(True, "admitted", rem, cost),
                dict(self._state(), spent2=frac_to_json(new)))


class GDPResidueFilter(FilterBase):
    """The GDP residue filter (paper, Def. 7 and Thm. 1): budget G_mu, update to G_mu'.

    The state is mu^2 as an exact ``Fraction``, so Gaussian queries subtract exactly
    (G_sqrt(mu^2 - nu^2) (+) G_nu = G_mu); a discrete query's certified mu' enters as the
    exact square of its float.
    """

    KIND = "gdp_residue"

    def __init__(
        self, mu: float | None = None, *, eps: float | None = None, delta: float | None = None
    ) -> None:
        self._mu2 = Fraction(_budget_mu(mu, eps, delta, "GDPResidueFilter")) ** 2

    def _state(self) -> dict[str, Any]:
        return {"mu2": frac_to_json(self._mu2)}

    def _load(self, state: dict[str, Any]) -> None:
        self._mu2 = frac_from_json(state["mu2"], "mu2")

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        r.frac("mu2", lo=0)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({"mu": sqrt_down(self._mu2)})

    def residue_mu2(self, query: Charge) -> Fraction | None:
        """mu'^2 after this query (exact), or ``None`` if it is not admissible."""
        sa = symmetric_atoms(as_query(query))
        if sa is None:
            return None
        atoms, g = sa
        if atoms.is_identity:
            left = self._mu2 - Fraction(g) ** 2
        else:
            mu = sqrt_down(self._mu2)
            m = _strip_gauss(residue_mu(atoms, mu, lower=_naive_residue(atoms, mu)), g)
            left = Fraction(m) ** 2 if m >= 0 else Fraction(-1)
        return left if left >= 0 else None

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        before = sqrt_down(self._mu2)
        left = self.residue_mu2(q)
        after = -1.0 if left is None else sqrt_down(left)
        cost = {"mu_before": before, "mu_after": after, "query": query_to_dict(q)}
        if left is None:
            return Decision.of(
                False,
                "no residue: the query is not dominated by the GDP budget"
                + delta_refusal(q, "GDP"),
                self.remaining(),
                cost,
            ), None
        return Decision.of(True, f"admitted; budget G_{after!r}", {"mu": after}, cost), {
            "mu2": frac_to_json(left)
        }


class ApproxGDPResidueFilter(FilterBase):
    """Residue filter for approximate-GDP budgets R_{0,delta} (+) G_mu (ours; see module doc).

    The delta part pays for the query's mass at +inf, the GDP part for its finite part.
    """

    KIND = "approx_gdp_residue"

    def __init__(self, mu: float, delta: float) -> None:
        self._mu = check_nonnegative("mu", mu, "ApproxGDPResidueFilter")
        self._delta = check_in_closed("delta", delta, 0.0, 1.0, "ApproxGDPResidueFilter")

    def _state(self) -> dict[str, Any]:
        return {"mu": self._mu, "delta": self._delta}

    def _load(self, state: dict[str, Any]) -> None:
        self._mu = float(state["mu"])
        self._delta = float(state["delta"])

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        r.number("mu", lo=0.0)
        r.number("delta", lo=0.0, hi=1.0)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({"mu": self._mu, "delta": self._delta})

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        qd = query_to_dict(q)
        sa = symmetric_atoms(q)
        if sa is None:
            return Decision.of(
                False, "the query has no approximate-GDP form", self.remaining(), {"query": qd}
            ), None
        atoms, g = sa
        d = atoms.p_inf
        if d >= 1.0 or d > self._delta:
            return Decision.of(
                False,
                "the query's delta exceeds the delta budget",
                self.remaining(),
                {"delta": d, "query": qd},
            ), None
        finite = Atoms(atoms.z, np.asarray(atoms.p) / (1.0 - d), 0.0)
        lower = _naive_residue(finite, self._mu)
        new_mu = _strip_gauss(residue_mu(finite, self._mu, lower=lower), g)
        new_delta = _delta_residue(self._delta, d)
        cost = {"delta": d, "mu_after": new_mu, "query": qd}
        if new_mu < 0 or new_delta < 0:
            return Decision.of(
                False, "no residue within the approximate-GDP budget", self.remaining(), cost
            ), None
        st = {"mu": new_mu, "delta": new_delta}
        return Decision.of(True, "admitted", dict(st), cost), st


def _delta_residue(delta: float, d: float) -> float:
    """Largest float delta' with (1 - delta')(1 - d) >= 1 - delta, exactly; -1.0 if none."""
    if d > delta:
        return -1.0
    if d == 0.0:
        return delta
    out = max(0.0, (delta - d) / (1.0 - d))
    one = Fraction(1)
    while out > 0 and (one - Fraction(out)) * (one - Fraction(d)) < one - Fraction(delta):
        out = toward_zero(out)
    return out
