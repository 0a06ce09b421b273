"""The choices of ``"auto"`` bounds land where their error bound says (slow: many seeds).

:func:`dpsieve.queries.auto.choose` is permute-and-flip over integer scores ``q_r``; one
pass visits every candidate and the best (score ``q*``) always accepts, so the output is
``r`` with probability at most ``exp(c (q_r - q*))`` (``r`` must win its own coin,
``c = eps / Delta``, or ``eps / (2 Delta)`` when not monotonic). Summed over the
candidates whose excess over the target is more than ``tol`` units (an upper bound too
low, a lower bound too high) or that lie more than ``far`` steps past the first candidate
within target, that bounds the miss probability ``p``; over ``R`` seeds the misses must
stay below a binomial upper quantile of ``R p``. A choice with twice its stated noise (the
scores halved) fails it (checked below on the same data).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.accounting.events import Neighbouring
from dpsieve.queries.auto import PRIOR_STEP, _excesses, choose, count_candidates

pytestmark = pytest.mark.slow


def _miss_bound(exc: np.ndarray, eps: float, monotonic: bool, bad: np.ndarray) -> float:
    """Sum over the bad candidates of exp(c (q_r - q*)), q = -eps-scaled excess - prior."""
    c = eps if monotonic else eps / 2
    beta = max(float(PRIOR_STEP), eps / 2)
    q = -c * exc.astype(np.float64) - beta * np.arange(exc.size)
    return float(min(1.0, np.exp(q[bad] - q.max()).sum()))


def _check(values: np.ndarray, cands: np.ndarray, target: float | None, eps: float,
           upper: bool, tol: int, far: int, runs: int, seed: int, scale: float = 1.0) -> None:
    walk = cands if upper else cands[::-1]
    exc = _excesses(values, walk, target, upper)
    first = int(np.argmin(exc))  # the first candidate of least excess
    bad = (exc > exc[first] + tol) | (np.arange(walk.size) > first + far)
    bound = _miss_bound(exc, eps, target is not None, bad)
    rng = np.random.default_rng(seed)
    misses = 0
    for _ in range(runs):
        j = choose(values, cands, target, eps * scale, rng, upper=upper,
                   nb=Neighbouring.ADD_REMOVE)
        i = j if upper else cands.size - 1 - j
        misses += bool(bad[i])
    mean = runs * bound
    limit = mean + 4 * math.sqrt(mean + 1) + 3
    if scale == 1.0:
        assert misses <= limit, (misses, bound)
    else:
        assert misses > limit, (misses, bound)


@pytest.mark.parametrize(("target", "eps"), [(300.0, 0.05), (None, 0.05), (30.0, 0.5)])
def test_rows_per_unit_choice_within_its_error_bound(target: float | None, eps: float
                                                     ) -> None:
    values = np.random.default_rng(11).geometric(0.15, 3000).astype(np.float64)
    cands = np.asarray(count_candidates(), dtype=np.float64)
    _check(values, cands, target, eps, True, tol=60, far=3, runs=1000, seed=1)


@pytest.mark.parametrize("upper", [True, False])
def test_value_bound_choice_within_its_error_bound(upper: bool) -> None:
    values = np.random.default_rng(12).normal(50.0, 10.0, 2000)
    cands = np.asarray(sorted({*np.arange(0, 101, 5.0), *(-x for x in np.arange(5, 101, 5.0))}))
    _check(values, cands, 20.0, 0.2, upper, tol=30, far=3, runs=1000, seed=2)


def test_the_bound_catches_a_choice_with_twice_its_noise() -> None:
    values = np.random.default_rng(11).geometric(0.15, 3000).astype(np.float64)
    cands = np.asarray(count_candidates(), dtype=np.float64)
    _check(values, cands, 300.0, 0.05, True, tol=60, far=3, runs=1000, seed=3,
           scale=float(Fraction(1, 2)))
