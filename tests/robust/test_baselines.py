"""Baselines: shapes, accuracy on easy data, privacy bookkeeping, bad input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.errors import ValidationError
from dpsieve.robust.baselines import adaptive_clipped_mean, analyze_gauss_pca, clipped_mean


def test_clipped_mean_scale_matches_the_worst_case() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(5, 1, 1000)
    errs = [clipped_mean(x, 1e4, 1.0, rng) - x.mean() for _ in range(120)]
    # Laplace with scale 2e4/1000 = 20: RMSE = 20 sqrt(2) ~ 28
    assert 18 < math.sqrt(np.mean(np.square(errs))) < 40


def test_adaptive_clipping_vector_and_scalar() -> None:
    rng = np.random.default_rng(1)
    v = adaptive_clipped_mean(rng.normal([1.0, 2.0], 1.0, (5000, 2)), 1e3, 1.0, rng=rng)
    assert np.allclose(v, [1, 2], atol=0.5)
    assert isinstance(adaptive_clipped_mean(rng.normal(0, 1, 5000), 1e3, 1.0, rng=rng), float)


def test_analyze_gauss_reports_its_privacy() -> None:
    rng = np.random.default_rng(2)
    a = rng.normal(size=(5000, 4)) * [5.0, 1.0, 1.0, 1.0]
    u, priv = analyze_gauss_pca(a, 1, 1.0, 1e-6, 20.0, rng)
    assert u.shape == (4, 1)
    assert abs(abs(u[0, 0]) - 1) < 0.05
    assert priv.eps <= 1.0
    assert priv.delta == 1e-6


def test_bad_input() -> None:
    with pytest.raises(ValidationError, match="'bound'"):
        clipped_mean([1.0, 2.0], -1.0, 1.0)
    with pytest.raises(ValidationError, match="'data'"):
        adaptive_clipped_mean([], 1.0, 1.0)
