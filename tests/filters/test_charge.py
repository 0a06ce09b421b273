"""Typed charges: filters and ledgers take typed values only; JSON is mapped at the edge.

The typed path (a description or a PLD handed to the filter) and the JSON path (its
``to_dict()`` sent as JSON, mapped once by ``charge_from_dict``, the mapping the filters
applied inside before) charge identical amounts: identical decisions and identical states
after every step of an adaptive sequence. A dict reaching a filter or a store is refused
(TypeError naming 'query'), nothing spent.
"""

from __future__ import annotations

import json

import pytest

from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ChargeTypeError, ValidationError
from dpsieve.filters import (
    ApproxZCDPFilter,
    GDPResidueFilter,
    MixedFilter,
    NaiveGDPFilter,
    NaturalGDPFilter,
    PureDPFilter,
    RDPFilter,
    ZCDPFilter,
    filter_from_json,
)
from dpsieve.filters.charge import charge_from_dict, charge_to_dict, check_charge
from dpsieve.ledger.memory import MemoryStore
from dpsieve.mechanisms.subsampled import DPSGDStep

#: pure, approx, zCDP, GDP and PLD-described queries (and RDP, approx-zCDP)
QUERIES = [
    PureDP(0.1),
    ApproxDP(0.2, 1e-6),
    ZCDP(0.02),
    GDP(0.15),
    PLD.laplace(10.0),
    PLD.gaussian(6.0),
    ApproxZCDP(0.01, 1e-7),
    RDP((2.0, 8.0, 32.0), (0.01, 0.04, 0.2)),
    PureDP(0.3),
    GDP(0.5),
]


def _filters():
    return [
        PureDPFilter(1.0),
        ZCDPFilter(0.5),
        ApproxZCDPFilter(0.5, 1e-5),
        RDPFilter((2.0, 8.0, 32.0), (1.0, 4.0, 9.0)),
        NaiveGDPFilter(1.0),
        GDPResidueFilter(1.0),
        NaturalGDPFilter(1.0),
        MixedFilter(1.0, 1e-5),
        MixedFilter(1.0, 1e-5, typical=[PureDP(0.1), ApproxDP(0.2, 1e-6)]),
    ]


def _old_json_path(d: dict) -> object:
    """What the filters did with a dict before they took typed charges only (dpsieve 1d19a22,
    filters._queries.as_query): a PLD dict to PLD.from_dict, anything else to
    description_from_dict."""
    from dpsieve.accounting.events import description_from_dict

    if d.get("type") == "pld" or "pld" in d:
        return PLD.from_dict(d.get("pld", d))
    return description_from_dict(d)


def _wire(q: object) -> dict:
    return json.loads(json.dumps(q.to_dict()))  # type: ignore[attr-defined]


def _outcome(f, q):
    try:
        return f.try_spend(q).to_dict(), f.to_json()
    except ValidationError as e:  # a query no finite charge follows from, refused alike
        return type(e).__name__, str(e), f.to_json()


@pytest.mark.parametrize("make", range(len(_filters())), ids=lambda i: _filters()[i].kind)
def test_typed_and_json_paths_charge_identical_amounts(make: int) -> None:
    typed, mapped, old = _filters()[make], _filters()[make], _filters()[make]
    admitted = 0
    for q in QUERIES * 3:  # adaptive: each step decided on the state the last left
        a = _outcome(typed, q)
        b = _outcome(mapped, charge_from_dict(_wire(q)))
        c = _outcome(old, _old_json_path(_wire(q)))
        assert a == b == c, (typed.kind, q)
        admitted += isinstance(a[0], dict) and a[0]["admitted"]
    assert admitted > 0, typed.kind  # the sequence charged something on every filter
    assert filter_from_json(typed.to_json()).to_json() == mapped.to_json()


@pytest.mark.parametrize("q", QUERIES, ids=repr)
def test_charge_from_dict_round_trips(q: object) -> None:
    back = charge_from_dict(_wire(q))
    assert type(back) is type(q)
    assert back.to_dict() == q.to_dict()  # type: ignore[attr-defined]
    assert charge_to_dict(back) == ({"type": "pld"} if isinstance(q, PLD) else q.to_dict())  # type: ignore[attr-defined]


@pytest.mark.parametrize("f", _filters(), ids=lambda f: f.kind)
@pytest.mark.parametrize("method", ["try_spend", "dry_run"])
def test_a_dict_reaching_a_filter_is_refused(f, method: str) -> None:
    before = f.to_json()
    with pytest.raises(TypeError, match=r"'query'.*not a dict") as e:
        getattr(f, method)({"type": "pure", "eps": 0.1})
    assert isinstance(e.value, ChargeTypeError)
    assert e.value.parameter == "query"
    assert f.to_json() == before
    with pytest.raises(ChargeTypeError, match="'query'"):
        getattr(f, method)(_wire(PLD.laplace(10.0)))
    assert f.to_json() == before


def test_a_dict_reaching_a_store_is_refused_before_anything_is_logged() -> None:
    store = MemoryStore()
    store.create_budget("b", GDPResidueFilter(1.0))
    before, logged = store.load_filter("b").to_json(), store.audit("b")
    with pytest.raises(ChargeTypeError, match="'query'") as e:
        store.spend("b", {"type": "gdp", "mu": 0.1}, key="k")  # type: ignore[arg-type]
    assert isinstance(e.value, TypeError)
    assert store.load_filter("b").to_json() == before
    assert store.history("b") == []
    assert store.audit("b") == logged
    # the same key is still free for the typed charge
    assert store.spend("b", GDP(0.1), key="k").decision.admitted


def test_check_charge_takes_every_typed_charge_and_names_the_parameter() -> None:
    for q in [*QUERIES, DPSGDStep(1.0, 0.01)]:
        assert check_charge(q) is q
    with pytest.raises(ChargeTypeError, match="'like' parameter of f\\(\\)"):
        check_charge("eps=1", "like", "f")
    with pytest.raises(ChargeTypeError, match="JSON object"):
        charge_from_dict([("type", "pure")])  # type: ignore[arg-type]
