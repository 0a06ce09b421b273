"""Median, PCA, KL, treatment rules, the Variant B pieces, and the refused resistances."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import UnsupportedError, ValidationError
from dpsieve.robust import (
    Refusal,
    RobustResult,
    pfr_effective_resistance,
    pfr_kl,
    pfr_median,
    pfr_pca,
    pfr_policy,
    score_mean,
)
from dpsieve.robust.kl import kl_scores
from dpsieve.robust.policy import ipw_values
from dpsieve.robust.variant_b import check_rowwise_score, quantile_utility, trimmed_mean


def _pairs(rng: np.random.Generator, n: int, count: int):  # type: ignore[no-untyped-def]
    for _ in range(count):
        x = rng.standard_cauchy(n)
        y = x.copy()
        y[rng.integers(n)] = rng.standard_cauchy() * 100
        yield x, y


def test_quantile_utility_sensitivity_one() -> None:
    rng = np.random.default_rng(0)
    grid = np.linspace(-5, 5, 101)
    for x, y in _pairs(rng, 50, 200):
        ux, uy = quantile_utility(x, 0.9, grid), quantile_utility(y, 0.9, grid)
        assert np.max(np.abs(ux - uy)) <= 1.0


def test_policy_utility_sensitivity_two_tau() -> None:
    rng = np.random.default_rng(1)
    n, tau = 40, 3.0
    pols = [lambda x: (x[:, 0] > 0).astype(int), lambda x: np.ones(len(x), int)]
    for _ in range(300):
        x = rng.normal(size=(n, 1))
        t = rng.integers(0, 2, n)
        y = rng.normal(0, 3, n)
        e = np.full(n, 0.5)
        x2, t2, y2 = x.copy(), t.copy(), y.copy()
        k = rng.integers(n)
        x2[k], t2[k], y2[k] = rng.normal(), rng.integers(0, 2), rng.normal(0, 3)
        def util(xx, tt, yy, e=e):  # type: ignore[no-untyped-def]
            keep = np.abs(yy) / e <= tau
            return ipw_values(xx[keep], tt[keep], yy[keep], e[keep], pols).sum(axis=1)
        assert np.max(np.abs(util(x, t, y) - util(x2, t2, y2))) <= 2 * tau


def test_trimmed_mean_sum_sensitivity_and_refusal() -> None:
    rng = np.random.default_rng(2)
    v = rng.exponential(1.0, 5000)
    out = trimmed_mean(v, 3.0, 1.0, 1.0, rng=rng)
    assert not isinstance(out, Refusal)
    assert abs(out[0] - v[v <= 3].mean()) < 0.05
    refused = trimmed_mean(np.array([0.5, 0.7]), 1.0, 0.01, 0.01, n_min=1000, rng=rng)
    assert isinstance(refused, Refusal)
    with pytest.raises(ValidationError, match="'values'"):
        trimmed_mean(np.array([-1.0]), 1.0, 1.0, 1.0)


@pytest.mark.parametrize(
    "score",
    [
        lambda r: r[:, 0] - r[:, 0].mean(),  # depends on the other records
        lambda r: -np.abs(r[:, 0]),  # negative
        lambda r: np.full(len(r), np.nan),  # NaN
        lambda r: r[:2, 0],  # wrong shape
        lambda r: np.abs(r[:, 0]) / len(r),  # depends on n
    ],
)
def test_score_not_rowwise_is_rejected(score: object) -> None:
    x = np.random.default_rng(3).normal(size=(100, 2))
    with pytest.raises(ValidationError, match="'score'"):
        check_rowwise_score(score, x, "score_mean")  # type: ignore[arg-type]


def test_score_mean_user_score() -> None:
    rng = np.random.default_rng(4)
    x = np.abs(rng.normal(size=(4000, 2)))
    out = score_mean(x, lambda r: r.sum(axis=1), 1.0, 20.0, rng=rng)
    assert isinstance(out, RobustResult)
    assert out.privacy == PureDP(1.0, Neighbouring.REPLACE_ONE)


def test_median_close() -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(3, 1, 1800), rng.normal(1e4, 1, 200)])
    out = pfr_median(x, 1.0, 1e-6, bound=1e5, rng=rng)
    assert isinstance(out, RobustResult)
    assert abs(out.value - np.median(x)) < 0.5
    assert out.privacy.eps <= 1.0 + 1e-9
    assert pfr_median(np.ones(20), 1.0, 1e-6, bound=1.0).refused


def test_kl_matches_inlier_statistic() -> None:
    rng = np.random.default_rng(6)
    q = np.array([0.4, 0.3, 0.2, 0.1])
    h = rng.multinomial(30, q, size=4000)
    h[:200] = [[0, 0, 0, 30]] * 200  # outlying users
    out = pfr_kl(h, q, 1.0, rng=rng)
    assert isinstance(out, RobustResult)
    s = kl_scores(h, q)
    tau = out.details["threshold"]
    assert abs(out.value - s[s <= tau].mean()) < 0.05
    assert out.value < s.mean()
    with pytest.raises(ValidationError, match="'reference'"):
        pfr_kl(h, [0.5, 0.5, 0.0, 0.0], 1.0)
    with pytest.raises(ValidationError, match="'hist'"):
        pfr_kl(-h, q, 1.0)


def test_policy_selects_the_best_rule() -> None:
    rng = np.random.default_rng(7)
    n = 6000
    x = rng.normal(size=(n, 2))
    t = rng.integers(0, 2, n)
    y = np.where(t == 1, 2 * (x[:, 0] > 0) - 1, 0.0) + rng.normal(0, 0.5, n)
    pols = [lambda a: np.zeros(len(a), int), lambda a: np.ones(len(a), int),
            lambda a: (a[:, 0] > 0).astype(int), lambda a: (a[:, 1] > 0).astype(int)]
    wins = 0
    for _ in range(10):
        out = pfr_policy(x, t, y, lambda a, tt: np.full(len(a), 0.5), pols, 1.0, bound=20.0,
                         rng=rng)
        assert isinstance(out, RobustResult)
        wins += out.value == 2
    assert wins >= 8
    with pytest.raises(ValidationError, match="'propensity'"):
        pfr_policy(x, t, y, lambda a, tt: np.zeros(len(a)), pols, 1.0, bound=20.0)


def test_pca_recovers_a_spiked_subspace() -> None:
    rng = np.random.default_rng(8)
    n, d = 20000, 5
    basis = np.linalg.qr(rng.normal(size=(d, 2)))[0]
    a = rng.normal(size=(n, 2)) * [6.0, 5.0] @ basis.T + rng.normal(size=(n, d))
    out = pfr_pca(a, 2, 2.0, 1e-6, rng=rng)
    assert isinstance(out, RobustResult)
    u = out.value
    assert np.allclose(u.T @ u, np.eye(2), atol=1e-8)
    assert np.linalg.norm(u @ u.T - basis @ basis.T) < 0.5
    with pytest.raises(ValidationError, match="'k'"):
        pfr_pca(a, 6, 1.0, 1e-6)


def test_pca_refuses_when_too_few_blocks() -> None:
    out = pfr_pca(np.random.default_rng(9).normal(size=(500, 3)), 1, 1.0, 1e-6)
    assert isinstance(out, Refusal)
    assert out.stage == "public"


def test_resistance_is_refused_on_purpose() -> None:
    with pytest.raises(UnsupportedError, match="not available"):
        pfr_effective_resistance("graph", eps=1.0)
    assert math.isfinite(1.0)


def test_private_quantile_exact_law_is_eps_dp() -> None:
    """The exponential mechanism's exact law (probabilities ∝ exp(eps u / 2)) on the
    quantile utility: the realised loss on neighbouring pairs is at most eps."""
    rng = np.random.default_rng(10)
    grid = np.linspace(0.05, 10, 200)
    eps = 0.7
    worst = 0.0
    for _ in range(300):
        x = np.abs(rng.standard_cauchy(30))
        y = x.copy()
        y[rng.integers(30)] = abs(rng.standard_cauchy()) * 5
        px = np.exp(eps * quantile_utility(x, 0.9, grid) / 2)
        py = np.exp(eps * quantile_utility(y, 0.9, grid) / 2)
        loss = np.max(np.abs(np.log(px / px.sum()) - np.log(py / py.sum())))
        assert loss <= eps + 1e-12
        worst = max(worst, loss)
    assert worst > 0.3 * eps
