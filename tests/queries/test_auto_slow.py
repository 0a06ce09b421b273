"""The scans of ``"auto"`` bounds land where their error bound says (slow: many seeds).

For values of a known distribution and the exact count as threshold base, a scan
(:func:`dpsieve.queries.auto.choose`) errs early when some candidate short of the level by
``x`` values passes (its noise minus the threshold's at least ``x``) and late when one past
it by ``x`` fails (the threshold's noise minus its own above ``x``). A union bound over the
candidates with the discrete Laplace tails gives the probability ``p`` of landing outside
``[level - tol, level + tol]``; over ``R`` seeds the misses must stay below a binomial upper
quantile of ``R p``. The union bound is loose (measured: 0 misses in 400 runs where it
allows 17.6 at level 0.9, eps 0.5, tol 0.01; 13 with the scan's eps halved), so the test
catches a scan with several times its stated noise, not a small excess.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.queries.auto import THRESHOLD_SHARE, choose, count_candidates

pytestmark = pytest.mark.slow


def _tail(x: float, scale: float) -> float:
    """P[Z >= x] for the discrete Laplace of ``scale`` (>= 0 integers), bounded above."""
    k = max(0, math.ceil(x))
    return math.exp(-k / scale)


def _miss_bound(cdf: np.ndarray, level: float, tol: float, n: int, eps: float) -> float:
    e1 = float(Fraction(eps) * THRESHOLD_SHARE)
    s_rho, s_nu = 1 / e1, 1 / (eps - e1)
    p = 0.0
    for f in cdf:
        gap = abs(f - level) * n
        if f < level - tol or f > level + tol:  # passing (early) or failing (late) here
            p += _tail(gap / 2, s_nu) + _tail(gap / 2, s_rho)
    return min(1.0, p)


@pytest.mark.parametrize(("level", "eps"), [(0.9, 0.5), (0.5, 0.3), (0.95, 1.0)])
def test_rows_per_unit_scan_within_its_error_bound(level: float, eps: float) -> None:
    rng = np.random.default_rng(11)
    n = 3000
    values = rng.geometric(0.15, n).astype(np.float64)  # rows per unit, mean ~6.7
    cands = np.asarray(count_candidates(), dtype=np.float64)
    cdf = np.searchsorted(np.sort(values), cands, side="right") / n
    tol = 0.01
    bound = _miss_bound(cdf, level, tol, n, eps)
    runs = 1000
    misses = 0
    for _ in range(runs):
        j = choose(values, cands, level, eps, rng, n_hat=n)
        prev = cdf[j - 1] if j > 0 else 0.0
        if cdf[j] < level - tol or prev > level + tol:
            misses += 1
    mean = runs * bound
    assert misses <= mean + 4 * math.sqrt(mean + 1) + 3, (misses, bound)


def test_value_bounds_scan_within_its_error_bound() -> None:
    rng = np.random.default_rng(12)
    n = 2000
    values = rng.normal(50.0, 10.0, n)
    cands = np.asarray(sorted({*np.arange(0, 101, 5.0), *(-x for x in np.arange(5, 101, 5.0))}))
    srt = np.sort(values)
    cdf_le = np.searchsorted(srt, cands, side="right") / n
    cdf_ge = 1 - np.searchsorted(srt, cands, side="left") / n  # share >= c
    eps, tol, runs = 0.5, 0.01, 1000
    up_bound = _miss_bound(cdf_le, 0.9, tol, n, eps)
    lo_bound = _miss_bound(1 - cdf_ge, 0.1, tol, n, eps)
    up_miss = lo_miss = 0
    for _ in range(runs):
        j = choose(values, cands, 0.9, eps, rng, n_hat=n)
        if cdf_le[j] < 0.9 - tol or (j > 0 and cdf_le[j - 1] > 0.9 + tol):
            up_miss += 1
        i = choose(values, cands, 0.1, eps, rng, n_hat=n, upper=False)
        nxt = cdf_ge[i + 1] if i + 1 < cands.size else 0.0
        if cdf_ge[i] < 0.9 - tol or nxt > 0.9 + tol:
            lo_miss += 1
    for misses, bound in ((up_miss, up_bound), (lo_miss, lo_bound)):
        mean = runs * bound
        assert misses <= mean + 4 * math.sqrt(mean + 1) + 3, (misses, bound)
