"""Algorithm 3's profile of a PLD query is verified, not assumed (issue 18, "Proofs and docs").

The old argument (docs/proofs/filters.md, Sec. 7, before this change) claimed that mass
found at a knot z of a pessimistic PLD has true |loss| at most |z| + grid, so bucketing by
|z| + grid only moves mass up. That is false for composed PLDs: each composition adds up to
one grid step of downward displacement per factor. Dominance L <= RR_{p,eps}, which
Theorem 15 needs, held in every case tried, but nothing proved it. The profile charged now
is accepted only after a certified check of L' <= RR_{v,eps} (L' the pessimistic PLD).
"""

from __future__ import annotations

import math
from fractions import Fraction

import exact_oracle as oracle
import numpy as np
from exact_oracle import Truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsieve.accounting.pld import PLD
from dpsieve.filters import discretized_profile

E = 1.02626582278481  # RR_E on a 0.05 grid, composed twice
GRID = (0.0, 2 * E * (1 - 0.001), math.inf)


def test_composed_pld_knots_sit_below_the_true_loss() -> None:
    """The counterexample to the old claim: the true |loss| 2E exceeds the boundary with
    mass p^2 + q^2 = 0.612, but only 0.477 of the PLD's mass has |z| + grid above it."""
    q = PLD.randomized_response(E, grid=0.05).compose(PLD.randomized_response(E, grid=0.05))
    z, p = np.asarray(q.losses), np.asarray(q.probs)
    moved_up = float(np.sum(p[np.abs(z) + q.grid >= GRID[1]]))
    pr = 1 / (1 + math.exp(-E))
    true_top = pr**2 + (1 - pr) ** 2
    assert true_top > 0.61
    assert moved_up < 0.48  # so "|z| + grid >= true |loss|" fails for this PLD


def test_the_charged_profile_of_the_counterexample_is_certified() -> None:
    q = PLD.randomized_response(E, grid=0.05).compose(PLD.randomized_response(E, grid=0.05))
    c = discretized_profile(q, GRID)
    v = [x / max(Fraction(1), sum(c, Fraction(0))) for x in c]
    ok, gap = oracle.leq_generalized_rr([Truth("rr", eps=E)] * 2, v, GRID)
    assert ok, gap


def test_the_check_refuses_a_profile_that_does_not_dominate() -> None:
    from dpsieve.filters.profile import _verified

    q = PLD.randomized_response(1.0)
    z, p = np.asarray(q.losses), np.asarray(q.probs)
    keep = p > 0
    grid = (0.0, 0.5, 2.0, math.inf)
    low = [Fraction(1), Fraction(0), Fraction(0)]  # all of R_1 charged as RR_0.5: too little
    assert not _verified(low, grid, z[keep], p[keep], 0.0)
    good = [Fraction(0), Fraction(1), Fraction(0)]  # RR_2 dominates R_1
    assert _verified(good, grid, z[keep], p[keep], 0.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    e=st.floats(0.01, 2.0),
    k=st.integers(1, 4),
    g=st.sampled_from([1e-4, 1e-3, 0.01, 0.05, 0.2]),
    cuts=st.lists(st.floats(0.0, 1.2), min_size=1, max_size=4, unique=True),
)
def test_pld_profiles_dominate_the_exact_query(
    e: float, k: int, g: float, cuts: list[float]
) -> None:
    """For composed randomized-response PLDs on coarse grids and random buckets, the exact
    composition RR_e^k is below RR_{v,eps} for the charged profile (mpmath)."""
    q = PLD.randomized_response(e, grid=g).self_compose(k)
    grid = (0.0, *sorted(c * k * e for c in cuts if c > 0), math.inf)
    if len(grid) < 3:
        grid = (0.0, e, math.inf)
    c = discretized_profile(q, grid)
    assert all(x >= 0 for x in c)
    total = sum(c, Fraction(0))
    assert total >= 1
    ok, gap = oracle.leq_generalized_rr([Truth("rr", eps=e)] * k, [x / total for x in c], grid)
    assert ok, (gap, [float(x) for x in c])
