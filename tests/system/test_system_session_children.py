"""Children through Session on every backend: opened under the session's budget (charged
once, refused: nothing), questioned with values the session computes from its data (a
plan for a sparse vector, time windows or the steward's counts for a counter, weights over
a column's categories for an answer cache), public refusals before the data is read,
every answer in the audit log, the state surviving a restart, owners and grants."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import GDP, PureDP
from dpsieve.errors import BudgetExceededError, LedgerError, UnsupportedError, ValidationError
from dpsieve.interactive import ChildExhaustedError
from dpsieve.ledger.base import BudgetNotFoundError
from dpsieve.ledger.children import ChildAccessError

N = 240


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame({"age": rng.integers(18, 90, N), "x": rng.uniform(-5, 10, N),
                         "city": rng.choice(["a", "b", "c", "d"], N),
                         "t": rng.integers(0, 100, N), "pid": np.arange(N) // 3})


class Counted:
    """The frame behind a lazy loader that counts its reads."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.df, self.reads = df, 0

    def __call__(self) -> pd.DataFrame:
        self.reads += 1
        return self.df


TYPES = {"age": "integer", "x": "float", "city": "string", "t": "integer", "pid": "integer"}


def _session(make_store: Any, budget: Any = None, principal: str = "",
             data: Any = None, **kw: Any) -> Session:
    df = _frame()
    return Session(data if data is not None else df, store=make_store(), budget=budget,
                   budget_id="b", principal=principal, column_types=TYPES,
                   neighbouring=None if budget is not None else kw.pop("nb", "add_remove"),
                   **kw)


def _answers(s: Session) -> list[Any]:
    return [e for e in s.store.audit("b") if e.event == "child_answer"]


def test_sparse_vector_answers_plans_from_the_data(make_store: Any) -> None:
    """eps = 1000 and 2 positives: the comparison's noise has scale ~0.006 x the
    sensitivity, so thresholds 0.5 (count) and 1 (sum, sensitivity 10) either side of the
    true answer bracket the value the session computed (failure odds below 1e-7)."""
    df = _frame()
    s = _session(make_store, PureDP(2000.0))
    out = s.children.open("cnt", "sparse_vector", {"eps": 1000.0, "positives": 2})
    assert out["declared"] == {"type": "pure", "eps": 1000.0, "neighbouring": "add_remove"}
    s.children.open("sum", "sparse_vector", {"eps": 1000.0, "positives": 2,
                                             "sensitivity": 10.0})
    assert Fraction(s.remaining()["eps"]) == 0
    n_old = int((df.age >= 60).sum())
    old = {"type": "count", "where": [{"column": "age", "op": ">=", "value": 60}]}
    assert not s.children.ask("cnt", old, threshold=n_old + 0.5)["above"]
    assert s.children.ask("cnt", old, threshold=n_old - 0.5)["above"]
    total = float(df.x.clip(0, 10).sum())
    plan = {"type": "sum", "column": "x", "lower": 0, "upper": 10}
    assert not s.children.ask("sum", plan, threshold=total + 1.0)["above"]
    assert s.children.ask("sum", plan, threshold=total - 1.0)["above"]
    assert len(_answers(s)) == 4  # every answer in the audit log
    assert Fraction(s.remaining()["eps"]) == 0  # questions are free


def test_questions_are_refused_from_public_values_before_the_data_is_read(
        make_store: Any) -> None:
    data = Counted(_frame())
    s = Session(data, store=make_store(), budget=PureDP(1.0), budget_id="b",
                column_types=TYPES)
    s.children.open("sv", "sparse_vector", {"eps": 0.5, "positives": 1})
    s.children.open("mono", "sparse_vector", {"eps": 0.1, "monotonic": True,
                                               "sensitivity": 10.0})
    with pytest.raises(ValidationError, match=r"sensitivity at most the child's 1\.0"):
        s.children.ask("sv", {"type": "sum", "column": "x", "lower": 0, "upper": 10},
                       threshold=1.0)
    with pytest.raises(ValidationError, match="one 'count' or 'sum'"):
        s.children.ask("sv", {"type": "mean", "column": "x", "lower": 0, "upper": 1},
                       threshold=1.0)
    with pytest.raises(ValidationError, match="monotonic"):
        s.children.ask("mono", {"type": "sum", "column": "x", "lower": -1, "upper": 1},
                       threshold=1.0)
    with pytest.raises(ValidationError, match="'column'"):
        s.children.ask("sv", {"type": "count", "where": [{"column": "nope", "op": "==",
                                                          "value": 1}]}, threshold=1.0)
    with pytest.raises(ValidationError, match="'op'"):
        s.children.step("sv", count=3)
    with pytest.raises(BudgetNotFoundError):
        s.children.ask("absent", {"type": "count"}, threshold=1.0)
    assert data.reads == 0
    assert _answers(s) == []
    assert s.children.ask("sv", {"type": "count"}, threshold=-1e9)["above"]
    with pytest.raises(ChildExhaustedError):
        s.children.ask("sv", {"type": "count"}, threshold=-1e9)
    assert len(_answers(s)) == 1
    versions = {r.child_id: r.version for r in s.children.visible()}
    assert versions == {"mono": 1, "sv": 2}  # refused questions changed nothing


def test_open_is_charged_once_and_a_refusal_creates_nothing(make_store: Any) -> None:
    s = _session(make_store, PureDP(1.0))
    first = s.children.open("sv", "sparse_vector", {"eps": 0.6}, key="k1")
    again = s.children.open("sv", "sparse_vector", {"eps": 0.6}, key="k1")
    assert again["replayed"]
    assert not first["replayed"]
    with pytest.raises(BudgetExceededError):
        s.children.open("sv2", "sparse_vector", {"eps": 0.6})
    with pytest.raises(LedgerError, match="exists"):
        s.children.open("sv", "sparse_vector", {"eps": 0.1})
    for bad in ({"eps": 0.1, "neighbouring": "replace_one"}, {"eps": -1.0},
                {"eps": 0.1, "bogus": 1}, {"noise": "cauchy", "eps": 0.1}):
        with pytest.raises(ValidationError):
            s.children.open("bad", "sparse_vector", bad)
    with pytest.raises(ValidationError, match="'kind'"):
        s.children.open("bad", "oracle", {})
    assert [r.child_id for r in s.children.visible()] == ["sv"]
    assert Fraction(s.remaining()["eps"]) == Fraction(1.0) - Fraction(0.6)
    assert [e.event for e in s.store.audit("b")].count("child_open") == 1


def test_counter_steps_count_disjoint_windows_and_the_stewards_counts(
        make_store: Any) -> None:
    df = _frame()
    s = _session(make_store, GDP(3.0))
    s.children.open("by_time", "counter", {"mu": 1.0, "time_column": "t",
                                           "where": [{"column": "city", "op": "==",
                                                      "value": "a"}]})
    s.children.open("manual", "counter", {"mu": 1.0})
    ends = [10, 35, 36, 80]
    for u in ends:
        out = s.children.step("by_time", until=u)
        assert out["until"] == u
    state = s.store.child_state("b", "by_time")  # the steward's view: the exact count
    assert state["total"] == int(((df.t < 80) & (df.city == "a")).sum())
    assert state["steps"] == 4
    with pytest.raises(ValidationError, match="above the previous step's 80"):
        s.children.step("by_time", until=80)
    with pytest.raises(ValidationError, match="time_column"):
        s.children.step("manual", until=5)
    for c in (3, 0, 4):
        s.children.step("manual", count=c)
    assert s.store.child_state("b", "manual")["total"] == 7
    with pytest.raises(ValidationError, match="'count'"):
        s.children.step("manual", count=-1)
    assert len(_answers(s)) == 7
    assert s.children.get("by_time").public["binding"]["until"] == 80.0


def test_counter_by_time_is_refused_on_a_data_set_with_a_privacy_unit(
        make_store: Any) -> None:
    s = _session(make_store, GDP(3.0), privacy_unit="pid")
    with pytest.raises(UnsupportedError, match="privacy unit"):
        s.children.open("c", "counter", {"mu": 1.0, "time_column": "t"})
    assert s.children.visible() == []
    assert s.store.history("b") == []
    s.children.open("c", "counter", {"mu": 1.0})  # the steward's counts: allowed


def test_cache_answers_weighted_counts_of_a_column(make_store: Any) -> None:
    """eps = 1000, 5 updates, a tolerance of 0.01 and a first guess of 10 rows: every
    question is an update (its gap is ~50 counts, the comparison's noise scale ~0.02)
    whose value is the exact weighted count plus Laplace noise of scale 0.01 (|noise| <
    0.2 but with odds e^-20)."""
    df = _frame()
    s = _session(make_store, PureDP(2000.0))
    cats = ["a", "b", "c", "d"]
    s.children.open("cache", "cache", {"eps": 1000.0, "column": "city", "categories": cats,
                                       "updates": 5, "tolerance": 0.01,
                                       "expected_rows": 10.0})
    counts = [int((df.city == c).sum()) for c in cats]
    for w in ([1, 0, 0, 0], [0.5, 1, 0, 0.25], [0, 0, 1, 1]):
        out = s.children.query("cache", w)
        truth = sum(Fraction(x) * n for x, n in zip(w, counts, strict=True))
        assert out["updated"]
        assert abs(out["value"] - float(truth)) < 0.2
    with pytest.raises(ValidationError, match="4 numbers"):
        s.children.query("cache", [1, 0])
    with pytest.raises(ValidationError, match=r"\[0, 1\]"):
        s.children.query("cache", [2, 0, 0, 0])


def test_state_survives_a_restart_and_grants_are_kept(make_store: Any, backend: str
                                                       ) -> None:
    if backend == "memory":
        pytest.skip("a restart needs a durable ledger")
    ana = _session(make_store, PureDP(1.0), principal="ana")
    ana.children.open("sv", "sparse_vector", {"eps": 0.5, "positives": 2})
    assert ana.children.ask("sv", {"type": "count"}, threshold=-1e9)["above"]
    secret = ana.store.child_state("b", "sv")["threshold_noise"]
    bob = _session(make_store, principal="bob")  # a new process attaching to the budget
    with pytest.raises(ChildAccessError):
        bob.children.ask("sv", {"type": "count"}, threshold=-1e9)
    assert bob.children.visible() == []
    with pytest.raises(ChildAccessError):
        bob.children.grant("sv", "bob")
    ana.children.grant("sv", "bob")
    out = bob.children.ask("sv", {"type": "count"}, threshold=-1e9, key="q")
    assert out["positives_left"] == 0
    assert out["question"] == 2
    assert bob.store.child_state("b", "sv")["threshold_noise"] == secret
    assert bob.children.ask("sv", {"type": "count"}, threshold=-1e9, key="q") == out
    owners = [(r.child_id, r.owner) for r in bob.children.visible()]
    assert owners == [("sv", "ana")]
    assert "threshold_noise" not in str(bob.children.get("sv"))


def test_cache_on_a_data_set_with_a_privacy_unit_keeps_one_row_a_unit(
        make_store: Any) -> None:
    """pid groups 3 rows: the cache's counts are of units (one kept row each), so the
    weighted count of all categories is the number of units, 80."""
    s = _session(make_store, PureDP(2000.0), privacy_unit="pid")
    s.children.open("cache", "cache", {"eps": 1000.0, "column": "city",
                                       "categories": ["a", "b", "c", "d"], "updates": 2,
                                       "tolerance": 0.01, "expected_rows": 10.0})
    out = s.children.query("cache", [1, 1, 1, 1])
    assert out["updated"]
    assert abs(out["value"] - N // 3) < 0.2


def test_a_steward_step_through_the_ledger_keeps_a_sessions_binding(make_store: Any
                                                                     ) -> None:
    from dpsieve.interactive.store import ask_child

    s = _session(make_store, GDP(3.0))
    s.children.open("c", "counter", {"mu": 1.0, "time_column": "t"})
    s.children.step("c", until=10)
    ask_child(s.store, "b", "c", {"op": "step"}, 4, key="steward-1")
    with pytest.raises(ValidationError, match="above the previous step's 10"):
        s.children.step("c", until=5)
    s.children.step("c", until=20)
    df = _frame()
    assert s.store.child_state("b", "c")["total"] == int((df.t < 20).sum()) + 4


@pytest.mark.parametrize(("kind", "spec", "name"), [
    ("sparse_vector", {"noise": "gaussian", "eps": 1.0, "delta": 1e-6,
                       "max_questions": 10**6, "positives": 10**5}, "positives"),
    ("sparse_vector", {"noise": "gaussian", "eps": 1.0, "delta": 1e-6,
                       "max_questions": 10**9}, "max_questions"),
    ("sparse_vector", {"eps": 1.0, "positives": 10**15}, "positives"),
    ("cache", {"eps": 1.0, "column": "city", "categories": ["a"], "updates": 10**9,
               "tolerance": 1.0, "expected_rows": 1.0}, "updates"),
])
def test_specs_whose_opening_is_too_much_work_are_refused_first(
        kind: str, spec: dict[str, Any], name: str) -> None:
    """A request may not make the service compute for minutes (a Gaussian sparse vector
    with 10^5 positives took over 5 minutes to calibrate): refused, naming the bound."""
    from dpsieve.ledger import MemoryStore

    s = Session(_frame(), store=MemoryStore(), budget=GDP(10.0), column_types=TYPES)
    with pytest.raises(ValidationError, match=f"'{name}'.*an int <="):
        s.children.open("c", kind, spec)
    assert s.store.history("session") == []
