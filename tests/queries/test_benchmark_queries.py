"""Smoke test of benchmarks/queries_engines.py on tiny data (no timing is checked).

What it guards: the generated data have the shape the benchmark claims (at most 4 groups
per unit, every group public), the hand-written SQL baseline computes the same bounding
as dpsieve's DuckDB engine (identical bounded counts, sums equal up to dpsieve's lattice
snapping), and one measured child process reports its result and a peak memory.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("duckdb")
pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import _queries_data as qd  # noqa: E402
from benchmarks import _queries_runners as qr  # noqa: E402
from benchmarks import queries_engines as qe  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return qd.ensure(tmp_path_factory.mktemp("qbench"), 3000, seed=7)


def test_generated_data_have_the_claimed_shape(tiny: Path) -> None:
    t = qd.truth(tiny)
    assert t["rows"] == 3000
    assert sum(t["count"]) == 3000
    assert 1 <= t["max_unit_groups"] <= qd.MAX_UNIT_GROUPS
    assert t["units"] < 3000
    assert t["max_unit_rows"] > 3000 // 100
    mtime = tiny.stat().st_mtime_ns
    assert qd.ensure(tiny.parent, 3000, seed=7) == tiny
    assert tiny.stat().st_mtime_ns == mtime


def test_handwritten_sql_bounds_like_the_duckdb_engine(tiny: Path) -> None:
    from dpsieve.queries.engines.duckdb import DuckDBEngine

    sql = qr.run_sql(tiny)
    t = qd.truth(tiny)
    assert sql["count"] == t["bounded_count"]
    prepared = qr.dpsieve_prepared()
    aggs = DuckDBEngine(tiny).aggregate(replace(prepared.spec, seed=3))
    count_m, sum_m = prepared.spec.measures
    assert aggs.values[count_m.name].tolist() == [int(c) for c in sql["count"]]
    g = sum_m.granularity  # per-row snapping: at most g/2 per row of a group
    for s_engine, s_sql, n in zip(aggs.values[sum_m.name].tolist(), sql["sum"], t["count"],
                                  strict=True):
        assert abs(s_engine * g - s_sql) <= n * g / 2 + 1e-6


def test_a_measured_child_reports_time_answers_and_memory(tiny: Path) -> None:
    res = qe.measure("sql-duckdb", tiny, timeout=120)
    assert len(res["count"]) == qd.GROUPS
    assert res["seconds"] > 0
    assert 10 * 2**20 < res["peak_bytes"] < 2**31
    assert qe.rmse(res["count"], res["count"]) == 0.0


def test_sort_free_sample_prototype_counts_and_agrees(tiny: Path) -> None:
    """benchmarks/_queries_rows_classes.py (issue 24 item 4, a prototype measured and not
    adopted): every variant counts the exact bounded rows (the count does not depend on the
    sample), and its two forms of the sample keep the same rows for the same key."""
    from benchmarks import _queries_rows_classes as rc

    t = qd.truth(tiny)
    got = {n: rc.run_one(n, tiny, "256MiB", seed=11)
           for n in ("current", "classes", "expand", "join")}
    for r in got.values():
        assert r["count"] == sum(t["bounded_count"])
    assert got["expand"]["sums"] == got["join"]["sums"]
    # the sample keeps part of the large cells' rows: fewer than every row's integer
    assert sum(got["expand"]["sums"].values()) < sum(got["classes"]["sums"].values())
