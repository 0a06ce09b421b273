"""A filter's ``remaining()`` is a typed :class:`BudgetLeft` (issue 12, item 1), read by
``BudgetLeft.description()`` / ``mixed_split()`` where the service used to sniff dicts.

Oracles: closed forms (a fresh budget left states the budget it was opened with), and a
copy of the dict-reading ``service.curves.description_of`` as it was before (1637872),
run on the same JSON, over 12 filter kinds and their decisions after adaptive steps.
``to_dict()`` is the JSON a decision carries, byte for byte.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import typing
from fractions import Fraction
from typing import Any

import pytest

from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PureDP,
    description_from_dict,
)
from dpsieve.accounting.pld import PLD
from dpsieve.filters import (
    AdditiveProfileFilter,
    ApproxZCDPFilter,
    GDPResidueFilter,
    MixedFilter,
    NaiveGDPFilter,
    NaturalApproxFilter,
    NaturalGDPFilter,
    PureDPFilter,
    RDPFilter,
    TrainingFilter,
    ZCDPFilter,
)
from dpsieve.filters import summary as summary_mod
from dpsieve.filters.base import BudgetLeft, PrivacyFilter
from dpsieve.service import budget_view, curves
from dpsieve.service.curves import MixedBudget, description_of
from dpsieve.session import Session


def _filters() -> list[Any]:
    return [PureDPFilter(1.0), ZCDPFilter(0.5), ApproxZCDPFilter(0.5, 1e-5),
            RDPFilter((2.0, 8.0), (1.0, 4.0)), NaiveGDPFilter(1.0), GDPResidueFilter(1.0),
            NaturalGDPFilter(1.0), MixedFilter(1.0, 1e-5),
            MixedFilter(1.0, 1e-5, typical=[PureDP(0.1)]),
            NaturalApproxFilter(1.0, 1e-5, 5, allow_general=True),
            AdditiveProfileFilter(1.0, 1e-5, 5), TrainingFilter(1.0, 1e-5, sigma=2.0, rate=0.05)]


QUERIES = [PureDP(0.1), ApproxDP(0.2, 1e-6), ZCDP(0.02), GDP(0.15), PLD.laplace(10.0),
           ApproxZCDP(0.01, 1e-7), RDP((2.0, 8.0), (0.01, 0.04)), PureDP(0.6)]


def _old_description_of(remaining: dict[str, Any]) -> Any:
    """``service.curves.description_of`` before 1637872 (it read the dict), verbatim."""
    def num(x: Any) -> float:
        return float(Fraction(x)) if isinstance(x, str) else float(x)

    try:
        if remaining.get("split") == "undecided":  # undecided: the same keys as a split
            return ApproxDP(num(remaining["eps"]), num(remaining["delta"]))
        if "pure_exact" in remaining and "mu" in remaining:
            return MixedBudget(Fraction(remaining["pure_exact"]), max(0.0, num(remaining["mu"])))
        keys = set(remaining) - {"exact", "kind", "type", "neighbouring"}
        if "type" not in remaining:
            if keys == {"mu"}:
                return GDP(max(0.0, num(remaining["mu"])))
            if keys == {"eps"}:
                return PureDP(max(0.0, num(remaining["eps"])))
            if keys == {"rho"}:
                return ZCDP(max(0.0, num(remaining["rho"])))
            if keys == {"rho", "delta"}:
                return ApproxZCDP(max(0.0, num(remaining["rho"])),
                                  min(1.0, max(0.0, num(remaining["delta"]))))
            if keys == {"orders", "rdp"}:
                return RDP(tuple(float(a) for a in remaining["orders"]),
                           tuple(max(0.0, num(v)) for v in remaining["rdp"]))
    except (ValueError, TypeError, ZeroDivisionError):
        return None
    for cand in (remaining, remaining.get("budget"), remaining.get("remaining")):
        if isinstance(cand, dict) and "type" in cand:
            try:
                return description_from_dict(cand)
            except (ValueError, KeyError, TypeError):
                return None
    return None


@pytest.mark.parametrize("i", range(12))
def test_remaining_is_typed_and_reads_as_the_dict_did(i: int) -> None:
    f = _filters()[i]
    seen = 0
    for q in QUERIES * 3:
        left = f.remaining()
        assert type(left) is BudgetLeft
        refused = f.dry_run(PureDP(1e6)) if not isinstance(f, TrainingFilter) else None
        if refused is not None and not refused.admitted:  # a refusal states remaining()
            assert refused.remaining == left
            assert json.dumps(refused.remaining.to_dict()) == json.dumps(left.to_dict())
        for b in (left, f.dry_run(q).remaining):
            assert description_of(b) == _old_description_of(b.to_dict())
            seen += 1
        with contextlib.suppress(TypeError, ValueError):
            f.try_spend(q)
    assert seen == 48


def test_a_fresh_budget_states_what_it_was_opened_with() -> None:
    assert PureDPFilter(1.0).remaining().description() == PureDP(1.0)
    assert ZCDPFilter(0.5).remaining().description() == ZCDP(0.5)
    assert ApproxZCDPFilter(0.5, 1e-5).remaining().description() == ApproxZCDP(0.5, 1e-5)
    assert GDPResidueFilter(1.0).remaining().description() == GDP(1.0)
    assert RDPFilter((2.0, 8.0), (1.0, 4.0)).remaining().description() == RDP(
        (2.0, 8.0), (1.0, 4.0))
    undecided = MixedFilter(1.0, 1e-5).remaining()
    assert undecided.description() == ApproxDP(1.0, 1e-5)
    assert undecided.mixed_split() is None
    split = MixedFilter(1.0, 1e-5, typical=[PureDP(0.1)]).remaining()
    assert split.description() is None  # R_a (+) G_mu: no single description
    parts = split.mixed_split()
    assert parts is not None
    assert parts[0] == Fraction(split["pure_exact"])
    assert parts[1] == split["mu"]
    assert description_of(split) == MixedBudget(*parts)
    assert TrainingFilter(1.0, 1e-5, sigma=2.0, rate=0.05).remaining().description() is None
    # after a spend: never more left than the exact value (floats rounded down)
    f = PureDPFilter(1.0)
    f.try_spend(PureDP(0.3))
    d = f.remaining().description()
    assert isinstance(d, PureDP)
    assert Fraction(d.eps) <= Fraction(f.remaining()["exact"])


def test_a_malformed_stored_budget_states_nothing() -> None:
    assert BudgetLeft({"eps": "not a number"}).description() is None
    assert BudgetLeft({"mu": 1.0, "pure_exact": "1/0"}).mixed_split() is None
    assert BudgetLeft({"type": "pure"}).description() is None  # eps missing
    assert BudgetLeft({}).description() is None


def test_session_remaining_is_typed() -> None:
    import pandas as pd

    s = Session(pd.DataFrame({"x": [1.0, 2.0]}), budget=PureDP(1.0))
    left = s.remaining()
    assert type(left) is BudgetLeft
    assert left.to_dict() == {"eps": 1.0, "exact": "1/1"}


def _returns(obj: Any) -> Any:
    ns = vars(__import__(obj.__module__, fromlist=["_"]))
    raw = inspect.signature(obj).return_annotation
    return eval(raw, ns) if isinstance(raw, str) else raw


def _param(obj: Any, name: str) -> Any:
    return typing.get_type_hints(obj)[name]


@pytest.mark.parametrize("obj", [PrivacyFilter.remaining, Session.remaining,
                                 *(type(f).remaining for f in _filters())])
def test_remaining_is_annotated_budget_left(obj: Any) -> None:
    assert _returns(obj) is BudgetLeft


@pytest.mark.parametrize(("obj", "name"), [
    (curves.description_of, "left"), (budget_view.step_eps, "remaining"),
    (summary_mod.eps_of, "remaining"), (summary_mod.display_delta, "remaining"),
])
def test_budget_readers_take_budget_left(obj: Any, name: str) -> None:
    assert _param(obj, name) is BudgetLeft


def _hint(obj: Any, name: str) -> Any:
    """A parameter's annotation, with the names its module imports for type checking."""
    from dpsieve.accounting.events import PrivacyDescription
    from dpsieve.filters.charge import PrivacyCharge
    from dpsieve.filters.summary import BudgetSummary
    from dpsieve.ledger.base import BudgetStore

    extra = {"BudgetStore": BudgetStore, "PrivacyFilter": PrivacyFilter,
             "BudgetLeft": BudgetLeft, "PrivacyCharge": PrivacyCharge,
             "PrivacyDescription": PrivacyDescription, "BudgetSummary": BudgetSummary}
    return typing.get_type_hints(obj, localns=extra)[name]


def _view_and_summary() -> list[tuple[Any, str, str]]:
    from dpsieve import _budget_view as bv
    from dpsieve.filters import capacity

    return [
        (summary_mod.query_fits, "flt", "PrivacyFilter"),
        (summary_mod.fitting_types, "flt", "PrivacyFilter"),
        (summary_mod.epsilon_left, "flt", "PrivacyFilter"),
        (summary_mod.budget_summary, "current", "PrivacyFilter"),
        (summary_mod.budget_summary, "initial", "PrivacyFilter | None"),
        (capacity.count_admitted, "flt", "PrivacyFilter"),
        (bv.check_fits, "flt", "PrivacyFilter"),
        (bv.store_summary, "store", "BudgetStore"),
        (bv.refused, "store", "BudgetStore"),
        (bv.after_query, "store", "BudgetStore"),
    ]


@pytest.mark.parametrize(("obj", "name", "want"), _view_and_summary())
def test_budget_views_take_typed_filters_and_stores(obj: Any, name: str, want: str) -> None:
    from dpsieve.ledger.base import BudgetStore

    types = {"PrivacyFilter": PrivacyFilter, "BudgetStore": BudgetStore,
             "PrivacyFilter | None": PrivacyFilter | None}
    assert _hint(obj, name) == types[want]


@pytest.mark.parametrize("budget", [
    GDP(1.0, Neighbouring.REPLACE_ONE), PureDP(1.0, Neighbouring.REPLACE_ONE),
    ZCDP(0.5, Neighbouring.REPLACE_ONE), ApproxZCDP(0.5, 1e-6, Neighbouring.REPLACE_ONE),
    ApproxDP(1.0, 1e-6, Neighbouring.REPLACE_ONE)])
def test_a_replace_one_budget_left_states_its_relation_and_can_be_handed_back(
        budget: Any) -> None:
    import pandas as pd

    from dpsieve.session import Session, filter_for_budget

    left = filter_for_budget(budget).remaining()
    desc = left.description()
    assert desc is not None
    assert desc.neighbouring == Neighbouring.REPLACE_ONE
    s = Session(pd.DataFrame({"x": [1, 2, 3]}), budget=budget)
    assert s.remaining().neighbouring == Neighbouring.REPLACE_ONE
    again = s.remaining().description()
    assert again is not None
    s.budget(like=again)  # handed back: stated under the budget's relation, not refused
    r = s.count(privacy=PureDP(0.1, Neighbouring.REPLACE_ONE))
    assert r.remaining.neighbouring == Neighbouring.REPLACE_ONE
    assert r.remaining.to_dict() == s.remaining().to_dict()  # the JSON is unchanged
