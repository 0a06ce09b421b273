"""The answer cache: its privacy budget adds up exactly, it answers from its state and pays
only for updates, and it is more accurate than answering every query with its own noise."""

from __future__ import annotations

import json
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.accounting.events import PureDP
from dpsieve.errors import ValidationError
from dpsieve.interactive import AnswerCache, CacheSpec, ChildExhaustedError, child_from_state


def _data(rng: np.random.Generator, t: int, n: int) -> np.ndarray:
    """A skewed histogram of n rows over t domain elements."""
    p = rng.dirichlet(np.full(t, 0.3))
    return rng.multinomial(n, p).astype(np.float64)


def test_budget_adds_up_exactly() -> None:
    for eps, share, c in [(1.0, 0.5, 10), (0.3, 0.2, 3), (2.0, 0.9, 50)]:
        spec = CacheSpec(eps, 16, c, 5.0, 1000.0, numeric_share=share)
        svt = spec.svt()
        e3 = Fraction(eps) - Fraction(svt.eps)
        assert 0 < e3 <= Fraction(eps)
        k = 1024  # lattice steps per count
        assert Fraction(c * k) / Fraction(spec.value_scale()) <= e3
        assert svt.positives == c
        assert svt.sensitivity == 1.0
        assert spec.declared() == PureDP(eps)


def test_answers_from_state_and_pays_only_for_updates() -> None:
    """2,000 random counting queries on 20,000 rows over 32 elements at eps = 2: the cache
    answers all of them with at most 100 updates, and its mean error is below half that of
    spending the same budget on one Laplace answer per query (scale 2,001 / 2)."""
    rng = np.random.default_rng(0)
    t, n = 32, 20_000
    hist = _data(rng, t, n)
    spec = CacheSpec(2.0, t, 100, tolerance=1000.0, expected_rows=1000.0, learning_rate=2.0)
    cache = AnswerCache.open(spec, rng=np.random.default_rng(1))
    first = cache.ask(np.ones(t), float(hist.sum()))
    assert first.updated  # the guess 1,000 is far from 20,000
    errors, updates = [], 0
    queries = (rng.random((2000, t)) < 0.5).astype(np.float64)
    for q in queries:
        a = cache.ask(q, float(q @ hist))
        updates += a.updated
        errors.append(abs(a.value - q @ hist))
    assert updates < 100
    assert float(np.mean(errors)) < 0.5 * 2001 / 2.0


def test_exhausted_cache_still_estimates_for_free() -> None:
    rng = np.random.default_rng(2)
    t = 8
    spec = CacheSpec(1.0, t, 1, tolerance=1.0, expected_rows=10.0)
    cache = AnswerCache.open(spec, rng=rng)
    q = np.zeros(t)
    q[0] = 1.0
    assert cache.ask(q, 1e6).updated
    assert cache.exhausted
    before = cache.to_state()
    with pytest.raises(ChildExhaustedError):
        cache.ask(q, 5.0)
    assert cache.to_state() == before
    assert cache.estimate(q) == pytest.approx(cache.estimate(q))


def test_state_round_trip_and_public() -> None:
    rng = np.random.default_rng(3)
    t = 6
    cache = AnswerCache.open(CacheSpec(1.0, t, 5, 2.0, 100.0), rng=rng)
    for _ in range(5):
        cache.ask(rng.random(t), 50.0)
    state = json.loads(json.dumps(cache.to_state()))
    back = child_from_state(state, np.random.default_rng(4))
    assert isinstance(back, AnswerCache)
    assert back.to_state() == cache.to_state()
    assert "threshold_noise" not in json.dumps(cache.public())
    q = np.full(t, 0.5)
    assert back.estimate(q) == cache.estimate(q)


def test_bad_queries_are_refused_before_anything_is_asked() -> None:
    cache = AnswerCache.open(CacheSpec(1.0, 4, 2, 1.0, 10.0), rng=np.random.default_rng(5))
    with pytest.raises(ValidationError, match="'query'"):
        cache.ask(np.array([0.0, 2.0, 0.0, 0.0]), 1.0)
    with pytest.raises(ValidationError, match="'query'"):
        cache.ask(np.ones(3), 1.0)
    assert cache.public()["questions"] == 0
    with pytest.raises(ValidationError, match="'numeric_share'"):
        CacheSpec(1.0, 4, 2, 1.0, 10.0, numeric_share=1.0)
