"""Statistical tests of the noise the robust releases add (slow suite)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpsieve.robust._noise import count_margin, count_scale, laplace_release, noisy_count


@pytest.mark.slow
def test_laplace_release_is_laplace_with_the_calibrated_scale() -> None:
    rng = np.random.default_rng(1)
    sens, eps = 0.37, 0.8
    draws = np.array([laplace_release([Fraction(0)], sens, eps, rng)[0] for _ in range(4000)])
    scale = sens / eps
    ks = stats.kstest(draws, stats.laplace(scale=scale).cdf)
    assert ks.pvalue > 1e-3
    # and not a smaller scale (which would be a privacy bug)
    assert stats.kstest(draws, stats.laplace(scale=0.8 * scale).cdf).pvalue < 1e-3


@pytest.mark.slow
def test_noisy_count_is_shifted_discrete_laplace() -> None:
    rng = np.random.default_rng(2)
    eps, delta = 0.5, 1e-3
    m = count_margin(eps, delta)
    draws = np.array([noisy_count(100, eps, delta, rng) for _ in range(20000)]) - 100 + m
    a = math.exp(-1.0 / count_scale(eps))
    ks = np.arange(-12, 13)
    pmf = (1 - a) / (1 + a) * a ** np.abs(ks)
    obs = np.array([(draws == k).sum() for k in ks])
    expected = pmf * len(draws)
    chi = stats.chisquare(np.append(obs, len(draws) - obs.sum()),
                          np.append(expected, len(draws) - expected.sum()))
    assert chi.pvalue > 1e-3
    assert np.mean(draws > m) <= 3 * delta + 3 * math.sqrt(delta / len(draws))
