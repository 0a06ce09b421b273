"""Budgets in plain words (issue 15, item 2): Session, service and their errors.

eps left at the target's delta, the fraction used, "about N more queries like this one"
(exact: checked against spending them), incompatible_privacy (422) naming the types that
fit, refusals stating the cost asked and what is left.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve import IncompatiblePrivacyError, Session
from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, PureDP
from dpsieve.errors import BudgetExceededError, ValidationError
from dpsieve.filters import MixedFilter
from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Wd7RmZ2vK9pLw4sN8bYc3FhJ6t"


def _frame() -> pd.DataFrame:
    return pd.DataFrame({"age": [20.0, 30.0, 40.0] * 10, "city": ["a", "b", "c"] * 10})


def test_session_states_budget_and_counts_exactly() -> None:
    s = Session(_frame(), budget=ApproxDP(1.0, 1e-6), typical=PureDP(0.2))
    counts = []
    for _ in range(4):
        r = s.count(privacy=PureDP(0.2))
        b = r.budget
        assert b["delta"] == 1e-6
        assert b["eps_total"] == pytest.approx(1.0, abs=1e-6)
        assert 0 < b["fraction_used"] <= 1
        counts.append(b["more"]["count"])
        assert f"{b['more']['count']} more quer" in b["text"]
        assert "at delta 1e-06" in b["text"]
    assert counts == [3, 2, 1, 0]  # exact: each admitted query uses exactly one of them
    with pytest.raises(BudgetExceededError) as ei:
        s.count(privacy=PureDP(0.2))
    msg = str(ei.value)
    assert "asks for pure eps 0.2" in msg
    assert "left" in msg
    assert "Nothing was spent" in msg
    assert ei.value.summary["more"]["count"] == 0
    assert "not dominated" not in msg  # no lattice jargon


def test_session_budget_for_a_given_query() -> None:
    s = Session(_frame(), budget=GDP(1.0))
    summary = s.budget(PureDP(0.1), cap=10_000)
    n = summary.more.count
    assert not summary.more.at_least
    admitted = 0
    while True:
        try:
            s.count(privacy=PureDP(0.1))
        except BudgetExceededError:
            break
        admitted += 1
    assert admitted == n  # "about N more" is exactly what the filter then admits
    assert str(s.budget()) == s.budget().text  # print(session.budget()) is the sentence
    assert s.budget().more is None
    assert s.budget().fraction_used == pytest.approx(1.0, abs=0.2)


def test_incompatible_privacy_is_its_own_error() -> None:
    s = Session(_frame(), budget=ApproxDP(2.0, 1e-6))
    with pytest.raises(IncompatiblePrivacyError) as ei:
        s.count(privacy=ZCDP(0.01))
    assert ei.value.fits == ["pure", "approx"]  # approx: its delta from a delta part
    assert "zCDP" in str(ei.value)
    assert "pure (eps)" in str(ei.value)
    assert not isinstance(ei.value, BudgetExceededError)
    assert s.budget().fraction_used == 0  # nothing was spent
    assert isinstance(s.store.load_filter("session"), MixedFilter)


def test_typical_needs_an_approx_budget() -> None:
    with pytest.raises(ValidationError, match="'typical'"):
        Session(_frame(), budget=GDP(1.0), typical=PureDP(0.1))
    with pytest.raises(ValidationError, match="'typical'"):
        Session(_frame(), filter=MixedFilter(1.0, 1e-6), typical=PureDP(0.1))
    s = Session(_frame(), budget=ApproxDP(10.0, 1e-6), typical={"type": "pure", "eps": 0.5})
    split = s.store.load_filter("session").split()
    assert split is not None
    assert split["chosen"] == "typical"


@pytest.fixture
def client(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "w.db")
    app = create_app(Settings(owner_key=OWNER), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        own = {"Authorization": f"Bearer {OWNER}"}
        csv = write_csv(tmp_path / "people.csv")
        r = c.post("/v1/datasets", headers=own, json={
            "name": "people", "path": str(csv), "infer_types": True,
            "budget": {"type": "approx", "eps": 1.0, "delta": 1e-6,
                       "typical": {"type": "pure", "eps": 0.2}}})
        assert r.status_code == 201, r.text
        keys = {}
        for who in ("ana", "bob"):
            keys[who] = {"X-API-Key": c.post("/v1/analysts", json={"name": who},
                                             headers=own).json()["api_key"]}
            c.post("/v1/datasets/people/grants", json={"analyst": who}, headers=own)
        yield {"c": c, "owner": own, **keys}


Q = {"type": "count", "privacy": {"type": "pure", "eps": 0.2}}


def test_service_answers_and_refusals_in_plain_words(client: dict[str, Any]) -> None:
    c = client["c"]
    for left in (3, 2, 1, 0):
        r = c.post("/v1/datasets/people/queries", json=Q, headers=client["ana"])
        assert r.status_code == 200, r.text
        assert r.json()["budget"]["more"] == {"count": left, "at_least": False}
    r = c.post("/v1/datasets/people/queries", json=Q, headers=client["bob"])
    assert r.status_code == 409
    body = r.json()
    assert body["error"] == "budget_exceeded"
    assert "asks for pure eps 0.2" in body["message"]
    assert body["summary"]["more"]["count"] == 0
    r = c.post("/v1/datasets/people/queries", headers=client["ana"], json={
        "type": "count", "privacy": {"type": "zcdp", "rho": 0.001}})
    assert r.status_code == 422
    assert r.json()["error"] == "incompatible_privacy"
    # declared for pure queries (typical): no delta part, so no (eps, delta) charge fits
    # (a budget opened without a typical query keeps one: docs/proofs/mixed.md §6)
    assert r.json()["fits"] == ["pure"]


def test_budget_endpoint_summary_history_refusals(client: dict[str, Any]) -> None:
    c = client["c"]
    c.post("/v1/datasets/people/queries", json=Q, headers=client["ana"])
    c.post("/v1/datasets/people/queries", headers=client["bob"], json={
        "type": "mean", "column": "age", "lower": 0, "upper": 100,
        "privacy": {"type": "pure", "eps": 0.4}})
    assert c.post("/v1/datasets/people/queries", headers=client["ana"], json={
        "type": "count", "privacy": {"type": "pure", "eps": 0.9}}).status_code == 409
    b = c.get("/v1/datasets/people/budget", headers=client["ana"]).json()
    assert b["summary"]["text"].startswith("eps ")
    assert b["summary"]["like"] == "pure eps 0.4"  # the last admitted query
    mine, theirs = b["history"]
    assert mine["description"] == "count of rows"
    assert mine["charged"] == "pure eps 0.2"
    assert theirs["description"] == "a query by another analyst"  # not bob's parameters
    assert "query" not in theirs
    assert theirs["charged"] == "pure eps 0.4"
    assert mine["eps_left"] > theirs["eps_left"] > 0
    (ref,) = b["refusals"]
    assert ref["asked"] == "pure eps 0.9"
    assert ref["reason"].startswith("more than the budget had left (eps ")
    assert ref["description"] == "count of rows"
    own = c.get("/v1/datasets/people/budget", headers=client["owner"]).json()
    assert own["history"][1]["description"] == "mean of 'age' in [0, 100]"
    steps = c.get("/v1/datasets/people/curves", headers=client["ana"]).json()["steps"]
    assert [s["eps_left"] for s in steps][1:] == [h["eps_left"] for h in b["history"]]
    assert steps[0]["eps_left"] == pytest.approx(1.0, abs=1e-6)


def test_budget_endpoint_counts_a_given_query(client: dict[str, Any]) -> None:
    c = client["c"]
    r = c.get("/v1/datasets/people/budget", headers=client["ana"],
              params={"like": '{"type": "pure", "eps": 0.2}'})
    assert r.status_code == 200, r.text
    assert r.json()["summary"]["more"] == {"count": 4, "at_least": False}
    assert r.json()["summary"]["like"] == "pure eps 0.2"
    r = c.get("/v1/datasets/people/budget", headers=client["ana"], params={"like": "{bad"})
    assert r.status_code == 422
    assert r.json()["parameter"] == "like"


def test_example_server_zcdp_against_gdp_budget(tmp_path: Path) -> None:
    from dpsieve.service.example import setup_example

    store = SQLiteStore(tmp_path / "e.db")
    info = setup_example(store)
    app = create_app(Settings(owner_key=OWNER), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post(f"/v1/datasets/{info['dataset']}/queries",
                   headers={"X-API-Key": info["api_key"]},
                   json={"type": "count", "privacy": {"type": "zcdp", "rho": 0.01}})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "incompatible_privacy"
    assert "pure (eps)" in r.json()["message"]


def test_undeclared_default_is_stated_then_shown(tmp_path: Path) -> None:
    """Without a typical query the budget says the first admitted query will choose the
    split (docs/filters.md, "Without a declaration"), then which query chose it."""
    store = SQLiteStore(tmp_path / "u.db")
    app = create_app(Settings(owner_key=OWNER), store=store)
    own = {"Authorization": f"Bearer {OWNER}"}
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/datasets", headers=own, json={
            "name": "people", "path": str(write_csv(tmp_path / "p.csv")), "infer_types": True,
            "budget": {"type": "approx", "eps": 1.0, "delta": 1e-6}})
        assert r.status_code == 201, r.text
        split = c.get("/v1/datasets/people/budget", headers=own).json()["split"]
        assert split["chosen"] == "undecided"
        assert "No typical query was declared" in split["text"]
        assert "the first admitted query will choose" in split["text"]
        assert c.post("/v1/datasets/people/queries", headers=own, json=Q).status_code == 200
        split = c.get("/v1/datasets/people/budget", headers=own).json()["split"]
    assert split["chosen"] == "first query"
    assert "chosen for the first admitted query (pure eps 0.2)" in split["text"]
    assert split["pure"] > 0
