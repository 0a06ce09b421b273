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


def _by_decision(f, q, cap: int):
    """The closed form as it was before ``admits_more``: the filter's decision on a dry
    run, then floor(left / exact cost) from the serialised state."""
    import json
    import math
    from fractions import Fraction

    from dpsieve.filters.capacity import Capacity

    d = f.dry_run(q)
    if not d.admitted:
        return Capacity(0)
    c = Fraction(d.cost["exact"])
    if c <= 0:
        return None
    st_ = json.loads(f.to_json())["state"]
    n = math.floor((Fraction(st_["budget"]) - Fraction(st_["spent"])) / c)
    return Capacity(cap, at_least=True) if n >= cap else Capacity(n)


@settings(max_examples=60, deadline=None)
@given(zcdp=st.booleans(), budget=st.floats(0.0, 1e6), spends=st.lists(
    st.floats(0.0, 10.0), max_size=4), q=st.floats(0.0, 50.0), delta=st.sampled_from(
    [0.0, 1e-7]), cap=st.sampled_from([0, 1, 3, 100, 100_000]))
def test_scalar_one_step_count_equals_the_decision_route(zcdp: bool, budget: float,
                                                         spends: list[float], q: float,
                                                         delta: float, cap: int) -> None:
    # pure DP and zCDP count with admits_more (no decision built): the same Capacity as
    # the filter's dry run and the stored state give, refused and free queries included
    f = ZCDPFilter(budget) if zcdp else PureDPFilter(budget)
    for s in spends:
        f.try_spend(ZCDP(s) if zcdp else PureDP(s))
    query = (ApproxZCDP(q, delta) if delta else ZCDP(q)) if zcdp else (
        ApproxDP(q, delta) if delta else PureDP(q))
    before = f.to_json()
    got = count_admitted(f, query, cap=cap)
    assert f.to_json() == before
    want = _by_decision(f, query, cap)
    if want is None:  # a free query: counted by running, up to the cap
        assert got.count == min(cap, _brute(f, query, cap))
    else:
        assert got == want


def test_scalar_one_step_count_keeps_the_relation_check() -> None:
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.errors import NeighbourRelationError

    f = PureDPFilter(1.0).with_neighbouring(Neighbouring.ADD_REMOVE)
    q = PureDP(0.1, Neighbouring.REPLACE_ONE)
    with pytest.raises(NeighbourRelationError) as by_dry_run:
        f.dry_run(q)
    with pytest.raises(NeighbourRelationError) as by_count:
        count_admitted(f, q)
    assert str(by_count.value) == str(by_dry_run.value)
    assert count_admitted(PureDPFilter(1.0), PureDP(0.5), cap=0) == _by_decision(
        PureDPFilter(1.0), PureDP(0.5), 0)


@pytest.mark.parametrize(("budget", "spent", "q"), [
    (1.0, [0.875], 0.125),  # exactly one left
    (1.0, [0.5, 0.375], 0.125),
    (1.0, [], 0.1),  # 0.1 is above 1/10: nine fit, not ten
    (1.0, [0.9], 0.1),
    (0.0, [], 0.125),
    (1.0, [1.0], 0.125),  # exhausted
    (3.0, [0.5], 0.0),  # free: counted by running, to the cap
])
@pytest.mark.parametrize("zcdp", [False, True])
def test_scalar_one_step_count_at_the_boundary(budget: float, spent: list[float], q: float,
                                               zcdp: bool) -> None:
    make = (lambda x: ZCDP(x)) if zcdp else (lambda x: PureDP(x))
    f = ZCDPFilter(budget) if zcdp else PureDPFilter(budget)
    for s in spent:
        assert f.try_spend(make(s)).admitted
    got = count_admitted(f, make(q), cap=50)
    assert got.count == _brute(f, make(q), 50)
    want = _by_decision(f, make(q), 50)
    assert want is None or got == want
