"""Decisions, spend records and query results carry typed, immutable budget values
(:class:`BudgetLeft`, :class:`Cost`) whose ``to_dict()`` is the JSON they always carried."""

from __future__ import annotations

import json
from fractions import Fraction

import pytest

from dpsieve.accounting.events import GDP, ApproxDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.filters import GDPResidueFilter, MixedFilter, PureDPFilter
from dpsieve.filters.base import BudgetLeft, Cost, Decision
from dpsieve.ledger.memory import MemoryStore
from dpsieve.ledger.sqlite import SQLiteStore


def test_decision_values_are_typed_and_their_json_is_the_filters_numbers() -> None:
    d = PureDPFilter(1.0).try_spend(PureDP(0.25))
    assert isinstance(d.remaining, BudgetLeft)
    assert isinstance(d.cost, Cost)
    j = d.to_dict()
    assert type(j["remaining"]) is dict
    assert type(j["cost"]) is dict
    assert Fraction(j["remaining"]["exact"]) == Fraction(3, 4)  # 1 - 1/4 exactly
    assert j["cost"]["query"] == PureDP(0.25).to_dict()
    assert Decision.from_dict(json.loads(json.dumps(j))) == d
    assert d.cost.charged() == PureDP(0.25)


def test_budget_values_are_immutable_and_not_dicts() -> None:
    d = GDPResidueFilter(1.0).try_spend(GDP(0.3))
    with pytest.raises(TypeError):
        d.remaining["mu"] = 5.0  # type: ignore[index]
    with pytest.raises(AttributeError):
        d.cost._values = {}  # type: ignore[misc]
    out = d.remaining.to_dict()
    out["mu"] = 5.0  # a copy: the decision keeps its value
    assert d.remaining["mu"] < 1.0
    assert d.remaining != d.remaining.to_dict()  # compare typed to typed, or JSON to JSON
    assert d.remaining == BudgetLeft(d.remaining.to_dict())
    assert d.remaining != Cost(d.remaining.to_dict())


def test_charged_is_none_for_a_pld_or_no_query() -> None:
    d = MixedFilter(1.0, 1e-5).try_spend(PLD.laplace(10.0))
    assert d.cost["query"] == {"type": "pld"}
    assert d.cost.charged() is None
    assert Cost().charged() is None
    assert Cost({"query": {"type": "nope"}}).charged() is None


@pytest.mark.parametrize("store_kind", ["memory", "sqlite"])
def test_spend_records_carry_the_typed_values_the_ledger_stored(store_kind, tmp_path) -> None:
    store = MemoryStore() if store_kind == "memory" else SQLiteStore(str(tmp_path / "l.db"))
    store.create_budget("b", MixedFilter(1.0, 1e-5))
    out = [store.spend("b", q, key=str(i)).decision
           for i, q in enumerate([PureDP(0.1), ApproxDP(0.2, 1e-6), GDP(0.1)])]
    hist = store.history("b")
    assert [r.cost for r in hist] == [d.cost for d in out if d.admitted]
    assert all(isinstance(r.cost, Cost) and isinstance(r.remaining, BudgetLeft) for r in hist)
    assert [r.remaining.to_dict() for r in hist] == [d.remaining.to_dict() for d in out
                                                     if d.admitted]
    assert hist[0].cost.charged() == PureDP(0.1)
    # a replay rebuilds the stored decision, typed, equal to the first
    again = store.spend("b", PureDP(0.1), key="0")
    assert again.replayed
    assert again.decision == out[0]
    store.close()


def test_query_result_carries_typed_values_and_sends_plain_json() -> None:
    import numpy as np
    import pandas as pd

    from dpsieve.session import Session

    s = Session(pd.DataFrame({"x": [1.0, 2.0] * 5}), budget=PureDP(1.0),
                rng=np.random.default_rng(0))
    r = s.count(privacy=PureDP(0.25))
    assert isinstance(r.cost, Cost)
    assert isinstance(r.remaining, BudgetLeft)
    assert r.cost.charged() == PureDP(0.25)
    j = json.loads(json.dumps(r.to_dict()))
    assert j["cost"] == r.cost.to_dict()
    assert j["remaining"] == r.remaining.to_dict()
    assert Fraction(j["remaining"]["exact"]) == Fraction(3, 4)
