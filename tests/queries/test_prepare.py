"""Plans checked against a schema before any spend; charges; answers; the PLD of a charge."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve.accounting.events import (
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PureDP,
)
from dpsieve.errors import UnsupportedError, ValidationError
from dpsieve.queries import Column, ColumnType, Schema
from dpsieve.queries.engines import DuckDBEngine, PandasEngine, PolarsEngine
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare

AR = Neighbouring.ADD_REMOVE
SCHEMA = Schema((Column("pid", ColumnType.INTEGER), Column("city", ColumnType.STRING),
                 Column("x", ColumnType.FLOAT, bounds=(0.0, 10.0)),
                 Column("n", ColumnType.INTEGER), Column("d", ColumnType.OTHER),
                 Column("ok", ColumnType.BOOLEAN, categories=(True, False))), "pid")
PURE = {"type": "pure", "eps": 1.0}


def _q(**kw: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": PURE, "contribution": {"max_groups": 2, "max_rows": 3},
            **kw}


@pytest.mark.parametrize(("spec", "param"), [
    (_q(aggregations=[{"type": "sum", "column": "nope", "lower": 0, "upper": 1}]), "column"),
    (_q(aggregations=[{"type": "sum", "column": "city", "lower": 0, "upper": 1}]), "column"),
    (_q(aggregations=[{"type": "mean", "column": "d", "lower": 0, "upper": 1}]), "column"),
    (_q(aggregations=[{"type": "sum", "column": "n"}]), "lower"),
    (_q(aggregations=[{"type": "sum", "column": "x", "lower": math.nan, "upper": 1}]), "lower"),
    (_q(aggregations=[{"type": "sum", "column": "x", "lower": 0, "upper": math.inf}]), "upper"),
    (_q(aggregations=[{"type": "sum", "column": "x", "lower": 2, "upper": 2}]), "upper"),
    (_q(aggregations=[{"type": "histogram", "column": "n", "categories": [20, 20.0]}]),
     "categories"),
    (_q(aggregations=[{"type": "histogram", "column": "n", "categories": ["20"]}]),
     "categories"),
    (_q(aggregations=[{"type": "histogram", "column": "x", "categories": [0.0, -0.0]}]),
     "categories"),
    (_q(aggregations=[{"type": "histogram", "column": "city", "categories": [1]}]),
     "categories"),
    (_q(aggregations=[{"type": "count"}], group_by=["city"], keys=[["a"], ["a"]]), "keys"),
    (_q(aggregations=[{"type": "count"}], group_by=["n"], keys=[[1], [1.0]]), "keys"),
    (_q(aggregations=[{"type": "count"}], group_by=["city"]), "keys"),
    (_q(aggregations=[{"type": "count"}], group_by=["x"], select={"delta": 1e-6}), "group_by"),
    (_q(aggregations=[{"type": "count"}], where=[{"column": "n", "op": "<", "value": "3"}]),
     "value"),
    (_q(aggregations=[{"type": "count"}], where=[{"column": "n", "op": "~", "value": 3}]),
     "op"),
    (_q(aggregations=[{"type": "count"}], contribution={"max_groups": 0}), "max_groups"),
    (_q(aggregations=[{"type": "count"}], contribution={"max_rows": 0}), "max_rows"),
    (_q(aggregations=[{"type": "count"}], contribution={"max_groups": 1.5}), "max_groups"),
    ({"type": "query", "privacy": PURE, "aggregations": [{"type": "count"}]},
     "contribution"),  # a privacy unit and no bounds: refused, no silent max_groups=1
    ({"type": "query", "privacy": PURE, "aggregations": [{"type": "count"}],
      "contribution": {"max_groups": 1}}, "max_rows"),
    ({"type": "query", "privacy": PURE, "aggregations": [{"type": "count"}],
      "contribution": {"max_groups": "some"}}, "max_groups"),
    (_q(aggregations=[{"type": "sum", "column": "x", "lower": "low", "upper": 1}]), "lower"),
    (_q(aggregations=[{"type": "count"}], auto_share=0.1), "auto_share"),
    (_q(aggregations=[{"type": "sum", "column": "x", "lower": 0, "upper": "auto"}],
        auto_share=1.0), "auto_share"),
    (_q(aggregations=[{"type": "count", "colour": 1}]), "colour"),
    (_q(aggregations=[{"type": "count"}], privacy={"type": "pure", "eps": math.nan}), "eps"),
    (_q(aggregations=[]), "aggregations"),
])
def test_bad_plans_are_refused_naming_the_parameter(spec: dict[str, Any], param: str) -> None:
    with pytest.raises(ValidationError) as ei:
        prepare(from_spec(spec, "add_remove"), SCHEMA, AR)
    assert ei.value.parameter == param, str(ei.value)


def test_privacy_unit_must_be_a_hashable_column_of_the_schema() -> None:
    with pytest.raises(ValidationError, match="'privacy_unit'"):
        Schema(SCHEMA.columns, "missing")
    with pytest.raises(ValidationError, match="'privacy_unit'"):
        Schema(SCHEMA.columns, "x")


def test_gdp_noise_and_foreign_relations_are_refused() -> None:
    with pytest.raises(UnsupportedError):
        prepare(from_spec({"type": "count", "privacy": {"type": "gdp", "mu": 1},
                           "contribution": {"max_rows": 1}}, "add_remove"), SCHEMA, AR)
    with pytest.raises(ValidationError, match="'privacy'"):
        prepare(from_spec({"type": "count", "privacy": {"type": "pure", "eps": 1},
                           "contribution": {"max_rows": 1}}, "replace_one"), SCHEMA, AR)


@pytest.mark.parametrize(("privacy", "select", "want"), [
    (PureDP(1.0), None, PureDP(1.0)), (ZCDP(0.5), None, ZCDP(0.5)),
    (PureDP(1.0), 1e-6, ApproxDP(1.0, 1e-6)), (ZCDP(0.5), 1e-6, ApproxZCDP(0.5, 1e-6)),
])
def test_one_charge_for_all_aggregations(privacy: Any, select: float | None, want: Any
                                         ) -> None:
    spec = _q(aggregations=[{"type": "count"}, {"type": "mean", "column": "x"},
                            {"type": "variance", "column": "x"},
                            {"type": "quantile", "column": "x", "quantiles": [0.1, 0.9]},
                            {"type": "histogram", "column": "ok"}],
              privacy=privacy.to_dict(), group_by=["city"])
    if select is None:
        spec["keys"] = [["a"], ["b"]]
    else:
        spec["select"] = {"delta": select}
    p = prepare(from_spec(spec), SCHEMA, AR)
    assert p.charge.description == want
    # each part's mechanism states at most its share; the shares sum to at most the whole
    if isinstance(privacy, PureDP):
        parts = [c.charge.eps for c in p.charge.parts]
        assert all(c.mechanism.pure_eps() is None or c.mechanism.pure_eps() <= c.charge.eps
                   for c in p.charge.parts)
        sel = p.charge.selection.charge.eps if p.charge.selection else 0.0
        assert sum(parts) + sel <= privacy.eps * (1 + 1e-12)
    else:
        parts = [c.mechanism.zcdp_rho() for c in p.charge.parts]
        assert sum(parts) <= privacy.rho * (1 + 1e-12)


def test_pld_of_a_pure_charge_is_below_its_description() -> None:
    from dpsieve.accounting.pld import PLD

    spec = _q(aggregations=[{"type": "count"}, {"type": "sum", "column": "x"}],
              group_by=["city"], keys=[["a"], ["b"], ["c"]])
    p = prepare(from_spec(spec), SCHEMA, AR)
    pld = p.charge.pld()
    assert pld is not None
    assert pld.leq(PLD.pure_dp(1.0))
    assert pld.epsilon(1e-9) <= 1.0 + 1e-9


def _frame(n: int = 3000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"pid": rng.integers(0, 400, n),
                         "city": rng.choice(["a", "b", "c"], n),
                         "x": rng.uniform(0, 10, n), "n": rng.integers(0, 5, n),
                         "d": pd.Timestamp(0), "ok": rng.random(n) < 0.3})


def test_answers_are_close_with_tiny_noise_and_carry_intervals() -> None:
    df = _frame()
    eng = PandasEngine(df)
    schema = Schema(eng.columns(), "pid").with_columns([Column("x", ColumnType.FLOAT,
                                                               bounds=(0.0, 10.0))])
    spec = {"type": "query", "privacy": {"type": "pure", "eps": 1e7},
            "aggregations": [{"type": "count", "per": "unit"}, {"type": "sum", "column": "x",
                                                                "per": "unit", "upper": 1e4}],
            "group_by": ["city"], "keys": [["a"], ["b"], ["zz"]],
            "contribution": {"max_groups": 3}}
    p = prepare(from_spec(spec), schema, AR)
    ans = p.run(eng, rng=np.random.default_rng(1))
    units = df.groupby("city")["pid"].nunique()
    totals = df.groupby("city")["x"].sum()
    for g, key in zip(ans.groups, ["a", "b", "zz"], strict=True):
        assert g.key == (key,)
        c, s = g.estimates
        assert c.value == pytest.approx(units.get(key, 0), abs=0.5)
        assert s.value == pytest.approx(totals.get(key, 0.0), abs=1.0)  # lattice 2^-7
        assert c.interval[0] <= c.value <= c.interval[1]
    assert ans.noise["count"]["a0.count"].scale == pytest.approx(3 / 5e6)


def test_the_same_plan_gives_the_same_answer_on_every_engine(tmp_path: Any) -> None:
    import duckdb
    import polars as pl

    df = _frame(800, 3).drop(columns=["d"])
    path = tmp_path / "t.parquet"
    con = duckdb.connect()
    con.register("df", df)
    con.execute(f"COPY df TO '{path}' (FORMAT parquet)")
    pf = pl.DataFrame({c: df[c].to_numpy() for c in df.columns})
    engines = [PandasEngine(df), PolarsEngine(pf), DuckDBEngine(path)]
    schema = Schema(engines[0].columns(), "pid")
    spec = _q(aggregations=[{"type": "count"}, {"type": "sum", "column": "x", "lower": 0,
                                                "upper": 10},
                            {"type": "quantile", "column": "x", "lower": 0, "upper": 10},
                            {"type": "histogram", "column": "n", "categories": [0, 1, 2]}],
              group_by=["city"], select={"delta": 1e-3, "by": "units"},
              privacy={"type": "pure", "eps": 50})
    p = prepare(from_spec(spec), schema, AR)
    answers = [p.run(e, rng=np.random.default_rng(7), seed=1234).to_dict() for e in engines]
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["selection"]["selected"] == 3
    # thresholding the released count draws its noise in each engine's group order (any
    # order is the same mechanism); the groups and the other aggregates' draws agree
    spec["select"] = {"delta": 1e-3, "by": "count"}
    p = prepare(from_spec(spec), schema, AR)
    got = [p.run(e, rng=np.random.default_rng(7), seed=1234).to_dict() for e in engines]
    assert [[g["key"] for g in a["groups"]] for a in got] == [[["a"], ["b"], ["c"]]] * 3
    assert got[0]["selection"]["released_count"] is True
