"""Errors carry typed privacy values; JSON is made at the service and the CLI (issue 12,
item 1): a refusal's ``requested`` is the privacy description asked for and ``remaining``
a :class:`~dpsieve.filters.base.BudgetLeft`; the service's 409/422 bodies state them as
the JSON they stated before (``to_dict()``), so clients see no change.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient

from dpsieve import _budget_view
from dpsieve.accounting.events import ZCDP, ApproxDP, PrivacyDescription, PureDP
from dpsieve.errors import BudgetExceededError, IncompatiblePrivacyError, Stated
from dpsieve.filters.base import BudgetLeft
from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app
from dpsieve.session import Session

OWNER = "dps_test-owner-key_Wd7RmZ2vK9pLw4sN8bYc3FhJ6t"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"age": [20.0, 30.0, 40.0] * 10, "city": ["a", "b", "c"] * 10})


def test_a_refusal_carries_the_privacy_asked_for_typed() -> None:
    s = Session(_frame(), budget=PureDP(1.0))
    with pytest.raises(BudgetExceededError) as ei:
        s.mean("age", lower=0, upper=100, privacy={"type": "pure", "eps": 2.0})
    assert ei.value.requested == PureDP(2.0)  # the dict was mapped once, at the call
    assert isinstance(ei.value.remaining, BudgetLeft)
    assert ei.value.remaining.to_dict() == {"eps": 1.0, "exact": "1/1"}
    assert s.store.history(s.budget_id) == []


def test_an_incompatible_query_carries_the_privacy_asked_for_typed() -> None:
    s = Session(_frame(), budget=ApproxDP(2.0, 1e-6))
    with pytest.raises(IncompatiblePrivacyError) as ei:
        s.count(privacy=ZCDP(0.01))
    assert ei.value.requested == ZCDP(0.01)
    assert "zCDP (rho) query" in str(ei.value)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    csv = tmp_path / "p.csv"
    _frame().to_csv(csv, index=False)
    app = create_app(Settings(owner_key=OWNER), store=SQLiteStore(tmp_path / "w.db"))
    with TestClient(app, raise_server_exceptions=False) as c:
        c.headers["Authorization"] = f"Bearer {OWNER}"
        r = c.post("/v1/datasets", json={"name": "p", "path": str(csv), "infer_types": True,
            "budget": {
            "type": "approx", "eps": 1.0, "delta": 1e-6,
            "typical": {"type": "pure", "eps": 0.2}}})
        assert r.status_code == 201, r.text
        yield c


def test_the_service_states_them_as_the_json_before(client: TestClient) -> None:
    r = client.post("/v1/datasets/p/queries",
                    json={"type": "count", "privacy": {"type": "pure", "eps": 0.9}})
    assert r.status_code == 409, r.text
    body = r.json()
    assert body["requested"] == {"type": "pure", "eps": 0.9, "neighbouring": "add_remove"}
    # a mixed budget states the same keys before and after its split (stable remaining())
    assert set(body["remaining"]) == {"split", "eps", "delta", "pure_eps", "pure_exact", "mu",
                                      "delta_part"}
    assert body["summary"]["more"] == {"count": 0, "at_least": False}
    r = client.post("/v1/datasets/p/queries",
                    json={"type": "count", "privacy": {"type": "zcdp", "rho": 0.001}})
    assert r.status_code == 422, r.text
    assert r.json()["requested"] == {"type": "zcdp", "rho": 0.001,
                                     "neighbouring": "add_remove"}


def _hint(obj: Any, name: str, **names: Any) -> Any:
    """The annotation of ``name`` (a parameter), evaluated in its module plus ``names``
    (types its module imports for type checking only)."""
    ns = {**vars(__import__(obj.__module__, fromlist=["_"])), **names}
    raw = inspect.signature(obj).parameters[name].annotation
    return eval(raw, ns) if isinstance(raw, str) else raw


TYPES = {"PrivacyDescription": PrivacyDescription, "BudgetLeft": BudgetLeft, "Stated": Stated}


def test_the_values_errors_carry_are_stated_values() -> None:
    """errors.py imports nothing of dpsieve (every layer raises its errors, so it sits
    below them all): the typed values it carries are :class:`Stated` (``to_dict()``),
    which budgets left and every privacy description are."""
    assert isinstance(BudgetLeft({"eps": 1.0}), Stated)
    for d in (PureDP(1.0), ZCDP(0.1)):
        assert isinstance(d, Stated)
    assert not isinstance({"eps": 1.0}, Stated)  # a dict states no typed value


@pytest.mark.parametrize(("obj", "name", "want"), [
    (BudgetExceededError.__init__, "requested", Stated | None),
    (BudgetExceededError.__init__, "remaining", Stated | None),
    (IncompatiblePrivacyError.__init__, "requested", Stated | None),
    (_budget_view.refused, "requested", PrivacyDescription),
    (_budget_view.check_fits, "requested", PrivacyDescription),
])
def test_errors_carry_typed_privacy(obj: Any, name: str, want: object) -> None:
    assert _hint(obj, name, **TYPES) == want
    assert typing.get_origin(want) is not None  # a union, never Any
