"""A plan's answer size is costed from public values and refused before any spend (issue
11 defect 6 applied to the query layer): 10^5 public keys x a 10^4-category histogram
asked for 10^9 noisy numbers -- ~10 us and ~0.5 KB each -- and was charged, then ran for
hours or out of memory. The limit is a setting (DPSIEVE_MAX_QUERY_CELLS)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries.prepare import DEFAULT_MAX_CELLS, MAX_CELLS_ENV


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(1)
    return pd.DataFrame({"pid": rng.integers(0, 50, 200), "ward": rng.choice(["A", "B"], 200),
                         "age": rng.integers(0, 100, 200)})


def _plan(keys: int, categories: int, **kw: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
            "aggregations": [{"type": "histogram", "column": "age",
                              "categories": list(range(categories))}],
            "group_by": ["ward"], "keys": [[f"k{i}"] for i in range(keys)], **kw}


def _refused(s: Session, plan: dict[str, Any]) -> ValidationError:
    with pytest.raises(ValidationError) as e:
        s.run(plan)
    assert s.store.history(s.budget_id) == []
    return e.value


def test_a_plan_too_large_to_answer_is_refused_before_any_spend(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MAX_CELLS_ENV, raising=False)
    s = Session(_frame(), budget=PureDP(10.0))
    err = _refused(s, _plan(DEFAULT_MAX_CELLS // 1000 + 1, 1000))
    assert err.parameter == "keys"
    assert "1001 groups x 1000 numbers" in str(err)


def test_the_limit_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MAX_CELLS_ENV, "6")
    s = Session(_frame(), budget=PureDP(10.0))
    assert _refused(s, _plan(4, 2)).parameter == "keys"  # 8 numbers
    r = s.run(_plan(3, 2))  # 6 numbers: answered
    assert len(r.value["groups"]) == 3
    # DP key selection: the groups are unknown, each group's numbers are checked
    u = Session(_frame(), budget=PureDP(10.0), privacy_unit="pid")
    sel = {**_plan(1, 7), "keys": None, "select": {"delta": 1e-6},
           "contribution": {"max_groups": 1, "max_rows": 1}}
    assert _refused(u, sel).parameter == "aggregations"


@pytest.mark.parametrize("bad", ["abc", "0", "-5", "1.5"])
def test_a_bad_limit_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch,
                                                    bad: str) -> None:
    monkeypatch.setenv(MAX_CELLS_ENV, bad)
    s = Session(_frame(), budget=PureDP(10.0))
    assert _refused(s, _plan(2, 2)).parameter == MAX_CELLS_ENV


def test_the_service_refuses_it_with_a_422_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from dpsieve.ledger import SQLiteStore
    from dpsieve.service import Settings, create_app

    monkeypatch.setenv(MAX_CELLS_ENV, "100")
    path = tmp_path / "d.csv"
    _frame().to_csv(path, index=False)
    owner = "owner-" + "Zq7".join(str(i) for i in range(20))
    store = SQLiteStore(tmp_path / "l.db")
    with TestClient(create_app(Settings(owner_key=owner), store=store)) as c:
        own = {"Authorization": f"Bearer {owner}"}
        r = c.post("/v1/datasets", headers=own, json={
            "name": "d", "path": str(path), "infer_types": True,
                "budget": {"type": "pure", "eps": 5.0}})
        assert r.status_code == 201, r.text
        audit = len(store.audit())
        r = c.post("/v1/datasets/d/queries", headers=own, json=_plan(11, 10))
        assert r.status_code == 422, r.text
        assert r.json()["parameter"] == "keys"
        assert store.history("d") == []
        assert len(store.audit()) == audit
