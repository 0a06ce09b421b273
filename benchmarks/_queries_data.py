"""Synthetic user-level data for benchmarks/queries_engines.py, written by DuckDB.

One Parquet file per size: columns ``unit`` (BIGINT, the privacy unit), ``g`` (BIGINT,
one of ``GROUPS`` public groups) and ``value`` (DOUBLE in [0, 10)). Rows are generated
and written by one streaming DuckDB ``COPY`` (never built in Python memory), from a
counter-based hash, so a file is a pure function of (rows, seed):

* the privacy unit of row ``i`` is Zipf-distributed: ``floor(x)`` for ``x`` drawn by the
  inverse CDF of the density ``x^-s`` on ``[1, U + 1)`` (``s = ZIPF_S``, ``U = rows / 10``
  candidate units; most of them never appear, the first has ~8 % of the rows);
* each unit has ``1 + hash(u) % 4`` candidate groups (at most ``MAX_UNIT_GROUPS``), each
  ``hash(u, j) % GROUPS``; a row picks one of its unit's candidates uniformly;
* the value is uniform in [0, 10).

Files are cached in the data directory (``zipf-<rows>-s<seed>-v1.parquet``) with the
exact per-group answers beside them (``.truth.json``: unbounded counts and sums, and the
bounded ones -- deterministic here because no unit has more than ``MAX_UNIT_GROUPS``
groups, so the L0 bound never drops a group).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

GROUPS = 1000
MAX_UNIT_GROUPS = 4
ZIPF_S = 1.1
VERSION = 1


def data_path(data_dir: Path, rows: int, seed: int = 0) -> Path:
    return data_dir / f"zipf-{rows}-s{seed}-v{VERSION}.parquet"


def _uniform(expr: str, salt: int, seed: int) -> str:
    """A uniform double in [0, 1) from DuckDB's 64-bit ``hash`` of (expr, salt, seed)."""
    return f"(CAST(hash({expr}, {salt}, {seed}) >> 11 AS DOUBLE) / 9007199254740992.0)"


def generator_sql(rows: int, seed: int) -> str:
    """The SELECT producing the table (streamed by COPY)."""
    units = max(1, rows // 10)
    a = 1.0 - ZIPF_S
    top = float(units + 1) ** a - 1.0
    x = f"pow(1.0 + {_uniform('i', 1, seed)} * {top!r}, {1.0 / a!r})"
    unit = f"least(CAST(floor({x}) AS BIGINT), {units})"
    k = f"(1 + hash(u, 2, {seed}) % {MAX_UNIT_GROUPS})"
    j = f"(hash(i, 3, {seed}) % {k})"
    return (f"SELECT u AS unit, CAST(hash(u, 4 + {j}, {seed}) % {GROUPS} AS BIGINT) AS g, "
            f"10.0 * {_uniform('i', 5, seed)} AS value "
            f"FROM (SELECT i, {unit} AS u FROM range({rows}) t(i))")


def connect(memory_limit: str = "700MB", threads: int = 2) -> Any:
    import duckdb

    con = duckdb.connect(config={"memory_limit": memory_limit, "threads": threads,
                                 "preserve_insertion_order": False})
    con.execute("SET enable_progress_bar = false")
    return con


def ensure(data_dir: Path, rows: int, seed: int = 0) -> Path:
    """The cached file for (rows, seed), generated (and its truth computed) if missing."""
    path = data_path(data_dir, rows, seed)
    truth = path.with_suffix(".truth.json")
    if path.is_file() and truth.is_file():
        return path
    data_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    t0 = time.perf_counter()
    con = connect()
    try:
        con.execute(f"COPY ({generator_sql(rows, seed)}) TO '{tmp}' "
                    "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 262144)")
        os.replace(tmp, path)
        facts = _truth(con, path)
    finally:
        con.close()
    facts.update(rows=rows, seed=seed, seconds=round(time.perf_counter() - t0, 1),
                 bytes=path.stat().st_size)
    truth.write_text(json.dumps(facts))
    return path


def _truth(con: Any, path: Path) -> dict[str, Any]:
    src = f"read_parquet('{path}')"
    exact = con.execute(f"SELECT g, count(*), sum(value) FROM {src} GROUP BY g").fetchall()
    cells = (f"SELECT unit, g, count(*) AS n, sum(value) AS s FROM {src} GROUP BY unit, g")
    bounded = con.execute(
        f"SELECT g, sum(least(n, {LINF})), sum(least(greatest(s, 0), {UNIT_SUM_UPPER})) "
        f"FROM ({cells}) GROUP BY g").fetchall()
    stats = con.execute(
        f"SELECT count(*), max(k), max(n) FROM (SELECT unit, count(DISTINCT g) AS k, "
        f"count(*) AS n FROM {src} GROUP BY unit)").fetchone()
    assert stats is not None
    assert stats[1] <= MAX_UNIT_GROUPS
    return {"count": _dense(exact, 1), "sum": _dense(exact, 2),
            "bounded_count": _dense(bounded, 1), "bounded_sum": _dense(bounded, 2),
            "units": int(stats[0]), "max_unit_groups": int(stats[1]),
            "max_unit_rows": int(stats[2])}


def _dense(rows: list[tuple[Any, ...]], col: int) -> list[float]:
    out = [0.0] * GROUPS
    for r in rows:
        out[int(r[0])] = float(r[col])
    return out


def truth(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(path.with_suffix(".truth.json").read_text())
    return loaded


# The workload's contribution bounds (shared with the runners).
L0 = 4
LINF = 10
VALUE_UPPER = 10.0
UNIT_SUM_UPPER = 100.0
EPS = 1.0
