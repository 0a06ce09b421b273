"""DuckDB's memory limit (issue 12: a Session query's peak memory must not grow with the
table): bounded by default (128 MiB per thread), changed by ``memory_limit=`` or
``DPSIEVE_DUCKDB_MEMORY_LIMIT``, a bad value refused before any spend, naming it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pytest

from dpsieve import Session
from dpsieve.accounting.events import PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries.engines.duckdb import (
    MEMORY_LIMIT_ENV,
    DuckDBEngine,
    default_memory_limit,
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


def test_default_is_128_mib_per_thread_and_reaches_duckdb(tmp_path: Path,
                                                          monkeypatch: Any) -> None:
    monkeypatch.delenv(MEMORY_LIMIT_ENV, raising=False)
    path = _parquet(tmp_path)
    assert default_memory_limit(3) == "384MiB"
    assert default_memory_limit() == f"{128 * (os.cpu_count() or 1)}MiB"
    assert _mib(_setting(DuckDBEngine(path, threads=3))) == 384
    assert _mib(_setting(DuckDBEngine(path, memory_limit="1GB"))) == pytest.approx(
        1e9 / 2**20, rel=1e-3)
    kept = DuckDBEngine(path, threads=3, keep_open=True)._load().con  # the service's too
    assert _mib(str(kept.execute("SELECT current_setting('memory_limit')").fetchone()[0])
                ) == 384


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
