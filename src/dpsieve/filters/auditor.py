"""Filter auditor: the worst case of the natural filter over a finite family of queries.

For a finite family F of finite PLDs (the identity is always added: the analyst may
pass), a budget B and k rounds, the privacy of the natural filter interaction is
V_k(Id) (paper, Sec. 5, Lemma 1 and the recursion before Thm. 6)::

    V_0(L') = Id
    V_{j+1}(L') = sup{ L (+) V_j(L' (+) L) : L in F, L' (+) L <= B }

Everything is exact for piecewise-linear tradeoff curves: composition and order in
``Fraction`` (:mod:`dpsieve.accounting.tradeoff`), the supremum as the lower convex
envelope (:func:`dpsieve.filters._budgets.pl_supremum`). Budgets of the form
R_{0,delta} (+) G_mu are analytic: each admissibility test is then made twice, with the
float margin on either side, and the recursion run for both readings:

* **lower**: only moves *certified* admissible (``pl_leq_budget``). Its V_k is at or below
  the true one, so an overspend it shows (above the margin) is real: **not free**, with a
  witness strategy that only uses admissible moves.
* **upper**: every move not *certainly* inadmissible (``pl_maybe_leq_budget``). Its V_k is
  at or above the true one, so if it is certified <= B the filter is **free**.
* otherwise the verdict is **undetermined** ("not shown not free"): some move within the
  margin (1e-12) of the budget decides it; ``max_gap`` is the overspend the upper reading
  shows and ``margin`` the float margin. (At mu = 0.6649917799953612 the approximate-GDP
  witness is exactly admissible: within the margin, not free.)

For a piecewise-linear budget both readings coincide (exact arithmetic).

When V_k(Id) is not <= B, :func:`audit_natural` returns a witness: the (eps, delta)
where the worst analyst's hockey-stick curve exceeds B's, and the adaptive strategy
achieving it (Lemma 1: at privacy level x, play the query maximising
h_{L (+) V_j(L (+) L')}(x), observe the loss z, continue at level x e^{-z}).

A family of GDP queries G_mu (not finite PLDs) is audited by the same recursion on the
exact representation G_s (s^2 a ``Fraction``): compositions and suprema of Gaussians are
Gaussians (:func:`audit_gdp_family`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpsieve._rounding import add_down, add_up, sqrt_down, sqrt_up
from dpsieve._validation import check_int, fail
from dpsieve.accounting.gdp import gdp_delta_err
from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff
from dpsieve.errors import UnsupportedError
from dpsieve.filters._budgets import (
    MARGIN,
    GaussianBudget,
    approx_curve,
    pl_leq_budget,
    pl_maybe_leq_budget,
    pl_supremum,
)

__all__ = [
    "FREE",
    "NOT_FREE",
    "UNDETERMINED",
    "AuditResult",
    "GaussianBudget",
    "approx_curve",
    "as_curve",
    "audit_gdp_family",
    "audit_natural",
    "overspend",
    "pl_leq_budget",
    "pl_supremum",
]

PL = PiecewiseLinearTradeoff
_ID = PiecewiseLinearTradeoff.identity()


#: The verdicts: certified free, certified not free (a real overspend), or neither.
FREE, NOT_FREE, UNDETERMINED = "free", "not free", "not shown not free"


@dataclass(frozen=True, slots=True)
class AuditResult:
    """Verdict of the auditor.

    ``verdict``: ``"free"`` (certified: V_k(Id) <= B), ``"not free"`` (certified overspend)
    or ``"not shown not free"`` (undetermined within the float ``margin``). ``free`` is True
    only for a certified "free". ``worst``: V_k(Id) (a tradeoff curve, or ``{"gdp": s}``);
    for an undetermined verdict, the upper reading's. ``eps_range``/``max_gap``/
    ``eps_at_max``: where and by how much the worst analyst's delta(eps) exceeds the
    budget's (a real overspend when not free; a possible one when undetermined).
    ``strategy``: the adaptive strategy at ``eps_at_max`` (nested dict: query name, then
    per observed loss the next step), only for a certified overspend.
    """

    free: bool
    rounds: int
    worst: Any
    eps_range: tuple[float, float] | None = None
    max_gap: float = 0.0
    eps_at_max: float | None = None
    delta_worst: float | None = None
    delta_budget: float | None = None
    strategy: dict[str, Any] = field(default_factory=dict)
    verdict: str = ""
    margin: float = 0.0

    def __post_init__(self) -> None:
        if not self.verdict:
            object.__setattr__(self, "verdict", FREE if self.free else NOT_FREE)
        if self.free != (self.verdict == FREE):
            raise ValueError("AuditResult: 'free' must say whether the verdict is 'free'")

    def to_dict(self) -> dict[str, Any]:
        return {
            "free": self.free,
            "verdict": self.verdict,
            "margin": self.margin,
            "rounds": self.rounds,
            "eps_range": list(self.eps_range) if self.eps_range else None,
            "max_gap": self.max_gap,
            "eps_at_max": self.eps_at_max,
            "delta_worst": self.delta_worst,
            "delta_budget": self.delta_budget,
            "strategy": self.strategy,
        }


def _budget_h(budget: PL | GaussianBudget, x: float) -> float:
    if isinstance(budget, PiecewiseLinearTradeoff):
        return float(budget.hockey_stick_exact(Fraction(x)))
    return float(budget.hockey_stick(x))


def overspend(
    worst: PL,
    budget: PL | GaussianBudget,
    eps_grid: np.ndarray | None = None,
    *,
    threshold: float = MARGIN,
) -> tuple[tuple[float, float] | None, float, float | None]:
    """(eps range, max gap, eps at max) where h_worst(e^eps) - h_B(e^eps) > threshold.

    h_worst is exact at each grid point; h_B is exact (piecewise linear) or its float value
    (error ~1e-15), so with the default threshold (the margin) every reported gap is real.
    """
    grid = np.linspace(0.0, 10.0, 2001) if eps_grid is None else eps_grid
    gaps = []
    for e in grid:
        x = math.exp(float(e))
        gaps.append(float(worst.hockey_stick_exact(Fraction(x))) - _budget_h(budget, x))
    g = np.array(gaps)
    over = g > threshold
    if not np.any(over):
        return None, float(g.max(initial=0.0)), None
    idx = np.nonzero(over)[0]
    i = int(np.argmax(g))
    return (float(grid[idx[0]]), float(grid[idx[-1]])), float(g[i]), float(grid[i])


class _Natural:
    """The V_k recursion with one reading of admissibility (``upper``: possibly admissible)."""

    def __init__(
        self, family: dict[str, PL], budget: PL | GaussianBudget, *, upper: bool = False
    ) -> None:
        self.family = dict(family)
        self.family.setdefault("Id", _ID)
        self.budget = budget
        self.test = pl_maybe_leq_budget if upper else pl_leq_budget
        self.memo: dict[tuple[PL, int], PL] = {}
        self.adm: dict[PL, bool] = {}

    def admissible(self, curve: PL) -> bool:
        if curve not in self.adm:
            self.adm[curve] = self.test(curve, self.budget)
        return self.adm[curve]

    def moves(self, prefix: PL) -> list[tuple[str, PL, PL]]:
        out = []
        for name, q in self.family.items():
            nxt = prefix.compose(q)
            if self.admissible(nxt):
                out.append((name, q, nxt))
        return out

    def value(self, prefix: PL, j: int) -> PL:
        if j == 0:
            return _ID
        key = (prefix, j)
        if key not in self.memo:
            cands = [q.compose(self.value(nxt, j - 1)) for _, q, nxt in self.moves(prefix)]
            self.memo[key] = pl_supremum(cands) if cands else _ID
        return self.memo[key]

    def strategy(self, prefix: PL, j: int, x: Fraction) -> dict[str, Any]:
        """The move maximising h_{L (+) V_{j-1}(prefix (+) L)}(x), and its continuations."""
        if j == 0:
            return {}
        best: tuple[Fraction, str, PL, PL] | None = None
        for name, q, nxt in self.moves(prefix):
            h = q.compose(self.value(nxt, j - 1)).hockey_stick_exact(x)
            if best is None or h > best[0]:
                best = (h, name, q, nxt)
        if best is None:
            return {}
        _, name, q, nxt = best
        then: dict[str, Any] = {}
        if j > 1:
            for _w, m in q.segments:
                if m == 0:
                    continue  # loss +inf: the pair is told apart, nothing left to gain
                z = -math.log(float(m))
                then[f"loss={z:.6g}"] = self.strategy(nxt, j - 1, x * m)
        return {"query": name, "then": then}


def as_curve(q: Any) -> PL:
    """A family member as a tradeoff curve: a curve as is; a PLD without Gaussian part via
    its atoms (``from_pld_atoms``, pessimistic: the curve is on or below the PLD's)."""
    if isinstance(q, PiecewiseLinearTradeoff):
        return q
    if hasattr(q, "losses") and hasattr(q, "probs") and float(getattr(q, "mu", 0.0)) == 0.0:
        keep = np.asarray(q.probs) > 0
        losses = list(np.asarray(q.losses)[keep]) + ([math.inf] if q.inf_mass > 0 else [])
        probs = list(np.asarray(q.probs)[keep]) + ([q.inf_mass] if q.inf_mass > 0 else [])
        return PiecewiseLinearTradeoff.from_pld_atoms(losses, probs)
    raise fail("family", "audit_natural", "tradeoff curves or PLDs without Gaussian part", q)


def audit_natural(
    family: dict[str, Any],
    budget: PL | GaussianBudget,
    rounds: int,
    *,
    eps_grid: np.ndarray | None = None,
) -> AuditResult:
    """Worst case of the natural filter with queries ``family`` (+ Id), budget, k rounds.

    Family members are tradeoff curves or PLDs (converted pessimistically by :func:`as_curve`).
    """
    k = check_int("rounds", rounds, "audit_natural", minimum=1)
    if not family:
        raise fail("family", "audit_natural", "a non-empty dict name -> tradeoff curve", family)
    fam = {name: as_curve(q) for name, q in family.items()}
    exact = isinstance(budget, PiecewiseLinearTradeoff)
    margin = 0.0 if exact else MARGIN
    hi = _Natural(fam, budget, upper=True)
    worst_hi = hi.value(_ID, k)
    if pl_leq_budget(worst_hi, budget):
        return AuditResult(True, k, worst_hi, margin=margin)
    lo = hi if exact else _Natural(fam, budget)
    worst = lo.value(_ID, k)
    rng, gap, e_at = overspend(worst, budget, eps_grid)
    if e_at is None:
        # neither certified free nor a certified overspend: a move within the margin decides
        rng, gap, e_at = overspend(worst_hi, budget, eps_grid)
        return AuditResult(
            False,
            k,
            worst_hi,
            eps_range=rng,
            max_gap=gap,
            eps_at_max=e_at,
            verdict=UNDETERMINED,
            margin=margin,
        )
    x = Fraction(math.exp(e_at))
    return AuditResult(
        False,
        k,
        worst,
        eps_range=rng,
        max_gap=gap,
        eps_at_max=e_at,
        delta_worst=float(worst.hockey_stick_exact(x)),
        delta_budget=_budget_h(budget, float(x)),
        strategy=lo.strategy(_ID, k, x),
        margin=margin,
    )


def audit_gdp_family(
    mus: list[float], budget: GaussianBudget | tuple[float, float], rounds: int
) -> AuditResult:
    """The natural filter's worst case for GDP queries {G_mu_i} (+ Id), exactly.

    States are G_s with s^2 exact; sup of Gaussians is the largest (G_a <= G_b iff a <= b),
    composition adds squares. ``budget``: G_mu (``GaussianBudget`` with delta = 0) or an
    (eps, delta) target R_{eps,delta}, where G_s <= R_{eps,delta} iff delta_s(eps) <= delta
    (both pairs symmetric; paper, Lemma 8).
    """
    k = check_int("rounds", rounds, "audit_gdp_family", minimum=1)
    sq = sorted({Fraction(m) ** 2 for m in mus} | {Fraction(0)})

    if isinstance(budget, GaussianBudget):
        if budget.delta != 0.0:
            raise UnsupportedError("audit_gdp_family supports G_mu and R_{eps,delta} budgets.")
        cap = Fraction(budget.mu) ** 2
        margin = 0.0

        def ok(s2: Fraction) -> bool:
            return s2 <= cap

        maybe = ok
    else:
        eps, delta = budget

        # delta_s(eps) with gdp_delta_err's certified error bound (valid at every mu; the
        # flat 1e-12 it replaces is exceeded from mu ~ 1e5: 3e-12 at mu = 1e5, eps = 5e9)
        def ok(s2: Fraction) -> bool:  # certified: a larger mu has a larger delta(eps)
            h, err = gdp_delta_err(sqrt_up(s2), eps)
            return add_up(float(h), float(err)) <= delta

        def maybe(s2: Fraction) -> bool:  # not certainly inadmissible
            h, err = gdp_delta_err(sqrt_down(s2), eps)
            return add_down(float(h), -float(err)) <= delta

    memo: dict[tuple[Fraction, int], Fraction] = {}

    def value(prefix: Fraction, j: int) -> Fraction:
        """r^2 of V_j(G_prefix) = G_r, over the possibly admissible moves (upper reading)."""
        if j == 0:
            return Fraction(0)
        if (prefix, j) not in memo:
            best = Fraction(0)
            for q in sq:
                if maybe(prefix + q):
                    best = max(best, q + value(prefix + q, j - 1))
            memo[(prefix, j)] = best
        return memo[(prefix, j)]

    r2 = value(Fraction(0), k)
    worst = {"gdp_mu_squared": str(r2), "gdp_mu": math.sqrt(float(r2))}
    if not isinstance(budget, GaussianBudget):
        margin = float(gdp_delta_err(sqrt_up(r2), budget[0])[1])  # the verdict's margin
    if r2 == 0 or ok(r2):
        return AuditResult(True, k, worst, margin=margin)
    # GDP queries are universally free (paper, Thm. 8), so no overspend can be certified:
    # the upper reading's worst composition is within the margin of the budget
    return AuditResult(False, k, worst, verdict=UNDETERMINED, margin=margin)
