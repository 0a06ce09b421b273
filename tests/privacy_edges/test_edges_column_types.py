"""A frame's column types are its engine's, one system (``queries.schema.ColumnType``).

The session once typed columns twice: plans by the engine's metadata, the robust
estimators (and ``data_column_kinds``) by a second table over a pandas copy of the frame.
For a polars frame that copy's dtypes depend on the values: a boolean column holding one
null becomes ``object`` (text), an integer one ``float64``. So ``robust_mean`` of a polars
boolean column was answered on D and refused ("the public schema says 'b' is string") on
D with one row replaced by a null -- an outcome that depended on one person's row. Now
every kind comes from the engine that runs the data set's plans:

* a polars frame's kinds are its own dtypes', null or not, and a robust query's outcome
  class is the same on both neighbours;
* a pandas categorical column has its categories' type everywhere (the schema, plans, the
  robust estimators), and the pandas engine reads it exactly as the plain column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import polars as pl
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ApproxDP, Neighbouring
from dpsieve.errors import DPError
from dpsieve.queries.engine import (
    BoundingSpec,
    BucketCount,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
)
from dpsieve.queries.engines import PandasEngine, PolarsEngine
from dpsieve.session import data_column_kinds

RO = Neighbouring.REPLACE_ONE
ROBUST = {"type": "robust_mean", "bound": 1.0,
          "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6,
                      "neighbouring": "replace_one"}}


def _polars_pair(column: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Replace-one neighbours: row 0's value replaced by a null."""
    n = 60
    d = pl.DataFrame({"b": [i % 3 == 0 for i in range(n)], "i": list(range(n)),
                      "x": [float(i) for i in range(n)]})
    return d, d.with_columns(pl.when(pl.int_range(pl.len()) == 0).then(None)
                             .otherwise(pl.col(column)).alias(column))


def _outcome(frame: Any, spec: dict[str, Any]) -> tuple[str, str]:
    s = Session(frame, budget=ApproxDP(10.0, 1e-3, neighbouring=RO),
                row_count=lambda: len(frame))
    try:
        s.run(spec)
    except DPError as e:
        return type(e).__name__, str(e)
    return "ok", ""


@pytest.mark.parametrize("column", ["b", "i", "x"])
def test_a_polars_frames_kinds_do_not_depend_on_a_null(column: str) -> None:
    d, d1 = _polars_pair(column)
    assert data_column_kinds(d) == data_column_kinds(d1) == {
        "b": "boolean", "i": "integer", "x": "float"}
    a, b = _outcome(d, {**ROBUST, "column": column}), _outcome(d1, {**ROBUST, "column": column})
    assert a == b, (a, b)
    assert a[0] == "ok", a  # a numeric column: answered on both


def test_kinds_are_the_engines_for_every_frame_dtype() -> None:
    frame = pd.DataFrame({
        "i": np.arange(3), "u": np.array([1, 2, 2**64 - 1], dtype="uint64"),
        "I": pd.array([1, None, 3], dtype="Int64"), "f": [0.5, np.nan, 2.0],
        "b": pd.array([True, None, False], dtype="boolean"), "o": [1, "a", None],
        "s": pd.array(["a", None, "b"], dtype="string"),
        "ci": pd.Categorical([3, 1, None]), "cs": pd.Categorical(["a", None, "b"]),
        "cb": pd.Categorical([True, False, True]), "t": pd.to_datetime(["2020-01-01"] * 3)})
    want = {"i": "integer", "u": "integer", "I": "integer", "f": "float", "b": "boolean",
            "o": "string", "s": "string", "ci": "integer", "cs": "string", "cb": "boolean",
            "t": "other"}
    assert data_column_kinds(frame) == want
    assert {c.name: c.type.value for c in PandasEngine(frame).columns()} == want
    assert Session(frame, budget=ApproxDP(1.0, 1e-6)).schema().to_dict()["columns"] == [
        {"name": n, "type": t} for n, t in want.items()]
    p = pl.from_pandas(frame.drop(columns=["o", "t", "ci", "cb"]))
    assert data_column_kinds(p) == {c.name: c.type.value for c in PolarsEngine(p).columns()}
    assert data_column_kinds(p) == {k: want[k] for k in p.columns}


def _specs() -> list[BoundingSpec]:
    out = []
    for seed, (gb, unit) in enumerate([((), "u"), (("g",), "u"), (("k", "g"), None),
                                       (("g",), "c")]):
        out.append(BoundingSpec(
            (RowCount("n", Level.UNIT if unit else Level.ROW),
             BucketCount("h", "k", categories=(0, 1, 3)),
             BucketCount("hs", "g", categories=("a", "c", "zz")),
             ValueSum("s", "x", 0.25, -3.0, 3.0, -12, 12, Level.ROW)),
            gb, None if gb else ((),),
            (Predicate("k", Op.NE, 2), Predicate("g", Op.IN, ("a", "b", "c"))),
            unit, 2 if unit else 1, 3 if unit else None, seed))
    return out


def test_the_pandas_engine_reads_a_categorical_as_its_plain_column() -> None:
    rng = np.random.default_rng(4)
    n = 90
    plain = pd.DataFrame({"u": rng.integers(0, 20, n), "g": rng.choice(["a", "b", "c"], n),
                          "x": rng.normal(size=n),
                          "k": pd.array(rng.integers(0, 4, n), dtype="Int64"),
                          "c": rng.choice(["p", "q", "r"], n).astype(object)})
    plain.loc[[3, 7], "g"] = None
    plain.loc[[5], "k"] = None
    plain.loc[[9], "c"] = None
    cat = plain.astype({"u": "category", "g": "category", "k": "category",
                        "c": "category"})
    assert [c.type for c in PandasEngine(cat).columns()] == [
        c.type for c in PandasEngine(plain).columns()]
    for spec in _specs():
        assert PandasEngine(cat).aggregate(spec).same_as(
            PandasEngine(plain).aggregate(spec)), spec
    # no category at all: every row missing
    empty = pd.DataFrame({"u": [1, 2, 2], "k": pd.Categorical(
        [None] * 3, categories=pd.Index([], dtype="int64"))})
    nulls = pd.DataFrame({"u": [1, 2, 2], "k": pd.array([None] * 3, dtype="Int64")})
    spec = BoundingSpec((RowCount("n", Level.ROW), BucketCount("h", "k", categories=(0,))),
                        (), ((),), (Predicate("k", Op.IS_NULL, None),), "u", 1, 3, 1)
    got = PandasEngine(empty).aggregate(spec)
    assert got.same_as(PandasEngine(nulls).aggregate(spec))
    assert got.values["n"].tolist() == [3]


def test_a_categorical_column_runs_in_plans_and_robust_queries() -> None:
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"x": pd.Categorical(rng.integers(0, 3, 80)),
                          "g": pd.Categorical(rng.choice(["a", "b"], 80))})
    s = Session(frame, budget=ApproxDP(1e9, 1e-3, neighbouring=RO), row_count=lambda: 80)
    r = s.run({"type": "query", "privacy": {"type": "pure", "eps": 1e8,
                                           "neighbouring": "replace_one"},
               "aggregations": [{"type": "sum", "column": "x", "lower": 0, "upper": 3}],
               "group_by": ["g"], "keys": [["a"], ["b"]]})
    got = {g["key"][0]: g["estimates"][0]["value"] for g in r.value["groups"]}
    exact = frame.astype({"x": int, "g": str}).groupby("g")["x"].sum().to_dict()
    assert got == pytest.approx(exact, abs=0.01)
    assert _outcome(frame, {**ROBUST, "column": "x"})[0] == "ok"
    assert "is string" in _outcome(frame, {**ROBUST, "column": "g"})[1]
