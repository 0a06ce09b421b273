"""Mixed budgets: a pure part and a Gaussian part inside one (eps, delta) target (ours).

The budget is B = R_a (+) G_mu (R_a the pure eps-DP PLD, G_mu the Gaussian one) with
h_B(e^eps) <= delta, so B <= R_{eps,delta}: the interaction is (eps, delta)-DP. Each query
is charged where it costs least:

* to the **pure part**, exactly: a query with L <= R_e (a pure eps-DP query, a Laplace or
  randomized-response PLD) and e <= a leaves R_{a-e} (+) G_mu (exact ``Fraction``s);
* to the **Gaussian part** by the GDP residue (paper, Def. 7): G_mu' with
  G_mu' (+) L <= G_mu, certified by :class:`~dpsieve.filters.GDPResidueFilter`'s search,
  leaves R_a (+) G_mu';
* when both are possible, to the one that leaves the larger eps at the target's delta
  (ties go to the pure part, which is exact).

Each choice satisfies the residue condition U(B, L) (+) L <= B, so the filter is valid
for fully adaptive queries (paper, Thm. 1); docs/proofs/mixed.md gives the proof and the
soundness of every check used.

**The split** (a, mu) is chosen from a *typical query* (or a list, cycled) declared when the
budget is opened: the candidate splits are simulated on that workload and the one that
admits most is kept (ties go to the larger Gaussian part, which also admits Gaussian
queries). Without a declaration the budget starts *undecided*, as the whole target
R_{eps,delta}, and the first admitted query is taken as the typical one. This is still a
residue filter with initial budget R_{eps,delta}: the first update U(R_{eps,delta}, L)
is the residue of the split chosen for L, and U (+) L <= R_a (+) G_mu <= R_{eps,delta}.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from dpsieve._validation import check_in_open, check_nonnegative, fail
from dpsieve.accounting.gdp import gdp_delta_err, gdp_mu_for
from dpsieve.filters._common import FilterBase, StateReader, frac_from_json, frac_to_json
from dpsieve.filters._mixed_math import delta_upper, epsilon_upper, mu_for
from dpsieve.filters._queries import as_query, pure_eps_of, query_to_dict
from dpsieve.filters.base import Decision
from dpsieve.filters.gdp import GDPResidueFilter, naive_gdp_cost, sqrt_down

__all__ = ["MixedFilter", "choose_split", "mixed_budget", "split_inside"]

#: Admissions simulated per candidate split when choosing it (more is not needed to rank).
SPLIT_CAP = 200
_SPLITS: dict[tuple[float, float, tuple[str, ...], int], Fraction] = {}


@functools.lru_cache(maxsize=512)
def _pure_eps_cached(q: Any) -> float | None:
    return pure_eps_of(q)


def _pure_eps(q: Any) -> float | None:
    """pure_eps_of, memoised for hashable queries (descriptions and PLDs are immutable)."""
    try:
        return _pure_eps_cached(q)
    except TypeError:  # an unhashable query: compute directly
        return pure_eps_of(q)


def mixed_budget(eps: float, delta: float, pure: float | Fraction) -> tuple[Fraction, float]:
    """(a, mu) for a pure part ``pure`` (clipped to eps) inside the (eps, delta) target.

    mu is the largest value (rounded down) whose budget R_a (+) G_mu is certified
    (eps, delta)-DP (:func:`dpsieve.filters._mixed_math.mu_for`).
    """
    a = min(Fraction(pure), Fraction(eps))
    m = mu_for(a, eps, delta)
    if a == 0:  # all Gaussian: exactly the GDP residue filter's budget G_{gdp_mu_for(eps, delta)}
        m = max(m, gdp_mu_for(eps, delta))
    if m < 0:  # cannot happen for a <= eps (R_a is eps-DP), kept as a guard
        raise fail("pure", "mixed_budget", f"a pure part <= eps = {eps!r}", pure)
    return a, m


def split_inside(a: Fraction, mu: float, eps: float, delta: float) -> bool:
    """Certified check that R_a (+) G_mu is (eps, delta)-DP (docs/proofs/mixed.md §3).

    For a = 0 the GDP residue filter's own test is accepted too
    (h_mu(e^eps) + err <= delta with gdp_delta_err's certified bound, as
    :func:`dpsieve.accounting.gdp.gdp_mu_for` uses), so the
    all-Gaussian split is exactly that filter's budget.
    """
    if mu == 0 and Fraction(a) <= Fraction(eps):
        return True  # exact: R_a is a-DP, so (eps, 0)-DP (docs/proofs/mixed.md §3)
    if delta_upper(a, mu, eps) <= delta:
        return True
    if a != 0:
        return False
    h, err = gdp_delta_err(mu, eps)
    return float(h) + float(err) <= delta


def choose_split(
    eps: float, delta: float, typical: Sequence[Any], *, cap: int = SPLIT_CAP
) -> Fraction:
    """The pure part a of the split that admits most of ``typical`` (offered cyclically).

    Candidates: a = 0 (all Gaussian), a = eps (all pure), for each pure query size e in
    the workload the largest multiple of e that fits (the same pure count with a Gaussian
    part left over), and eps/2 when the workload is not one query. Each is simulated with
    the filter itself (up to ``cap`` admissions: enough to rank, since a pure part only
    wins for queries the additive filter admits a few dozen times); the most admissions
    win, ties to the larger Gaussian part. The choice affects utility, never validity.
    """
    qs = [as_query(q) for q in typical]
    if not qs:
        raise fail("typical", "choose_split", "a non-empty list of queries", typical)
    from dpsieve.filters.capacity import count_admitted, query_key

    ckey = (eps, delta, tuple(query_key(q) for q in qs), cap)
    hit = _SPLITS.get(ckey)
    if hit is not None:
        return hit
    top = Fraction(eps)
    cands: set[Fraction] = {Fraction(0), top}
    for q in qs:
        e = _pure_eps(q)
        if e is not None and 0 < e <= eps:
            k = math.floor(top / Fraction(e))
            cands.add(k * Fraction(e))
    if len(set(ckey[2])) > 1:
        cands.add(top / 2)
    best: tuple[int, float, Fraction] | None = None
    for a in sorted(cands):
        a_, m = mixed_budget(eps, delta, a)
        f = MixedFilter(eps, delta, pure=a_)
        n = count_admitted(f, list(qs), cap=cap).count
        score = (n, m, a_)
        if best is None or (score[0], score[1]) > (best[0], best[1]):
            best = score
    out = Fraction(0) if best is None else best[2]
    if len(_SPLITS) >= 256:
        _SPLITS.pop(next(iter(_SPLITS)))
    _SPLITS[ckey] = out
    return out


class MixedFilter(FilterBase):
    """Residue filter with budget R_a (+) G_mu inside an (eps, delta) target (module doc).

    ``MixedFilter(eps, delta, typical=q)`` chooses the split for queries like ``q`` (a
    privacy description or PLD, or a list of them); ``pure=a`` fixes the pure part; with
    neither, the split is chosen at the first admitted query.
    """

    KIND = "mixed"

    def __init__(
        self,
        eps: float,
        delta: float,
        *,
        typical: Any = None,
        pure: float | Fraction | None = None,
    ) -> None:
        self._eps = check_nonnegative("eps", eps, "MixedFilter")
        self._delta = check_in_open("delta", delta, 0.0, 1.0, "MixedFilter")
        if not math.isfinite(self._eps):
            raise fail("eps", "MixedFilter", "a finite float >= 0", eps)
        if typical is not None and pure is not None:
            raise fail("pure", "MixedFilter", "not given together with 'typical'", pure)
        self._split: dict[str, Any] | None = None
        self._pure = Fraction(0)
        self._mu2 = Fraction(0)
        if pure is not None:
            if not (Fraction(pure) >= 0):
                raise fail("pure", "MixedFilter", "a number >= 0", pure)
            self._set_split(Fraction(pure), "given")
        elif typical is not None:
            qs = list(typical) if isinstance(typical, list | tuple) else [typical]
            a = choose_split(self._eps, self._delta, qs)
            self._set_split(a, "typical", [query_to_dict(as_query(q)) for q in qs])

    def _set_split(self, a: Fraction, how: str, typical: list[dict[str, Any]] | None = None
                   ) -> None:
        a, m = mixed_budget(self._eps, self._delta, a)
        self._pure, self._mu2 = a, Fraction(m) ** 2
        self._split = {"pure": frac_to_json(a), "mu": m, "chosen": how,
                       "typical": typical or []}

    # -- state ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        st: dict[str, Any] = {"eps": self._eps, "delta": self._delta, "split": self._split}
        if self._split is not None:
            st["pure"] = frac_to_json(self._pure)
            st["mu2"] = frac_to_json(self._mu2)
        return st

    def _load(self, state: dict[str, Any]) -> None:
        """Install a state (trusted: our own ``_decide``'s, or one ``_check_state`` passed)."""
        split = state.get("split")
        self._eps, self._delta, self._split = float(state["eps"]), float(state["delta"]), split
        self._pure = Fraction(0) if split is None else frac_from_json(state["pure"], "pure")
        self._mu2 = Fraction(0) if split is None else frac_from_json(state["mu2"], "mu2")

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        """The invariants of ``_load``, read through the filters' StateReader (field names)."""
        eps = r.number("eps", lo=0.0)
        delta = r.number("delta", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        if r.raw("split") is None:
            r.require(not r.optional("pure"), "pure", "absent while the split is undecided", "")
            r.require(not r.optional("mu2"), "mu2", "absent while the split is undecided", "")
            return
        sp = r.nested("split")
        pure0 = sp.frac("pure", lo=0, hi=Fraction(eps))
        mu0 = sp.number("mu", lo=0.0)
        sp.string("chosen")
        sp.raw("typical")
        sp.done()
        r.frac("pure", lo=0, hi=pure0)
        r.frac("mu2", lo=0, hi=Fraction(mu0) ** 2)
        r.require(
            split_inside(pure0, mu0, eps, delta),
            "split",
            f"a budget R_a (+) G_mu inside the ({eps!r}, {delta!r}) target",
            r.raw("split"),
        )

    # -- reading ----------------------------------------------------------------------------
    @property
    def target(self) -> tuple[float, float]:
        """The (eps, delta) target the budget lies inside."""
        return self._eps, self._delta

    @property
    def decided(self) -> bool:
        """Whether the split is fixed (declared, given, or chosen at the first query)."""
        return self._split is not None

    def split(self) -> dict[str, Any] | None:
        """The initial split {pure, mu, chosen, typical}, or None while undecided."""
        return None if self._split is None else dict(self._split)

    def remaining(self) -> dict[str, Any]:
        if self._split is None:
            return {"eps": self._eps, "delta": self._delta, "split": "undecided"}
        return self._remaining_of(self._pure, self._mu2)

    def epsilon_left(self) -> float:
        """eps at the target's delta of the budget left (rounded up: never understated)."""
        if self._split is None:
            return self._eps
        return epsilon_upper(self._pure, sqrt_down(self._mu2), self._delta)

    # -- deciding -----------------------------------------------------------------------------
    def _decide(self, query: Any) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        if self._split is None:
            probe = MixedFilter(self._eps, self._delta)
            probe._set_split(choose_split(self._eps, self._delta, [q]), "first query",
                             [query_to_dict(q)])
            decision, new = probe._decide_split(q)
            if not decision.admitted:  # stay undecided: a refusal changes nothing
                return Decision(False, decision.reason, self.remaining(), decision.cost), None
            return decision, new
        return self._decide_split(q)

    def _decide_split(self, q: Any) -> tuple[Decision, dict[str, Any] | None]:
        qd = query_to_dict(q)
        e = _pure_eps(q)
        if e is not None and not math.isfinite(e):
            e = None  # PureDP(inf): no pure charge (and no GDP one either)
        pure_left = self._pure - Fraction(e) if e is not None else Fraction(-1)
        gauss_left = self._gauss_residue(q)
        cost: dict[str, Any] = {"query": qd, "pure_eps": e}
        if pure_left < 0 and gauss_left is None:
            return Decision(False, self._refusal(e), self.remaining(), cost), None
        if gauss_left is not None and (pure_left < 0 or not self._pure_leaves_more(
                pure_left, gauss_left)):
            route, pure, mu2 = "gaussian", self._pure, gauss_left
        else:
            route, pure, mu2 = "pure", pure_left, self._mu2
        st = dict(self._state(), pure=frac_to_json(pure), mu2=frac_to_json(mu2))
        rem = self._remaining_of(pure, mu2)
        cost.update(route=route, pure_before=float(self._pure), pure_after=float(pure),
                    mu_before=sqrt_down(self._mu2), mu_after=rem["mu"])
        return Decision(True, f"admitted, charged to the {route} part", rem, cost), st

    def _pure_leaves_more(self, pure_left: Fraction, gauss_left: Fraction) -> bool:
        """Whether the pure route leaves at least as much eps at the target's delta.

        With e_p the eps left after the pure route, the Gaussian route leaves more iff its
        budget is not (e_p, delta)-DP (both read through the same certified bound).
        """
        e_p = epsilon_upper(pure_left, sqrt_down(self._mu2), self._delta)
        if not math.isfinite(e_p):
            return False
        return delta_upper(self._pure, sqrt_down(gauss_left), e_p) <= self._delta

    def _remaining_of(self, pure: Fraction, mu2: Fraction) -> dict[str, Any]:
        return {"pure_eps": float(pure), "pure_exact": frac_to_json(pure),
                "mu": sqrt_down(mu2), "delta": self._delta}

    def _gauss_residue(self, q: Any) -> Fraction | None:
        if self._mu2 == 0:
            return None
        # G_mu' (+) L <= G_mu needs L <= G_mu (Id <= G_mu'), i.e. a GDP cost nu <= mu; the
        # naive cost is nu rounded up (memoised), so skipping when it exceeds mu only ever
        # refuses (docs/proofs/mixed.md §4.ii) and saves the search on hopeless queries.
        nu = naive_gdp_cost(q)
        if not math.isfinite(nu) or Fraction(nu) ** 2 > self._mu2:
            return None
        g = GDPResidueFilter(0.0)
        g._load({"mu2": frac_to_json(self._mu2)})
        return g.residue_mu2(q)

    def _refusal(self, e: float | None) -> str:
        mu = sqrt_down(self._mu2)
        if e is not None:
            return (f"refused: the query costs eps {e:.4g} (pure), more than the pure part "
                    f"left ({float(self._pure):.4g}), and the Gaussian part left "
                    f"(mu {mu:.4g}) cannot absorb it")
        return ("refused: the query has no pure-DP bound and the Gaussian part left "
                f"(mu {mu:.4g}) cannot absorb it")
