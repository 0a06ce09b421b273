"""Stored filter states are untrusted input (issue 18, item 5).

``filter_from_json`` checks every field and every invariant and names the field it
rejects (``FilterStateError``, a ``ValidationError``). The issue's exact cases first, then
generic corruptions of every filter's state (missing, unknown, mistyped and negated
fields) over the conformance suite's filters after some spends.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_conformance import QUERIES, _filters

from dpsieve.accounting.events import GDP, ApproxDP, PureDP
from dpsieve.errors import FilterStateError, ValidationError
from dpsieve.filters import (
    AdditiveProfileFilter,
    NaturalApproxFilter,
    PureDPFilter,
    RDPFilter,
    filter_from_json,
)


def _tamper(f: Any, **state: Any) -> str:
    d = json.loads(f.to_json())
    d["state"].update(state)
    return json.dumps(d)


def _rejects(s: str, field: str) -> FilterStateError:
    with pytest.raises(FilterStateError) as info:
        filter_from_json(s)
    assert info.value.field == field, (info.value.field, str(info.value))
    assert f"'{field}'" in str(info.value)
    assert isinstance(info.value, ValidationError)
    return info.value


def test_issue18_negative_pure_dp_spend() -> None:
    """pure_dp spent -5 used to give 6 eps left."""
    f = PureDPFilter(1.0)
    err = _rejects(_tamper(f, spent="-5/1"), "spent")
    assert err.kind == "pure_dp"


def test_issue18_negative_count() -> None:
    f = AdditiveProfileFilter(1.0, 1e-5, 5)
    _rejects(_tamper(f, count=-1), "count")
    _rejects(_tamper(f, count=6), "count")  # more rounds than k
    _rejects(_tamper(f, count=1.0), "count")  # not an integer
    _rejects(_tamper(f, count=True), "count")


def test_issue18_rdp_order_below_one_and_mismatched_lengths() -> None:
    f = RDPFilter((2.0, 8.0), (1.0, 2.0))
    _rejects(_tamper(f, orders=[0.5, 8.0]), "orders[0]")
    _rejects(_tamper(f, orders=[1.0, 8.0]), "orders[0]")
    _rejects(_tamper(f, budgets=["1/1"]), "budgets")
    _rejects(_tamper(f, spent=["0/1", "0/1", "0/1"]), "spent")
    _rejects(_tamper(f, spent=["0/1", "3/1"]), "spent[1]")  # over its budget
    _rejects(_tamper(f, orders=[]), "orders")


def test_issue18_natural_approx_needs_the_opt_in() -> None:
    f = NaturalApproxFilter(1.0, 1e-5, 5, allow_general=True)
    d = json.loads(f.to_json())
    del d["state"]["allow_general"]
    _rejects(json.dumps(d), "allow_general")
    _rejects(_tamper(f, allow_general=False), "allow_general")
    assert filter_from_json(f.to_json()).to_json() == f.to_json()


def test_natural_approx_stored_queries_must_fit() -> None:
    f = NaturalApproxFilter(1.0, 1e-5, 5, allow_general=True)
    assert f.try_spend(PureDP(0.5)).admitted
    big = PureDP(3.0).to_dict()
    _rejects(_tamper(f, queries=[big]), "queries")
    _rejects(_tamper(f, queries=[PureDP(0.1).to_dict()] * 6), "queries")  # > rounds
    _rejects(_tamper(f, queries=[GDP(0.1).to_dict()]), "queries[0]")
    _rejects(_tamper(f, queries=[{"type": "pure", "eps": -1.0}]), "queries[0]")


def test_top_level_is_checked() -> None:
    f = PureDPFilter(1.0)
    d = json.loads(f.to_json())
    _rejects(json.dumps({**d, "extra": 1}), "extra")
    _rejects(json.dumps({**d, "neighbouring": "both"}), "neighbouring")
    _rejects(json.dumps({**d, "kind": 3}), "kind")
    _rejects(json.dumps({**d, "state": []}), "state")
    _rejects(f.to_json().replace('"1/1"', "NaN"), "s")
    _rejects("[]", "s")


def test_fractions_must_be_exact_p_over_q() -> None:
    f = PureDPFilter(1.0)
    for bad in ("1.5", "1e3", "nan", "1/0", " 1/2", "0x1/2", 0.5, None, "1/-2"):
        _rejects(_tamper(f, spent=bad), "spent")


def _corruptions(state: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(field, corrupted state) pairs that no filter may accept."""
    out: list[tuple[str, dict[str, Any]]] = []
    for key, v in state.items():
        out.append((key, {k: w for k, w in state.items() if k != key}))  # missing
        out.append((key, {**state, key: {"nested": v}}))  # wrong type
        neg = _negated(v)
        if neg is not None:
            out.append((key, {**state, key: neg}))
    out.append(("zzz_unknown", {**state, "zzz_unknown": 0}))
    return out


def _negated(v: Any) -> Any:
    """A negative version of a numeric field (every filter's numbers are >= 0), or None."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float) and v > 0:
        return -v
    if isinstance(v, str) and "/" in v and not v.startswith("0/") and not v.startswith("-"):
        return "-" + v
    if isinstance(v, list) and v and all(_negated(x) is not None for x in v):
        return [_negated(x) for x in v]
    return None


@pytest.mark.parametrize("f", _filters(), ids=lambda f: f.kind)
def test_every_filter_rejects_corrupted_states(f: Any) -> None:
    for q in QUERIES[:6]:
        f.try_spend(q)
    good = json.loads(f.to_json())
    assert filter_from_json(f.to_json()).to_json() == f.to_json()
    for field, bad in _corruptions(good["state"]):
        s = json.dumps({**good, "state": bad})
        with pytest.raises(FilterStateError) as info:
            filter_from_json(s)
        assert info.value.kind == f.kind
        named = info.value.field or ""
        assert named == field or named.startswith((field + "[", field + ".")), (
            field,
            str(info.value),
        )


def test_a_refused_state_builds_nothing_and_explains() -> None:
    f = PureDPFilter(1.0)
    f.try_spend(ApproxDP(0.2, 0.0))
    err = _rejects(_tamper(f, spent="2/1"), "spent")  # more spent than the budget
    assert "<= 1" in str(err)
