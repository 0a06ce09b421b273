"""The charge audit: does an entry point release more than the ledger charged?

A black-box statistical test of the DP inequality on one neighbouring pair. Run the same
query ``R`` times on a data set ``D`` and on a neighbour ``D2`` (each on its own ledger),
record what the ledger charged, and look for an event ``E`` of the outcome whose
probabilities break every (eps, delta) the charge allows::

    P[E | A] - e^eps P[E | B] > delta_c(eps)     for some eps,  {A, B} = {D, D2},

where ``delta_c`` is the privacy profile implied by the recorded charge (:func:`profile`;
an upper bound on the profile of *any* mechanism with that cost). If the spread of the
answers is smaller than the charge implies, their distributions on ``D`` and ``D2`` are too
far apart and the test finds an event separating them. A crash or refusal is an outcome
too: a run that fails on ``D`` more often than on ``D2`` releases that (issue 10, defect 3).

**How the event is chosen.** A pilot sample (not used in the test) picks ``E`` among:
"the run failed" (error, refusal, or no value), and "the answer projected on the pilot's
direction of change exceeds t" for t at the midpoint and at pilot quantiles. Then fresh
samples give one-sided Clopper-Pearson bounds ``lo`` on ``P[E | A]`` and ``hi`` on
``P[E | B]``, each at level ``alpha / 2``.

**False alarms.** If the entry point is truly as private as it charges, the audit fails
with probability at most ``alpha`` (the two bounds hold together with probability
``>= 1 - alpha``; on that event ``lo - e^eps hi <= P[E|A] - e^eps P[E|B] <= delta_c(eps)``
for every eps; the event was fixed before the test samples were drawn). ``ALPHA`` below is
the rate per audit; the suite's rate is at most the number of audits times that.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

#: False-alarm rate of one audit (see the module docstring).
ALPHA = 1e-4
#: eps values at which the profile is checked (the charge's own eps is added).
EPS_GRID = (0.0, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0)


# -- privacy profiles --------------------------------------------------------------------
def _rdp_delta(order: float, value: float, eps: float) -> float:
    """(alpha, tau)-RDP => (eps, delta)-DP with this delta (Canonne, Kamath, Steinke 2020,
    Prop. 12; Asoodeh et al. 2021): exp((a-1)(tau-eps)) / a * (1 - 1/a)^(a-1)."""
    a = order
    log = (a - 1.0) * (value - eps) - math.log(a) + (a - 1.0) * math.log1p(-1.0 / a)
    return math.exp(min(log, 0.0))


def _gdp_delta(mu: float, eps: float) -> float:
    """The exact profile of mu-GDP (Dong, Roth, Su 2022, Cor. 2.13)."""
    if mu == 0:
        return 0.0
    phi = stats.norm.cdf
    return float(phi(-eps / mu + mu / 2) - math.exp(eps) * phi(-eps / mu - mu / 2))


ORDERS = tuple(1.0 + 10 ** (k / 8) for k in range(-24, 33))


def profile(cost: dict[str, Any]) -> Callable[[float], float]:
    """An upper bound on delta(eps) of any mechanism with this recorded cost (a dict as the
    ledger stores it). Each family's bound is valid for every mechanism in it, so using it
    can only make the audit *less* likely to fail (the false-alarm rate is kept)."""
    t = cost["type"]
    if t == "pure":
        e = float(cost["eps"])
        # the privacy region of e-DP is randomized response's (Kairouz, Oh, Viswanath 2015)
        return lambda x: 0.0 if x >= e else (math.exp(e) - math.exp(x)) / (1 + math.exp(e))
    if t == "approx":
        e, d = float(cost["eps"]), float(cost["delta"])
        return lambda x: d if x >= e else 1.0
    if t in ("zcdp", "approx_zcdp"):
        rho, d = float(cost["rho"]), float(cost.get("delta", 0.0))
        return lambda x: min(1.0, d + min(_rdp_delta(a, a * rho, x) for a in ORDERS))
    if t == "gdp":
        mu = float(cost["mu"])
        return lambda x: min(1.0, _gdp_delta(mu, x) + 1e-12)
    if t == "rdp":
        pairs = list(zip(cost["orders"], cost["values"], strict=True))
        return lambda x: min(1.0, *(_rdp_delta(a, v, x) for a, v in pairs))
    raise ValueError(f"no profile for cost type {t!r}")


def charge_eps_grid(cost: dict[str, Any]) -> list[float]:
    own = [float(cost["eps"])] if "eps" in cost else []
    return sorted({*EPS_GRID, *own})


# -- outcomes as features -------------------------------------------------------------------
def features(value: Any) -> list[float] | None:
    """The released numbers of an answer, or None when the run gave no value."""
    if value is None:
        return None
    if isinstance(value, dict):
        if "groups" in value:  # a plan's answer: every estimate of every group, in order
            flat: list[float] = []
            for g in value["groups"]:
                for e in g["estimates"]:
                    v = e["value"]
                    flat.extend(float(x) for x in (v if isinstance(v, list) else [v]))
            return flat if flat and all(math.isfinite(v) for v in flat) else None
        for k in ("answers", "counts", "value"):
            if k in value:
                return features(value[k])
        return None
    if isinstance(value, list | tuple):
        out = [float(v) for v in value]
        return out if all(math.isfinite(v) for v in out) else None
    v = float(value)
    return [v] if math.isfinite(v) else None


@dataclass(frozen=True)
class Sample:
    """What one side released: a feature row per ok run (None for a failed run)."""

    rows: list[list[float] | None]
    costs: list[dict[str, Any]]


Event = Callable[[list[float] | None], bool]


def _candidate_events(a: Sample, b: Sample) -> list[tuple[str, Event]]:
    events: list[tuple[str, Event]] = [("failed", lambda r: r is None)]
    ra = [r for r in a.rows if r is not None]
    rb = [r for r in b.rows if r is not None]
    if not ra or not rb or len({len(r) for r in ra + rb}) != 1:
        return events
    xa, xb = np.array(ra), np.array(rb)
    u = xa.mean(axis=0) - xb.mean(axis=0)
    if not np.any(u != 0) or not np.all(np.isfinite(u)):
        u = np.ones(xa.shape[1])
    u = u / np.max(np.abs(u))
    pa, pb = xa @ u, xb @ u
    pooled = np.concatenate([pa, pb])
    ts = {float((pa.mean() + pb.mean()) / 2)}
    ts |= {float(np.quantile(pooled, q)) for q in (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)}
    for t in sorted(ts):
        def above(r: list[float] | None, t: float = t, u: Any = u) -> bool:
            return r is not None and float(np.dot(r, u)) > t
        events.append((f"projection > {t:.6g}", above))
    return events


def _violation(pa: float, pb: float, prof: Callable[[float], float],
               grid: Sequence[float]) -> tuple[float, float]:
    """max over eps of pa - e^eps pb - delta_c(eps), and the eps attaining it."""
    best, at = -math.inf, 0.0
    for e in grid:
        v = pa - math.exp(e) * pb - prof(e)
        if v > best:
            best, at = v, e
    return best, at


def _cp_lower(k: int, n: int, level: float) -> float:
    return 0.0 if k == 0 else float(stats.beta.ppf(level, k, n - k + 1))


def _cp_upper(k: int, n: int, level: float) -> float:
    return 1.0 if k == n else float(stats.beta.ppf(1 - level, k + 1, n - k))


@dataclass(frozen=True)
class Verdict:
    """The audit's outcome; ``passed`` is False when the charge is shown too small."""

    passed: bool
    event: str
    eps: float
    lower: float  # Clopper-Pearson lower bound on P[E | A]
    upper: float  # upper bound on P[E | B]
    allowed: float  # delta_c(eps)
    excess: float  # lower - e^eps upper - allowed (> 0: failed)
    cost: dict[str, Any]
    samples: int

    def __str__(self) -> str:
        return (f"{'passed' if self.passed else 'FAILED'}: event '{self.event}', "
                f"P[E|A] >= {self.lower:.4g}, P[E|B] <= {self.upper:.4g}, eps = {self.eps}, "
                f"delta allowed by {self.cost} = {self.allowed:.3g}, excess {self.excess:.3g} "
                f"({self.samples} runs a side, alpha = {ALPHA})")


def audit(run_a: Callable[[int], Sample], run_b: Callable[[int], Sample], *,
          samples: int, pilot: int | None = None, alpha: float = ALPHA) -> Verdict:
    """Audit one query on a neighbouring pair: ``run_a(k)`` / ``run_b(k)`` run it k times.

    The charge is the largest the ledger recorded for the pilot and test runs (they must
    agree: a query whose charge varies is a failure of its own)."""
    pilot = pilot if pilot is not None else max(20, samples // 3)
    pa_, pb_ = run_a(pilot), run_b(pilot)
    ta, tb = run_a(samples), run_b(samples)
    costs = [c for s in (pa_, pb_, ta, tb) for c in s.costs]
    if not costs:
        raise AssertionError("no run was charged: nothing to audit (every run refused?)")
    keyed = {repr(sorted(c.items())): c for c in costs}
    assert len(keyed) == 1, f"the same query was charged differently: {list(keyed)}"
    cost = costs[0]
    prof, grid = profile(cost), charge_eps_grid(cost)
    # choose the event and its direction on the pilot only
    best: tuple[float, str, Event, bool] | None = None
    for name, ev in _candidate_events(pa_, pb_):
        qa = np.mean([ev(r) for r in pa_.rows])
        qb = np.mean([ev(r) for r in pb_.rows])
        for flip in (False, True):
            for comp in (False, True):
                x, y = (qb, qa) if flip else (qa, qb)
                if comp:
                    x, y = 1 - x, 1 - y
                v = _violation(float(x), float(y), prof, grid)[0]
                if best is None or v > best[0]:
                    label = ("not " if comp else "") + name + (" (D2 vs D)" if flip else "")
                    best = (v, label, (lambda r, ev=ev, c=comp: ev(r) != c), flip)
    assert best is not None
    _, label, ev, flip = best
    first, second = (tb, ta) if flip else (ta, tb)
    k1 = sum(ev(r) for r in first.rows)
    k2 = sum(ev(r) for r in second.rows)
    lo = _cp_lower(k1, len(first.rows), alpha / 2)
    hi = _cp_upper(k2, len(second.rows), alpha / 2)
    excess, eps = _violation(lo, hi, prof, grid)
    return Verdict(excess <= 0, label, eps, lo, hi, prof(eps), excess, cost, samples)
