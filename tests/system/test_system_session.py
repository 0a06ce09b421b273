"""The Session API: data sources, the order spend-then-read, replays, valid budgets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.errors import BudgetExceededError, ValidationError
from dpsieve.ledger import MemoryStore, SQLiteStore
from dpsieve.session import filter_for_budget


def _frame(n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"x": rng.uniform(0, 10, n), "c": rng.choice(["a", "b"], n)})


class Loader:
    """A lazy data source that counts how often the private data was read."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.df, self.reads = df, 0

    def __call__(self) -> pd.DataFrame:
        self.reads += 1
        return self.df


def test_refused_query_never_reads_the_data() -> None:
    data = Loader(_frame())
    s = Session(data, budget=PureDP(1.0), columns=["x", "c"])
    with pytest.raises(BudgetExceededError) as ei:
        s.sum("x", lower=0, upper=10, privacy=PureDP(2.0))
    assert ei.value.requested["eps"] == 2.0
    assert data.reads == 0
    with pytest.raises(ValidationError, match="'column'"):
        s.sum("nope", lower=0, upper=10, privacy=PureDP(0.5))
    assert data.reads == 0
    assert s.store.history("session") == []
    s.count(privacy=PureDP(0.5))
    assert data.reads == 1


@pytest.mark.parametrize("fmt", ["frame", "csv", "parquet"])
def test_sources_give_the_same_exact_answer_with_tiny_noise(fmt: str, tmp_path: Path) -> None:
    df = _frame()
    src: Any = df
    if fmt == "csv":
        src = tmp_path / "d.csv"
        df.to_csv(src, index=False)
    elif fmt == "parquet":
        import duckdb

        src = tmp_path / "d.parquet"
        con = duckdb.connect()
        con.register("df", df)
        con.execute(f"COPY df TO '{src}' (FORMAT parquet)")
        con.close()
    s = Session(src, budget=ZCDP(1e9), rng=np.random.default_rng(1))
    r = s.histogram("c", categories=["a", "b"], privacy=ZCDP(1e8))
    exact = [int((df.c == "a").sum()), int((df.c == "b").sum())]
    assert r.value["counts"] == pytest.approx(exact, abs=1e-3)
    m = s.mean("x", lower=0, upper=10, privacy=ZCDP(1e8))
    assert m.value == pytest.approx(df.x.mean(), abs=1e-3)


def test_result_carries_noise_cost_and_remaining() -> None:
    s = Session(_frame(), budget=PureDP(1.0), rng=np.random.default_rng(2))
    r = s.sum("x", lower=-1, upper=10, privacy=PureDP(0.25))
    assert r.noise["mechanism"] == "discrete_laplace"
    assert r.noise["scale"] >= 10 / 0.25  # never less noise than the calibration
    assert r.remaining["exact"] == "3/4"
    assert r.cost["eps"] == 0.25
    assert s.remaining()["exact"] == "3/4"


def test_replay_with_key_is_free_and_identical(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "l.db")
    s = Session(_frame(), budget=PureDP(1.0), store=store, budget_id="b")
    a = s.count(privacy=PureDP(0.5), key="k")
    b = s.count(privacy=PureDP(0.5), key="k")
    assert (a.value, b.replayed) == (b.value, True)
    assert s.remaining()["exact"] == "1/2"
    # a second session on the same ledger sees the spend (persisted budget is reused)
    t = Session(_frame(), store=SQLiteStore(tmp_path / "l.db"), budget_id="b")
    assert t.remaining()["exact"] == "1/2"
    store.close()


@pytest.mark.parametrize(("budget", "kind"), [
    (GDP(1.0), "gdp_residue"), (ApproxDP(1.0, 1e-6), "gdp_residue"), (PureDP(1.0), "pure_dp"),
    (ApproxDP(1.0, 0.0), "pure_dp"), (ZCDP(0.5), "zcdp"), (ApproxZCDP(0.5, 1e-6), "approx_zcdp"),
    (RDP((2.0, 8.0), (0.5, 2.0)), "rdp"),
])
def test_filter_for_budget_picks_the_valid_filter(budget: Any, kind: str) -> None:
    assert filter_for_budget(budget).kind == kind


def test_bad_queries_and_sessions() -> None:
    with pytest.raises(ValidationError, match="not both"):
        Session(_frame(), budget=PureDP(1.0), filter=filter_for_budget(PureDP(1.0)))
    with pytest.raises(ValidationError, match="needs 'budget' or 'filter'"):
        Session(_frame(), store=MemoryStore())
    s = Session(_frame(), budget=PureDP(1.0))
    for bad in ({"type": "count", "privacy": {"type": "pure", "eps": float("nan")}},
                {"type": "count", "privacy": {"type": "approx", "eps": 1, "delta": 0.1}},
                {"type": "sum", "column": "x", "lower": 1.0, "upper": 1.0,
                 "privacy": {"type": "pure", "eps": 0.1}},
                {"type": "histogram", "column": "c", "categories": ["a", "a"],
                 "privacy": {"type": "pure", "eps": 0.1}},
                {"type": "median"}):
        with pytest.raises(ValidationError):
            s.run(bad)
    assert s.remaining()["exact"] == "1/1"
