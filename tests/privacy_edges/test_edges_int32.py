"""Row integers narrowed to INTEGER in the DuckDB SQL (``duckdb_sql._int32``) at the
INTEGER edges: rows clamped to ``[-2^31, 2^31 - 1]`` exactly, values beyond it, NULLs, key
indices of a range around ``2^31``, and sums of many such rows (far beyond INTEGER: they
must be HUGEINT) -- without a privacy unit, with one on the one-ranking SQL (``min_by``
lists summed by ``list_sum``), on the rank-twice SQL and above ``TOP_MAX_ROWS``. The
DuckDB engine gives the reference engine's aggregates exactly on a data set and on its
neighbour with one more unit of extreme rows: no cast fails, nothing wraps."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest

from dpsieve.queries import BoundingSpec, Column, ColumnType, Level, RowCount, ValueSum
from dpsieve.queries.engines import DuckDBEngine, ReferenceEngine

LO, HI = -(2**31), 2**31 - 1
COLS = (Column("u", ColumnType.INTEGER), Column("k", ColumnType.INTEGER),
        Column("v", ColumnType.INTEGER))
#: 6 units, up to 9 rows per (unit, key); values at, inside and beyond the edges, NULLs
BASE = [{"u": u, "k": 2**31 - 2 + (i % 4), "v": [HI, LO, HI, HI - 1, None, 2**40, -(2**40),
                                                   0, LO + 1][(u + i) % 9]}
        for u in range(6) for i in range(4 + 5 * (u % 2))]
ADDED = [{"u": 99, "k": 2**31 - 1, "v": HI}] * 11 + [{"u": 99, "k": 2**31 + 1, "v": -(2**62)},
                                                     {"u": 99, "k": 2**31 - 2, "v": None}]


class _RankTwice(DuckDBEngine):
    def _attempts(self, spec: BoundingSpec) -> list[tuple[str | None, bool]]:
        return [(None, True)]


def _con(rows: list[dict[str, Any]]) -> Any:
    con = duckdb.connect()
    con.execute('CREATE TABLE t ("u" BIGINT, "k" BIGINT, "v" BIGINT)')
    con.executemany("INSERT INTO t VALUES (?, ?, ?)", [[r["u"], r["k"], r["v"]] for r in rows])
    return con


def _spec(unit: bool, max_rows: int | None, level: Level = Level.ROW) -> BoundingSpec:
    s = ValueSum("s", "v", 1.0, float(LO), float(HI), LO, HI, level,
                 *((-(2**45), 2**45) if level == Level.UNIT else (None, None)))
    keys = tuple((2**31 - 2 + i,) for i in range(4))  # ids 0..3 of values around 2^31
    return BoundingSpec((RowCount("n", Level.ROW), s), ("k",), keys, (),
                        "u" if unit else None, 3 if unit else 1, max_rows, 17)


@pytest.mark.parametrize(("engine", "unit", "max_rows", "level"), [
    (DuckDBEngine, False, None, Level.ROW),
    (DuckDBEngine, False, None, Level.UNIT),
    (DuckDBEngine, True, 3, Level.ROW),  # min_by lists, list_sum
    (DuckDBEngine, True, 50, Level.ROW),  # every cell within max_rows: plain sums
    (DuckDBEngine, True, 2**40, Level.ROW),  # above TOP_MAX_ROWS: ranked twice
    (_RankTwice, True, 3, Level.ROW),
    (DuckDBEngine, True, None, Level.UNIT),
])
def test_int32_rows_and_key_ids_at_the_edges_match_the_reference(
        engine: type[DuckDBEngine], unit: bool, max_rows: int | None, level: Level) -> None:
    spec = _spec(unit, max_rows, level)
    for rows in (BASE, BASE + ADDED):  # a data set and its neighbour with one more unit
        eng = engine(connection=_con(rows), table="t")
        sql, _ = eng.sql(spec)
        assert "AS INTEGER) END) AS _g" in sql  # key ids narrowed
        if level == Level.ROW:  # the rows narrowed: the path exercised
            assert "CAST(least(greatest(" in sql
            assert "AS INTEGER) AS _m1" in sql
        got = eng.aggregate(spec)
        want = ReferenceEngine(rows, COLS).aggregate(spec)
        assert got.same_as(want), (want.sorted(), got.sorted())
        # some cell's sum is far outside INTEGER: the sums are not INTEGER arithmetic
        assert max(abs(int(x)) for x in want.values["s"].tolist()) > 2**33
