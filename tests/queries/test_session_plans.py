"""Session speaks the query layer (issue 12 items 1 and 6): plans as JSON or typed objects,
one charge per plan, every check against the public schema before any spend, execution
inside DuckDB for files, and the brute-force sensitivity check through the Session path."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ZCDP, PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries import Column, ColumnType, Schema
from dpsieve.queries.plan import Contribution, Count, Mean, Query, Sum

PURE = {"type": "pure", "eps": 1.0}


def _frame(seed: int = 0, n: int = 300) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "pid": rng.integers(0, 60, n), "ward": rng.choice(["A", "B", "C"], n),
        "cost": rng.gamma(2.0, 50.0, n), "age": rng.integers(18, 90, n),
        "ok": rng.random(n) < 0.5})


def _plan(**kw: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": PURE,
            "aggregations": [{"type": "count", "per": "unit"},
                             {"type": "sum", "column": "cost", "lower": 0, "upper": 500,
                              "per": "unit"},
                             {"type": "mean", "column": "age", "lower": 0, "upper": 100}],
            "group_by": ["ward"], "keys": [["A"], ["B"], ["C"], ["Z"]],
            "contribution": {"max_groups": 2, "max_rows": 5}, **kw}


def test_schema_is_inferred_from_metadata_with_the_privacy_unit() -> None:
    s = Session(_frame(), budget=PureDP(1.0), privacy_unit="pid")
    d = s.schema().to_dict()
    assert d["privacy_unit"] == "pid"
    assert {c["name"]: c["type"] for c in d["columns"]} == {
        "pid": "integer", "ward": "string", "cost": "float", "age": "integer",
        "ok": "boolean"}


def test_declared_schema_overrides_types_bounds_and_domains() -> None:
    decl = [Column("age", ColumnType.INTEGER, bounds=(0, 100)),
            Column("ward", ColumnType.STRING, categories=("A", "B", "C"))]
    s = Session(_frame(), budget=PureDP(2.0), schema=decl, privacy_unit="pid")
    assert s.schema().column("age").bounds == (0.0, 100.0)
    r = s.query({"type": "query", "privacy": PURE, "aggregations": [
        {"type": "mean", "column": "age"}, {"type": "histogram", "column": "ward"}],
        "contribution": {"max_rows": 3}})  # bounds and categories from the schema
    assert r.answer.labels == ("mean(age)", "histogram(ward)")
    assert len(r.answer.groups[0].estimates[1].value) == 3  # type: ignore[arg-type]
    with pytest.raises(ValidationError) as ei:  # declared type differs from the table's
        Session(_frame(), budget=PureDP(1.0), schema=[Column("age", ColumnType.STRING)]
                ).schema()
    assert ei.value.parameter == "schema"
    with pytest.raises(ValidationError) as ei:
        Session(_frame(), budget=PureDP(1.0), schema=Schema.of([("age", "integer")], "pid"),
                privacy_unit="ward")
    assert ei.value.parameter == "privacy_unit"


def test_a_plan_with_several_aggregations_is_charged_once_and_answers_every_key() -> None:
    s = Session(_frame(), budget=PureDP(3.0), privacy_unit="pid")
    r = s.run(_plan())
    assert len(s.store.history(s.budget_id)) == 1
    assert s.remaining()["exact"] == "2/1"
    assert r.query["type"] == "query"
    assert r.cost["query"]["eps"] == 1.0
    a = r.answer
    assert [g.key for g in a.groups] == [("A",), ("B",), ("C",), ("Z",)]  # Z: noise only
    assert a.labels == ("count", "sum(cost)", "mean(age)")
    for g in a.groups:
        for e in g.estimates:
            lo, hi = e.interval  # type: ignore[misc]
            assert lo <= e.value <= hi  # type: ignore[operator]
    # noise in the answer's units; lattice internals apart
    assert set(a.noise["sum(cost)"]["a1.sum"].to_dict()) == {"mechanism", "scale", "std", "ci95"}
    assert {"granularity", "lattice_scale"} <= set(r.details["a1.sum"])
    # the typed plan gives the same kind of answer
    typed = Query((Count(per="unit"), Sum("cost", 0, 500, per="unit"), Mean("age", 0, 100)),
                  PureDP(1.0), group_by=("ward",), keys=(("A",), ("B",)),
                  contribution=Contribution(max_groups=2, max_rows=5))
    r2 = s.query(typed)
    assert [g.key for g in r2.answer.groups] == [("A",), ("B",)]
    assert s.remaining()["exact"] == "1/1"


def test_replay_with_the_same_key_is_not_charged_again() -> None:
    s = Session(_frame(), budget=PureDP(3.0), privacy_unit="pid")
    a = s.run(_plan(), key="k1")
    b = s.run(_plan(), key="k1")
    assert b.replayed
    assert b.value == a.value
    assert b.answer == a.answer
    assert s.remaining()["exact"] == "2/1"


@pytest.mark.parametrize("fmt", ["pandas", "polars", "csv", "parquet", "duckdb"])
def test_every_source_gives_the_same_answer_for_the_same_randomness(fmt: str,
                                                                     tmp_path: Any) -> None:
    df = _frame(3)
    data: Any = df
    table = None
    if fmt == "polars":
        import polars as pl

        data = pl.from_pandas(df)
    elif fmt == "csv":
        data = tmp_path / "d.csv"
        df.to_csv(data, index=False)
    elif fmt == "parquet":
        data = tmp_path / "d.parquet"
        df.to_parquet(data)
    elif fmt == "duckdb":
        import duckdb

        data, table = str(tmp_path / "d.duckdb"), "visits"
        con = duckdb.connect(data)
        con.execute("CREATE TABLE visits AS SELECT * FROM df")
        con.close()
    plan = _plan(where=[{"column": "ok", "op": "==", "value": True}])
    ref = Session(df, budget=PureDP(1.0), privacy_unit="pid",
                  rng=np.random.default_rng(7)).run(plan)
    types = ({"pid": "integer", "ward": "string", "cost": "float", "age": "integer",
              "ok": "boolean"} if fmt == "csv" else None)  # a CSV's: declared
    got = Session(data, budget=PureDP(1.0), privacy_unit="pid", table=table,
                  rng=np.random.default_rng(7), column_types=types).run(plan)
    assert got.value == ref.value


def test_files_are_never_loaded_into_python(tmp_path: Any, monkeypatch: Any) -> None:
    import dpsieve.session.data as session_mod

    path = tmp_path / "d.parquet"
    _frame().to_parquet(path)

    def boom(_: Any) -> Any:
        raise AssertionError("the table was loaded into Python")
    monkeypatch.setattr(session_mod, "load_frame", boom)
    s = Session(path, budget=PureDP(1.0), privacy_unit="pid")
    assert s.run(_plan()).answer.groups


BAD: list[tuple[dict[str, Any], str]] = [
    (_plan(aggregations=[{"type": "sum", "column": "nope", "lower": 0, "upper": 1}]), "column"),
    (_plan(aggregations=[{"type": "sum", "column": "ward", "lower": 0, "upper": 1}]), "column"),
    (_plan(aggregations=[{"type": "histogram", "column": "age", "categories": [20, 20.0]}]),
     "categories"),
    (_plan(aggregations=[{"type": "histogram", "column": "ward", "categories": ["A", "A"]}]),
     "categories"),
    (_plan(keys=[["A"], ["A"]]), "keys"),
    (_plan(group_by=["nope"]), "group_by"),
    (_plan(contribution={"max_groups": 0, "max_rows": 5}), "max_groups"),
    (_plan(contribution={"max_groups": 1, "max_rows": 0}), "max_rows"),
    (_plan(contribution={"max_groups": -1}), "max_groups"),
    (_plan(aggregations=[{"type": "count"}], contribution={"max_groups": 2}), "max_rows"),
    (_plan(aggregations=[{"type": "sum", "column": "cost", "lower": math.nan, "upper": 1}]),
     "lower"),
    (_plan(aggregations=[{"type": "sum", "column": "cost", "lower": 0, "upper": math.nan}]),
     "upper"),
    (_plan(aggregations=[{"type": "mean", "column": "cost", "lower": 0, "upper": math.inf}]),
     "upper"),
    (_plan(where=[{"column": "age", "op": ">=", "value": "18"}]), "value"),
    (_plan(privacy={"type": "pure", "eps": -1}), "eps"),
    (_plan(colour=1), "colour"),
]


@pytest.mark.parametrize(("spec", "param"), BAD)
def test_bad_plans_are_refused_before_any_spend_naming_the_parameter(
        spec: dict[str, Any], param: str) -> None:
    s = Session(_frame(), budget=PureDP(1.0), privacy_unit="pid")
    with pytest.raises(ValidationError) as ei:
        s.run(spec)
    assert ei.value.parameter == param, str(ei.value)
    assert s.store.history(s.budget_id) == []
    assert s.remaining()["exact"] == "1/1"


def test_a_missing_privacy_unit_column_is_refused_before_any_spend(tmp_path: Any) -> None:
    path = tmp_path / "d.parquet"
    _frame().to_parquet(path)
    for data in (_frame(), path):
        s = Session(data, budget=PureDP(1.0), privacy_unit="patient")
        with pytest.raises(ValidationError) as ei:
            s.run(_plan())
        assert ei.value.parameter == "privacy_unit"
        assert s.store.history(s.budget_id) == []


def test_old_shapes_are_refused_on_a_data_set_with_a_privacy_unit() -> None:
    """The one-row-per-person shapes would under-charge a person with many rows."""
    s = Session(_frame(), budget=PureDP(1.0), privacy_unit="pid")
    for call in (lambda: s.count(privacy=PURE),
                 lambda: s.run({"type": "robust_mean", "column": "cost", "bound": 10,
                                "privacy": {"type": "approx", "eps": 1, "delta": 1e-6}})):
        with pytest.raises(ValidationError):
            call()
    assert s.store.history(s.budget_id) == []


def test_zcdp_plans_are_charged_their_rho() -> None:
    s = Session(_frame(), budget=ZCDP(1.0), privacy_unit="pid")
    s.run(_plan(privacy={"type": "zcdp", "rho": 0.25}))
    assert s.remaining()["exact"] == "3/4"


# -- brute-force sensitivity through the Session path ----------------------------------------

def _capture(monkeypatch: Any) -> dict[str, Any]:
    """Record the exact integer vector of each release (and release it without noise)."""
    from dpsieve.queries import calibrate

    seen: dict[str, Any] = {}

    def draw(self: Any, exact: Any, rng: Any) -> Any:
        seen[self.release.name] = (np.asarray(exact, dtype=object), self.sens)
        return np.asarray(exact, dtype=np.float64) * self.release.unit
    monkeypatch.setattr(calibrate.Calibrated, "draw", draw)
    return seen


def _units(df: pd.DataFrame) -> list[int]:
    return sorted(int(u) for u in df["pid"].unique())


SESSION_AGGS = [
    {"type": "count"}, {"type": "count", "per": "unit"},
    {"type": "sum", "column": "cost", "lower": -5, "upper": 80},
    {"type": "sum", "column": "cost", "lower": 0, "upper": 300, "per": "unit"},
    {"type": "mean", "column": "cost", "lower": 10, "upper": 80},
    {"type": "mean", "column": "age", "lower": 0, "upper": 100, "per": "unit"},
]


@pytest.mark.parametrize("agg", SESSION_AGGS, ids=lambda a: f"{a['type']}-{a.get('per', 'row')}")
@pytest.mark.parametrize("grouped", [False, True])
def test_session_sensitivity_by_brute_force_over_privacy_units(
        agg: dict[str, Any], grouped: bool, monkeypatch: Any) -> None:
    """Remove each unit, and add adversarial units (many rows in every group, huge,
    infinite and missing values): each release moves by at most its charged L1 and L2^2."""
    seen = _capture(monkeypatch)
    rng = np.random.default_rng(11)
    base = _frame(5, n=40).assign(pid=lambda d: d["pid"] % 8)
    base["cost"] = base["cost"].astype(float)
    plan = {"type": "query", "privacy": PURE, "aggregations": [agg],
            "contribution": {"max_groups": 2, "max_rows": 3}}
    if grouped:
        plan.update(group_by=["ward"], keys=[["A"], ["B"], ["C"]])
    adversaries = [pd.DataFrame({"pid": 99, "ward": w, "cost": x, "age": 200, "ok": True}
                                for w in ("A", "B", "C") for _ in range(7))
                   for x in (1e308, -1e308, math.inf, -math.inf, math.nan, 79.0)]
    neighbours = [base[base["pid"] != u] for u in _units(base)]
    neighbours += [pd.concat([base, a], ignore_index=True) for a in adversaries]

    def exact(df: pd.DataFrame) -> dict[str, Any]:
        seen.clear()
        seed_rng = np.random.default_rng(123)  # same sampling key on both sides
        Session(df, budget=PureDP(10.0), privacy_unit="pid", rng=seed_rng).run(plan)
        return dict(seen)

    ref = exact(base)
    assert ref
    checked = 0
    for nb in neighbours:
        got = exact(nb)
        for name, (x, sens) in ref.items():
            y = got[name][0]
            d = [int(v) for v in (y - x).reshape(-1)]
            assert sum(abs(v) for v in d) <= sens.l1, (name, d, sens)
            assert sum(v * v for v in d) <= sens.l2sq, (name, d, sens)
            checked += 1
    assert checked >= len(neighbours)
    del rng


def test_a_csv_cell_that_does_not_parse_is_missing_not_an_error_after_the_spend(
        tmp_path: Any) -> None:
    """A CSV's declared types: a later cell of another type (once made the query fail
    after the spend, with an error quoting the record) is missing."""
    path = tmp_path / "d.csv"
    rows = [f"{i % 50},{i % 7}" for i in range(60_000)] + ["SECRET-VALUE,3"]
    path.write_text("pid,x\n" + "\n".join(rows) + "\n")
    types = {"pid": "integer", "x": "integer"}  # the owner's declarations
    s = Session(path, budget=PureDP(10.0), privacy_unit="pid", rng=np.random.default_rng(1),
                column_types=types)
    assert s.schema().column("x").type == ColumnType.INTEGER
    from dpsieve.queries.engine import BoundingSpec, RowCount, ValueSum
    from dpsieve.queries.engines import DuckDBEngine

    spec = BoundingSpec((RowCount("n"), ValueSum("s", "pid", 1.0, 0, 100, 0, 100)))
    aggs = DuckDBEngine(path, types=types).aggregate(spec)
    seen = {k: int(v[0]) for k, v in aggs.values.items()}
    assert seen == {"n": 60_001, "s": sum(i % 50 for i in range(60_000))}  # the cell: missing
    r = s.run(_plan(aggregations=[{"type": "sum", "column": "x", "lower": 0, "upper": 10}],
                    group_by=[], keys=None, contribution={"max_rows": 5}))
    assert "SECRET" not in str(r.to_dict())


# -- DP key selection on (eps, delta) budgets (docs/proofs/mixed.md §6) ----------------------

def test_key_selection_is_admitted_by_an_eps_delta_budget_and_charged_its_eps_delta() -> None:
    from dpsieve.accounting.events import ApproxDP

    s = Session(_frame(), budget=ApproxDP(4.0, 1e-5), privacy_unit="pid")
    plan = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
            "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["ward"],
            "select": {"delta": 1e-7}, "contribution": {"max_groups": 2}}
    r = s.run(plan)
    assert r.answer is not None
    (rec,) = s.store.history(s.budget_id)
    assert rec.cost["query"] == ApproxDP(0.5, 1e-7).to_dict()  # exactly the selection's
    d0, d1 = Fraction(rec.cost["delta_part_before"]), Fraction(rec.cost["delta_part_after"])
    assert 1 - (1 - d1) * (1 - Fraction(1e-7)) <= d0  # R_{0,d1} (+) R_{0,1e-7} <= R_{0,d0}
    assert s.remaining()["pure_eps"] == 3.5


def test_key_selection_on_a_pure_budget_is_refused_naming_the_delta() -> None:
    s = Session(_frame(), budget=PureDP(4.0), privacy_unit="pid")
    plan = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
            "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["ward"],
            "select": {"delta": 1e-7}, "contribution": {"max_groups": 2}}
    before = s.remaining()
    with pytest.raises(Exception, match="delta") as e:
        s.run(plan)
    assert "charged as approximate (eps, delta)" in str(e.value)
    assert "this budget has no delta to pay it" in str(e.value)
    assert s.remaining() == before


def test_key_selection_after_a_pure_query_on_an_eps_delta_budget() -> None:
    """Issue 12 gap A. An (eps, delta) budget whose first query was pure keeps a delta part
    (a tenth of delta, docs/proofs/mixed.md §6), so a later DP key selection is admitted
    (it was refused forever: the split was chosen without one); a selection whose delta
    exceeds the part left is refused naming both, with nothing spent; an approximate-zCDP
    charge is pointed to pure privacy."""
    from dpsieve.accounting.events import ApproxDP
    from dpsieve.errors import BudgetExceededError, IncompatiblePrivacyError

    s = Session(_frame(), budget=ApproxDP(4.0, 1e-5), privacy_unit="pid")
    s.run({"type": "query", "privacy": {"type": "pure", "eps": 0.5},
           "aggregations": [{"type": "count", "per": "unit"}],
           "contribution": {"max_groups": 1}})
    plan = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
            "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["ward"],
            "select": {"delta": 1e-7}, "contribution": {"max_groups": 2}}
    s.run(plan)
    left = s.remaining()
    assert left["pure_eps"] == 3.0
    assert 8.9e-7 < left["delta_part"] < 1e-6  # 1e-6 kept, 1e-7 of it paid
    before = len(s.store.history(s.budget_id))
    with pytest.raises(BudgetExceededError) as e:
        s.run({**plan, "select": {"delta": 2e-6}})
    assert "delta 2e-06 is more than the budget's delta part left (9e-07)" in str(e.value)
    assert "Nothing was spent" in str(e.value)
    assert s.remaining() == left
    assert len(s.store.history(s.budget_id)) == before
    fresh = Session(_frame(), budget=ApproxDP(4.0, 1e-5), privacy_unit="pid")
    with pytest.raises(IncompatiblePrivacyError) as e2:
        fresh.run({**plan, "privacy": {"type": "zcdp", "rho": 0.05}})
    assert "ask for pure (eps) privacy" in str(e2.value)
    assert fresh.store.history(fresh.budget_id) == []
