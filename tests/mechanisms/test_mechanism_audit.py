"""Empirical privacy audits: a lower bound on eps from runs on a neighbouring pair.

For an event S, Clopper-Pearson bounds (confidence 1 - 1e-6 each, Bonferroni over the
events tried) give p_lo <= P[M(D) in S] and p_hi >= P[M(D') in S]; then
eps_lb = log((p_lo - delta) / p_hi) is, with high probability, a lower bound on any valid
eps at delta. It must stay below the accounted eps. Each audit also checks that it has
power (eps_lb above a fixed fraction of the accounted eps), so it can fail. Seeds fixed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pytest
from scipy import stats

from dpsieve.mechanisms import (
    AboveThreshold,
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PermuteAndFlip,
    RandomizedResponse,
    ReportNoisyMax,
    snap_to_lattice,
)

ALPHA = 1e-6


def eps_lower_bound(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    events: Sequence[Callable[[np.ndarray], np.ndarray]],
    delta: float,
) -> float:
    """Max over events (and both orders) of the Clopper-Pearson eps lower bound."""
    xa, xb = np.asarray(a), np.asarray(b)
    conf = ALPHA / (2 * len(events))
    best = 0.0
    for ev in events:
        for x, y in ((xa, xb), (xb, xa)):
            k1, k2 = int(np.sum(ev(x))), int(np.sum(ev(y)))
            lo = stats.beta.ppf(conf, k1, x.size - k1 + 1) if k1 > 0 else 0.0
            hi = stats.beta.ppf(1 - conf, k2 + 1, y.size - k2) if k2 < y.size else 1.0
            if lo - delta > 0 and hi > 0:
                best = max(best, math.log((lo - delta) / hi))
    return best


def _le(t: float) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x <= t


def _eq(t: int) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: x == t


def _additive(m: object, x: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n independent releases of x: exactly what ``release`` computes, vectorized."""
    step = getattr(m, "step", None)
    noise = m.sample(n, rng)  # type: ignore[attr-defined]
    if step is None:
        return np.int64(x) + noise
    return (snap_to_lattice([x], step)[0] * step) + noise


def test_audit_discrete_laplace_fast() -> None:
    rng = np.random.default_rng(51)
    m = DiscreteLaplaceMechanism(1.0, 1)
    a, b = _additive(m, 0, 200_000, rng), _additive(m, 1, 200_000, rng)
    lb = eps_lower_bound(a, b, [_le(t) for t in (-1, 0, 1)], 0.0)
    assert lb <= m.pure_eps()
    assert lb >= 0.85 * m.pure_eps()


def test_audit_randomized_response_fast() -> None:
    rng = np.random.default_rng(52)
    m = RandomizedResponse(1.0, 2)
    a = np.array([m.release(0, rng) for _ in range(20_000)])
    b = np.array([m.release(1, rng) for _ in range(20_000)])
    lb = eps_lower_bound(a, b, [_eq(0), _eq(1)], 0.0)
    assert lb <= m.pure_eps()
    assert lb >= 0.75 * m.pure_eps()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("m", "x0", "x1", "events", "delta", "power"),
    [
        (LaplaceMechanism(1.0), 0.0, 1.0, [_le(t) for t in (-0.5, 0.0, 0.5)], 0.0, 0.85),
        (DiscreteLaplaceMechanism(2.0, 2), 0, 2, [_le(t) for t in (-2, 0, 2)], 0.0, 0.85),
        (GaussianMechanism(1.0), 0.0, 1.0, [_le(t) for t in (-1, -2, -2.5)], 1e-3, 0.6),
        (DiscreteGaussianMechanism(2.0), 0, 1, [_le(t) for t in (-3, -4, -5)], 1e-3, 0.5),
    ],
    ids=["laplace", "discrete_laplace", "gaussian", "discrete_gaussian"],
)
def test_audit_additive(m, x0, x1, events, delta, power) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(53)
    a, b = _additive(m, x0, 2_000_000, rng), _additive(m, x1, 2_000_000, rng)
    lb = eps_lower_bound(a, b, events, delta)
    accounted = m.pure_eps() if delta == 0 else float(m.pld().epsilon(delta))
    assert lb <= accounted
    assert lb >= power * accounted


@pytest.mark.slow
@pytest.mark.parametrize(
    "m",
    [ExponentialMechanism(1.0), PermuteAndFlip(1.0), ReportNoisyMax(1.0)],
    ids=lambda m: type(m).__name__,
)
def test_audit_selection(m) -> None:  # type: ignore[no-untyped-def]
    """Scores [1, 0] vs [0, 1] (each moves by 1): P[0] ratio is e^{eps} for EM."""
    rng = np.random.default_rng(54)
    a = np.array([m.release([1.0, 0.0], rng) for _ in range(40_000)])
    b = np.array([m.release([0.0, 1.0], rng) for _ in range(40_000)])
    lb = eps_lower_bound(a, b, [_eq(0)], 0.0)
    assert lb <= m.pure_eps()
    assert lb >= 0.4 * m.pure_eps()


@pytest.mark.slow
def test_audit_above_threshold() -> None:
    """Monotone counting queries [0, 0] vs [1, 1] against threshold 1."""
    rng = np.random.default_rng(55)
    m = AboveThreshold(2.0, monotonic=True)
    a = np.array([m.release([1.0, 1.0], 1.0, rng) == 0 for _ in range(15_000)])
    b = np.array([m.release([0.0, 0.0], 1.0, rng) == 0 for _ in range(15_000)])
    lb = eps_lower_bound(a, b, [lambda x: x], 0.0)
    assert lb <= m.pure_eps()
    assert lb >= 0.2 * m.pure_eps()


@pytest.mark.slow
def test_audit_randomized_response_k_ary() -> None:
    rng = np.random.default_rng(56)
    m = RandomizedResponse(2.0, 5)
    a = np.array([m.release(0, rng) for _ in range(60_000)])
    b = np.array([m.release(3, rng) for _ in range(60_000)])
    lb = eps_lower_bound(a, b, [_eq(0), _eq(3)], 0.0)
    assert lb <= m.pure_eps()
    assert lb >= 0.85 * m.pure_eps()


@pytest.mark.slow
def test_audit_poisson_subsampled_gaussian() -> None:
    """Empty dataset vs one record of contribution Delta, rate 1/2."""
    from dpsieve.mechanisms import PoissonSubsampledGaussian, discrete_gaussian, poisson_sample

    rng = np.random.default_rng(57)
    m = PoissonSubsampledGaussian(1.0, 0.5, 1.0)
    n = 1_000_000
    s = m.sigma / m.step
    a = discrete_gaussian(s, n, rng)
    b = poisson_sample(n, m.rate, rng) * m.lattice_sensitivity + discrete_gaussian(s, n, rng)
    k = m.lattice_sensitivity
    events = [(lambda x, t=t: x >= t * k) for t in (1.0, 1.5, 2.0, 2.5)]
    delta = 1e-3
    lb = eps_lower_bound(b, a, events, delta)
    accounted = float(m.pld().epsilon(delta))
    assert lb <= accounted
    assert lb >= 0.5 * accounted
    # the vectorized simulation above has the law of release(): two-sample KS
    rel = np.array([m.release([1.0], rng) for _ in range(3000)]) / m.step
    assert stats.ks_2samp(rel, b[:3000]).pvalue > ALPHA
