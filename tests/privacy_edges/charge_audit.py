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
"the run failed" (error, refusal, or no value), and "a statistic of the answer exceeds t"
for t at the midpoint and at pilot quantiles, for three statistics fitted on the pilot
(:func:`_statistics`): the projection on the direction of change of the means; the
Gaussian likelihood ratio (that direction weighted by the inverse variances); and the
**Laplace likelihood ratio** ``sum_i w_i clip((x_i - c_i) / d_i, 0, 1)`` with ``c_i`` the
B-side median, ``d_i`` the median shift and ``w_i = |d_i| / b_i`` (``b_i`` the mean absolute
deviation), which is the privacy loss of independent Laplace noise on every coordinate. The
likelihood ratios add up every coordinate the neighbour moves -- e.g. all the groups a
privacy unit touches -- each with the weight its noise gives it, so a user-level release
whose noise is too small for its L0 groups shows in one number (the audit's power on
user-level plans: tests/privacy_edges/test_edges_audit_power.py). Among the events, the
pilot picks the one whose Clopper-Pearson excess *at the test's sample size* (pilot rates
scaled to ``samples`` runs) is largest: an event that looks extreme on a small pilot but is
too rare to be bounded at ``samples`` runs is not preferred. Then fresh samples give
one-sided Clopper-Pearson bounds ``lo`` on ``P[E | A]`` and ``hi`` on ``P[E | B]``, each at
level ``alpha / 2``.

**False alarms.** If the entry point is truly as private as it charges, the audit fails
with probability at most ``alpha`` (the two bounds hold together with probability
``>= 1 - alpha``; on that event ``lo - e^eps hi <= P[E|A] - e^eps P[E|B] <= delta_c(eps)``
for every eps; the event was fixed before the test samples were drawn). ``ALPHA`` below is
the rate per audit; the suite's rate is at most the number of audits times that. The same
argument at every level gives the verdict's **p-value** (:attr:`Verdict.p_value`: the
least ``alpha`` at which the chosen event's test fails): under a correct charge,
``P[p_value <= a] <= a`` for every ``a``. None of this depends on the statistics fitted on
the pilot being right: a poor fit costs power, never the false-alarm rate.
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
        # (eps, delta)-DP is dominated by randomized response with a delta atom (Kairouz,
        # Oh, Viswanath 2015, Thm. 2.4): delta(x) = delta + (1 - delta)(e^eps - e^x) /
        # (1 + e^eps) for 0 <= x <= eps (the pure line at delta = 0); was 1 below eps
        e, d = float(cost["eps"]), float(cost["delta"])
        return lambda x: d if x >= e else 1.0 if x < 0 else min(
            1.0, d + (1 - d) * (math.exp(e) - math.exp(x)) / (1 + math.exp(e)))
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


#: A statistic of released rows: (runs x coordinates) -> one number per run.
Statistic = Callable[[np.ndarray], np.ndarray]
#: Rows the pilot's resampling model draws per side to rate the candidate events.
MODEL_DRAWS = 20_000


def _statistics(xa: np.ndarray, xb: np.ndarray) -> list[tuple[str, Statistic]]:
    """Statistics fitted on the pilot rows (runs x coordinates) of the two sides: large on
    A, small on B (module docstring). Any function of the pilot keeps the audit valid."""
    u = xa.mean(axis=0) - xb.mean(axis=0)
    if not np.any(u != 0) or not np.all(np.isfinite(u)):
        u = np.ones(xa.shape[1])
    u = u / np.max(np.abs(u))
    out: list[tuple[str, Statistic]] = [("projection", lambda x, u=u: x @ u)]
    var = (xa.var(axis=0) + xb.var(axis=0)) / 2
    diff = xa.mean(axis=0) - xb.mean(axis=0)
    if np.all(np.isfinite(var)) and np.all(var > 0) and np.any(diff != 0):
        g = diff / var
        g = g / np.max(np.abs(g))
        out.append(("gaussian LR", lambda x, g=g: x @ g))
    c, ca = np.median(xb, axis=0), np.median(xa, axis=0)
    d = ca - c
    b = (np.mean(np.abs(xa - ca), axis=0) + np.mean(np.abs(xb - c), axis=0)) / 2
    live = (d != 0) & (b > 0) & np.isfinite(d) & np.isfinite(b)
    if np.any(live):
        c, d, w = c[live], d[live], np.abs(d[live]) / b[live]

        def laplace(x: np.ndarray, live: Any = live, c: Any = c, d: Any = d,
                    w: Any = w) -> np.ndarray:
            return np.clip((x[:, live] - c) / d, 0.0, 1.0) @ w
        out.append(("laplace LR", laplace))
    return out


def _model(xa: np.ndarray, xb: np.ndarray, draws: int, seed: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """Rows resampled from the pilot to rate events more smoothly than the pilot's own
    counts: each coordinate is its side's median plus a residual drawn from both sides'
    residuals of that coordinate, independently across coordinates (as the noise is). Used
    only to choose the event: a poor model costs power, never validity."""
    rng = np.random.default_rng(seed)
    ca, cb = np.median(xa, axis=0), np.median(xb, axis=0)
    res = np.concatenate([xa - ca, xb - cb])
    idx = rng.integers(0, res.shape[0], (2, draws, res.shape[1]))
    cols = np.arange(res.shape[1])
    return ca + res[idx[0], cols], cb + res[idx[1], cols]


def _candidate_events(a: Sample, b: Sample) -> list[tuple[str, Event, float, float]]:
    """Events with their rates on A and B as estimated from the pilot."""
    ok_a = [r is not None for r in a.rows]
    ok_b = [r is not None for r in b.rows]
    fa, fb = 1 - float(np.mean(ok_a)), 1 - float(np.mean(ok_b))
    events: list[tuple[str, Event, float, float]] = [("failed", lambda r: r is None, fa, fb)]
    ra = [r for r in a.rows if r is not None]
    rb = [r for r in b.rows if r is not None]
    if not ra or not rb or len({len(r) for r in ra + rb}) != 1:
        return events
    xa, xb = np.array(ra, dtype=np.float64), np.array(rb, dtype=np.float64)
    if not (np.all(np.isfinite(xa)) and np.all(np.isfinite(xb))):
        return events
    ma, mb = _model(xa, xb, MODEL_DRAWS, seed=len(ra) * 7919 + len(rb))
    qs = np.concatenate([[0.001, 0.005], np.linspace(0.01, 0.99, 99), [0.995, 0.999]])
    for name, stat in _statistics(xa, xb):
        sa, sb = np.sort(stat(ma)), np.sort(stat(mb))
        pooled = np.concatenate([sa, sb, stat(xa), stat(xb)])
        ts = set(np.quantile(pooled, qs).tolist())
        ts.add(float((sa.mean() + sb.mean()) / 2))
        for t in sorted(ts):
            # P[stat > t] in the model, times the pilot's rate of runs that gave a value
            qa = (1 - fa) * (1 - np.searchsorted(sa, t, side="right") / sa.size)
            qb = (1 - fb) * (1 - np.searchsorted(sb, t, side="right") / sb.size)

            def above(r: list[float] | None, t: float = t, f: Statistic = stat) -> bool:
                return r is not None and float(f(np.asarray([r], dtype=np.float64))[0]) > t
            events.append((f"{name} > {t:.6g}", above, float(qa), float(qb)))
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


def _violations(pa: np.ndarray, pb: np.ndarray, prof: Callable[[float], float],
                grid: Sequence[float]) -> np.ndarray:
    """:func:`_violation` for arrays of rates (elementwise)."""
    return np.max([pa - math.exp(e) * pb - prof(e) for e in grid], axis=0)


def _cp_lowers(k: np.ndarray, n: int, level: float) -> np.ndarray:
    with np.errstate(all="ignore"):
        lo = stats.beta.ppf(level, np.maximum(k, 1), n - k + 1)
    return np.where(k <= 0, 0.0, lo)


def _cp_uppers(k: np.ndarray, n: int, level: float) -> np.ndarray:
    with np.errstate(all="ignore"):
        hi = stats.beta.isf(level, k + 1, np.maximum(n - k, 1))
    return np.where(k >= n, 1.0, hi)


def _cp_lower(k: int, n: int, level: float) -> float:
    return 0.0 if k == 0 else float(stats.beta.ppf(level, k, n - k + 1))


def _cp_upper(k: int, n: int, level: float) -> float:
    return 1.0 if k == n else float(stats.beta.isf(level, k + 1, n - k))


def _excess(k1: int, n1: int, k2: int, n2: int, alpha: float,
            prof: Callable[[float], float], grid: Sequence[float]
            ) -> tuple[float, float, float, float]:
    """(excess, eps, lo, hi) of the test at level ``alpha`` on counts k1/n1 (A), k2/n2 (B)."""
    lo = _cp_lower(k1, n1, alpha / 2)
    hi = _cp_upper(k2, n2, alpha / 2)
    excess, eps = _violation(lo, hi, prof, grid)
    return excess, eps, lo, hi


def p_value(k1: int, n1: int, k2: int, n2: int, prof: Callable[[float], float],
            grid: Sequence[float]) -> float:
    """The least level ``a`` at which the test on these counts fails (1 if it never does),
    found by bisection on log10(a) down to 1e-30 (reported as 1e-30 below that); rounded
    up (a larger p-value is the cautious statement of a detection)."""
    if _excess(k1, n1, k2, n2, 1.0, prof, grid)[0] <= 0:
        return 1.0
    lo, hi = -30.0, 0.0  # log10: fails at 10^hi, not known to fail at 10^lo
    if _excess(k1, n1, k2, n2, 10.0**lo, prof, grid)[0] > 0:
        return 10.0**lo
    for _ in range(40):
        mid = (lo + hi) / 2
        if _excess(k1, n1, k2, n2, 10.0**mid, prof, grid)[0] > 0:
            hi = mid
        else:
            lo = mid
    return float(10.0**hi)


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
    alpha: float = ALPHA
    p_value: float = 1.0  # the least alpha at which this event's test fails
    rates: tuple[float, float] = (math.nan, math.nan)  # observed P[E|A], P[E|B]

    def __str__(self) -> str:
        return (f"{'passed' if self.passed else 'FAILED'}: event '{self.event}', "
                f"observed {self.rates[0]:.4g} vs {self.rates[1]:.4g}, "
                f"P[E|A] >= {self.lower:.4g}, P[E|B] <= {self.upper:.4g}, eps = {self.eps}, "
                f"delta allowed by {self.cost} = {self.allowed:.3g}, excess {self.excess:.3g} "
                f"({self.samples} runs a side, alpha = {self.alpha}, "
                f"p-value {self.p_value:.3g})")


def audit(run_a: Callable[[int], Sample], run_b: Callable[[int], Sample], *,
          samples: int, pilot: int | None = None, alpha: float = ALPHA,
          events: Sequence[tuple[str, Event]] = ()) -> Verdict:
    """Audit one query on a neighbouring pair: ``run_a(k)`` / ``run_b(k)`` run it k times.

    The charge is the largest the ledger recorded for the pilot and test runs (they must
    agree: a query whose charge varies is a failure of its own). ``events``: more
    candidate events, fixed by the caller and rated on the pilot's own rows (e.g. "a
    group is released", which the resampling model cannot rate: a rare jump leaves the
    medians where they are). False alarms: at most ``alpha`` (module docstring)."""
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
    # choose the event and its direction on the pilot only: the largest excess the test
    # would show at `samples` runs if its rates were the pilot's (ties: the larger raw gap)
    cands = _candidate_events(pa_, pb_) + [
        (name, ev, float(np.mean([ev(r) for r in pa_.rows])),
         float(np.mean([ev(r) for r in pb_.rows]))) for name, ev in events]
    qa = np.array([c[2] for c in cands])
    qb = np.array([c[3] for c in cands])
    best: tuple[float, float, str, Event, bool] | None = None
    for flip in (False, True):
        for comp in (False, True):
            x, y = (qb, qa) if flip else (qa, qb)
            if comp:
                x, y = 1 - x, 1 - y
            raw = _violations(x, y, prof, grid)
            k1, k2 = np.rint(x * samples), np.rint(y * samples)
            scaled = _violations(_cp_lowers(k1, samples, alpha / 2),
                                 _cp_uppers(k2, samples, alpha / 2), prof, grid)
            i = int(np.lexsort((raw, scaled))[-1])
            if best is None or (scaled[i], raw[i]) > (best[0], best[1]):
                name, ev = cands[i][0], cands[i][1]
                label = ("not " if comp else "") + name + (" (D2 vs D)" if flip else "")
                best = (float(scaled[i]), float(raw[i]), label,
                        (lambda r, ev=ev, c=comp: ev(r) != c), flip)
    assert best is not None
    _, _, label, ev, flip = best
    first, second = (tb, ta) if flip else (ta, tb)
    k1 = sum(ev(r) for r in first.rows)
    k2 = sum(ev(r) for r in second.rows)
    n1, n2 = len(first.rows), len(second.rows)
    excess, eps, lo, hi = _excess(k1, n1, k2, n2, alpha, prof, grid)
    return Verdict(excess <= 0, label, eps, lo, hi, prof(eps), excess, cost, samples, alpha,
                   p_value(k1, n1, k2, n2, prof, grid), (k1 / n1, k2 / n2))
