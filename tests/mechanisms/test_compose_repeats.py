"""compose_plds groups repeated mechanisms and composes each group by squaring."""

from __future__ import annotations

import math

from dpsieve.accounting.families import pure_dp_compose_delta
from dpsieve.accounting.order import supremum
from dpsieve.mechanisms import (
    LaplaceMechanism,
    PoissonSubsampledGaussian,
    RandomizedResponse,
    compose_plds,
)


def test_repeats_are_self_composed() -> None:
    m = LaplaceMechanism(2.0)
    assert compose_plds([m] * 37) == m.pld().self_compose(37)
    # equal parameters, distinct objects: one group
    assert compose_plds([LaplaceMechanism(2.0) for _ in range(5)]) == m.pld().self_compose(5)


def test_interleaved_repeats_equal_grouped_composition() -> None:
    a, b = RandomizedResponse(0.5), RandomizedResponse(0.3)
    got = compose_plds([a, b, a, a, b, a])
    want = a.pld().self_compose(4).compose(b.pld().self_compose(2))
    assert got == want
    # and it is an upper bound within 1e-9 of the exact heterogeneous composition: RR(eps) on
    # its lattice is exact, so compare delta with the closed form of the pure parts at eps'
    exact_4a = pure_dp_compose_delta(0.5, 4, 1.0, upper=False)
    assert float(a.pld().self_compose(4).delta(1.0)) >= float(exact_4a)
    assert math.isclose(float(a.pld().self_compose(4).delta(1.0)), float(exact_4a), rel_tol=1e-9)


def test_directed_repeats_match_direction_by_direction() -> None:
    m = PoissonSubsampledGaussian(2.0, 0.1)
    d = m.plds()
    want = supremum([d.remove.self_compose(20), d.add.self_compose(20)])
    assert compose_plds([m] * 20) == want
    # mixed with a one-direction mechanism: grouped the same way
    lap = LaplaceMechanism(4.0)
    got = compose_plds([m, lap, m, m])
    r = d.remove.self_compose(3).compose(lap.pld())
    a = d.add.self_compose(3).compose(lap.pld())
    assert got == supremum([r, a])
