"""Session on Spark (issue 13 item 2): a Spark DataFrame, or a Spark catalog table through
``SparkEngine(name, spark=...)``, answers query plans exactly as the same data in pandas
(same aggregates, same noise for the same random source); the release and robust shapes,
which need the rows in memory, are refused before any spend (a Spark table is never
collected)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from spark_support import session_or_skip, spark_frame
from test_session_plans import _frame, _plan

from dpsieve import Session
from dpsieve.accounting.events import PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries import Column, ColumnType
from dpsieve.queries.engines.spark import SparkEngine

# The first test starts a JVM; on a loaded 2-core machine a Spark job takes minutes.
pytestmark = pytest.mark.timeout(1500)

COLS = (Column("pid", ColumnType.INTEGER), Column("ward", ColumnType.STRING),
        Column("cost", ColumnType.FLOAT), Column("age", ColumnType.INTEGER),
        Column("ok", ColumnType.BOOLEAN))


@pytest.fixture(scope="module")
def spark() -> Any:
    return session_or_skip()


def _answer(s: Session) -> Any:
    r = s.run(_plan())
    return [(g.key, [e.value for e in g.estimates]) for g in r.answer.groups]


def test_a_spark_frame_answers_plans_as_pandas_does(spark: Any) -> None:
    pdf = _frame(3, 200)
    rows = [{**r, "pid": int(r["pid"]), "age": int(r["age"]), "ok": bool(r["ok"])}
            for r in pdf.to_dict("records")]
    sdf = spark_frame(spark, rows, COLS, 3)
    on_spark = Session(sdf, budget=PureDP(3.0), privacy_unit="pid",
                       rng=np.random.default_rng(11))
    on_pandas = Session(pdf, budget=PureDP(3.0), privacy_unit="pid",
                        rng=np.random.default_rng(11))
    assert on_spark.schema().to_dict() == on_pandas.schema().to_dict()
    assert _answer(on_spark) == _answer(on_pandas)
    assert on_spark.remaining()["exact"] == "2/1"
    sdf.createOrReplaceTempView("dpsieve_session_people")
    by_name = Session(SparkEngine("dpsieve_session_people", spark=spark), budget=PureDP(1.0),
                      privacy_unit="pid", rng=np.random.default_rng(11))
    assert _answer(by_name) == _answer(Session(pdf, budget=PureDP(1.0), privacy_unit="pid",
                                               rng=np.random.default_rng(11)))


def test_old_query_shapes_on_spark_are_refused_before_any_spend(spark: Any) -> None:
    rows = [{"pid": 1, "ward": "A", "cost": 2.0, "age": 30, "ok": True}]
    s = Session(spark_frame(spark, rows, COLS), budget=PureDP(1.0))
    with pytest.raises(ValidationError) as ei:  # release/robust need the rows in memory
        s.run({"type": "robust_mean", "column": "cost", "bound": 10.0,
               "privacy": {"type": "approx", "eps": 0.5, "delta": 1e-6}})
    assert ei.value.parameter == "data"
    assert "query plans" in str(ei.value)
    assert s.store.history(s.budget_id) == []
    assert s.remaining()["exact"] == "1/1"
    # the one-aggregation shapes are plans now: they run on Spark, charged once
    assert s.run({"type": "count", "privacy": {"type": "pure", "eps": 0.5}}).noise["scale"] > 0
    assert len(s.store.history(s.budget_id)) == 1
    assert s.remaining()["exact"] == "1/2"
