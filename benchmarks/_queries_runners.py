"""The runners of benchmarks/queries_engines.py: one workload, many implementations.

Each runner is called in a fresh process (``python -m benchmarks.queries_engines child
NAME PATH``) so its peak memory is its own. It returns the seconds of the query itself
(imports, and for Spark the session start, are excluded and reported apart) and the
per-group noisy count and sum (dense over the public groups ``0..GROUPS-1``; the
hand-written SQL returns the exact bounded values instead: it adds no noise).

The workload (benchmarks/_queries_data.py): contribution bounding with at most ``L0``
groups per privacy unit and ``LINF`` rows per unit and group, a noisy count of the kept
rows and a noisy sum of per-(unit, group) sums clipped to ``[0, UNIT_SUM_UPPER]``, over
the ``GROUPS`` public groups; pure DP, ``EPS`` in total (half each), add/remove one unit.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from benchmarks._queries_data import (
    EPS,
    GROUPS,
    L0,
    LINF,
    UNIT_SUM_UPPER,
    VALUE_UPPER,
)

Result = dict[str, Any]
DUCKDB_MEMORY = os.environ.get("QBENCH_DUCKDB_MEMORY", "600MB")
SPARK_CONF = {"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "8",
              "spark.ui.enabled": "false", "spark.sql.adaptive.enabled": "true",
              "spark.ui.showConsoleProgress": "false"}


def _cpu() -> float:
    """CPU seconds of this process (all its threads: DuckDB's, Polars') and its live
    children (Spark's JVM and Python workers)."""
    import resource

    import psutil

    ru = resource.getrusage(resource.RUSAGE_SELF)
    total = ru.ru_utime + ru.ru_stime
    for c in psutil.Process().children(recursive=True):
        try:
            t = c.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


class Clock:
    """Wall and CPU seconds since it was made, less what :meth:`skip` ran. On the shared
    machine the CPU time is the steadier figure: wall time includes waiting for a core."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), _cpu()

    def skip(self, fn: Callable[[], Any]) -> float:
        w, c = time.perf_counter(), _cpu()
        fn()
        dw = time.perf_counter() - w
        self.wall, self.cpu = self.wall + dw, self.cpu + (_cpu() - c)
        return dw

    def read(self) -> dict[str, float]:
        return {"seconds": time.perf_counter() - self.wall, "cpu_seconds": _cpu() - self.cpu}


def _dense(pairs: Iterator[tuple[Any, float, float]]) -> tuple[list[float], list[float]]:
    counts, sums = [0.0] * GROUPS, [0.0] * GROUPS
    for g, c, s in pairs:
        counts[int(g)], sums[int(g)] = float(c), float(s)
    return counts, sums


def _warm_imports() -> None:
    """Import what the dpsieve runners import lazily (so the clock sees the query only):
    the plan layer, its samplers, the ledger (``Session`` imports it when it opens a
    budget) and DuckDB."""
    import duckdb  # noqa: F401

    import dpsieve.ledger  # noqa: F401

    dpsieve_prepared()


# -- dpsieve -------------------------------------------------------------------------------

def dpsieve_prepared() -> Any:
    """The workload as a dpsieve plan, checked against the public schema (no data read)."""
    from dpsieve.accounting.events import PureDP
    from dpsieve.queries import Level, Schema
    from dpsieve.queries.plan import Contribution, Count, Query, Sum
    from dpsieve.queries.prepare import prepare

    schema = Schema.of([("unit", "integer"), ("g", "integer"), ("value", "float")], "unit")
    query = Query((Count(Level.ROW), Sum("value", 0.0, UNIT_SUM_UPPER, Level.UNIT)),
                  PureDP(EPS), group_by=("g",), keys=tuple((k,) for k in range(GROUPS)),
                  contribution=Contribution(max_groups=L0, max_rows=LINF))
    return prepare(query, schema, PureDP(EPS).neighbouring)


def _answer_pairs(answer: Any) -> Iterator[tuple[Any, float, float]]:
    for grp in answer.groups:
        yield grp.key[0], grp.estimates[0].value, grp.estimates[1].value


def run_dpsieve(path: Path) -> Result:
    """prepare (checks, charge) + the DuckDB engine + exact noise on the driver."""
    from dpsieve.queries.engines.duckdb import DuckDBEngine

    _warm_imports()
    clock = Clock()
    prepared = dpsieve_prepared()
    engine = DuckDBEngine(path, threads=2, memory_limit=DUCKDB_MEMORY)
    answer = prepared.run(engine)
    times = clock.read()
    counts, sums = _dense(_answer_pairs(answer))
    return {**times, "count": counts, "sum": sums}


def run_session(path: Path) -> Result:
    """The same plan through ``Session`` on the Parquet path, as a steward runs it: the
    schema from the file's metadata, the charge spent on an in-memory ledger, then the
    engine ``Session`` picks (DuckDB on all cores under dpsieve's default memory limit,
    ``duckdb.default_memory_limit``: 32 MiB per core, at least 64 MiB, or
    ``DPSIEVE_DUCKDB_MEMORY_LIMIT``)."""
    import psutil

    from dpsieve import Session
    from dpsieve.accounting.events import PureDP

    _warm_imports()
    base = psutil.Process().memory_info().rss  # Python, dpsieve and DuckDB imported
    clock = Clock()
    session = Session(str(path), budget=PureDP(10 * EPS), privacy_unit="unit")
    res = session.query(dpsieve_prepared().query)
    times = clock.read()
    counts, sums = _dense((g["key"][0], g["estimates"][0]["value"],
                           g["estimates"][1]["value"]) for g in res.value["groups"])
    return {**times, "count": counts, "sum": sums, "base_bytes": base}


#: The bounding as an expert writes it: the per-(unit, group) cells with their sampling
#: priority computed once in the aggregate (DuckDB's native ``hash``), so the L0 window
#: sorts five narrow columns. Ordering the window by ``hash(unit, g, $seed)`` directly
#: (this baseline until 2026-12-06) is slower and fails at 50M rows under 256 MiB.
HANDWRITTEN_SQL = f"""
WITH cells AS (
  SELECT unit, g, count(*) AS n, least(greatest(sum(value), 0), {UNIT_SUM_UPPER}) AS s,
         hash(unit, g, $seed) AS h
  FROM read_parquet($path)
  WHERE unit IS NOT NULL AND g >= 0 AND g < {GROUPS}
  GROUP BY unit, g),
kept AS (
  SELECT * FROM cells
  QUALIFY row_number() OVER (PARTITION BY unit ORDER BY h, g) <= {L0})
SELECT g, sum(least(n, {LINF})), sum(s) FROM kept GROUP BY g
"""


#: The same bounding with dpsieve's arithmetic: each row's value clipped and rounded to the
#: lattice of ``LATTICE`` (2^-14; DuckDB's ``round``, ties away from zero) and summed as
#: integers, so the per-(unit, group) sum is exact and its clamp is the sensitivity (a
#: floating-point sum is not: its rounding depends on the row order). dpsieve computes this.
LATTICE = 2.0 ** -14
HANDWRITTEN_LATTICE_SQL = f"""
WITH cells AS (
  SELECT unit, g, count(*) AS n,
         least(greatest(sum(CAST(round(least(greatest(
             CASE WHEN isnan(value) THEN 0 ELSE value END, -204800.0), 204800.0)
             / {LATTICE!r}) AS BIGINT)), 0), {round(UNIT_SUM_UPPER / LATTICE)}) AS s,
         hash(unit, g, $seed) AS h
  FROM read_parquet($path)
  WHERE unit IS NOT NULL AND g >= 0 AND g < {GROUPS}
  GROUP BY unit, g),
kept AS (
  SELECT * FROM cells
  QUALIFY row_number() OVER (PARTITION BY unit ORDER BY h, g) <= {L0})
SELECT g, sum(least(n, {LINF})), sum(s) * {LATTICE!r} FROM kept GROUP BY g
"""


def _handwritten(path: Path, memory_limit: str, sql: str = HANDWRITTEN_SQL
                 ) -> list[tuple[Any, ...]]:
    import duckdb

    with tempfile.TemporaryDirectory(prefix="qbench-sql-") as tmp:  # as DuckDBEngine does
        con = duckdb.connect(config={"threads": 2, "memory_limit": memory_limit,
                                     "preserve_insertion_order": False,
                                     "temp_directory": tmp})
        try:
            rows: list[tuple[Any, ...]] = con.execute(
                sql, {"path": str(path),
                                  "seed": int.from_bytes(os.urandom(4), "little")}).fetchall()
        finally:
            con.close()
    return rows


def run_sql(path: Path) -> Result:
    """The same bounding hand-written in DuckDB SQL (same DuckDB settings as
    ``run_dpsieve``: ``QBENCH_DUCKDB_MEMORY``, 2 threads; no noise)."""
    return _timed_handwritten(path, HANDWRITTEN_SQL)


def _timed_handwritten(path: Path, sql: str) -> Result:
    _warm_imports()
    clock = Clock()
    rows = _handwritten(path, DUCKDB_MEMORY, sql)
    times = clock.read()
    counts, sums = _dense(iter(rows))
    return {**times, "count": counts, "sum": sums}


def run_sql_lattice(path: Path) -> Result:
    """``HANDWRITTEN_LATTICE_SQL`` (dpsieve's exact integer sums) under the settings of
    ``run_sql``."""
    return _timed_handwritten(path, HANDWRITTEN_LATTICE_SQL)


def run_sql_session_limits(path: Path) -> Result:
    """The hand-written SQL under the memory policy ``Session`` runs under: dpsieve's
    default limit (``default_memory_limit``: 64 MiB on 2 cores), and on DuckDB's
    out-of-memory error the same SQL again under ``retry_memory_limit`` (256 MiB), as
    ``DuckDBEngine`` does. The like-for-like baseline of the ``Session`` row: same engine
    settings, so the ratio measures dpsieve's plan, not the memory budget."""
    import duckdb

    from dpsieve.queries.engines.duckdb import default_memory_limit, retry_memory_limit

    _warm_imports()
    clock = Clock()
    try:
        rows = _handwritten(path, default_memory_limit(2))
        retried = 0.0
    except duckdb.OutOfMemoryException:
        rows = _handwritten(path, retry_memory_limit(2))
        retried = 1.0
    times = clock.read()
    counts, sums = _dense(iter(rows))
    return {**times, "count": counts, "sum": sums, "retried": retried}


# -- row-level bounds (issue 24, item 4) ---------------------------------------------------

def row_level_query() -> Any:
    """The workload with per-row bounds: a count of the kept rows and a sum of the kept
    rows' values, each row clipped to [0, VALUE_UPPER] (``per="row"``), L0 groups and
    L-inf rows per (unit, group): what OpenDP's runner computes (``truncate_per_group``
    and a per-row clipped integer sum)."""
    from dpsieve.accounting.events import PureDP
    from dpsieve.queries import Level
    from dpsieve.queries.plan import Contribution, Count, Query, Sum

    return Query((Count(Level.ROW), Sum("value", 0.0, VALUE_UPPER, Level.ROW)), PureDP(EPS),
                 group_by=("g",), keys=tuple((k,) for k in range(GROUPS)),
                 contribution=Contribution(max_groups=L0, max_rows=LINF))


def run_session_rows(path: Path) -> Result:
    """:func:`row_level_query` through ``Session`` on the Parquet path under its defaults
    (the engine Session picks; a plan ranking rows starts under ``retry_memory_limit``)."""
    from dpsieve import Session
    from dpsieve.accounting.events import PureDP

    _warm_imports()
    clock = Clock()
    session = Session(str(path), budget=PureDP(10 * EPS), privacy_unit="unit")
    res = session.query(row_level_query())
    times = clock.read()
    counts, sums = _dense((g["key"][0], g["estimates"][0]["value"],
                           g["estimates"][1]["value"]) for g in res.value["groups"])
    return {**times, "count": counts, "sum": sums}


#: The row-level bounding as an expert writes it in DuckDB: each row's priority a hash of
#: its value and a seed (so the sample does not depend on the file's row order), the first
#: L-inf rows of each (unit, group) by it -- DuckDB turns ``row_number() ... <= k`` into a
#: top-k aggregate, no sort -- then the cells' L0 choice by a keyed hash. (Rows of equal
#: value share a priority: their sample is not uniform; dpsieve ranks a cell's rows by
#: value and draws ranks, which costs a sort.)
HANDWRITTEN_ROWS_SQL = f"""
WITH r AS (
  SELECT unit, g, least(greatest(CASE WHEN isnan(value) THEN 0 ELSE value END, 0),
                        {VALUE_UPPER}) AS v,
         row_number() OVER (PARTITION BY unit, g ORDER BY hash(value, $seed)) AS rn
  FROM read_parquet($path)
  WHERE unit IS NOT NULL AND g >= 0 AND g < {GROUPS}),
cells AS (
  SELECT unit, g, count(*) AS n, sum(v) AS s, hash(unit, g, $seed) AS h
  FROM r WHERE rn <= {LINF} GROUP BY unit, g),
kept AS (
  SELECT * FROM cells QUALIFY row_number() OVER (PARTITION BY unit ORDER BY h, g) <= {L0})
SELECT g, sum(n), sum(s) FROM kept GROUP BY g
"""


#: The same with dpsieve's sample of rows (independent of the file's row order and uniform
#: over each cell's rows, ties included): rows ranked by value, then the L-inf ranks of
#: smallest keyed hash kept (the second ``row_number`` DuckDB's top-k aggregate).
HANDWRITTEN_ROWS_RANKED_SQL = f"""
WITH r0 AS (
  SELECT unit, g, least(greatest(CASE WHEN isnan(value) THEN 0 ELSE value END, 0),
                        {VALUE_UPPER}) AS v,
         row_number() OVER (PARTITION BY unit, g ORDER BY value) AS i
  FROM read_parquet($path)
  WHERE unit IS NOT NULL AND g >= 0 AND g < {GROUPS}),
r AS (
  SELECT * FROM r0
  QUALIFY row_number() OVER (PARTITION BY unit, g ORDER BY hash(unit, g, i, $seed)) <= {LINF}),
cells AS (
  SELECT unit, g, count(*) AS n, sum(v) AS s, hash(unit, g, $seed) AS h
  FROM r GROUP BY unit, g),
kept AS (
  SELECT * FROM cells QUALIFY row_number() OVER (PARTITION BY unit ORDER BY h, g) <= {L0})
SELECT g, sum(n), sum(s) FROM kept GROUP BY g
"""


def run_sql_rows(path: Path, sql: str = HANDWRITTEN_ROWS_SQL) -> Result:
    """``HANDWRITTEN_ROWS_SQL`` under DuckDB's own default memory limit (80 % of the
    machine's memory; it fails under 256 MiB and 600 MB), 2 threads, no noise."""
    import duckdb

    _warm_imports()
    clock = Clock()
    with tempfile.TemporaryDirectory(prefix="qbench-sql-") as tmp:
        con = duckdb.connect(config={"threads": 2, "preserve_insertion_order": False,
                                     "temp_directory": tmp})
        try:
            con.execute("SET enable_progress_bar = false")
            rows = con.execute(sql, {
                "path": str(path), "seed": int.from_bytes(os.urandom(4), "little")}).fetchall()
            limit = con.execute("SELECT current_setting('memory_limit')").fetchone()
        finally:
            con.close()
    times = clock.read()
    counts, sums = _dense(iter(rows))
    return {**times, "count": counts, "sum": sums,
            "note": f"DuckDB's default memory_limit here: {limit[0] if limit else '?'}"}


def run_sql_rows_ranked(path: Path) -> Result:
    """``HANDWRITTEN_ROWS_RANKED_SQL`` (dpsieve's sample of rows) as :func:`run_sql_rows`."""
    return run_sql_rows(path, HANDWRITTEN_ROWS_RANKED_SQL)


# -- peers ---------------------------------------------------------------------------------

#: OpenDP's sums are of integers: the values as whole thousandths (``round(value * 1000)``,
#: a row-wise map of the data before OpenDP reads it), summed with bounds ``[0, 10,000]``
#: and divided by 1,000 after the release. OpenDP's documentation recommends integer data
#: for sums: a float sum's sensitivity grows with the margin's ``max_length`` (its bound on
#: the rounding of a float sum), which at ``max_length`` = 10M rows made the Laplace scale
#: of this sum 19,008 instead of 800. An integer sum's noise does not depend on
#: ``max_length`` (it only bounds the sum against overflow): 800 with ``max_length`` 10M
#: or 10^9 alike (checked with ``summarize()``).
OPENDP_SCALE = 1000


def _opendp_query(path: Path, num_groups: int) -> Any:
    """The workload as an OpenDP 0.16 Polars query (not yet resolved).

    ``truncate_num_groups(k)`` filters ``rank("dense").over(identifier) < k``: the dense
    rank starts at 1, so it keeps ``k - 1`` groups per unit, and OpenDP's stability map
    bounds the groups a unit touches by ``k``. Keeping L0 groups therefore takes
    ``k = L0 + 1``, and OpenDP then adds noise for L0 + 1 groups (count and sum scales
    100 and 1,000 instead of 80 and 800); ``k = L0`` keeps L0 - 1 groups, which on these
    data drops 4.9 % of the rows (every row of a unit's fourth group), under noise for L0.
    ``keep="first"`` keeps each unit's groups of smallest key: the default ``"sample"``
    builds ``struct(hash(struct(g)), struct(g))``, two fields named ``g``, which Polars
    refuses when the plan runs (summarize() resolves it; release() fails)."""
    import opendp.prelude as dp
    import polars as pl
    import pyarrow.parquet as pq

    dp.enable_features("contrib")
    rows = pq.ParquetFile(path).metadata.num_rows  # public: bounds any group's length
    data = pl.scan_parquet(path).with_columns(
        (pl.col("value").fill_nan(0.0).fill_null(0.0) * OPENDP_SCALE).round()
        .cast(pl.Int64).alias("value"))
    ctx = dp.Context.compositor(
        data=data, privacy_unit=dp.unit_of(contributions=1, identifier=pl.col("unit")),
        privacy_loss=dp.loss_of(epsilon=EPS), split_evenly_over=1,
        margins=[dp.polars.Margin(by=["g"], max_length=rows)])
    keys = pl.LazyFrame({"g": list(range(GROUPS))})
    upper = round(VALUE_UPPER * OPENDP_SCALE)
    return (ctx.query().truncate_num_groups(num_groups, by=["g"], keep="first")
            .truncate_per_group(LINF, by=["g"])
            .group_by("g").agg(dp.len(signed=False), pl.col("value").dp.sum((0, upper)))
            .with_keys(keys))


def _run_opendp(path: Path, num_groups: int) -> Result:
    clock = Clock()
    q = _opendp_query(path, num_groups)
    # the calibration alone, reported apart (release() does it again, and is counted)
    scales: list[float] = []
    calibration = clock.skip(lambda: scales.extend(q.summarize()["scale"].to_list()))
    df = q.release().collect()
    times = clock.read()
    counts, sums = _dense((g, n, s / OPENDP_SCALE)
                          for g, n, s in df.select("g", "len", "value").iter_rows())
    return {**times, "count": counts, "sum": sums,
            "note": f"truncate_num_groups({num_groups}): Laplace scales {scales[0]:g} "
                    f"(count) and {scales[1] / OPENDP_SCALE:g} (sum); calibrating them "
                    f"took {calibration:.1f} s"}


def run_opendp(path: Path) -> Result:
    """OpenDP's Polars Context as its documentation recommends: identifier = unit, L0
    groups per unit kept (``truncate_num_groups(L0 + 1)``, see :func:`_opendp_query`),
    at most LINF rows per (unit, group) (``truncate_per_group``), per-row values clipped
    to [0, 10] and summed as integers (so a unit's sum in a group is at most LINF * 10 =
    UNIT_SUM_UPPER, the sensitivity of dpsieve's per-unit clipping), explicit public keys,
    pure DP."""
    return _run_opendp(path, L0 + 1)


def run_opendp_drop(path: Path) -> Result:
    """As :func:`run_opendp` with ``truncate_num_groups(L0)``: noise for L0 groups, but
    each unit's L0-th group dropped."""
    return _run_opendp(path, L0)


def _pipelinedp_params() -> tuple[Any, Any]:
    import pipeline_dp

    params = pipeline_dp.AggregateParams(
        metrics=[pipeline_dp.Metrics.COUNT, pipeline_dp.Metrics.SUM],
        noise_kind=pipeline_dp.NoiseKind.LAPLACE, max_partitions_contributed=L0,
        max_contributions_per_partition=LINF, min_sum_per_partition=0.0,
        max_sum_per_partition=UNIT_SUM_UPPER)
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1],
                                            value_extractor=lambda r: r[2])
    return params, extractors


def _pipelinedp(backend: Any, data: Any, collect: Callable[[Any], Any]) -> Result:
    import pipeline_dp

    clock = Clock()
    budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPS, total_delta=0)
    params, extractors = _pipelinedp_params()
    out = pipeline_dp.DPEngine(budget, backend).aggregate(
        data, params, extractors, public_partitions=list(range(GROUPS)))
    budget.compute_budgets()
    rows = collect(out)
    times = clock.read()
    counts, sums = _dense((g, m.count, m.sum) for g, m in rows)
    return {**times, "count": counts, "sum": sums}


def _parquet_rows(path: Path) -> Iterator[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    f = pq.ParquetFile(path)
    for batch in f.iter_batches(batch_size=65536, columns=["unit", "g", "value"]):
        yield from zip(*(c.to_pylist() for c in batch.columns), strict=True)


def run_pipelinedp_local(path: Path) -> Result:
    """PipelineDP's LocalBackend over the rows streamed from Parquet as Python tuples."""
    import pipeline_dp

    return _pipelinedp(pipeline_dp.LocalBackend(), _parquet_rows(path), list)


# -- Spark ---------------------------------------------------------------------------------

def spark_session(cores: int = 2) -> Any:
    import sys

    from pyspark.sql import SparkSession

    # Python workers (PipelineDP's RDD code) run this interpreter, which has the packages
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    b = SparkSession.builder.master(f"local[{cores}]").appName("dpsieve-qbench")
    for k, v in SPARK_CONF.items():
        b = b.config(k, v)
    return b.getOrCreate()


def run_spark(path: Path) -> Result:
    """dpsieve's SparkEngine (DataFrame API) on local[2]; noise on the driver."""
    from dpsieve.queries.engines.spark import SparkEngine

    t0 = time.perf_counter()
    spark = spark_session()
    start = time.perf_counter() - t0
    clock = Clock()
    prepared = dpsieve_prepared()
    engine = SparkEngine(spark.read.parquet(str(path)), spark=spark)
    answer = prepared.run(engine)
    times = clock.read()
    counts, sums = _dense(_answer_pairs(answer))
    shuffles = engine.bounding_shuffles(prepared.spec)
    spark.stop()
    return {**times, "startup": start, "count": counts, "sum": sums,
            "bounding_shuffles": shuffles}


def run_spark_warm(path: Path) -> Result:
    """As :func:`run_spark`, after one untimed run of the same query on the 1M-row file
    beside ``path`` in the same session (the JVM's JIT and Spark's generated code warm):
    what a long-lived driver pays per query."""
    from benchmarks._queries_data import data_path
    from dpsieve.queries.engines.spark import SparkEngine

    warm_path = data_path(path.parent, 1_000_000)
    t0 = time.perf_counter()
    spark = spark_session()
    start = time.perf_counter() - t0
    dpsieve_prepared().run(SparkEngine(spark.read.parquet(str(warm_path)), spark=spark))
    warm = time.perf_counter() - t0 - start
    clock = Clock()
    prepared = dpsieve_prepared()
    answer = prepared.run(SparkEngine(spark.read.parquet(str(path)), spark=spark))
    times = clock.read()
    counts, sums = _dense(_answer_pairs(answer))
    spark.stop()
    return {**times, "startup": start, "count": counts, "sum": sums,
            "note": f"warm-up run on 1M rows: {warm:.1f} s"}


def run_pipelinedp_spark(path: Path) -> Result:
    """PipelineDP's SparkRDDBackend on local[2], the rows an RDD of the Parquet file."""
    import pipeline_dp

    t0 = time.perf_counter()
    spark = spark_session()
    start = time.perf_counter() - t0
    rdd = spark.read.parquet(str(path)).rdd.map(tuple)
    lineage: list[str] = []

    def collect(r: Any) -> Any:
        text = r.toDebugString()  # the RDD lineage: one ShuffledRDD per shuffle
        lineage.append(text.decode() if isinstance(text, bytes) else str(text))
        return r.collect()

    res = _pipelinedp(pipeline_dp.SparkRDDBackend(spark.sparkContext), rdd, collect)
    spark.stop()
    res["startup"] = start
    res["lineage"] = lineage[0]
    res["shuffles"] = lineage[0].count("ShuffledRDD")
    return res


def pipelinedp_lineage(path: Path) -> Result:
    """PipelineDP's SparkRDDBackend result RDD built (lazily: nothing runs) and its
    lineage, with one ShuffledRDD per shuffle."""
    import pipeline_dp

    spark = spark_session()
    rdd = spark.read.parquet(str(path)).rdd.map(tuple)
    budget = pipeline_dp.NaiveBudgetAccountant(total_epsilon=EPS, total_delta=0)
    params, extractors = _pipelinedp_params()
    out = pipeline_dp.DPEngine(budget, pipeline_dp.SparkRDDBackend(spark.sparkContext)
                               ).aggregate(rdd, params, extractors,
                                           public_partitions=list(range(GROUPS)))
    budget.compute_budgets()
    text = out.toDebugString()
    lineage = text.decode() if isinstance(text, bytes) else str(text)
    spark.stop()
    return {"lineage": lineage, "shuffles": lineage.count("ShuffledRDD")}


def _explained(df: Any) -> str:
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        df.explain()
    return buf.getvalue()


def count_exchanges(plan: str) -> tuple[int, int]:
    """(shuffles on the privacy unit, all shuffles) in a physical plan's text: the
    ``Exchange hashpartitioning(...)`` nodes, broadcasts not counted; of an executed
    adaptive plan, only its ``Final Plan`` section (its ``Initial Plan`` repeats them)."""
    final = plan.split("== Initial Plan ==")[0]
    lines = [ln for ln in final.splitlines() if "Exchange hashpartitioning(" in ln
             and "BroadcastExchange" not in ln]
    return sum("hashpartitioning(_u#" in ln for ln in lines), len(lines)


def spark_plan(path: Path) -> Result:
    """The physical plan of the bounding and its count of exchanges on the unit, before
    and after running it (the executed adaptive plan)."""
    spark = spark_session()
    from dpsieve.queries.engines.spark import SparkEngine

    prepared = dpsieve_prepared()
    engine = SparkEngine(spark.read.parquet(str(path)), spark=spark)
    out: Result = {"plan": engine.explain(prepared.spec),
                   "bounding_shuffles": engine.bounding_shuffles(prepared.spec)}
    # the plan as executed: run the same DataFrame, then its adaptive plan is final
    df = engine.plan(prepared.spec)
    df.collect()
    out["final_plan"] = _explained(df)
    out["final_unit_shuffles"], out["final_shuffles"] = count_exchanges(out["final_plan"])
    spark.stop()
    return out


RUNNERS: dict[str, Callable[[Path], Result]] = {
    "dpsieve-duckdb": run_dpsieve,
    "session-duckdb": run_session,
    "sql-duckdb": run_sql,
    "sql-duckdb-session-limits": run_sql_session_limits,
    "sql-duckdb-lattice": run_sql_lattice,
    "session-rows": run_session_rows,
    "sql-duckdb-rows": run_sql_rows,
    "sql-duckdb-rows-ranked": run_sql_rows_ranked,
    "opendp-polars": run_opendp,
    "opendp-polars-drop": run_opendp_drop,
    "pipelinedp-local": run_pipelinedp_local,
    "dpsieve-spark": run_spark,
    "dpsieve-spark-warm": run_spark_warm,
    "pipelinedp-spark": run_pipelinedp_spark,
    "spark-plan": spark_plan,
    "pipelinedp-lineage": pipelinedp_lineage,
}
