"""Every filter honours the protocol: dry run, refusal leaves state byte-identical, JSON."""

from __future__ import annotations

import json

import pytest

from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.errors import UnsupportedError, ValidationError
from dpsieve.filters import (
    AdditiveProfileFilter,
    AnyOrderRDPFilter,
    ApproxGDPResidueFilter,
    ApproxZCDPFilter,
    GDPResidueFilter,
    MixedFilter,
    NaiveGDPFilter,
    NaturalApproxFilter,
    NaturalGDPFilter,
    NaturalZeroDeltaFilter,
    PerRecordGDPFilter,
    PerRecordRDPFilter,
    PrivacyFilter,
    PureDPFilter,
    RDPFilter,
    TrainingFilter,
    ZCDPFilter,
    filter_from_json,
)


def _filters():
    return [
        PureDPFilter(1.0),
        ZCDPFilter(0.5),
        ApproxZCDPFilter(0.5, 1e-5),
        RDPFilter((2.0, 8.0, 32.0), (1.0, 4.0, 9.0)),
        AnyOrderRDPFilter((2.0, 8.0, 32.0), (1.0, 4.0, 9.0)),
        AnyOrderRDPFilter.for_target(4.0, 1e-6, (2.0, 4.0, 8.0, 16.0, 32.0)),
        NaiveGDPFilter(1.0),
        GDPResidueFilter(1.0),
        GDPResidueFilter(eps=2.0, delta=1e-5),
        ApproxGDPResidueFilter(1.0, 1e-3),
        NaturalGDPFilter(1.0),
        NaturalZeroDeltaFilter(1e-3),
        NaturalApproxFilter(1.0, 1e-5, 5, allow_general=True),
        AdditiveProfileFilter(1.0, 1e-5, 5),
        MixedFilter(2.0, 1e-5),  # split chosen at the first admitted query
        MixedFilter(2.0, 1e-5, pure=1.0),
        MixedFilter(2.0, 1e-5, typical=[PureDP(0.3), GDP(0.4)]),
        TrainingFilter(1.0, 1e-5, sigma=2.0, rate=0.05),
        PerRecordGDPFilter(10, 1.0),
        PerRecordRDPFilter(10, 8.0, 1.0),
    ]


QUERIES = [
    PureDP(0.3),
    ApproxDP(0.2, 1e-4),
    ApproxDP(0.0, 2e-4),
    GDP(0.4),
    ZCDP(0.05),
    ApproxZCDP(0.05, 1e-6),
    RDP((2.0, 8.0, 32.0), (0.1, 0.3, 0.5)),
    PLD.randomized_response(0.3),
    PLD.laplace(5.0),
    PureDP(50.0),
]


@pytest.mark.parametrize("f", _filters(), ids=lambda f: f.kind)
def test_protocol_dry_run_refusal_and_round_trip(f) -> None:
    assert isinstance(f, PrivacyFilter)
    for q in QUERIES * 2:
        before = f.to_json()
        dry = f.dry_run(q)
        assert f.to_json() == before, "dry_run changed the state"
        real = f.try_spend(q)
        assert real.to_dict() == dry.to_dict(), "dry_run disagrees with try_spend"
        json.dumps(real.to_dict())  # decisions are JSON-ready
        if not real.admitted:
            assert f.to_json() == before, "a refused query changed the state"
        again = filter_from_json(f.to_json())
        assert again.to_json() == f.to_json()
        assert type(again) is type(f)
        assert again.remaining() == f.remaining()


def test_refusals_happen_and_exhaust() -> None:
    f = PureDPFilter(1.0)
    admitted = [f.try_spend(PureDP(0.125)).admitted for _ in range(10)]
    assert admitted == [True] * 8 + [False] * 2  # exact: 8 x 0.125 = 1
    assert f.remaining()["eps"] == 0.0
    # the float 0.1 is 0.1000000000000000055...: ten of them exceed 1.0, and exactness says so
    g = PureDPFilter(1.0)
    assert sum(g.try_spend(PureDP(0.1)).admitted for _ in range(10)) == 9


def test_filter_from_json_rejects_bad_input() -> None:
    with pytest.raises(ValidationError, match="'s'"):
        filter_from_json("not json")
    with pytest.raises(ValidationError, match="'kind'"):
        filter_from_json(json.dumps({"kind": "nope", "state": {}}))


def test_natural_approx_requires_opt_in() -> None:
    with pytest.raises(UnsupportedError, match="allow_general"):
        NaturalApproxFilter(1.0, 1e-6, 10)


def test_bad_query_type() -> None:
    with pytest.raises(ValidationError, match="'query'"):
        GDPResidueFilter(1.0).try_spend("eps=1")


def test_neighbouring_relation_is_enforced() -> None:
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.errors import NeighbourRelationError

    assert GDPResidueFilter(1.0).neighbouring is None  # undeclared: the caller's business
    f = GDPResidueFilter(1.0).with_neighbouring(Neighbouring.ADD_REMOVE)
    with pytest.raises(NeighbourRelationError):
        f.try_spend(PureDP(0.1, Neighbouring.REPLACE_ONE))
    with pytest.raises(NeighbourRelationError):
        f.dry_run(GDP(0.1, Neighbouring.REPLACE_ONE))
    g = PureDPFilter(1.0).with_neighbouring("replace_one")
    assert g.try_spend(PureDP(0.1, Neighbouring.REPLACE_ONE)).admitted
    h = filter_from_json(g.to_json())
    assert h.neighbouring is Neighbouring.REPLACE_ONE
    with pytest.raises(NeighbourRelationError):
        h.try_spend(PureDP(0.1))
