"""Slow statistical suite: larger samples, more parameters, KS tests of lattice noise.

Seeds and thresholds are fixed (P_MIN); tests of the secure source cannot be seeded and
fail with probability about P_MIN each.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from mech_stats import P_MIN, chi2_pvalue, dgauss_pmf, dlap_pmf, freq_pvalue
from scipy import stats

from dpsieve.mechanisms import (
    discrete_gaussian,
    discrete_laplace,
    exponential_mechanism,
    gaussian_noise,
    laplace_noise,
    poisson_sample,
    sampled_sigma2,
)
from dpsieve.mechanisms._random import RandomSource

pytestmark = pytest.mark.slow
N = 1_000_000


@pytest.mark.parametrize("scale", [0.05, 0.4, 1.0, 3.3, 25.0, 1e4])
def test_discrete_laplace_large_sample(scale: float) -> None:
    z = discrete_laplace(scale, N, np.random.default_rng(101))
    if scale <= 100:
        lim = int(40 * scale) + 3
        sup = np.arange(-lim, lim + 1)
        assert chi2_pvalue(z, sup, dlap_pmf(scale, sup)) > P_MIN
    else:  # bin |Z| by edges y_i: P[|Z| >= y] = 2 a^y / (1 + a) for y >= 1 (exact)
        a = math.exp(-1 / scale)
        edges = np.unique(np.concatenate([[0, 1], np.floor(scale * np.linspace(0.05, 12, 40))]))
        surv = np.where(edges == 0, 1.0, 2 * a**edges / (1 + a))
        probs = np.append(-np.diff(surv), surv[-1])
        idx = np.searchsorted(edges, np.abs(z), side="right") - 1
        counts = np.bincount(idx, minlength=edges.size)
        assert stats.chisquare(counts, probs * z.size).pvalue > P_MIN


@pytest.mark.parametrize("sigma", [0.2, 0.7, 1.0, 2.5, 13.0, 77.7])
def test_discrete_gaussian_large_sample(sigma: float) -> None:
    z = discrete_gaussian(sigma, N, np.random.default_rng(102))
    s2 = float(sampled_sigma2(sigma))
    lim = int(9 * sigma) + 4
    sup = np.arange(-lim, lim + 1)
    assert chi2_pvalue(z, sup, dgauss_pmf(s2, sup)) > P_MIN


def test_large_sigma_moments() -> None:
    sigma = 1e5
    z = discrete_gaussian(sigma, N, np.random.default_rng(103))
    assert stats.kstest(z / sigma, stats.norm.cdf).pvalue > P_MIN


def test_secure_source_fits() -> None:
    z = discrete_laplace(2.0, 200_000)
    sup = np.arange(-60, 61)
    assert chi2_pvalue(z, sup, dlap_pmf(2.0, sup)) > P_MIN
    g = discrete_gaussian(2.0, 200_000)
    assert chi2_pvalue(g, sup, dgauss_pmf(float(sampled_sigma2(2.0)), sup)) > P_MIN


@pytest.mark.parametrize("scale", [1e-3, 1.0, 1e6])
def test_lattice_laplace_ks(scale: float) -> None:
    x = laplace_noise(scale, 300_000, np.random.default_rng(104))
    assert stats.kstest(x / scale, stats.laplace.cdf).pvalue > P_MIN


@pytest.mark.parametrize("sigma", [1e-3, 1.0, 1e6])
def test_lattice_gaussian_ks(sigma: float) -> None:
    x = gaussian_noise(sigma, 300_000, np.random.default_rng(105))
    assert stats.kstest(x / sigma, stats.norm.cdf).pvalue > P_MIN


@pytest.mark.parametrize("m", [3, 7, 1000, 2**63 + 12345])
def test_uniform_below(m: int) -> None:
    src = RandomSource(np.random.default_rng(106))
    u = src.below(np.full(300_000, m, dtype=np.uint64))
    k = 10
    bins = (u.astype(object) * k // m).astype(np.int64) if m > 2**53 else (u * k // m)
    if m < k:
        assert freq_pvalue(u.astype(np.int64), [1 / m] * m) > P_MIN
    else:
        counts = np.bincount(bins.astype(np.int64), minlength=k)
        edges = [(-(-m * i // k)) for i in range(k + 1)]  # ceil(m i / k)
        probs = np.diff(edges) / m
        assert stats.chisquare(counts, probs * u.size).pvalue > P_MIN


def test_exponential_mechanism_many_candidates() -> None:
    rng = np.random.default_rng(107)
    scores = np.linspace(0, 5, 12)
    xs = [exponential_mechanism(scores, 1.0, 1.0, rng) for _ in range(60_000)]
    w = np.exp(scores / 2)
    assert freq_pvalue(xs, w / w.sum()) > P_MIN


@pytest.mark.parametrize("rate", [0.3, 1e-3, 2.0**-50 * 3])
def test_poisson_sample_rate(rate: float) -> None:
    x = poisson_sample(2_000_000, rate, np.random.default_rng(108))
    assert stats.binomtest(int(x.sum()), x.size, rate).pvalue > P_MIN


@pytest.mark.parametrize(("c", "monotonic"), [(0.5, False), (2.0, False), (1.0, True)])
def test_above_threshold_single_query_law(c: float, monotonic: bool) -> None:
    """One query at distance c below the threshold: P[answer 0] = P[nu - rho >= c] with
    rho ~ Lap(2/eps), nu ~ Lap(4/eps) (Lap(2/eps) if monotonic); the lattice (2^-30)
    changes this by far less than the test can see. For independent Laplace scales a != b,
    P[nu + rho >= c] = (a^2 e^{-c/a} - b^2 e^{-c/b}) / (2 (a^2 - b^2)), and for a = b it is
    (1 + c/(2a)) e^{-c/a} / 2."""
    from dpsieve.mechanisms import above_threshold

    eps, n = 1.0, 20_000
    rng = np.random.default_rng(109)
    hits = sum(above_threshold([0.0], c, eps, 1.0, rng, monotonic=monotonic) == 0 for _ in range(n))
    a, b = 2 / eps, (2 / eps if monotonic else 4 / eps)
    if a == b:
        p = (1 + c / (2 * a)) * math.exp(-c / a) / 2
    else:
        p = (a * a * math.exp(-c / a) - b * b * math.exp(-c / b)) / (2 * (a * a - b * b))
    assert stats.binomtest(int(hits), n, p).pvalue > P_MIN


def test_geometric_large_sample() -> None:
    from dpsieve.mechanisms import geometric

    for scale in (0.2, 3.0, 40.0):
        y = geometric(scale, N, np.random.default_rng(110))
        a = math.exp(-1 / scale)
        sup = np.arange(0, int(50 * scale) + 5)
        assert chi2_pvalue(y, sup, (1 - a) * a**sup) > P_MIN
