"""A failure after the charge is the charge's stored outcome, on every ledger backend.

An admitted query whose computation fails (out of memory, a time limit, anything) keeps
its charge and stores one fixed failure as its answer (dpsieve.session.outcomes). A retry
with the same idempotency key must return that stored outcome -- never run the query
again, which would release a fresh noisy draw for free -- even when the engine works
again, and even from another process (a new store over the same database: the outcome is
in the ledger, not in memory). Checked on memory, SQLite and PostgreSQL (PostgreSQL at
127.0.0.1:5432, database ``test``; skipped with the reason when it does not answer),
through the library (``Session(store=...)``) and the HTTP service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import QueryFailedError
from dpsieve.session.outcomes import FAILED_MESSAGE

OWNER = "owner-key-for-failed-retry-tests-0123456789"
PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 0.25},
        "aggregations": [{"type": "sum", "column": "x", "lower": 0, "upper": 10}],
        "contribution": {"max_rows": 1}}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"pid": np.arange(50), "x": rng.uniform(0, 10, 50)})


def _fail(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every engine fails after the charge, with a message that quotes private data."""
    from dpsieve.queries.engines import duckdb as duckdb_engine
    from dpsieve.queries.engines import frames

    def boom(self: Any, spec: Any) -> Any:
        raise MemoryError("failed to allocate 4.2 GiB reading alice_smith's rows")
    monkeypatch.setattr(duckdb_engine.DuckDBEngine, "aggregate", boom)
    monkeypatch.setattr(frames.PandasEngine, "aggregate", boom)


def test_a_session_retry_returns_the_stored_failure(make_store: Any, backend: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    frame = _frame()
    store = make_store()
    s = Session(frame, budget=PureDP(1.0), privacy_unit="pid", store=store, budget_id="b")
    _fail(monkeypatch)
    with pytest.raises(QueryFailedError) as e:
        s.run(PLAN, key="k-1")
    assert str(e.value) == FAILED_MESSAGE
    left = s.remaining().to_dict()
    assert left["exact"] == "3/4"  # charged: eps 0.25 of 1
    monkeypatch.undo()  # the engine works again
    with pytest.raises(QueryFailedError) as e:
        s.run(PLAN, key="k-1")
    assert str(e.value) == FAILED_MESSAGE
    assert s.remaining().to_dict() == left  # not charged again
    # another process: a new store over the same database, the same outcome
    again = Session(frame, store=make_store(), budget_id="b", privacy_unit="pid",
                    neighbouring=Neighbouring.ADD_REMOVE)
    with pytest.raises(QueryFailedError):
        again.run(PLAN, key="k-1")
    assert again.remaining().to_dict() == left
    # another key is another query: answered and charged
    r = again.run(PLAN, key="k-2")
    assert r.value["groups"][0]["estimates"][0]["value"] is not None
    assert again.remaining().to_dict()["exact"] == "1/2"


def test_a_service_retry_returns_the_stored_failure(make_store: Any, backend: str,
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from fastapi.testclient import TestClient

    from dpsieve.service import Settings, create_app

    path = tmp_path / "d.parquet"
    _frame().to_parquet(path)
    own = {"Authorization": f"Bearer {OWNER}"}

    def client() -> Any:
        return TestClient(create_app(Settings(owner_key=OWNER), store=make_store()),
                          raise_server_exceptions=False)
    with client() as c:
        ana = c.post("/v1/analysts", headers=own, json={"name": "ana"}).json()["api_key"]
        r = c.post("/v1/datasets", headers=own, json={
            "name": "d", "path": str(path), "budget": {"type": "pure", "eps": 1.0},
            "privacy_unit": "pid"})
        assert r.status_code == 201, r.text
        c.post("/v1/datasets/d/grants", headers=own, json={"analyst": "ana"})
        key = {"X-API-Key": ana, "Idempotency-Key": "retry-1"}
        _fail(monkeypatch)
        first = c.post("/v1/datasets/d/queries", headers=key, json=PLAN)
        assert first.status_code == 422, first.text
        assert first.json() == {"error": "query_failed", "message": FAILED_MESSAGE}
        assert "alice" not in first.text
        monkeypatch.undo()
        second = c.post("/v1/datasets/d/queries", headers=key, json=PLAN)
        assert (second.status_code, second.json()) == (422, first.json())
        spent = c.get("/v1/datasets/d/budget", headers=key).json()
        assert spent["admitted"] == 1
    with client() as c:  # restarted: the outcome is the ledger's
        third = c.post("/v1/datasets/d/queries", headers=key, json=PLAN)
        assert (third.status_code, third.json()) == (422, first.json())
        assert c.get("/v1/datasets/d/budget", headers=key).json() == spent
        fresh = c.post("/v1/datasets/d/queries", headers={"X-API-Key": ana}, json=PLAN)
        assert fresh.status_code == 200, fresh.text
        assert c.get("/v1/datasets/d/budget", headers=key).json()["admitted"] == 2
