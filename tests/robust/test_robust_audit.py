"""Exact audits of Filter-then-Release (docs/proofs/pfr.md §8): the realised privacy loss
of every enumerated neighbouring pair stays below Lemma 3 / Lemma 5 / Theorem 2."""

from __future__ import annotations

import math

import numpy as np
import pytest
from robust_helpers import count_release, diameter_release, keep_probs, neighbour_pairs
from scipy import stats

from dpsieve.robust._noise import count_margin, count_scale
from dpsieve.robust.audit import (
    core_count_sum_distribution,
    core_distribution,
    hockey_stick,
    pipeline_pmf,
    realised_epsilon,
)
from dpsieve.robust.friendly import FilterParams, hybrid_privacy
from dpsieve.robust.mean import COUNT_FRACTION


def _laws(x, y, r, params, release):  # type: ignore[no-untyped-def]
    p, q = keep_probs(x, r, params), keep_probs(y, r, params)
    P, tp = pipeline_pmf(core_distribution(list(x), p), release)
    Q, tq = pipeline_pmf(core_distribution(list(y), q), release)
    return P, Q, max(tp, tq), p, q


def _exact_kappa(p: np.ndarray, q: np.ndarray, k: int) -> float:
    return float(p[k] + q[k] + sum(abs(p[i] - q[i]) for i in range(len(p)) if i != k))


@pytest.mark.parametrize("kind", ["count", "diameter"])
def test_hybrid_lemma_pure_releases(kind: str) -> None:
    rng = np.random.default_rng(7)
    worst = 0.0
    for x, y, k, r in neighbour_pairs(rng, 60):
        n = len(x)
        params = FilterParams.default(n)
        eps_m = float(rng.choice([0.05, 0.3, 1.0]))
        rel = count_release(eps_m, n) if kind == "count" else diameter_release(eps_m, r, 25)
        P, Q, tail, p, q = _laws(x, y, r, params, rel)
        assert tail < 1e-12
        realised = realised_epsilon(P, Q, delta=tail)
        claimed, _ = hybrid_privacy(eps_m, 0.0, params.kappa)
        exact_k = _exact_kappa(p, q, k)
        assert exact_k <= params.kappa
        assert realised <= math.expm1(eps_m) * exact_k + 1e-9
        assert realised <= claimed
        worst = max(worst, realised / claimed)
    assert worst > 0.05  # the audit is not vacuous: some pairs do leak


def test_audit_detects_a_non_friendly_release() -> None:
    """Without Lemma 1 the diameter release is not private: with t0 too small (2 t0 < n)
    the audit sees far more loss than the lemma would claim."""
    x = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 50.0])
    y = x.copy()
    y[0] = 50.0
    bad = FilterParams.__new__(FilterParams)
    object.__setattr__(bad, "n", 6)
    object.__setattr__(bad, "t0", 1)
    object.__setattr__(bad, "width", 1)
    rel = diameter_release(1.0, 1, 60)
    P, Q, tail, _, _ = _laws(x, y, 1, bad, rel)
    assert realised_epsilon(P, Q, delta=tail) > hybrid_privacy(1.0, 0.0, bad.kappa)[0]
    good = FilterParams.default(6)
    P, Q, tail, _, _ = _laws(x, y, 1, good, rel)
    assert realised_epsilon(P, Q, delta=tail) <= hybrid_privacy(1.0, 0.0, good.kappa)[0]


def _mean_law_from_count_sum(dp: np.ndarray, eps1: float, eps2: float, delta1: float,
                             r: float, n_min: int, edges: np.ndarray) -> tuple[np.ndarray, float]:
    """Exact law of (n~, cell of Y) of the friendly mean given the law of (|S|, sum S)."""
    t = count_scale(eps1)
    m1 = count_margin(eps1, delta1)
    a = math.exp(-1.0 / t)
    big = int(35 * t) + 5
    zs = np.arange(-big, big + 1)
    zp = (1 - a) / (1 + a) * a ** np.abs(zs)
    ztail = max(0.0, 1.0 - float(zp.sum()))
    cs, ss = np.nonzero(dp > 1e-300)
    w = dp[cs, ss]
    n = dp.shape[0] - 1
    ms = np.arange(-big - m1, n + big + 1)
    out = np.zeros((len(ms), len(edges) + 2))
    for i, m in enumerate(ms):
        wz = w * np.interp(m - cs + m1, zs, zp, left=0.0, right=0.0)
        if m < n_min:
            out[i, -1] = wz.sum()
            continue
        mean = np.where(cs > 0, ss / np.maximum(cs, 1), 0.0)
        b = (2 * r / m) / eps2
        cdf = stats.laplace.cdf(edges[None, :], loc=mean[:, None], scale=b)
        cells = np.diff(np.concatenate([np.zeros((len(w), 1)), cdf, np.ones((len(w), 1))], 1), 1)
        out[i, :-1] = wz @ cells
    return out.ravel(), ztail


def _audit_mean(trials: int, edges: np.ndarray, seed: int) -> float:
    """n = 120 integer records, eps_M = 0.3, delta_M = 1e-4 (so eps' ~ 2, delta' ~ 5e-3):
    the law of (|S|, sum S) is exact by dynamic programming, hence the law of the shipped
    friendly mean's output (n~, cell of Y); delta(eps') <= delta' for the claimed eps'."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    for trial in range(trials):
        n = 120
        x = np.clip(np.round(rng.normal(10, 2.5, n)), 0, 20)
        x[:6] = rng.integers(0, 21, 6)
        k = [int(np.argmin(np.abs(x - 10))), 0, 1, 2][trial]
        y = x.copy()
        y[k] = [20.0, 0.0, 10.0 + 3.0, 19.0][trial]
        r = 3.0
        params = FilterParams.default(n)
        eps_m, delta_m = 0.3, 1e-4
        laws = []
        for d in (x, y):
            pr = keep_probs(d, r, params)
            e_count = COUNT_FRACTION * eps_m  # the split pfr_mean ships
            laws.append(_mean_law_from_count_sum(core_count_sum_distribution(d, pr), e_count,
                                                 eps_m - e_count, delta_m, r, 2, edges))
        (P, t1), (Q, t2) = laws
        eps_c, delta_c = hybrid_privacy(eps_m, delta_m, params.kappa)
        assert hockey_stick(P, Q, eps_c, max(t1, t2)) <= delta_c
        worst = max(worst, realised_epsilon(P, Q, delta=delta_c, tail=max(t1, t2)) / eps_c)
    return worst


def test_friendly_mean_pipeline_exact() -> None:
    assert _audit_mean(1, np.linspace(0, 20, 21), 5) > 0.01  # not vacuous


@pytest.mark.slow
@pytest.mark.timeout(1500)  # exact enumeration: > 300 s on a loaded 2-core machine
def test_friendly_mean_pipeline_exact_fine_grid() -> None:
    assert _audit_mean(4, np.linspace(0, 20, 81), 6) > 0.01
