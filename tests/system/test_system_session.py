"""The Session API: data sources, the order spend-then-read, replays, valid budgets."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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
    s = Session(data, budget=PureDP(1.0), columns=["x", "c"],
                column_types={"x": "float", "c": "string"})
    with pytest.raises(BudgetExceededError) as ei:
        s.sum("x", lower=0, upper=10, privacy=PureDP(2.0))
    assert ei.value.requested == PureDP(2.0)  # typed: the privacy asked for
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
    types = {"x": "float", "c": "string"} if fmt == "csv" else None  # declared
    s = Session(src, budget=ZCDP(1e9), rng=np.random.default_rng(1), column_types=types)
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
    from dpsieve.accounting.events import Neighbouring

    with pytest.raises(ValidationError, match="'neighbouring'"):
        Session(_frame(), store=SQLiteStore(tmp_path / "l.db"), budget_id="b")
    t = Session(_frame(), store=SQLiteStore(tmp_path / "l.db"), budget_id="b",
                neighbouring=Neighbouring.ADD_REMOVE)
    assert t.remaining()["exact"] == "1/2"
    store.close()


def test_attached_session_takes_the_registered_neighbouring(tmp_path: Path) -> None:
    """Attached to an existing budget without 'neighbouring', the session reads the
    relation from the registry (and only then: a given one is used as given)."""
    from dpsieve.accounting.events import Neighbouring

    store = SQLiteStore(tmp_path / "l.db")
    Session(_frame(), budget=PureDP(1.0, Neighbouring.REPLACE_ONE), store=store,
            budget_id="b")
    store.register_dataset("b", {"neighbouring": "replace_one"})
    assert Session(_frame(), store=store, budget_id="b").neighbouring \
        == Neighbouring.REPLACE_ONE
    given = Session(_frame(), store=store, budget_id="b",
                    neighbouring=Neighbouring.ADD_REMOVE)
    assert given.neighbouring == Neighbouring.ADD_REMOVE
    store.close()


@pytest.mark.parametrize(("budget", "kind"), [
    (GDP(1.0), "gdp_residue"), (ApproxDP(1.0, 1e-6), "mixed"), (PureDP(1.0), "pure_dp"),
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
                {"type": "count", "privacy": {"type": "approx", "eps": 1, "delta": 1.5}},
                {"type": "sum", "column": "x", "lower": 1.0, "upper": 1.0,
                 "privacy": {"type": "pure", "eps": 0.1}},
                {"type": "histogram", "column": "c", "categories": ["a", "a"],
                 "privacy": {"type": "pure", "eps": 0.1}},
                {"type": "median"}):
        with pytest.raises(ValidationError):
            s.run(bad)
    assert s.remaining()["exact"] == "1/1"


def test_an_eps_delta_count_answered_with_laplace_is_charged_pure_eps() -> None:
    """An (eps, delta) request whose lower-noise calibration is Laplace (a count: variance
    2 / eps^2 against the Gaussian's at the rho implying (1, 0.1)) is answered at pure eps and
    charged so, which a pure budget admits (69c60cd; it was refused before (eps, delta) plans)."""
    s = Session(_frame(), budget=PureDP(1.0))
    r = s.run({"type": "count", "privacy": {"type": "approx", "eps": 1, "delta": 0.1}})
    assert r.noise is not None
    assert r.noise["mechanism"] == "discrete_laplace"
    assert s.remaining()["exact"] == "0/1"
    with pytest.raises(BudgetExceededError):
        s.run({"type": "count", "privacy": {"type": "pure", "eps": 1e-9}})


def test_gdp_noise_is_refused_before_any_spend() -> None:
    from dpsieve.errors import UnsupportedError

    s = Session(_frame(), budget=GDP(1.0))
    with pytest.raises(UnsupportedError, match="not known to be mu-GDP"):
        s.count(privacy=GDP(0.5))
    assert s.store.history("session") == []
    r = s.count(privacy=PureDP(0.5))  # Laplace queries are admitted by the residue filter
    assert 0 < r.remaining["mu"] < 1


@settings(max_examples=40, deadline=None)
@given(eps=st.floats(1e-3, 10.0), lo=st.floats(-1e3, 0.0), hi=st.floats(1e-3, 1e3),
       zcdp=st.booleans())
def test_calibration_never_understates_the_cost(eps: float, lo: float, hi: float,
                                               zcdp: bool) -> None:
    """Exact check on the released lattice details: k/t <= eps, k^2/(2 sigma^2) <= rho,
    and k >= the sensitivity of the released integers: each row is snapped to the lattice
    and clamped to [snap(lo), snap(hi)], so one row moves the sum by at most
    max(|snap(lo)|, |snap(hi)|) lattice units."""
    from dpsieve.queries.engine import snap

    privacy = ZCDP(eps) if zcdp else PureDP(eps)
    s = Session(_frame(20), budget=ZCDP(1e9) if zcdp else PureDP(1e9),
                rng=np.random.default_rng(0))
    n = s.sum("x", lower=lo, upper=hi, privacy=privacy).details
    k, g = n["integer_sensitivity"], n["granularity"]
    assert k >= max(abs(snap(lo, g)), abs(snap(hi, g)))
    if zcdp:
        # the sampler's variance parameter (>= lattice_sigma^2) is what the privacy rests on
        assert Fraction(k) ** 2 <= 2 * Fraction(eps) * Fraction(n["lattice_sigma2"])
    else:
        assert Fraction(k) <= Fraction(eps) * Fraction(n["lattice_scale"])


def test_robust_statistics_are_charged_up_front_under_replace_one() -> None:
    from dpsieve.accounting.events import Neighbouring

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"x": rng.normal(50, 5, 1000)})
    q = {"type": "robust_mean", "column": "x", "bound": 100,
         "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}}
    add_remove = Session(df, budget=ApproxZCDP(2.0, 1e-5))
    with pytest.raises(ValidationError, match="replace-one"):
        add_remove.run(q)
    s = Session(df, budget=ApproxZCDP(2.0, 1e-5, Neighbouring.REPLACE_ONE), rng=rng)
    for t in ("robust_mean", "robust_median"):
        r = s.run({**q, "type": t})
        stated = r.noise["privacy"]
        charged = r.cost["query"]
        assert stated["eps"] <= charged["eps"]
        assert stated.get("delta", 0.0) <= charged["delta"]  # the row-wise mean is pure
        assert (r.value is None) == r.noise["refused"]
    assert len(s.store.history("session")) == 2
    with pytest.raises(ValidationError, match="'bound'"):
        s.run({**q, "bound": -1})
    # 400 rows: the friendly PFR's public n0 refused this before any spend; the default
    # row-wise PFR (issue 16) has no public n0, so it runs and is charged once
    few = Session(df.head(400), budget=ApproxZCDP(2.0, 1e-5, Neighbouring.REPLACE_ONE),
                  rng=rng)
    r = few.run(q)
    assert r.noise["privacy"]["type"] == "pure"
    assert len(few.store.history("session")) == 1


@pytest.mark.parametrize("privacy", [PureDP(1e6), ZCDP(1e12)])
def test_linear_workload_answers_the_rounded_workload(privacy: Any) -> None:
    df = _frame(500)
    w = [[1.0, 1.0], [1.0, -1.0], [0.3, 0.0]]
    s = Session(df, budget=PureDP(1e9) if isinstance(privacy, PureDP) else ZCDP(1e15),
                rng=np.random.default_rng(4))
    r = s.run({"type": "linear", "column": "c", "categories": ["a", "b"], "workload": w,
               "privacy": privacy})
    h = np.array([(df.c == "a").sum(), (df.c == "b").sum()])
    g = r.details["granularity"]  # the workload's lattice
    exact = np.round(np.array(w) / g) * g @ h
    assert r.value["answers"] == pytest.approx(exact.tolist(), abs=1e-2)
    # one row moves the answers by a column of W: sensitivity in lattice units
    col_l1 = max(abs(np.round(np.array(w) / g)).sum(axis=0))
    if isinstance(privacy, PureDP):
        assert r.details["integer_sensitivity"] == col_l1
    with pytest.raises(ValidationError, match="'workload'"):
        s.run({"type": "linear", "column": "c", "categories": ["a", "b"],
               "workload": [[1.0, float("nan")]], "privacy": privacy})


def test_frames_with_to_pandas_are_accepted() -> None:
    """Polars (and pyarrow) frames are read through their ``to_pandas()``."""

    class PolarsLike:
        def __init__(self, df: pd.DataFrame) -> None:
            self.df = df

        def to_pandas(self) -> pd.DataFrame:
            return self.df

    s = Session(PolarsLike(_frame(50)), budget=ZCDP(1e12), rng=np.random.default_rng(5))
    assert s.count(privacy=ZCDP(1e10)).value == pytest.approx(50, abs=0.01)
