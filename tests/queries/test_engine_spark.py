"""The Spark engine: identical bounded aggregates to the reference and DuckDB engines, one
shuffle on the privacy unit, sampling independent of row order and partitioning.

Skips with the reason when pyspark or a Java runtime is missing (spark_support).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from engine_conformance import COLUMNS, check_engine, random_spec, random_table
from spark_support import session_or_skip, spark_frame
from test_engine_duckdb import duckdb_table

from dpsieve.errors import NumericalError, ValidationError
from dpsieve.queries import (
    Bins,
    BoundingSpec,
    BucketCount,
    Column,
    ColumnType,
    Level,
    RowCount,
    ValueSum,
)
from dpsieve.queries._mix import encode, fold, mix
from dpsieve.queries.engines import DuckDBEngine, ReferenceEngine
from dpsieve.queries.engines.spark import SparkEngine, spark_column_type

# The first test starts a JVM; on a loaded 2-core machine a Spark job takes minutes.
pytestmark = pytest.mark.timeout(1500)

@pytest.fixture(scope="module")
def spark() -> Any:
    return session_or_skip()


def test_spark_engine_matches_the_reference_on_random_specs(spark: Any) -> None:
    """One random table, three random specs (each a Spark job: ~13 s on a loaded 2-core
    machine); the slow test below runs 36 on 12 tables, the brute force every kind."""
    check_engine(lambda rows, cols: SparkEngine(spark_frame(spark, rows, cols)), cases=1,
                 seed=3)


@pytest.mark.slow
def test_spark_engine_matches_the_reference_on_many_random_specs(spark: Any) -> None:
    check_engine(lambda rows, cols: SparkEngine(spark_frame(spark, rows, cols, 3)), cases=12,
                 seed=17)


def test_spark_duckdb_and_reference_agree_with_dp_key_selection_counts(spark: Any) -> None:
    """Observed keys (DP key selection): the same groups and the same unit counts."""
    rng = np.random.default_rng(8)
    rows = random_table(rng, 60)
    spec = BoundingSpec((RowCount("n"), RowCount("u", Level.UNIT),
                         ValueSum("s", "x", 0.25, -2.0, 2.0, -8, 8),
                         BucketCount("b", "x", bins=Bins(0.5, 0.0, 4.0, 0, 8, 3))),
                        ("city", "k"), None, unit="name", max_groups=2, max_rows=2, seed=99)
    ref = ReferenceEngine(rows, COLUMNS).aggregate(spec)
    duck = DuckDBEngine(connection=duckdb_table(rows, COLUMNS), table="t").aggregate(spec)
    got = SparkEngine(spark_frame(spark, rows, COLUMNS)).aggregate(spec)
    assert ref.units is not None
    assert int(ref.units.sum()) > 0
    assert got.same_as(ref)
    assert duck.same_as(ref)


def test_one_shuffle_on_the_privacy_unit(spark: Any) -> None:
    """Bounding (cells, L0, L-inf) adds exactly one exchange, hash-partitioned on the unit."""
    eng = SparkEngine(spark_frame(spark, random_table(np.random.default_rng(1), 20), COLUMNS))
    cells_only = BoundingSpec((RowCount("n"), ValueSum("s", "x", 1.0, -4.0, 4.0, -4, 4,
                                                       Level.UNIT, -6, 6)),
                              ("city",), (("a",), ("b",)), unit="pid", max_groups=2,
                              max_rows=3)
    with_rows = BoundingSpec((RowCount("n"), ValueSum("s", "x", 1.0, -4.0, 4.0, -4, 4),
                              BucketCount("c", "city", categories=("a", "b"))),
                             ("k",), None, unit="name", max_groups=1, max_rows=2)
    for spec in (cells_only, with_rows):
        plan = eng.explain(spec)
        assert eng.bounding_shuffles(spec) == 1, plan
        # the only other shuffle is the final aggregation by group (of partial aggregates);
        # the public keys travel by broadcast
        shuffles = re.findall(r"(?<!Broadcast)Exchange (\w+)", plan)
        assert shuffles == ["hashpartitioning", "hashpartitioning"], plan


def test_row_order_and_partitioning_do_not_change_the_aggregates(spark: Any) -> None:
    rng = np.random.default_rng(21)
    rows = random_table(rng, 60)
    shuffled = [rows[i] for i in rng.permutation(len(rows))]
    by_unit = sorted(rows, key=lambda r: (r["pid"] is None, r["pid"] or 0))
    engines = [SparkEngine(spark_frame(spark, rows, COLUMNS)),
               SparkEngine(spark_frame(spark, shuffled, COLUMNS, 3)),
               SparkEngine(spark_frame(spark, by_unit, COLUMNS, 1), partitions=5)]
    for _ in range(2):
        spec = random_spec(rng, rows)
        outs = [e.aggregate(spec) for e in engines]
        assert outs[0].same_as(outs[1])
        assert outs[0].same_as(outs[2])


def test_mixer_on_spark_columns_matches_python(spark: Any) -> None:
    """The limb arithmetic of the mixer and the string encoding, on edge words."""
    from pyspark.sql import functions as sf

    from dpsieve.queries.engines.spark import _Plan, _signed

    words = [0, 1, 2**63 - 1, 2**63, 2**64 - 1, 0x9E3779B97F4A7C15, 12345678901234567]
    strings = ["", "a", "é", "p-3", "日本"]
    df = spark.createDataFrame([(_signed(w),) for w in words], "w long")
    P = _Plan(df, {"w": ColumnType.INTEGER})
    P.mix_many({"m": "`w`"})
    got = [r["m"] & (2**64 - 1) for r in P.df.orderBy(sf.monotonically_increasing_id())
           .select("m").collect()]
    assert got == [mix(w) for w in words]
    sdf = spark.createDataFrame([(s,) for s in [*strings, None]], "s string")
    Q = _Plan(sdf, {"s": ColumnType.STRING})
    enc = [r[0] & (2**64 - 1) for r in sdf.select(Q.encode("s")).collect()]
    assert enc == [encode(s) for s in [*strings, None]]
    assert fold(["a", 1]) != fold(["a", 2])


def test_exact_sums_and_overflow(spark: Any) -> None:
    """Sums are exact decimals; a total outside 64 bits is an error, never a wrap."""
    cols = (Column("pid", ColumnType.INTEGER), Column("v", ColumnType.FLOAT))
    rows = [{"pid": i, "v": 1e15} for i in range(12)]
    big = ValueSum("s", "v", 1.0, -2.0**51, 2.0**51, -(2**51), 2**51, square_shift=0)
    spec = BoundingSpec((big,), unit="pid", max_groups=1, max_rows=1)
    eng = SparkEngine(spark_frame(spark, rows, cols))
    with pytest.raises(NumericalError):
        ReferenceEngine(rows, cols).aggregate(spec)
    with pytest.raises(NumericalError):
        eng.aggregate(spec)
    ok = BoundingSpec((ValueSum("s", "v", 1.0, -2.0**51, 2.0**51, -(2**51), 2**51),),
                      unit="pid", max_groups=1, max_rows=1)
    assert int(eng.aggregate(ok).values["s"][0]) == 12 * 10**15


def test_catalog_tables_and_bad_sources(spark: Any) -> None:
    rows = random_table(np.random.default_rng(4), 10)
    spark_frame(spark, rows, COLUMNS).createOrReplaceTempView("dpsieve_people")
    eng = SparkEngine("dpsieve_people", spark=spark)
    assert {c.name: c.type for c in eng.columns()} == {c.name: c.type for c in COLUMNS}
    with pytest.raises(ValidationError, match="source"):
        SparkEngine("no_such_table_here", spark=spark)
    with pytest.raises(ValidationError, match="source"):
        SparkEngine(42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="partitions"):
        SparkEngine("dpsieve_people", spark=spark, partitions=0)
    with pytest.raises(ValidationError, match="column"):
        eng.aggregate(BoundingSpec((RowCount("n"),), unit="nobody"))


def test_column_types() -> None:
    assert spark_column_type("long") == ColumnType.INTEGER
    assert spark_column_type("decimal(10,2)") == ColumnType.FLOAT
    assert spark_column_type("string") == ColumnType.STRING
    assert spark_column_type("boolean") == ColumnType.BOOLEAN
    assert spark_column_type("timestamp") == ColumnType.OTHER


CONNECT_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
from pyspark.sql import SparkSession
from engine_conformance import check_engine
from spark_support import spark_frame
from dpsieve.queries.engines.spark import SparkEngine
spark = (SparkSession.builder.remote("local[2]")
         .config("spark.sql.shuffle.partitions", "2").getOrCreate())
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
check_engine(lambda rows, cols: SparkEngine(spark_frame(spark, rows, cols)), cases=1, seed=5)
print("CONNECT-OK")
"""


@pytest.mark.slow
def test_the_same_engine_runs_through_spark_connect(tmp_path: Any) -> None:
    """DataFrame API only: the engine runs unchanged on a Spark Connect session (a local
    Connect server, in its own process so that it does not share the classic session)."""
    import importlib.util
    import subprocess
    import sys
    from pathlib import Path

    from spark_support import skip_reason

    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    if importlib.util.find_spec("grpc") is None:
        pytest.skip("Spark Connect client packages missing (pip install 'pyspark[connect]')")
    script = tmp_path / "connect.py"
    script.write_text(CONNECT_SCRIPT.format(tests=str(Path(__file__).parent)))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=1200, check=False)
    assert "CONNECT-OK" in out.stdout, out.stderr[-3000:]


@pytest.mark.slow
def test_contribution_bounding_is_uniform_on_spark(spark: Any) -> None:
    """3,000 units each with rows in 6 groups (L0 = 2) and 5 distinct rows in group "a"
    (L-inf = 2): the kept groups and rows are uniform (chi-square, false alarm 1e-4 each),
    and a sorted and a shuffled, repartitioned copy give the same aggregates."""
    from scipy.stats import chisquare

    units, groups = 3000, ("a", "b", "c", "d", "e", "f")
    cols = (Column("pid", ColumnType.INTEGER), Column("g", ColumnType.STRING),
            Column("v", ColumnType.FLOAT))
    rows = [{"pid": u, "g": g, "v": float(j)} for u in range(units) for g in groups
            for j in (range(5) if g == "a" else range(1))]
    keys = tuple((g,) for g in groups)
    spec = BoundingSpec((RowCount("units", Level.UNIT),
                         BucketCount("b", "v", bins=Bins(1.0, 0.0, 4.0, 0, 4, 5))),
                        ("g",), keys, unit="pid", max_groups=2, max_rows=2, seed=2024)
    eng = SparkEngine(spark_frame(spark, rows, cols))
    out = eng.aggregate(spec)
    kept = out.values["units"]
    assert int(kept.sum()) == 2 * units
    assert chisquare(kept).pvalue > 1e-4, kept
    # rows of group "a" in units that kept it: each of the 5 values kept w.p. 2/5
    a_rows = out.values["b"][0]
    assert int(a_rows.sum()) == 2 * int(kept[0])
    assert chisquare(a_rows).pvalue > 1e-4, a_rows
    rng = np.random.default_rng(3)
    shuffled = [rows[i] for i in rng.permutation(len(rows))]
    other = SparkEngine(spark_frame(spark, shuffled, cols, 7), partitions=3).aggregate(spec)
    assert other.same_as(out)


def test_engine_for_maps_each_source_type_to_its_engine(spark: Any, tmp_path: Any) -> None:
    """Session, service and CLI resolve sources through one function, by type only."""
    import pandas as pd
    import polars as pl

    from dpsieve.queries.engines import (
        PandasEngine,
        PolarsEngine,
        engine_for,
        is_spark_frame,
    )

    rows = [{"pid": 1, "city": "a", "x": 1.0}]
    cols = (Column("pid", ColumnType.INTEGER), Column("city", ColumnType.STRING),
            Column("x", ColumnType.FLOAT))
    df = spark_frame(spark, rows, cols)
    assert is_spark_frame(df)
    assert not is_spark_frame(pd.DataFrame(rows))
    assert isinstance(engine_for(df), SparkEngine)
    df.createOrReplaceTempView("dpsieve_resolve_people")
    by_name = engine_for("dpsieve_resolve_people", spark=spark)
    assert isinstance(by_name, SparkEngine)
    assert by_name.columns() == cols
    assert isinstance(engine_for(pd.DataFrame(rows)), PandasEngine)
    odd = pd.DataFrame({"name": ["x"], "aggregate": [1], "columns": [2]})
    assert isinstance(engine_for(odd), PandasEngine)  # columns never pass for methods
    assert isinstance(engine_for(pl.DataFrame(rows)), PolarsEngine)
    pd.DataFrame(rows).to_parquet(tmp_path / "t.parquet")
    assert isinstance(engine_for(tmp_path / "t.parquet"), DuckDBEngine)
    eng = ReferenceEngine(rows, cols)
    assert engine_for(eng) is eng
    with pytest.raises(ValidationError, match=r"'source'.*Spark catalog"):
        engine_for(df, spark=spark)
    with pytest.raises(ValidationError, match=r"'source'.*pandas or polars") as e:
        engine_for(b"1234-secret")
    assert "1234" not in str(e.value)  # only the type name is echoed
    with pytest.raises(ValidationError, match=r"'source'.*Spark catalog"):
        engine_for("no_such_table_here", spark=spark)
