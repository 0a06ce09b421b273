"""Issue 24 item 4: can a sort-free sample of rows replace the rank window? (a prototype)

    python -m benchmarks._queries_rows_classes [--repeats 3] [--rows 10000000]

The per-row bounding plan of ``benchmarks.queries_engines --only rows`` ranks every row of
a (unit, group) cell by value (``row_number() OVER (PARTITION BY unit, g ORDER BY value)``)
and keeps the L-inf ranks of smallest keyed priority: a sort of every row. The candidate
evaluated here samples without a sort, still uniformly and from the unit's own rows only:
the rows of a cell are grouped into classes of equal row integer ``v`` (a hash aggregate on
(unit, g, v), multiplicity ``m``), each class gives its ``m`` interchangeable rows the
positions ``(v, j)``, ``j < m``, with priorities ``mix(mix(b1 ^ v) ^ j)`` (``b1`` the cell's
word), and each cell keeps its L-inf candidates of smallest priority (``min_by(.., n)``, a
top-k aggregate). Variants, each in a fresh process, interleaved, DuckDB on 2 threads:

* ``hand``: ``HANDWRITTEN_ROWS_SQL`` (rows sampled by a hash of their value; not uniform
  over equal values), DuckDB's own memory limit;
* ``current``: dpsieve's SQL for the plan (``compile_sql``), under 256 MiB;
* ``classes``: the cost floor of any sample built on classes: the scan, the classes'
  hash aggregate, the cells' count and sum from the classes and the L0 choice, no sample;
* ``expand``: the candidate above, each class's ``m`` candidates unnested;
* ``join``: the same with the cells' counts first (from the classes) and candidates made
  only for the cells of more than L-inf rows (a join of the classes to those cells).

The last two run out of memory under 256 MiB (the top-k states of every cell, or the
classes held for the join) and are timed under 2 GiB. Each prints one JSON line per run.
A one-off measurement of a design that was not adopted (benchmarks/RESULTS.md, the row
"issue 24 item 4"), so not one of ``run_all``'s modules (its name starts with ``_``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks import _queries_data as qd

L0, LINF = qd.L0, qd.LINF
HU = "CAST(CAST(_u AS HUGEINT) & 18446744073709551615 AS UBIGINT)"


def _current(path: Path) -> tuple[str, dict[str, Any]]:
    """dpsieve's SQL and parameters for the per-row plan on ``path``."""
    from benchmarks._queries_runners import row_level_query
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries.engines.duckdb import DuckDBEngine
    from dpsieve.queries.prepare import prepare
    from dpsieve.queries.schema import Schema

    eng = DuckDBEngine(str(path))
    spec = prepare(row_level_query(), Schema(eng.columns(), "unit"),
                   Neighbouring.ADD_REMOVE).spec
    return eng.sql(spec)


def _variant(name: str, path: Path, seed: int | None = None) -> tuple[str, dict[str, Any]]:
    """The SQL and parameters of a variant (module docstring); ``seed``: the sampling
    seed (default: a random one)."""
    from dpsieve.queries._mix import sampling_keys
    from dpsieve.queries.engines.duckdb_sql import _mix

    sql, params = _current(path)
    if name == "current":
        return sql, params
    base = sql[len("WITH "):sql.index(", _dps_c AS (")]
    params = {k: v for k, v in params.items() if f"${k} " in base or f"${k})" in base}
    k0, k1 = sampling_keys(int.from_bytes(os.urandom(8), "little") if seed is None else seed)
    params.update(k0=k0, k1=k1)
    # the cells' L0 priorities and choice, and the answer (as compile_sql writes them)
    a0 = _mix("xor(_hu, CAST($k0 AS UBIGINT))")

    def cells_of(agg: str) -> str:
        c = f"SELECT *, {HU} AS _hu, CAST(_g AS UBIGINT) AS _hg FROM ({agg})"
        return (f"SELECT * EXCLUDE (_a0, _hu, _hg), {_mix('xor(_a0, _hg)')} AS _p0 FROM "
                f"(SELECT *, {a0} AS _a0 FROM ({c}))")

    tail = (f"_dps_k AS (SELECT * FROM _dps_c QUALIFY row_number() OVER (PARTITION BY _u "
            f"ORDER BY _p0, _g) <= {L0}) SELECT _g, count(*) AS _units, sum(least(_n, {LINF})) "
            "AS _o0, sum(coalesce(list_sum(_r1), 0) + coalesce(_q1, 0)) AS _o1 FROM _dps_k "
            "GROUP BY _g")
    cls = "SELECT _u, _g, _m1, count(*) AS _c FROM _dps_b GROUP BY _u, _g, _m1"
    if name == "classes":
        agg = ("SELECT _u, _g, sum(_c) AS _n, NULL::INTEGER[] AS _r1, sum(_m1 * _c) AS _q1 "
               "FROM _dps_cls GROUP BY _u, _g")
        return f"WITH {base}, _dps_cls AS ({cls}), _dps_c AS ({cells_of(agg)}), {tail}", params
    if name == "expand":
        s = f"(SELECT _u, _g, _m1, _c, xor({HU}, CAST($k1 AS UBIGINT)) AS _x FROM _dps_cls)"
        s = f"(SELECT * EXCLUDE (_x), xor({_mix('_x')}, CAST(_g AS UBIGINT)) AS _x FROM {s})"
        s = f"(SELECT * EXCLUDE (_x), xor({_mix('_x')}, CAST(_m1 AS UBIGINT)) AS _x FROM {s})"
        s = f"(SELECT * EXCLUDE (_x), {_mix('_x')} AS _x FROM {s})"
        s = (f"(SELECT _u, _g, _m1, _x, CASE WHEN _c = 1 THEN CAST(0 AS UBIGINT) ELSE "
             f"CAST(unnest(range(_c)) AS UBIGINT) END AS _j FROM {s})")
        s = f"(SELECT _u, _g, _m1, {_mix('xor(_x, _j)')} AS _p1 FROM {s})"
        agg = (f"SELECT _u, _g, count(*) AS _n, min_by(_m1, _p1, {LINF}) AS _t, sum(_m1) AS _s "
               f"FROM {s} GROUP BY _u, _g")
        agg = (f"SELECT _u, _g, _n, CASE WHEN _n > {LINF} THEN _t END AS _r1, CASE WHEN "
               f"_n <= {LINF} THEN _s END AS _q1 FROM ({agg})")
        return f"WITH {base}, _dps_cls AS ({cls}), _dps_c AS ({cells_of(agg)}), {tail}", params
    assert name == "join", name
    cells = "SELECT _u, _g, sum(_c) AS _n, sum(_m1 * _c) AS _s FROM _dps_cls GROUP BY _u, _g"
    big = (f"SELECT _u, _g, xor({HU}, CAST($k1 AS UBIGINT)) AS _x FROM _dps_cells "
           f"WHERE _n > {LINF}")
    big = f"SELECT _u, _g, xor({_mix('_x')}, CAST(_g AS UBIGINT)) AS _x FROM ({big})"
    big = f"SELECT _u, _g, {_mix('_x')} AS _b1 FROM ({big})"
    s = (f"(SELECT c._u, c._g, c._m1, c._c, xor(b._b1, CAST(c._m1 AS UBIGINT)) AS _x FROM "
         f"_dps_cls c JOIN ({big}) b ON c._u = b._u AND c._g = b._g)")
    s = f"(SELECT * EXCLUDE (_x), {_mix('_x')} AS _x FROM {s})"
    s = (f"(SELECT _u, _g, _m1, _x, CASE WHEN _c = 1 THEN CAST(0 AS UBIGINT) ELSE "
         f"CAST(unnest(range(_c)) AS UBIGINT) END AS _j FROM {s})")
    s = f"(SELECT _u, _g, _m1, {_mix('xor(_x, _j)')} AS _p1 FROM {s})"
    top = f"SELECT _u, _g, min_by(_m1, _p1, {LINF}) AS _r1 FROM {s} GROUP BY _u, _g"
    agg = (f"SELECT c._u, c._g, c._n, t._r1, CASE WHEN c._n <= {LINF} THEN c._s END AS _q1 "
           f"FROM _dps_cells c LEFT JOIN ({top}) t ON c._u = t._u AND c._g = t._g")
    return (f"WITH {base}, _dps_cls AS ({cls}), _dps_cells AS ({cells}), "
            f"_dps_c AS ({cells_of(agg)}), {tail}", params)


def run_one(name: str, path: Path, limit: str | None, seed: int | None = None
            ) -> dict[str, Any]:
    """One run of a variant in this process: wall and CPU seconds, peak memory, the
    total count and the per-group sums (as ``g: sum``)."""
    import duckdb

    from benchmarks._queries_runners import HANDWRITTEN_ROWS_SQL

    if name == "hand":
        sql, params = HANDWRITTEN_ROWS_SQL, {"seed": int.from_bytes(os.urandom(4), "little")}
    else:
        sql, params = _variant(name, path, seed)
    params["path"] = str(path)
    params = {k: v for k, v in params.items() if re.search(rf"\${k}\b", sql)}
    t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)
    with tempfile.TemporaryDirectory(prefix="qbench-classes-") as tmp:
        cfg: dict[str, Any] = {"threads": 2, "preserve_insertion_order": False,
                               "temp_directory": tmp}
        if limit is not None:
            cfg["memory_limit"] = limit
        con = duckdb.connect(config=cfg)
        try:
            con.execute("SET enable_progress_bar = false")
            rows = con.execute(sql, params).fetchall()
        except duckdb.OutOfMemoryException:
            return {"name": name, "limit": limit, "failed": "out of memory"}
        finally:
            con.close()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime
    count = sum(int(r[1 if name == "hand" else 2]) for r in rows)
    sums = {int(r[0]): float(r[2 if name == "hand" else 3] or 0) for r in rows}
    return {"name": name, "limit": limit, "wall": round(time.perf_counter() - t0, 2),
            "cpu": round(cpu, 2), "peak_mib": r1.ru_maxrss // 1024, "count": count,
            "sums": sums}


RUNS = (("hand", None), ("current", "256MiB"), ("classes", "256MiB"), ("expand", "2GiB"),
        ("join", "2GiB"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--data", type=Path, default=Path("/tmp/dpsieve-qbench"))
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)  # (variant, limit): a child
    a = ap.parse_args()
    path = qd.ensure(a.data, a.rows)
    if a.one:
        name, limit = a.one
        r = run_one(name, path, None if limit == "-" else limit)
        print(json.dumps({k: v for k, v in r.items() if k != "sums"}), flush=True)
        return
    print(json.dumps({"load": os.getloadavg()}), flush=True)
    runs = [*[r for _ in range(a.repeats) for r in RUNS], ("expand", "256MiB"),
            ("join", "256MiB")]
    for name, limit in runs:
        subprocess.run([sys.executable, "-m", "benchmarks._queries_rows_classes", "--rows",
                        str(a.rows), "--data", str(a.data), "--one", name, limit or "-"],
                       check=True)
    print(json.dumps({"load": os.getloadavg()}), flush=True)


if __name__ == "__main__":
    main()
