"""Selection samplers against their exact output distributions (enumeration)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from mech_stats import P_MIN, freq_pvalue

from dpsieve.errors import ValidationError
from dpsieve.mechanisms import (
    above_threshold,
    exponential_mechanism,
    permute_and_flip,
    randomized_response,
    report_noisy_max,
)

SCORES = [0.0, 1.0, 2.5, 2.0]
EPS = 1.2
N = 6000


def _em_probs(scores: list[float], eps: float) -> np.ndarray:
    w = np.exp(eps * np.asarray(scores) / 2)
    return w / w.sum()


def _pf_probs(scores: list[float], eps: float) -> np.ndarray:
    """Exact permute-and-flip law by enumerating all orders (McKenna & Sheldon 2020)."""
    q = np.asarray(scores)
    p = np.exp(eps * (q - q.max()) / 2)
    out = np.zeros(q.size)
    perms = list(itertools.permutations(range(q.size)))
    for perm in perms:
        stay = 1.0
        for r in perm:
            out[r] += stay * p[r] / len(perms)
            stay *= 1 - p[r]
    return out


@pytest.mark.parametrize("exact", [False, True])
def test_exponential_mechanism_law(exact: bool) -> None:
    rng = np.random.default_rng(31)
    xs = [exponential_mechanism(SCORES, EPS, 1.0, rng, exact=exact) for _ in range(N)]
    assert freq_pvalue(xs, _em_probs(SCORES, EPS)) > P_MIN


def test_permute_and_flip_law_and_rnm_equivalence() -> None:
    rng = np.random.default_rng(32)
    pf = [permute_and_flip(SCORES, EPS, 1.0, rng) for _ in range(N)]
    rnm = [report_noisy_max(SCORES, EPS, 1.0, rng) for _ in range(N)]
    exact = _pf_probs(SCORES, EPS)
    assert freq_pvalue(pf, exact) > P_MIN
    assert freq_pvalue(rnm, exact) > P_MIN
    gum = [report_noisy_max(SCORES, EPS, 1.0, rng, noise="gumbel") for _ in range(N)]
    assert freq_pvalue(gum, _em_probs(SCORES, EPS)) > P_MIN


def test_monotonic_halves_the_exponent() -> None:
    rng = np.random.default_rng(33)
    xs = [exponential_mechanism(SCORES, EPS, 1.0, rng, monotonic=True) for _ in range(N)]
    assert freq_pvalue(xs, _em_probs(SCORES, 2 * EPS)) > P_MIN


def test_randomized_response_law() -> None:
    rng = np.random.default_rng(34)
    k, eps = 4, 0.8
    xs = [randomized_response(2, k, eps, rng) for _ in range(N)]
    keep = math.exp(eps) / (math.exp(eps) + k - 1)
    probs = [(1 - keep) / (k - 1)] * k
    probs[2] = keep
    assert freq_pvalue(xs, probs) > P_MIN
    assert randomized_response(1, 3, float("inf")) == 1


def test_above_threshold_behaviour() -> None:
    rng = np.random.default_rng(35)
    far_below = [-1e3] * 10
    assert all(above_threshold(far_below, 0.0, 1.0, 1.0, rng) is None for _ in range(50))
    assert all(above_threshold([-1e3, 1e3, 1e3], 0.0, 1.0, 1.0, rng) == 1 for _ in range(50))


def test_above_threshold_law_small_case() -> None:
    """One query exactly at the threshold: P[answer 0] = P[nu >= rho] = 1/2 + P[nu = rho]/2,
    and P[nu = rho] is below 2^-28 on the default lattice."""
    rng = np.random.default_rng(36)
    xs = [above_threshold([5.0], 5.0, 1.0, 1.0, rng) for _ in range(2000)]
    hits = sum(x == 0 for x in xs)
    assert abs(hits / 2000 - 0.5) < 5 * math.sqrt(0.25 / 2000)


@pytest.mark.parametrize(
    ("fn", "kwargs"),
    [
        (exponential_mechanism, {}),
        (permute_and_flip, {}),
        (report_noisy_max, {}),
    ],
)
def test_selection_validation(fn, kwargs) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match="'eps'"):
        fn(SCORES, float("nan"), **kwargs)
    with pytest.raises(ValidationError, match="'eps'"):
        fn(SCORES, 0.0, **kwargs)
    with pytest.raises(ValidationError, match="'sensitivity'"):
        fn(SCORES, 1.0, -1.0, **kwargs)
    with pytest.raises(ValidationError, match="'scores'"):
        fn([], 1.0, **kwargs)
    with pytest.raises(ValidationError, match="'scores'"):
        fn([1.0, float("nan")], 1.0, **kwargs)


def test_other_validation() -> None:
    with pytest.raises(ValidationError, match="'noise'"):
        report_noisy_max(SCORES, 1.0, noise="laplace")
    with pytest.raises(ValidationError, match="'threshold'"):
        above_threshold(SCORES, float("nan"), 1.0)
    with pytest.raises(ValidationError, match="'value'"):
        randomized_response(5, 3, 1.0)
    with pytest.raises(ValidationError, match="'k'"):
        randomized_response(0, 1, 1.0)
