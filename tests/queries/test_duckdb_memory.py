"""DuckDB's memory limit (issue 12: a Session query's peak memory must not grow with the
table): bounded by default (32 MiB per thread, at least 64 MiB), changed by
``memory_limit=`` or ``DPSIEVE_DUCKDB_MEMORY_LIMIT``, a bad value refused before any spend,
naming it; a query out of memory under the default runs again under the larger retry
limit (128 MiB per thread), the same answer; a given limit is never raised."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpsieve import Session
from dpsieve.accounting.events import PureDP
from dpsieve.errors import QueryFailedError, ValidationError
from dpsieve.queries.engines import duckdb as engine_module
from dpsieve.queries.engines.duckdb import (
    MEMORY_LIMIT_ENV,
    DuckDBEngine,
    default_memory_limit,
    retry_memory_limit,
)

PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
        "aggregations": [{"type": "count", "per": "unit"}],
        "group_by": ["g"], "keys": [[0], [1]], "contribution": {"max_groups": 1}}


def _parquet(tmp_path: Path) -> Path:
    path = tmp_path / "t.parquet"
    duckdb.connect().execute(f"COPY (SELECT i % 7 AS u, i % 2 AS g FROM range(100) t(i)) "
                             f"TO '{path}' (FORMAT parquet)")
    return path


def _setting(engine: DuckDBEngine) -> str:
    con, _, tmp = engine._open()
    try:
        row = con.execute("SELECT current_setting('memory_limit'), "
                          "current_setting('temp_directory')").fetchone()
        assert row is not None
        assert tmp is not None
        assert Path(str(row[1])).resolve() == Path(tmp.name).resolve()  # spills to it
        return str(row[0])
    finally:
        con.close()
        if tmp is not None:
            tmp.cleanup()


def _mib(setting: str) -> float:
    num, unit = setting.split()
    return float(num) * {"KiB": 2**-10, "MiB": 1.0, "GiB": 2**10}[unit]


def test_default_is_32_mib_per_thread_at_least_64_and_reaches_duckdb(
        tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    path = _parquet(tmp_path)
    assert default_memory_limit(1) == default_memory_limit(2) == "64MiB"
    assert default_memory_limit(3) == "96MiB"
    assert default_memory_limit() == f"{max(64, 32 * (os.cpu_count() or 1))}MiB"
    assert retry_memory_limit(3) == "384MiB"
    assert _mib(_setting(DuckDBEngine(path, threads=3))) == 96
    assert _mib(_setting(DuckDBEngine(path, memory_limit="1GB"))) == pytest.approx(
        1e9 / 2**20, rel=1e-3)
    kept = DuckDBEngine(path, threads=3, keep_open=True)._load().con  # the service's too
    assert _mib(str(kept.execute("SELECT current_setting('memory_limit')").fetchone()[0])
                ) == 96


def test_the_environment_changes_the_default(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "96MiB")
    path = _parquet(tmp_path)
    assert _mib(_setting(DuckDBEngine(path))) == 96
    assert _mib(_setting(DuckDBEngine(path, memory_limit="64MiB"))) == 64  # explicit wins


@pytest.mark.parametrize("bad", ["", "lots", "12", "-1GB", "0MB", "1 PB", "nan GB"])
def test_a_bad_limit_is_refused_naming_the_parameter(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ValidationError, match="'memory_limit'"):
        DuckDBEngine(_parquet(tmp_path), memory_limit=bad)
    with pytest.raises(ValidationError, match="'memory_limit'"):
        Session(str(_parquet(tmp_path)), budget=PureDP(1.0), memory_limit=bad)


def test_session_runs_under_its_limit_and_a_bad_environment_spends_nothing(
        tmp_path: Path, monkeypatch: Any) -> None:
    path = _parquet(tmp_path)
    s = Session(str(path), budget=PureDP(1.0), privacy_unit="u", memory_limit="64MiB")
    assert s.query(PLAN).answer is not None
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "a lot")
    t = Session(str(path), budget=PureDP(1.0), privacy_unit="u")
    with pytest.raises(ValidationError, match=MEMORY_LIMIT_ENV):
        t.query(PLAN)
    assert t.remaining() == Session(str(path), budget=PureDP(1.0)).remaining()


def _big_parquet(tmp_path: Path) -> Path:
    path = tmp_path / "big.parquet"
    duckdb.connect().execute(
        "COPY (SELECT i % 50000 AS u, i % 3 AS g, CAST(i % 11 AS DOUBLE) AS v "
        f"FROM range(200000) t(i)) TO '{path}' (FORMAT parquet)")
    return path


ROW_PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
            "aggregations": [{"type": "sum", "column": "v", "lower": 0, "upper": 10,
                              "per": "row"}],
            "group_by": ["g"], "keys": [[0], [1], [2]],
            "contribution": {"max_groups": 1, "max_rows": 2}}
UNIT_PLAN = {**PLAN, "keys": [[0], [1], [2]]}


def _limits_opened(monkeypatch: Any) -> list[float]:
    """The memory limits (MiB) of the databases the engine opens from now on."""
    seen: list[float] = []
    real = DuckDBEngine._open

    def spy(self: DuckDBEngine, memory_limit: str | None = None) -> Any:
        con, params, tmp = real(self, memory_limit)
        row = con.execute("SELECT current_setting('memory_limit')").fetchone()
        seen.append(_mib(str(row[0])))
        return con, params, tmp
    monkeypatch.setattr(DuckDBEngine, "_open", spy)
    return seen


@pytest.mark.parametrize("keep_open", [False, True])
def test_out_of_memory_under_the_default_runs_again_under_the_retry_limit(
        tmp_path: Path, monkeypatch: Any, keep_open: bool) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    path = _big_parquet(tmp_path)
    spec = Session(str(path), budget=PureDP(1.0), privacy_unit="u")
    from dpsieve.queries.prepare import prepare

    prepared = prepare(_plan_of(UNIT_PLAN), spec.schema(), spec.neighbouring)
    want = DuckDBEngine(path, memory_limit="1GB").aggregate(prepared.spec)
    # a default too small for any query (DuckDB refuses it: out of memory)
    monkeypatch.setattr(engine_module, "MEMORY_FLOOR_MIB", 1)
    monkeypatch.setattr(engine_module, "MEMORY_PER_THREAD_MIB", 0)
    engine = DuckDBEngine(path, threads=2, keep_open=keep_open, copy_max_bytes=0)
    with pytest.raises(duckdb.OutOfMemoryException):
        engine._aggregate_sql(prepared.spec, None)  # the first attempt alone fails
    seen = _limits_opened(monkeypatch)
    got = engine.aggregate(prepared.spec)
    assert seen[-1] == 256  # the retry: a database of its own, 128 MiB x 2 threads
    assert got.keys == want.keys
    for name, values in want.values.items():
        assert (got.values[name] == values).all()


def _plan_of(plan: dict[str, Any]) -> Any:
    from dpsieve.queries.plan import from_spec

    return from_spec(plan, "add_remove")


def test_a_given_limit_is_never_raised(tmp_path: Path, monkeypatch: Any) -> None:
    path = _big_parquet(tmp_path)
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    s = Session(str(path), budget=PureDP(1.0), privacy_unit="u", memory_limit="1MiB")
    seen = _limits_opened(monkeypatch)
    with pytest.raises(QueryFailedError):  # out of memory after the charge: one message
        s.query(UNIT_PLAN)
    assert seen
    assert set(seen) == {_mib("1 MiB")}  # never retried under more
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1MiB")
    t = Session(str(path), budget=PureDP(1.0), privacy_unit="u")
    seen.clear()
    with pytest.raises(QueryFailedError):
        t.query(UNIT_PLAN)
    assert seen
    assert set(seen) == {_mib("1 MiB")}


def test_a_plan_ranking_rows_starts_under_the_retry_limit(tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    path = _big_parquet(tmp_path)
    s = Session(str(path), budget=PureDP(1.0), privacy_unit="u")
    s.schema()
    seen = _limits_opened(monkeypatch)
    assert s.query(ROW_PLAN).answer is not None
    assert seen[-1] == _mib(retry_memory_limit().replace("MiB", " MiB"))
    seen.clear()
    assert s.query(UNIT_PLAN).answer is not None
    assert seen[-1] == _mib(default_memory_limit().replace("MiB", " MiB"))


def test_a_row_plan_out_of_memory_ranks_twice_under_the_same_limit(
        tmp_path: Path, monkeypatch: Any) -> None:
    """The one-ranking SQL of row-level sums keeps each large cell's chosen rows in the
    cells' aggregate; out of memory there, the engine runs the SQL that ranks the rows
    twice under the same limit (never more), with the same aggregates."""
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    path = _big_parquet(tmp_path)
    s = Session(str(path), budget=PureDP(1.0), privacy_unit="u")
    from dpsieve.queries.prepare import prepare

    spec = prepare(_plan_of(ROW_PLAN), s.schema(), s.neighbouring).spec
    want = DuckDBEngine(path, memory_limit="1GB").aggregate(spec)
    real = engine_module.compile_sql
    asked: list[bool] = []

    def fails_once(*args: Any, rank_twice: bool = False) -> Any:
        asked.append(rank_twice)
        if not rank_twice:
            raise duckdb.OutOfMemoryException("out of memory (test)")
        return real(*args, rank_twice=rank_twice)
    monkeypatch.setattr(engine_module, "compile_sql", fails_once)
    for given in (None, "200MiB"):
        engine = DuckDBEngine(path, memory_limit=given)
        seen = _limits_opened(monkeypatch)
        asked.clear()
        got = engine.aggregate(spec)
        assert asked == [False, True]
        limit = retry_memory_limit() if given is None else given
        assert seen == [_mib(limit.replace("MiB", " MiB"))] * 2  # the same limit twice
        assert got.keys == want.keys
        for name, values in want.values.items():
            assert (got.values[name] == values).all()
        batches = list(DuckDBEngine(path, memory_limit=given).aggregate_batches(
            replace(spec, keys=None), 2))
        assert batches
        assert asked[-2:] == [False, True]
