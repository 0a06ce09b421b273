"""Private selection at extreme parameters (issue 10: extreme magnitudes and parameters).

The Gumbel-max exponential mechanism and report-noisy-max computed ``float(c) * q + noise``
with ``c = eps / (2 Delta)``:

* at ``|c q| > 2^55`` the spacing of ``c q`` (8 or more) swallowed the noise and broke
  ties towards the first index: two equal scores at ``q = 2^53``, ``Delta = 2``,
  ``eps = 10`` gave the second one 11% of the time instead of 50%, and at ``1e308`` with a
  large ``eps / Delta`` ``c q`` overflowed to ``inf`` and the first index always won;
* ``eps / Delta`` above the largest float failed ``float(c)`` with an OverflowError.

Scores are now centred on their maximum before scaling (``select._centred``), with ``c``
rounded down (the same mechanism at a smaller eps). Seeded, so deterministic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.mechanisms.select import (
    exponential_mechanism,
    permute_and_flip,
    report_noisy_max,
)

FAST = [exponential_mechanism, report_noisy_max]


def _share(fn, scores: list[float], eps: float, delta: float, n: int,  # type: ignore[no-untyped-def]
           seed: int) -> float:
    rng = np.random.default_rng(seed)
    return float(np.mean([fn(scores, eps, delta, rng) == 1 for _ in range(n)]))


@pytest.mark.parametrize("fn", FAST, ids=lambda f: f.__name__)
@pytest.mark.parametrize(("q", "delta", "eps"), [
    (2.0**53, 2.0, 10.0), (2.0**60, 256.0, 10.0), (1e308, 1e292, 10.0), (1e308, 1.0, 1e300),
    (-1e308, 1.0, 1e300), (0.0, 5e-324, 1.0),
])
def test_equal_scores_are_equally_likely_at_any_magnitude(fn, q: float, delta: float,  # type: ignore[no-untyped-def]
                                                         eps: float) -> None:
    share = _share(fn, [q, q], eps, delta, 2000, 1)
    assert 0.44 < share < 0.56, (fn.__name__, q, share)


@pytest.mark.parametrize("fn", FAST, ids=lambda f: f.__name__)
def test_neighbouring_scores_at_magnitude_keep_the_ideal_odds(fn) -> None:  # type: ignore[no-untyped-def]
    """Scores 2^53 apart by Delta = 2 (c Delta = 2.5 at eps = 10 / 2): the runner-up wins
    with the ideal probability (EM: 1/(1+e^5); RNM with exponential noise: e^-5 / 2)."""
    q = 2.0**53
    got = _share(fn, [q + 2.0, q], 10.0, 2.0, 20000, 2)
    want = 1 / (1 + math.exp(5)) if fn is exponential_mechanism else math.exp(-5) / 2
    assert abs(got - want) < 5 * math.sqrt(want / 20000) + 1e-3, (fn.__name__, got, want)


@pytest.mark.parametrize("fn", [*FAST, permute_and_flip], ids=lambda f: f.__name__)
@pytest.mark.parametrize(("eps", "delta"), [(1e308, 5e-324), (5e-324, 1e308), (1e-300, 1.0),
                                            (1.7976931348623157e308, 1e-300)])
def test_extreme_eps_and_sensitivity_select_without_failing(fn, eps: float,  # type: ignore[no-untyped-def]
                                                            delta: float) -> None:
    rng = np.random.default_rng(3)
    picks = [fn([1.0, 2.0, -1e308, 1e308], eps, delta, rng) for _ in range(40)]
    assert all(0 <= p < 4 for p in picks)
    if eps / delta > 1e300:  # an overwhelming coefficient: the maximum, always
        assert set(picks) == {3}
