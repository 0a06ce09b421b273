"""'About N more queries like this one': exact counts by the filter's own decisions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ValidationError
from dpsieve.filters import (
    ApproxZCDPFilter,
    GDPResidueFilter,
    MixedFilter,
    NaiveGDPFilter,
    PureDPFilter,
    RDPFilter,
    ZCDPFilter,
    filter_from_json,
)
from dpsieve.filters.capacity import count_admitted


def _brute(f, workload, cap: int = 10_000) -> int:
    """Spend on a copy until a whole cycle is refused (the definition of the count)."""
    g = filter_from_json(f.to_json())
    qs = workload if isinstance(workload, list) else [workload]
    n = refused = i = 0
    while n < cap and refused < len(qs):
        if g.try_spend(qs[i % len(qs)]).admitted:
            n, refused = n + 1, 0
        else:
            refused += 1
        i += 1
    return n


QUERIES = [PureDP(0.1), PureDP(0.3), ZCDP(0.02), GDP(0.25), ApproxDP(0.2, 1e-7),
           ApproxZCDP(0.01, 1e-7), RDP((2.0, 8.0), (0.05, 0.2))]


def _additive_filters():
    return [PureDPFilter(1.0), ZCDPFilter(0.4), ApproxZCDPFilter(0.5, 1e-6),
            RDPFilter((2.0, 8.0), (1.0, 3.0)), NaiveGDPFilter(1.0)]


@settings(max_examples=40, deadline=None)
@given(fi=st.integers(0, 4), qi=st.integers(0, 6), spent=st.integers(0, 3),
       si=st.integers(0, 6))
def test_closed_forms_equal_spending_one_by_one(fi: int, qi: int, spent: int, si: int) -> None:
    f = _additive_filters()[fi]
    for _ in range(spent):
        f.try_spend(QUERIES[si])
    before = f.to_json()
    c = count_admitted(f, QUERIES[qi])
    assert f.to_json() == before  # counting never changes the filter
    assert c.count == _brute(f, QUERIES[qi])
    assert not c.at_least


def test_exactness_at_the_boundary() -> None:
    # 0.1 as a float is above 1/10: nine fit in 1.0, not ten; 0.125 is exact: eight fit
    assert count_admitted(PureDPFilter(1.0), PureDP(0.1)).count == 9
    assert count_admitted(PureDPFilter(1.0), PureDP(0.125)).count == 8
    assert count_admitted(PureDPFilter(1.0), PureDP(2.0)).count == 0


@pytest.mark.parametrize("make", [
    lambda: GDPResidueFilter(1.0),
    lambda: MixedFilter(2.0, 1e-6, pure=1.0),
    lambda: MixedFilter(2.0, 1e-6),
])
@pytest.mark.parametrize("q", [PureDP(0.3), GDP(0.2), PLD.randomized_response(0.4)])
def test_simulated_counts_equal_brute_force(make, q) -> None:
    f = make()
    c = count_admitted(f, q)
    assert c.count == _brute(f, q)
    # the memo: after one admission of the same query, exactly one fewer is left
    if c.count > 0:
        assert f.try_spend(q).admitted
        assert count_admitted(f, q).count == c.count - 1


def test_workloads_are_offered_cyclically_and_caps_are_reported() -> None:
    f = MixedFilter(3.0, 1e-6, pure=1.0)
    w = [PureDP(0.4), GDP(0.3), ZCDP(0.1)]  # the zCDP query is always refused
    assert count_admitted(f, w).count == _brute(f, w)
    c = count_admitted(PureDPFilter(1000.0), PureDP(0.001), cap=50)
    assert c.count == 50
    assert c.at_least
    assert c.to_dict() == {"count": 50, "at_least": True}
    free = count_admitted(GDPResidueFilter(1.0), GDP(0.0), cap=30)  # free queries: the cap
    assert free.count == 30
    assert free.at_least


def test_bad_arguments() -> None:
    with pytest.raises(ValidationError, match="'cap'"):
        count_admitted(PureDPFilter(1.0), PureDP(0.1), cap=-1)
    with pytest.raises(ValidationError, match="'workload'"):
        count_admitted(PureDPFilter(1.0), [])
