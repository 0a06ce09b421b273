"""JSON is mapped to typed values once, at the edge (issue 12 item 1): the service's models
build the privacy and the plan, the CLI and ``Session.run``'s dict go through
``request_from_json``; the session executes typed requests.

Soundness: the typed paths and the JSON path charge identical amounts, record identical
requests (the idempotency fingerprint binds them) and leave identical filter states, on
pure, approximate (DP key selection), zCDP and GDP budgets. PLD-described charges, which
reach only filters and ledgers, are compared in tests/filters/test_charge.py.
"""

from __future__ import annotations

import inspect
import json
import typing
from typing import Any

import numpy as np
import pandas as pd
import pytest
from pydantic import TypeAdapter

from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.filters import MixedFilter
from dpsieve.filters.base import BudgetLeft, Cost, Decision, PrivacyFilter
from dpsieve.filters.capacity import count_admitted
from dpsieve.filters.charge import Charge, PrivacyCharge, Workload
from dpsieve.filters.summary import budget_summary
from dpsieve.ledger.base import BudgetStore, SpendRecord
from dpsieve.queries.plan import from_spec
from dpsieve.queries.requests import PlanRequest, Request, request_from_json
from dpsieve.service.schemas import BudgetIn, PrivacyIn, QueryBody
from dpsieve.session import QueryResult, Session, filter_for_budget

AR = Neighbouring.ADD_REMOVE


def _frame(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"pid": rng.integers(0, 40, n), "ward": rng.choice(["A", "B", "C"], n),
                         "cost": rng.gamma(2.0, 50.0, n)})


_COUNT = [{"type": "count"}]
#: (budget, the request's JSON as a client sends it): pure, approx (key selection), zCDP, GDP
CASES: list[tuple[Any, dict[str, Any]]] = [
    (PureDP(2.0), {"type": "count", "privacy": {"type": "pure", "eps": 0.25}}),
    (PureDP(2.0), {"type": "sum", "column": "cost", "lower": 0.0, "upper": 500.0,
                   "privacy": {"type": "pure", "eps": 0.5}}),
    (PureDP(2.0), {"type": "histogram", "column": "ward", "categories": ["A", "B"],
                   "privacy": {"type": "pure", "eps": 0.5}}),
    (ApproxDP(4.0, 1e-5), {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
                           "aggregations": _COUNT, "group_by": ["ward"],
                           "select": {"delta": 1e-7}}),
    (ApproxDP(4.0, 1e-5), {"type": "mean", "column": "cost", "lower": 0.0, "upper": 500.0,
                           "privacy": {"type": "pure", "eps": 0.4}}),
    (ZCDP(1.0), {"type": "count", "privacy": {"type": "zcdp", "rho": 0.05}}),
    (ZCDP(1.0), {"type": "query", "privacy": {"type": "zcdp", "rho": 0.1},
                 "aggregations": _COUNT, "group_by": ["ward"], "keys": [["A"], ["B"]]}),
    (GDP(1.0), {"type": "count", "privacy": {"type": "pure", "eps": 0.3}}),
]


def _session(budget: Any) -> Session:
    return Session(_frame(), budget=budget, rng=np.random.default_rng(0))


def _ledger(s: Session) -> tuple[list[Any], str]:
    hist = s.store.history(s.budget_id)
    rows = [(r.cost.to_dict(), r.remaining.to_dict(), r.request) for r in hist]
    return rows, s.store.load_filter(s.budget_id).to_json()


@pytest.mark.parametrize(("budget", "spec"), CASES, ids=lambda v: str(v)[:40])
def test_typed_paths_and_the_json_path_charge_identical_amounts(budget: Any,
                                                               spec: dict[str, Any]) -> None:
    wire = json.loads(json.dumps(spec))
    by_json, by_service, by_plan = _session(budget), _session(budget), _session(budget)
    for i in range(3):  # adaptive: each charge decided on the state the last left
        a = by_json.run(json.loads(json.dumps(wire)), key=f"k{i}")
        body = TypeAdapter(QueryBody).validate_python(json.loads(json.dumps(wire)))
        typed = body.request(by_service.neighbouring)
        assert isinstance(typed.privacy, PureDP | ZCDP)  # typed by the model, not a dict
        b = by_service.execute(typed, key=f"k{i}")
        q = from_spec({**wire, "privacy": typed.privacy}, AR.value)
        c = by_plan.execute(request_from_json(q, AR), key=f"k{i}") if wire["type"] == "query" \
            else by_plan.run({**wire, "privacy": typed.privacy}, key=f"k{i}")
        assert a.cost == b.cost == c.cost
        assert a.remaining == b.remaining == c.remaining
        assert a.query == b.query == c.query
    assert _ledger(by_json) == _ledger(by_service) == _ledger(by_plan)
    assert _ledger(by_json)[0], "nothing was charged"


def test_the_service_models_build_descriptions_once() -> None:
    p = PrivacyIn.model_validate({"type": "approx", "eps": 1, "delta": 1e-6})
    d = p.description("replace_one")
    assert d == ApproxDP(1.0, 1e-6, Neighbouring.REPLACE_ONE)
    assert isinstance(d.eps, float)  # the recorded JSON says 1.0, as before
    with pytest.raises(ValidationError, match=r"'privacy'.*missing or bad 'delta'"):
        PrivacyIn.model_validate({"type": "approx", "eps": 1.0}).description("add_remove")
    b = BudgetIn.model_validate({"type": "approx", "eps": 2.0, "delta": 1e-5,
                                 "neighbouring": "replace_one",
                                 "typical": {"type": "pure", "eps": 0.1}})
    assert b.budget() == ApproxDP(2.0, 1e-5, Neighbouring.REPLACE_ONE)
    assert b.typicals() == [PureDP(0.1, Neighbouring.REPLACE_ONE)]
    with pytest.raises(ValidationError, match=r"'budget'.*'rho'"):
        BudgetIn.model_validate({"type": "zcdp"}).budget()


def test_request_from_json_names_the_parameter_and_spends_nothing() -> None:
    s = _session(PureDP(1.0))
    for bad, name in [({"type": "nope"}, "type"), ("count", "type"),
                      ({"type": "count", "privacy": {"type": "pure"}}, "privacy"),
                      ({"type": "robust_mean", "column": "cost"}, "privacy")]:
        with pytest.raises(ValidationError) as e:
            s.run(bad)  # type: ignore[arg-type]
        assert e.value.parameter == name, bad
    assert s.store.history(s.budget_id) == []


def test_a_request_keeps_the_recorded_json() -> None:
    spec = {"type": "count", "privacy": {"type": "pure", "eps": 0.25}}
    r = request_from_json(spec, AR)
    assert isinstance(r, PlanRequest)
    assert r.privacy == PureDP(0.25)
    assert r.plan is not None
    assert r.public == {"type": "count", "privacy": PureDP(0.25).to_dict()}


def _hint(obj: Any, name: str) -> Any:
    """The annotation of ``name`` (a field or a parameter), evaluated in its module."""
    ns = vars(__import__(obj.__module__, fromlist=["_"]))
    ann = typing.get_type_hints(obj, ns) if isinstance(obj, type) else None
    if ann is not None:
        return ann[name]
    raw = inspect.signature(obj).parameters[name].annotation
    return eval(raw, ns) if isinstance(raw, str) else raw


@pytest.mark.parametrize(("obj", "name", "want"), [
    (PrivacyFilter.try_spend, "query", Charge),
    (PrivacyFilter.dry_run, "query", Charge),
    (BudgetStore.spend, "query", Charge),
    (Decision, "remaining", BudgetLeft),
    (Decision, "cost", Cost),
    (SpendRecord, "cost", Cost),
    (SpendRecord, "remaining", BudgetLeft),
    (QueryResult, "cost", Cost),
    (QueryResult, "remaining", BudgetLeft),
    (Session.execute, "request", Request),
    (count_admitted, "workload", Workload),
    (budget_summary, "like", PrivacyCharge | None),
    (MixedFilter.__init__, "typical", Workload | None),
    (filter_for_budget, "typical", Workload | None),
])
def test_privacy_values_cross_layers_typed(obj: Any, name: str, want: object) -> None:
    assert _hint(obj, name) == want
