"""Lemmas 1, 2 and 4 of docs/proofs/pfr.md checked on random neighbouring pairs, plus the
budget arithmetic and the validation of user metrics and grids."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.errors import ValidationError
from dpsieve.robust.friendly import (
    FilterParams,
    euclidean,
    friend_count_table,
    hybrid_privacy,
    keep_numerators,
    keep_probabilities,
    l1,
    release_budget,
    sample_core,
)
from dpsieve.robust.propose import check_radii, propose_queries


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(4, 30),
    seed=st.integers(0, 2**32 - 1),
    r=st.floats(0.1, 5.0),
    dim=st.integers(1, 3),
)
def test_lemmas_1_2_4_on_random_neighbours(n: int, seed: int, r: float, dim: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.normal(0, 2, (n, dim))
    x[: n // 3] = rng.normal(0, 20, (n // 3, dim))
    k = int(rng.integers(n))
    y = x.copy()
    y[k] = rng.normal(0, 10, dim)
    params = FilterParams.default(n)
    zx = friend_count_table(x, euclidean, np.array([r]))[0]
    zy = friend_count_table(y, euclidean, np.array([r]))[0]
    px, py = keep_probabilities(zx, params), keep_probabilities(zy, params)
    # Lemma 2
    kappa = px[k] + py[k] + np.abs(np.delete(px - py, k)).sum()
    assert kappa <= params.kappa
    # Lemma 4
    q = propose_queries(np.stack([zx, zy]), params)
    assert abs(q[0] - q[1]) <= params.width + n - 1  # W q_r, exact integers
    assert abs(q[0] - q[1]) / params.width <= params.query_sensitivity
    # Lemma 1: all possible records (both datasets) pairwise within 2r
    possible = np.concatenate([x[px > 0], y[py > 0]])
    if len(possible):
        assert euclidean(possible, possible).max() <= 2 * r * (1 + 1e-12)


def test_friend_counts_fast_path_matches_generic() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_cauchy(200)
    radii = np.array([0.1, 0.5, 2.0, 10.0])
    fast = friend_count_table(x, l1, radii)
    generic = friend_count_table(x, lambda a, b: l1(a, b) + 0.0, radii)
    assert np.array_equal(fast, generic)


def test_keep_coins_are_exact_bernoulli_in_expectation() -> None:
    params = FilterParams(8, 4, 4)
    nums = keep_numerators(np.array([4, 5, 6, 7, 8, 9]), params)
    assert nums.tolist() == [0, 1, 2, 3, 4, 4]
    rng = np.random.default_rng(1)
    kept = np.mean([sample_core(nums, params.width, rng) for _ in range(4000)], axis=0)
    assert np.allclose(kept, nums / 4, atol=0.03)
    assert kept[0] == 0.0
    assert kept[-1] == 1.0
    assert sample_core(nums, params.width).dtype == np.bool_  # the secure source works


@given(eps=st.floats(0.01, 10), delta=st.floats(1e-12, 0.5), n=st.integers(4, 10_000))
def test_release_budget_inverts_hybrid_privacy_safely(eps: float, delta: float, n: int) -> None:
    kappa = FilterParams.default(n).kappa
    em, dm = release_budget(eps, delta, kappa)
    e2, d2 = hybrid_privacy(em, dm, kappa)
    assert e2 <= eps
    assert d2 <= delta
    assert e2 >= eps * (1 - 1e-9)


def test_hybrid_privacy_closed_form() -> None:
    e, d = hybrid_privacy(0.1, 1e-8, 6.0)
    assert e == pytest.approx(math.expm1(0.1) * 6.0, rel=1e-14)
    assert e >= math.expm1(0.1) * 6.0
    assert d == pytest.approx(6.0 * math.exp(e) * 1e-8, rel=1e-14)


@pytest.mark.parametrize(
    ("n", "t0", "width"), [(10, 4, 2), (10, 10, 2), (10, 5, 0), (1, 1, 1), (10, 5.0, 2)]
)
def test_filter_params_reject(n: object, t0: object, width: object) -> None:
    with pytest.raises(ValidationError):
        FilterParams(n, t0, width)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "bad", [[], [1.0, 1.0], [2.0, 1.0], [0.0, 1.0], [1.0, float("nan")], [[1.0, 2.0]], "a"]
)
def test_radius_grid_must_be_increasing_positive(bad: object) -> None:
    with pytest.raises(ValidationError, match="'radii'"):
        check_radii(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "metric",
    [
        lambda a, b: -l1(a, b),  # negative
        lambda a, b: l1(a, b) + 1.0,  # non-zero diagonal
        lambda a, b: l1(a, b) ** 2,  # violates the triangle inequality
        lambda a, b: np.triu(l1(a, b)),  # not symmetric
        lambda a, b: l1(a, b)[:, :1],  # wrong shape
    ],
)
def test_bad_metric_is_rejected(metric: object) -> None:
    x = np.arange(10.0)
    with pytest.raises(ValidationError, match="'metric'"):
        friend_count_table(x, metric, np.array([1.0]))  # type: ignore[arg-type]
