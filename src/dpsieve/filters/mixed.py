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

**A delta part** R_{0,d} joins the budget, B = R_a (+) G_mu (+) R_{0,d}, when the typical
(or first) query has a delta > 0 (an (eps, delta) query such as DP key selection's charge),
and in every split chosen at the first query (no typical declared): there at least
:data:`DEFAULT_DELTA_SHARE` of the target's delta, so a budget whose first query was pure
still admits DP key selection later. A declared split (``typical=``, ``pure=``) is as
declared: a delta part only if its workload has a delta (or ``delta_part=`` is given).
``ApproxDP(e, dq)``:
``ApproxDP(e, dq)`` is R_e (+) R_{0,dq} exactly (the PLD of R_{e,dq} is that composition),
so it pays dq from the delta part (R_{0,d'} (+) R_{0,dq} = R_{0,d} for
1 - d = (1 - d')(1 - dq); d' rounded down) and R_e by either route above. The split is
inside the target when d + (1 - d) h_{R_a (+) G_mu}(e^eps) <= delta, i.e. R_a (+) G_mu is
(eps, (delta - d)/(1 - d))-DP. A budget without a delta part refuses delta > 0 queries:
R_a (+) G_mu has no mass at +inf, and L <= U (+) ... with L's mass dq at +inf needs one.

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

from dpsieve._rounding import round_down
from dpsieve._validation import check_in_open, check_nonnegative, fail
from dpsieve.accounting.conversions import pure_eps_of
from dpsieve.accounting.events import ApproxDP, PureDP
from dpsieve.accounting.gdp import gdp_delta_err, gdp_mu_for
from dpsieve.filters._common import FilterBase, StateReader, frac_from_json, frac_to_json
from dpsieve.filters._mixed_math import delta_upper, epsilon_upper, mu_for
from dpsieve.filters._queries import as_query, query_to_dict
from dpsieve.filters.base import BudgetLeft, Charge, Decision
from dpsieve.filters.charge import PrivacyCharge, Workload
from dpsieve.filters.gdp import GDPResidueFilter, naive_gdp_cost, sqrt_down

__all__ = ["DEFAULT_DELTA_SHARE", "MixedFilter", "choose_split", "choose_split_parts",
           "default_delta_part", "delta_upper", "inner_delta", "mixed_budget", "pay_delta",
           "split_inside"]

#: Admissions simulated per candidate split when choosing it (more is not needed to rank).
SPLIT_CAP = 200
#: The smallest delta part of a split chosen at the first query (no typical declared), as a
#: share of the target's delta (docs/proofs/mixed.md §6): it keeps DP key selection possible
#: on a budget whose first query was pure, and costs
#: the Gaussian part 0.4-2 % of its mu (1-4 % of the Gaussian queries it admits) for eps in
#: [0.1, 3] and delta in [1e-8, 1e-3]; a tenth of delta pays selections at delta / 10 each.
DEFAULT_DELTA_SHARE = Fraction(1, 10)
_SPLITS: dict[tuple[float, float, tuple[str, ...], int, Fraction],
              tuple[Fraction, Fraction]] = {}


@functools.lru_cache(maxsize=512)
def _pure_eps_cached(q: PrivacyCharge) -> float | None:
    return pure_eps_of(q)


def _pure_eps(q: PrivacyCharge) -> float | None:
    """pure_eps_of, memoised for hashable queries (descriptions and PLDs are immutable)."""
    try:
        return _pure_eps_cached(q)
    except TypeError:  # an unhashable query: compute directly
        return pure_eps_of(q)


def _float_down(x: Fraction) -> Fraction:
    """The float at or below ``x`` (>= 0), as an exact Fraction."""
    return Fraction(max(round_down(x), 0.0))


def default_delta_part(delta: float) -> Fraction:
    """The delta part a split chosen at the first query keeps at least: ``DEFAULT_DELTA_SHARE
    * delta`` rounded down to a float (any d in [0, delta] is sound: Lemma 8)."""
    return _float_down(Fraction(delta) * DEFAULT_DELTA_SHARE)


def inner_delta(delta: float, dpart: Fraction) -> float:
    """(delta - d)/(1 - d), rounded down: R_a (+) G_mu (+) R_{0,d} is (eps, delta)-DP iff
    R_a (+) G_mu is (eps, inner_delta)-DP (h_{S (+) R_{0,d}} = d + (1 - d) h_S)."""
    if dpart == 0:
        return delta
    return float(_float_down((Fraction(delta) - dpart) / (1 - dpart)))


def pay_delta(dpart: Fraction, dq: float) -> Fraction | None:
    """The delta part left after a query's dq: d' with (1 - d')(1 - dq) >= 1 - d, rounded
    down (``None`` if dq > d)."""
    if Fraction(dq) > dpart:
        return None
    return _float_down((dpart - Fraction(dq)) / (1 - Fraction(dq)))


def mixed_budget(eps: float, delta: float, pure: float | Fraction,
                 dpart: Fraction = Fraction(0)) -> tuple[Fraction, float]:
    """(a, mu) for a pure part ``pure`` (clipped to eps) inside the (eps, delta) target,
    beside a delta part ``dpart`` (0 <= dpart <= delta).

    mu is the largest value (rounded down) whose budget R_a (+) G_mu (+) R_{0,dpart} is
    certified (eps, delta)-DP (:func:`dpsieve.filters._mixed_math.mu_for` at
    :func:`inner_delta`).
    """
    a = min(Fraction(pure), Fraction(eps))
    if not 0 <= dpart <= Fraction(delta):
        raise fail("delta_part", "mixed_budget", f"a number in [0, delta = {delta!r}]",
                   float(dpart))
    din = inner_delta(delta, dpart)
    m = mu_for(a, eps, din) if din > 0 else 0.0
    if a == 0 and din > 0:  # all Gaussian: the GDP residue filter's budget G_{gdp_mu_for}
        m = max(m, gdp_mu_for(eps, din))
    if m < 0:  # cannot happen for a <= eps (R_a is eps-DP), kept as a guard
        raise fail("pure", "mixed_budget", f"a pure part <= eps = {eps!r}", pure)
    return a, m


def split_inside(a: Fraction, mu: float, eps: float, delta: float,
                 dpart: Fraction = Fraction(0)) -> bool:
    """Certified check that R_a (+) G_mu (+) R_{0,dpart} is (eps, delta)-DP
    (docs/proofs/mixed.md §3, §6).

    For a = 0 the GDP residue filter's own test is accepted too
    (h_mu(e^eps) + err <= delta with gdp_delta_err's certified bound, as
    :func:`dpsieve.accounting.gdp.gdp_mu_for` uses), so the
    all-Gaussian split is exactly that filter's budget.
    """
    if not 0 <= dpart <= Fraction(delta):
        return False
    if mu == 0 and Fraction(a) <= Fraction(eps):
        return True  # exact: R_a (+) R_{0,d} = R_{a,d} is (eps, delta)-DP (§3, §6)
    delta = inner_delta(delta, dpart)
    if delta <= 0:
        return False
    if delta_upper(a, mu, eps) <= delta:
        return True
    if a != 0:
        return False
    h, err = gdp_delta_err(mu, eps)
    return float(h) + float(err) <= delta


def _delta_of(q: PrivacyCharge) -> float:
    """The delta of an (eps, delta) query (0 for every other query)."""
    return float(q.delta) if isinstance(q, ApproxDP) else 0.0


def _eps_part(q: PrivacyCharge) -> float | None:
    """The pure eps of a query, or of the R_e part of an ApproxDP(e, dq)."""
    if isinstance(q, ApproxDP) and q.delta > 0:
        return float(q.eps)
    return _pure_eps(q)


def choose_split(
    eps: float, delta: float, typical: Sequence[PrivacyCharge], *, cap: int = SPLIT_CAP
) -> Fraction:
    """The pure part a of the split that admits most of ``typical`` (offered cyclically);
    :func:`choose_split_parts` gives the delta part too."""
    return choose_split_parts(eps, delta, typical, cap=cap)[0]


def choose_split_parts(
    eps: float, delta: float, typical: Sequence[PrivacyCharge], *, cap: int = SPLIT_CAP,
    min_delta_part: Fraction = Fraction(0),
) -> tuple[Fraction, Fraction]:
    """(a, d): the pure part and the delta part of the split that admits most of
    ``typical`` (offered cyclically).

    Candidates for a: a = 0 (all Gaussian), a = eps (all pure), for each pure query size e
    in the workload (the eps of an (eps, delta) query counts) the largest multiple of e
    that fits (the same pure count with a Gaussian part left over), and eps/2 when the
    workload is not one query. Candidates for d: d_min = ``min_delta_part`` (0, or
    :func:`default_delta_part` for the split chosen at the first query, so that DP key
    selection stays possible after pure or Gaussian queries), dropped if 0 when a query
    has a delta; for each query's dq, delta (no Gaussian part), delta/2, and what the
    composition of floor(eps/e) such queries needs, 1 - (1 - dq)^k, when below delta,
    each raised to d_min if smaller. Each pair is
    simulated with the filter itself (up to ``cap`` admissions: enough to rank, since a
    pure part only wins for queries the additive filter admits a few dozen times); the most
    admissions win, ties to the larger Gaussian part. The choice affects utility, never
    validity.
    """
    qs = [as_query(q) for q in typical]
    if not qs:
        raise fail("typical", "choose_split", "a non-empty list of queries", typical)
    from dpsieve.filters.capacity import count_admitted, query_key

    dmin = Fraction(min_delta_part)
    if not 0 <= dmin <= Fraction(delta):
        raise fail("min_delta_part", "choose_split", f"a number in [0, delta = {delta!r}]",
                   min_delta_part)
    ckey = (eps, delta, tuple(query_key(q) for q in qs), cap, dmin)
    hit = _SPLITS.get(ckey)
    if hit is not None:
        return hit
    top = Fraction(eps)
    cands: set[Fraction] = {Fraction(0), top}
    dcands: set[Fraction] = {dmin}
    for q in qs:
        e = _eps_part(q)
        if e is not None and 0 < e <= eps:
            k = math.floor(top / Fraction(e))
            cands.add(k * Fraction(e))
        dq = _delta_of(q)
        if 0 < dq <= delta:
            dcands = (dcands - {Fraction(0)}) | {Fraction(delta), max(Fraction(delta) / 2, dmin)}
            # (e may be None, 0, above eps or inf -- ApproxDP(inf, dq) is a valid query
            # that no split admits: then one query, k = 1)
            k = math.floor(top / Fraction(e)) if e is not None and 0 < e < math.inf else 1
            # 1 - (1 - dq)^k, with a margin for the part left being rounded down each time
            # (k may exceed float range for tiny e: then (1 - dq)^k underflows, need = 1)
            kf = float(k) if k < 2**1000 else math.inf
            need = -math.expm1(kf * math.log1p(-dq)) * (1 + 1e-9)
            if dq <= need < delta:
                dcands.add(max(Fraction(need), dmin))
    if len(set(ckey[2])) > 1:
        cands.add(top / 2)
    best: tuple[int, float, Fraction, Fraction] | None = None
    for d in sorted(dcands):
        for a in sorted(cands):
            a_, m = mixed_budget(eps, delta, a, d)
            f = MixedFilter(eps, delta, pure=a_, delta_part=d)
            n = count_admitted(f, list(qs), cap=cap).count
            score = (n, m, a_, d)
            if best is None or (score[0], score[1]) > (best[0], best[1]):
                best = score
    out = (Fraction(0), Fraction(0)) if best is None else (best[2], best[3])
    if len(_SPLITS) >= 256:
        _SPLITS.pop(next(iter(_SPLITS)))
    _SPLITS[ckey] = out
    return out


class MixedFilter(FilterBase):
    """Residue filter with budget R_a (+) G_mu inside an (eps, delta) target (module doc).

    ``MixedFilter(eps, delta, typical=q)`` chooses the split for queries like ``q`` (a
    privacy description or PLD, or a list of them); ``pure=a`` fixes the pure part (and
    ``delta_part=d`` the delta part that pays (eps, delta) queries; none by default); with
    neither, the split is chosen at the first admitted query, and keeps at least
    :func:`default_delta_part` (a tenth of delta), so DP key selection stays possible
    whatever the first query was.
    """

    KIND = "mixed"

    def __init__(
        self,
        eps: float,
        delta: float,
        *,
        typical: Workload | None = None,
        pure: float | Fraction | None = None,
        delta_part: float | Fraction | None = None,
    ) -> None:
        self._eps = check_nonnegative("eps", eps, "MixedFilter")
        self._delta = check_in_open("delta", delta, 0.0, 1.0, "MixedFilter")
        if not math.isfinite(self._eps):
            raise fail("eps", "MixedFilter", "a finite float >= 0", eps)
        if typical is not None and pure is not None:
            raise fail("pure", "MixedFilter", "not given together with 'typical'", pure)
        if delta_part is not None and pure is None:
            raise fail("delta_part", "MixedFilter", "given together with 'pure'", delta_part)
        self._split: dict[str, Any] | None = None
        self._pure = Fraction(0)
        self._mu2 = Fraction(0)
        self._dpart = Fraction(0)
        if pure is not None:
            if not (Fraction(pure) >= 0):
                raise fail("pure", "MixedFilter", "a number >= 0", pure)
            d = Fraction(0) if delta_part is None else Fraction(delta_part)
            if not 0 <= d <= Fraction(self._delta):
                raise fail("delta_part", "MixedFilter", f"a number in [0, delta = "
                           f"{self._delta!r}]", delta_part)
            self._set_split(Fraction(pure), "given", dpart=d)
        elif typical is not None:
            qs = list(typical) if isinstance(typical, Sequence) else [typical]
            a, d = choose_split_parts(self._eps, self._delta, qs)
            self._set_split(a, "typical", [query_to_dict(as_query(q)) for q in qs], d)

    def _set_split(self, a: Fraction, how: str, typical: list[dict[str, Any]] | None = None,
                   dpart: Fraction = Fraction(0)) -> None:
        a, m = mixed_budget(self._eps, self._delta, a, dpart)
        self._pure, self._mu2, self._dpart = a, Fraction(m) ** 2, dpart
        self._split = {"pure": frac_to_json(a), "mu": m, "chosen": how,
                       "typical": typical or []}
        if dpart:  # absent when 0: states of budgets without a delta part are unchanged
            self._split["dpart"] = frac_to_json(dpart)

    # -- state ----------------------------------------------------------------------------
    def _state(self) -> dict[str, Any]:
        st: dict[str, Any] = {"eps": self._eps, "delta": self._delta, "split": self._split}
        if self._split is not None:
            st["pure"] = frac_to_json(self._pure)
            st["mu2"] = frac_to_json(self._mu2)
            if "dpart" in self._split:
                st["dpart"] = frac_to_json(self._dpart)
        return st

    def _load(self, state: dict[str, Any]) -> None:
        """Install a state (trusted: our own ``_decide``'s, or one ``_check_state`` passed)."""
        split = state.get("split")
        self._eps, self._delta, self._split = float(state["eps"]), float(state["delta"]), split
        self._pure = Fraction(0) if split is None else frac_from_json(state["pure"], "pure")
        self._mu2 = Fraction(0) if split is None else frac_from_json(state["mu2"], "mu2")
        self._dpart = (frac_from_json(state["dpart"], "dpart") if "dpart" in state
                       else Fraction(0))

    @classmethod
    def _check_state(cls, r: StateReader) -> None:
        """The invariants of ``_load``, read through the filters' StateReader (field names)."""
        eps = r.number("eps", lo=0.0)
        delta = r.number("delta", lo=0.0, hi=1.0, lo_open=True, hi_open=True)
        if r.raw("split") is None:
            r.require(not r.optional("pure"), "pure", "absent while the split is undecided", "")
            r.require(not r.optional("mu2"), "mu2", "absent while the split is undecided", "")
            r.require(not r.optional("dpart"), "dpart", "absent while the split is undecided",
                      "")
            return
        sp = r.nested("split")
        pure0 = sp.frac("pure", lo=0, hi=Fraction(eps))
        mu0 = sp.number("mu", lo=0.0)
        sp.string("chosen")
        sp.raw("typical")
        d0 = sp.frac("dpart", lo=0, hi=Fraction(delta)) if sp.optional("dpart") else None
        sp.done()
        r.frac("pure", lo=0, hi=pure0)
        r.frac("mu2", lo=0, hi=Fraction(mu0) ** 2)
        if d0 is None:
            r.require(not r.optional("dpart"), "dpart", "absent: the split has no delta part",
                      "")
        else:
            r.frac("dpart", lo=0, hi=d0)
        r.require(
            split_inside(pure0, mu0, eps, delta, d0 or Fraction(0)),
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

    def _remaining(self) -> BudgetLeft:
        """The budget left, with the same keys before and after the split is chosen:
        ``split`` ("undecided" or "chosen"), ``eps`` and ``delta`` (undecided: the whole
        target, nothing being spent; chosen: ``eps`` None -- the parts state what is left,
        :func:`~dpsieve.filters.summary.budget_summary` as one eps), ``pure_eps`` and
        ``pure_exact`` (the pure part, rounded down and exact), ``mu`` (the Gaussian part,
        rounded down) and ``delta_part`` (the delta kept for queries with one), each None
        while undecided (``delta_part`` also when the split keeps none)."""
        if self._split is None:
            return BudgetLeft({"split": "undecided", "eps": self._eps, "delta": self._delta,
                               "pure_eps": None, "pure_exact": None, "mu": None,
                               "delta_part": None})
        return BudgetLeft(self._remaining_of(self._pure, self._mu2, self._dpart))

    def epsilon_left(self) -> float:
        """eps at the target's delta of the budget left (rounded up: never understated)."""
        if self._split is None:
            return self._eps
        din = inner_delta(self._delta, self._dpart)
        if din <= 0:
            return float(self._pure) if self._mu2 == 0 else math.inf
        return epsilon_upper(self._pure, sqrt_down(self._mu2), din)

    # -- deciding -----------------------------------------------------------------------------
    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        q = as_query(query)
        if self._split is None:
            probe = MixedFilter(self._eps, self._delta)
            a, d = choose_split_parts(self._eps, self._delta, [q],
                                      min_delta_part=default_delta_part(self._delta))
            probe._set_split(a, "first query", [query_to_dict(q)], d)
            decision, new = probe._decide_split(q)
            if not decision.admitted:  # stay undecided: a refusal changes nothing
                return Decision.of(False, decision.reason, self.remaining(), decision.cost), None
            return decision, new
        return self._decide_split(q)

    def _decide_split(self, q: PrivacyCharge) -> tuple[Decision, dict[str, Any] | None]:
        dq = _delta_of(q)
        if dq > 0 and isinstance(q, ApproxDP):  # ApproxDP(e, dq) = R_e (+) R_{0,dq}: dq from
            return self._decide_delta(q, dq)       # the delta part, R_e as pure
        qd = query_to_dict(q)
        e = _pure_eps(q)
        if e is not None and not math.isfinite(e):
            e = None  # PureDP(inf): no pure charge (and no GDP one either)
        pure_left = self._pure - Fraction(e) if e is not None else Fraction(-1)
        gauss_left = self._gauss_residue(q)
        cost: dict[str, Any] = {"query": qd, "pure_eps": e}
        if pure_left < 0 and gauss_left is None:
            return Decision.of(False, self._refusal(e), self.remaining(), cost), None
        if gauss_left is not None and (pure_left < 0 or not self._pure_leaves_more(
                pure_left, gauss_left)):
            route, pure, mu2 = "gaussian", self._pure, gauss_left
        else:
            route, pure, mu2 = "pure", pure_left, self._mu2
        st = dict(self._state(), pure=frac_to_json(pure), mu2=frac_to_json(mu2))
        rem = self._remaining_of(pure, mu2, self._dpart)
        cost.update(route=route, pure_before=float(self._pure), pure_after=float(pure),
                    mu_before=sqrt_down(self._mu2), mu_after=rem["mu"])
        return Decision.of(True, f"admitted, charged to the {route} part", rem, cost), st

    def _decide_delta(self, q: ApproxDP, dq: float) -> tuple[Decision, dict[str, Any] | None]:
        """An (e, dq) query, dq > 0: R_{0,dq} paid by the delta part (exactly: the part
        left is rounded down), R_e routed as PureDP(e) (docs/proofs/mixed.md §6)."""
        left = pay_delta(self._dpart, dq)
        if left is None:
            why = ("the budget has no delta part: its split was declared for queries "
                   "without a delta (typical= or pure=), or stored before a split chosen "
                   "at the first query kept one; a budget declared with a typical query "
                   "with a delta, e.g. typical=ApproxDP(e, d), or one without a declaration,"
                   " has one"
                   if "dpart" not in (self._split or {}) else
                   f"the delta part left ({float(self._dpart):.4g}) is smaller (a split "
                   f"chosen at the first query keeps {float(DEFAULT_DELTA_SHARE):g} of the "
                   "target's delta for it unless that query had a delta: declare a typical "
                   "query with one, e.g. typical=ApproxDP(e, d), or ask for a smaller delta)")
            reason = (f"refused: the query's delta {dq:.4g} is paid from the budget's delta "
                      f"part R_(0,d) (R_a (+) G_mu has no mass at +inf), and {why}")
            cost = {"query": query_to_dict(q), "pure_eps": None, "delta": dq}
            return Decision.of(False, reason, self.remaining(), cost), None
        decision, st = self._decide_split(PureDP(q.eps, q.neighbouring))
        cost = dict(decision.cost or {}, query=query_to_dict(q), delta=dq)
        if st is None:
            return Decision.of(False, decision.reason, self.remaining(), cost), None
        st["dpart"] = frac_to_json(left)
        rem = dict(decision.remaining, delta_part=float(left))
        cost.update(delta_part_before=float(self._dpart), delta_part_after=float(left))
        return Decision.of(True, decision.reason + " and the delta part", rem, cost), st

    def _pure_leaves_more(self, pure_left: Fraction, gauss_left: Fraction) -> bool:
        """Whether the pure route leaves at least as much eps at the target's delta.

        With e_p the eps left after the pure route, the Gaussian route leaves more iff its
        budget is not (e_p, delta)-DP (both read through the same certified bound).
        """
        din = inner_delta(self._delta, self._dpart)
        if din <= 0:
            return True
        e_p = epsilon_upper(pure_left, sqrt_down(self._mu2), din)
        if not math.isfinite(e_p):
            return False
        return delta_upper(self._pure, sqrt_down(gauss_left), e_p) <= din

    def _remaining_of(self, pure: Fraction, mu2: Fraction, dpart: Fraction = Fraction(0)
                      ) -> dict[str, Any]:
        return {"split": "chosen", "eps": None, "delta": self._delta,
                "pure_eps": float(pure), "pure_exact": frac_to_json(pure),
                "mu": sqrt_down(mu2), "delta_part": float(dpart) if (
                    self._split is not None and "dpart" in self._split) else None}

    def _gauss_residue(self, q: PrivacyCharge) -> Fraction | None:
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
