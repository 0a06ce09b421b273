"""Natural filters: admit L_{t+1} iff L_1 (+) ... (+) L_{t+1} <= B.

The natural filter is free (the interaction stays within B) exactly when the queries'
composition closure is totally ordered (paper, Thm. 8). dpsieve therefore offers it as a
filter only where that holds, and enforces the family:

* :class:`NaturalGDPFilter`: GDP queries only (Cor. "GDP queries are universally free");
  G_a (+) G_b = G_sqrt(a^2+b^2). Budget G_mu, or an (eps, delta) target, for which
  G_s <= R_{eps,delta} iff delta_s(eps) <= delta (both symmetric; Lemma 8).
* :class:`NaturalZeroDeltaFilter`: (0, delta) queries only (Cor. "(0,delta) queries are
  universally free"); R_{0,a} (+) R_{0,b} = R_{0, 1-(1-a)(1-b)}, and R_{0,d} <= R_{eps,delta}
  iff d <= delta.
* :class:`NaturalApproxFilter`: any symmetric pure/approximate-DP query against an
  (eps, delta) budget — **not free** (Sec. 6.1). Built only with ``allow_general=True``;
  it never reports the budget as the guarantee, but the best of R_{eps,delta}^(+k)
  (Prop. 3), Theorem 9 and our certified bound for the declared number of rounds k, and
  refuses after those rounds.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import Any

from dpsieve._rounding import toward_zero
from dpsieve._validation import check_in_closed, check_in_open, check_int, check_nonnegative
from dpsieve.accounting.events import GDP, ApproxDP, PureDP, description_from_dict
from dpsieve.accounting.gdp import gdp_mu_for
from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff
from dpsieve.errors import UnsupportedError
from dpsieve.filters._budgets import approx_curve
from dpsieve.filters._common import (
    FilterBase,
    StateReader,
    float_up,
    frac_from_json,
    frac_to_json,
)
from dpsieve.filters._queries import as_query, is_pld, query_to_dict
from dpsieve.filters.base import BudgetLeft, Charge, Decision
from dpsieve.filters.charge import PrivacyCharge, check_charge
from dpsieve.filters.gdp import sqrt_down
from dpsieve.filters.theorem9 import certified_epsilon, composition_epsilon, theorem9

__all__ = ["NaturalApproxFilter", "NaturalGDPFilter", "NaturalZeroDeltaFilter"]

#: Largest number of segments of the exact composed curve (NaturalApproxFilter).
MAX_SEGMENTS = 50_000


class NaturalGDPFilter(FilterBase):
    """Natural filter for GDP queries (free): admit while sqrt(sum mu_i^2) <= mu_B."""

    KIND = "natural_gdp"

    def __init__(
        self, mu: float | None = None, *, eps: float | None = None, delta: float | None = None
    ) -> None:
        if mu is None:
            if eps is None or delta is None:
                raise UnsupportedError("NaturalGDPFilter needs mu, or eps and delta.")
            mu = gdp_mu_for(eps, delta)  # rounded down: G_mu <= R_{eps,delta}
        self._mu2 = Fraction(check_nonnegative("mu", mu, "NaturalGDPFilter")) ** 2
        self._sum2 = Fraction(0)

    def _state(self) -> dict[str, Any]:
        return {"mu2": frac_to_json(self._mu2), "sum2": frac_to_json(self._sum2)}

    def _load(self, state: dict[str, Any]) -> None:
        self._mu2 = frac_from_json(state["mu2"], "mu2")
        self._sum2 = frac_from_json(state["sum2"], "sum2")

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        mu2 = r.frac("mu2", lo=0)
        r.frac("sum2", lo=0, hi=mu2)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({"mu": sqrt_down(self._mu2 - self._sum2)})

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        qd = query_to_dict(q)
        if is_pld(q) and q.probs.size == 1 and q.offset == 0 and q.inf_mass == 0.0:
            q = GDP(float(q.mu))  # a PLD that is exactly G_mu (no discrete part)
        if not isinstance(q, GDP):
            return Decision.of(
                False,
                "the natural GDP filter is valid only for GDP queries (paper, Thm. 8)",
                self.remaining(),
                {"query": qd},
            ), None
        if not math.isfinite(q.mu):
            return Decision.of(
                False, "GDP(inf) exceeds any budget", self.remaining(), {"query": qd}
            ), None
        new = self._sum2 + Fraction(q.mu) ** 2
        cost = {"mu": q.mu, "query": qd}
        if new > self._mu2:
            return (Decision.of(False, "composed GDP exceeds the budget", self.remaining(),
                                cost), None)
        rem = {"mu": sqrt_down(self._mu2 - new)}
        return Decision.of(True, "admitted", rem, cost), dict(self._state(), sum2=frac_to_json(new))


class NaturalZeroDeltaFilter(FilterBase):
    """Natural filter for (0, delta) queries (free): admit while 1 - prod(1 - d_i) <= delta.

    The state is the composed delta s = 1 - prod(1 - d_i) as a float rounded up at each step
    (s' = s + d - s d computed exactly, then rounded up), so tiny deltas keep their full
    relative precision. (States stored as ``keep`` = prod(1 - d_i) by earlier versions are
    read too.)
    """

    KIND = "natural_zero_delta"

    def __init__(self, delta: float) -> None:
        self._delta = check_in_closed("delta", delta, 0.0, 1.0, "NaturalZeroDeltaFilter")
        self._spent = 0.0

    def _state(self) -> dict[str, Any]:
        return {"delta": self._delta, "spent": self._spent}

    def _load(self, state: dict[str, Any]) -> None:
        self._delta = float(state["delta"])
        if "keep" in state:
            self._spent = float_up(1 - Fraction(float(state["keep"])))
        else:
            self._spent = float(state["spent"])

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        delta = r.number("delta", lo=0.0, hi=1.0)
        if r.optional("keep"):
            keep = r.number("keep", lo=0.0, hi=1.0)
            spent = Fraction(1) - Fraction(keep)
            r.require(spent <= Fraction(delta), "keep", f">= 1 - delta ({delta!r})", keep)
        else:
            r.number("spent", lo=0.0, hi=delta)

    def _remaining(self) -> BudgetLeft:
        return BudgetLeft({"delta_spent": self._spent, "delta": self._delta})

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        qd = query_to_dict(q)
        if isinstance(q, PureDP) and q.eps == 0.0:
            d = 0.0
        elif isinstance(q, ApproxDP) and q.eps == 0.0:
            d = float(q.delta)
        else:
            return Decision.of(
                False,
                "the natural (0,delta) filter is valid only for (0, delta) queries (Thm. 8)",
                self.remaining(),
                {"query": qd},
            ), None
        s, fd = Fraction(self._spent), Fraction(d)
        spent = float_up(s + fd - s * fd)  # 1 - (1 - s)(1 - d), rounded up
        cost = {"delta": d, "query": qd}
        if spent > self._delta:
            return Decision.of(
                False, "composed delta exceeds the budget", self.remaining(), cost
            ), None
        st = {"delta": self._delta, "spent": spent}
        return Decision.of(True, "admitted", {"delta_spent": spent, "delta": self._delta}, cost), st


class NaturalApproxFilter(FilterBase):
    """The natural (eps, delta) filter over symmetric queries — NOT free; opt-in only.

    Composes the admitted queries exactly (piecewise-linear tradeoff curves of R_{e,d})
    and admits while the composition's delta(eps) <= delta. The guarantee that holds for
    the adaptive interaction (:meth:`guarantee`, reported in every decision) is the best of
    R_{eps,delta}^(+k) (Prop. 3), Theorem 9 and our certified bound for k = ``rounds``
    rounds; the filter refuses after ``rounds`` admitted queries.
    """

    KIND = "natural_approx"

    def __init__(
        self, eps: float, delta: float, rounds: int, *, allow_general: bool = False
    ) -> None:
        if not allow_general:
            raise UnsupportedError(
                "The natural (eps, delta) filter is not a valid filter for general adaptive "
                "queries (paper, Sec. 6.1). Use GDPResidueFilter, or pass allow_general=True "
                "to get Theorem 9's weaker guarantee reported instead of the budget."
            )
        self._eps = check_nonnegative("eps", eps, "NaturalApproxFilter")
        self._delta = check_in_open("delta", delta, 0.0, 1.0, "NaturalApproxFilter")
        self._rounds = check_int("rounds", rounds, "NaturalApproxFilter", minimum=1)
        self._queries: list[dict[str, Any]] = []
        self._curve: PiecewiseLinearTradeoff | None = PiecewiseLinearTradeoff.identity()

    def guarantee(self) -> dict[str, Any]:
        """What the adaptive interaction really satisfies: the best of three bounds at
        Theorem 9's delta' = chi delta, all valid for ``rounds`` rounds.

        * ``composition``: each admitted L_t <= R_{eps,delta} (the composition so far is,
          and composing with a PLD never lowers it), so the interaction is at most
          R_{eps,delta}^(+k) (paper, Prop. 3): eps' from the exact binomial composition
          (:func:`~dpsieve.filters.theorem9.composition_epsilon`, rounded up). For example,
          eps = 1, delta = 1e-6, k = 100 gives 67.6 at delta' = 4.52e-3.
        * ``theorem9``: the paper's (chi (eps + 1), chi delta) with its explicit constants.
        * ``certified``: our Theorem-15-style bound (docs/filters.md): the proof's
          post-processing and concentration steps with exact RR compositions.

        ``eps``/``delta`` are the smallest eps' among them (``method`` says which).
        """
        eps = max(self._eps, 1e-12)
        t9 = theorem9(eps, self._delta, self._rounds)
        e2, d2 = _certified(eps, self._delta, self._rounds)
        ec = _composition(eps, self._delta, self._rounds, t9.delta_prime)
        options = [
            (ec, t9.delta_prime, "composition (Prop. 3)"),
            (t9.eps_prime, t9.delta_prime, "Theorem 9"),
            (e2, d2, "certified Theorem 15 bound"),
        ]
        best = min(options, key=lambda o: (o[0], o[1]))
        return {
            "eps": best[0],
            "delta": best[1],
            "method": best[2],
            "composition": {"eps": ec, "delta": t9.delta_prime},
            "theorem9": {
                "theorem": "Regehr et al. 2026, Thm. 9",
                "eps": t9.eps_prime,
                "delta": t9.delta_prime,
                "chi": t9.chi,
                "chi_form": {"eps": t9.chi * (self._eps + 1.0), "delta": t9.chi * self._delta},
            },
            "certified": {"eps": e2, "delta": d2},
            "note": "the (eps, delta) budget itself does NOT hold for adaptive queries",
        }

    def _composed(self) -> PiecewiseLinearTradeoff:
        if self._curve is None:
            c = PiecewiseLinearTradeoff.identity()
            for d in self._queries:
                c = c.compose(_curve_of(description_from_dict(d)))
            self._curve = c
        return self._curve

    def _state(self) -> dict[str, Any]:
        return {
            "allow_general": True,
            "eps": self._eps,
            "delta": self._delta,
            "rounds": self._rounds,
            "queries": list(self._queries),
        }

    def _load(self, state: dict[str, Any]) -> None:
        self._eps = float(state["eps"])
        self._delta = float(state["delta"])
        self._rounds = int(state["rounds"])
        self._queries = list(state["queries"])
        self._curve = None

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        """The opt-in is part of the state (a stored state without it is refused, as the
        constructor refuses), and the stored queries must compose within the budget."""
        r.require(
            r.optional("allow_general") and r.boolean("allow_general"),
            "allow_general",
            "true (the natural (eps, delta) filter is not free; it needs the explicit opt-in)",
            r.raw("allow_general") if r.optional("allow_general") else None,
        )
        eps = r.number("eps", lo=0.0)
        delta = r.number("delta", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        rounds = r.integer("rounds", lo=1)

        def query(name: str, v: Any) -> PiecewiseLinearTradeoff:
            try:
                q = description_from_dict(v) if isinstance(v, dict) else None
            except (ValueError, TypeError, KeyError):
                q = None
            if not isinstance(q, PureDP | ApproxDP) or q.to_dict() != v:
                raise r.error(name, "a pure or approximate DP description", v)
            return _curve_of(q)

        curves = r.listed("queries", query)
        r.require(
            len(curves) <= rounds, "queries", f"at most rounds = {rounds} queries", len(curves)
        )
        c = PiecewiseLinearTradeoff.identity()
        for cv in curves:
            c = c.compose(cv)
            r.require(len(c.alphas) <= MAX_SEGMENTS, "queries", "a composition we can track", "")
        x = Fraction(toward_zero(math.exp(eps)))
        r.require(
            c.hockey_stick_exact(x) <= Fraction(delta),
            "queries",
            f"queries whose composition has delta(eps) <= {delta!r}",
            float(c.hockey_stick_exact(x)),
        )

    def _remaining(self) -> BudgetLeft:
        spent = float(self._composed().delta(self._eps)[()])
        return BudgetLeft({
            "delta_at_eps": spent,
            "rounds_left": self._rounds - len(self._queries),
            "guarantee": self.guarantee(),
        })

    def try_spend(self, query: Charge) -> Decision:
        """As the base class, keeping the composed curve cached across admissions."""
        query = check_charge(query, "query", f"{type(self).__name__}.try_spend")
        self._check_relation(query)
        decision, new_state = self._decide(query)
        if decision.admitted and new_state is not None:
            curve = self._composed().compose(_curve_of(as_query(query)))
            self._load(new_state)
            self._curve = curve
        return decision

    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        qd = query_to_dict(q)
        if not isinstance(q, PureDP | ApproxDP):
            return Decision.of(
                False, "only pure/approximate DP queries", self.remaining(), {"query": qd}
            ), None
        if len(self._queries) >= self._rounds:
            return Decision.of(False, "declared rounds used", self.remaining(), {"query": qd}), None
        new = self._composed().compose(_curve_of(q))
        if len(new.alphas) > MAX_SEGMENTS:
            return Decision.of(
                False, "composition too large to track exactly", self.remaining(), {"query": qd}
            ), None
        x = Fraction(toward_zero(math.exp(self._eps)))  # below e^eps: h larger
        d_new = new.hockey_stick_exact(x)
        cost = {"delta_at_eps": float(d_new), "query": qd}
        if d_new > Fraction(self._delta):
            return Decision.of(
                False, "composed delta(eps) exceeds delta", self.remaining(), cost
            ), None
        st = dict(self._state(), queries=[*self._queries, qd])
        rem = {
            "delta_at_eps": float(d_new),
            "rounds_left": self._rounds - len(self._queries) - 1,
            "guarantee": self.guarantee(),
        }
        return Decision.of(True, "admitted (guarantee: Theorem 9, not the budget)", rem, cost), st


@functools.lru_cache(maxsize=32)
def _certified(eps: float, delta: float, k: int) -> tuple[float, float]:
    return certified_epsilon(theorem9(eps, delta, k))


@functools.lru_cache(maxsize=32)
def _composition(eps: float, delta: float, k: int, delta_prime: float) -> float:
    return composition_epsilon(eps, delta, k, delta_prime)


def _curve_of(q: PrivacyCharge) -> PiecewiseLinearTradeoff:
    if isinstance(q, PureDP):
        return approx_curve(q.eps)
    if isinstance(q, ApproxDP):
        return approx_curve(q.eps, q.delta)
    raise UnsupportedError("only pure/approximate DP queries")
