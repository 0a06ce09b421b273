"""Constants, keys and categories against a column's storage type, and internal SQL names.

A plan whose ``where`` held a constant outside an integer column's storage range (``n ==
2**70`` on an INTEGER column) was accepted, charged, and then failed inside DuckDB only
when a row reached the comparison: ``where [pid == 4242, n == 2**70]`` failed if and only
if unit 4242 was in the data -- an exact membership oracle. Here:

* the refusal: every entry of such a plan is refused before the spend, with the same
  outcome and text on neighbouring data sets (with and without the unit), for every
  integer storage type, on files read by SQL and on the kept (in-memory) engine;
* the engines' totality: the DuckDB SQL given such constants directly (as after a table
  changed under a checked plan) answers exactly as the reference engine, never fails, on
  rows holding every type's extremes -- UHUGEINT units above 2^127 included;
* internal names: columns called like the SQL's internal names (``v``, ``b``, ``k0``,
  ``gid``, ``_u``, ...) give the reference's aggregates.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest

from dpsieve import Session
from dpsieve.accounting.events import PureDP
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
from dpsieve.queries.engines import DuckDBEngine, PandasEngine, PolarsEngine, ReferenceEngine
from dpsieve.queries.schema import Column, ColumnType, integer_range

INT_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT", "UHUGEINT")
TARGET = 4242


def _table(path: Path, storage: str, with_target: bool) -> str:
    """A DuckDB file with table ``t(pid BIGINT, n <storage>, x DOUBLE)``: 60 units, and
    the target unit holding the type's extremes when ``with_target``."""
    lo, hi = integer_range(storage)
    rows = [(i, lo + i % 7, float(i)) for i in range(60)]
    if with_target:
        rows += [(TARGET, hi, 1.0), (TARGET, lo, 2.0), (TARGET, None, 3.0)]
    con = duckdb.connect(str(path))
    con.execute(f"CREATE TABLE t (pid BIGINT, n {storage}, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, CAST(CAST(? AS VARCHAR) AS "
                    f"{storage}), ?)", [(p, None if n is None else str(n), x)
                                        for p, n, x in rows])
    con.close()
    return str(path)


def _plans(storage: str) -> list[dict[str, Any]]:
    lo, hi = integer_range(storage)
    bad = [v for v in (hi + 1, lo - 1, 2**70, -(2**130)) if not lo <= v <= hi]
    priv = {"type": "pure", "eps": 0.01}
    count = [{"type": "count", "per": "unit"}]
    out: list[dict[str, Any]] = []
    for v in bad:
        for op in ("==", "<"):
            out.append({"type": "query", "privacy": priv, "aggregations": count,
                        "where": [{"column": "pid", "op": "==", "value": TARGET},
                                  {"column": "n", "op": op, "value": v}]})
        out.append({"type": "query", "privacy": priv, "aggregations": count,
                    "where": [{"column": "pid", "op": "==", "value": TARGET},
                              {"column": "n", "op": "in", "value": [0, v]}]})
        out.append({"type": "query", "privacy": priv, "aggregations": count,
                    "group_by": ["n"], "keys": [[max(lo, 0)], [v]]})
        out.append({"type": "query", "privacy": priv, "contribution": {"max_rows": 3},
                    "aggregations": [{"type": "histogram", "column": "n",
                                      "categories": [max(lo, 0), v]}]})
    return out


def _outcome(path: str, plan: dict[str, Any]) -> tuple[str, str, bool]:
    s = Session(path, table="t", budget=PureDP(1.0), privacy_unit="pid")
    before = s.remaining().to_dict()
    try:
        s.run(plan)
        kind, text = "ok", ""
    except DPError as e:
        kind, text = type(e).__name__, str(e)
    except Exception as e:  # any other failure is the defect
        kind, text = "error " + type(e).__name__, str(e)
    return kind, text, s.remaining().to_dict() == before


@pytest.mark.parametrize("storage", INT_TYPES)
def test_out_of_range_constants_are_refused_alike_on_neighbours(storage: str,
                                                              tmp_path: Path) -> None:
    without = _table(tmp_path / "d.duckdb", storage, False)
    with_ = _table(tmp_path / "d1.duckdb", storage, True)
    for plan in _plans(storage):
        a, b = _outcome(without, plan), _outcome(with_, plan)
        assert a == b, (plan, a, b)
        assert a[0] == "ValidationError", (plan, a)
        assert a[2], (plan, a)  # refused: nothing spent
        assert f"storage type {storage}" in a[1]


@pytest.mark.parametrize("kind", ["int8", "int32", "uint8", "uint64"])
def test_parquet_and_kept_engines_refuse_before_the_spend(kind: str, tmp_path: Path) -> None:
    """Parquet files (read by SQL per query, and kept open as the service keeps them)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dpsieve.session.data import FileEngines

    t = getattr(pa, kind)()
    lo, hi = (0 if kind.startswith("u") else -(2 ** (t.bit_width - 1)),
              2 ** (t.bit_width - (0 if kind.startswith("u") else 1)) - 1)
    outs = []
    for with_target in (False, True):
        pids = list(range(40)) + ([TARGET, TARGET] if with_target else [])
        ns = [i % 5 for i in range(40)] + ([lo, hi] if with_target else [])
        path = tmp_path / f"d{int(with_target)}.parquet"
        pq.write_table(pa.table({"pid": pa.array(pids, pa.int64()), "n": pa.array(ns, t)}),
                       path)
        for engine in (None, FileEngines().get(str(path))):
            s = Session(str(path), budget=PureDP(1.0), privacy_unit="pid", engine=engine)
            for v in (hi + 1, lo - 1, 2**70):
                plan = {"type": "query", "privacy": {"type": "pure", "eps": 0.01},
                        "aggregations": [{"type": "count", "per": "unit"}],
                        "where": [{"column": "pid", "op": "==", "value": TARGET},
                                  {"column": "n", "op": "==", "value": v}]}
                try:
                    s.run(plan)
                    outs.append((with_target, "ok"))
                except DPError as e:
                    outs.append((with_target, type(e).__name__, str(e)))
            assert s.remaining().to_dict()["exact"] == "1/1"
    half = len(outs) // 2
    assert [o[1:] for o in outs[:half]] == [o[1:] for o in outs[half:]]
    assert all(o[1] == "ValidationError" for o in outs)


def _extreme_rows(storage: str) -> list[dict[str, Any]]:
    lo, hi = integer_range(storage)
    vals = [lo, lo + 1, 0 if lo <= 0 else lo + 2, hi - 1, hi, None]
    rng = np.random.default_rng(3)
    return [{"u": vals[int(rng.integers(0, 5))], "n": vals[i % len(vals)],
             "x": float(rng.normal())} for i in range(48)]


def _specs(storage: str) -> list[BoundingSpec]:
    lo, hi = integer_range(storage)
    out_of = (hi + 1, lo - 1, 2**129, -(2**129))
    specs = []
    for v in out_of:
        for op in (Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE):
            specs.append(BoundingSpec((RowCount("c", Level.UNIT),), (), ((),),
                                      (Predicate("n", op, v),), "u", 2, None, 11))
        specs.append(BoundingSpec((RowCount("c", Level.UNIT),), (), ((),),
                                  (Predicate("n", Op.IN, (v, lo)),), "u", 2, None, 12))
        specs.append(BoundingSpec((RowCount("c", Level.UNIT),), (), ((),),
                                  (Predicate("n", Op.NOT_IN, (v,)),), "u", 2, None, 13))
        specs.append(BoundingSpec((RowCount("c", Level.ROW),), ("n",), ((v,), (hi,), (lo,)),
                                  (), "u", 2, 3, 14))
        specs.append(BoundingSpec((BucketCount("h", "n", categories=(lo, v, hi)),), (),
                                  ((),), (), "u", 2, 3, 15))
    # contiguous keys at the top of the range, and observed keys holding the extremes
    specs.append(BoundingSpec((RowCount("c", Level.ROW),), ("n",),
                              ((hi - 1,), (hi,), (hi + 1,)), (), "u", 2, 3, 16))
    specs.append(BoundingSpec((RowCount("c", Level.ROW),
                               ValueSum("s", "x", 0.25, -3.0, 3.0, -12, 12, Level.ROW)),
                              ("n",), None, (), "u", 2, 3, 17))
    return specs


@pytest.mark.parametrize("storage", INT_TYPES)
def test_duckdb_sql_is_total_on_constants_outside_the_storage_range(storage: str) -> None:
    rows = _extreme_rows(storage)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t (u {storage}, n {storage}, x DOUBLE)")
    con.executemany(f"INSERT INTO t VALUES (CAST(CAST(? AS VARCHAR) AS {storage}), "
                    f"CAST(CAST(? AS VARCHAR) AS {storage}), ?)",
                    [[None if r[c] is None else str(r[c]) for c in ("u", "n")] + [r["x"]]
                     for r in rows])
    eng = DuckDBEngine(connection=con, table="t")
    assert {c.name: c.storage for c in eng.columns()}["n"] == storage
    cols = (Column("u", ColumnType.INTEGER), Column("n", ColumnType.INTEGER),
            Column("x", ColumnType.FLOAT))
    ref = ReferenceEngine(rows, cols)
    for spec in _specs(storage):
        assert eng.aggregate(spec).same_as(ref.aggregate(spec)), spec


@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8", "uint64"])
def test_frame_engines_are_exact_on_every_integer_dtype(dtype: str) -> None:
    """uint64 values above 2^63 keep their value (compared and encoded exactly)."""
    import pandas as pd
    import polars as pl

    storage = {"int8": "TINYINT", "int32": "INTEGER", "uint8": "UTINYINT",
               "uint64": "UBIGINT"}[dtype]
    rows = [r for r in _extreme_rows(storage) if r["u"] is not None and r["n"] is not None]
    frame = pd.DataFrame({"u": np.asarray([r["u"] for r in rows], dtype=dtype),
                          "n": np.asarray([r["n"] for r in rows], dtype=dtype),
                          "x": [r["x"] for r in rows]})
    cols = (Column("u", ColumnType.INTEGER), Column("n", ColumnType.INTEGER),
            Column("x", ColumnType.FLOAT))
    ref = ReferenceEngine(rows, cols)
    for eng in (PandasEngine(frame), PolarsEngine(pl.from_pandas(frame))):
        assert {c.name: c.storage for c in eng.columns()}["n"] == storage
        for spec in _specs(storage):
            assert eng.aggregate(spec).same_as(ref.aggregate(spec)), (eng.name, spec)


NAMES = ("v", "b", "k0", "gid", "_u", "_g", "_m0", "_n", "_dps_b", "_dpsieve_src")


def test_column_names_never_collide_with_internal_sql_names() -> None:
    rng = np.random.default_rng(9)
    cols = tuple(Column(n, ColumnType.INTEGER) for n in NAMES)
    rows = [{n: int(rng.integers(0, 4)) for n in NAMES} for _ in range(80)]
    con = duckdb.connect()
    con.execute("CREATE TABLE t (" + ", ".join(f'"{n}" BIGINT' for n in NAMES) + ")")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' for _ in NAMES)})",
                    [[r[n] for n in NAMES] for r in rows])
    eng = DuckDBEngine(connection=con, table="t")
    ref = ReferenceEngine(rows, cols)
    seed = 5
    for unit in (None, "_u", "gid", "v"):
        for gb in (("k0",), ("b", "gid"), ("_dps_b",), ()):
            for keys in (None, ((0,) * len(gb), (2,) * len(gb))):
                if not gb and keys is not None:
                    continue
                seed += 1
                spec = BoundingSpec(
                    (RowCount("c", Level.ROW),
                     BucketCount("h", "v", categories=(0, 1, 3)),
                     ValueSum("s", "b", 1.0, 0.0, 3.0, 0, 3, Level.ROW)),
                    gb, keys if gb else ((),),
                    (Predicate("_dpsieve_src", Op.NE, 3), Predicate("_g", Op.IN, (0, 1, 2))),
                    unit, 2 if unit else 1, 2 if unit else None, seed)
                assert eng.aggregate(spec).same_as(ref.aggregate(spec)), spec
