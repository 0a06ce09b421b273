"""The L0 choice when h(g) collides: 128-bit keys equal modulo 2^64 (HUGEINT -2^127 and 0)
have one 64-bit encoding, so two cells of a unit tie on (p0, h(g)). Every engine breaks the
tie by the key itself (by value, missing last): the kept cells are a function of the unit's
own cells, whatever the scan order (docs/queries-engines.md step 4, proofs Lemma 2)."""

from __future__ import annotations

import duckdb
import numpy as np

from dpsieve.queries.engine import BoundingSpec, Level, RowCount
from dpsieve.queries.engines import DuckDBEngine, ReferenceEngine
from dpsieve.queries.schema import Column, ColumnType

LO = -(2**127)


def _rows(order: np.ndarray) -> list[dict[str, int | None]]:
    # unit 1: groups LO and 0 (colliding) with 3 and 1 rows; unit 2: 0 and None;
    # filler units 3..40 in groups 5 and 6 (other rows, shuffled around the tied cells)
    base: list[dict[str, int | None]] = (
        [{"u": 1, "n": LO}] * 3 + [{"u": 1, "n": 0}] + [{"u": 2, "n": 0}] * 2
        + [{"u": 2, "n": None}] + [{"u": u, "n": 5 + u % 2} for u in range(3, 41)])
    return [dict(base[i]) for i in order]


def _duckdb(rows: list[dict[str, int | None]]) -> DuckDBEngine:
    con = duckdb.connect()
    con.execute("CREATE TABLE t (u HUGEINT, n HUGEINT)")
    con.executemany("INSERT INTO t VALUES (?, CAST(CAST(? AS VARCHAR) AS HUGEINT))",
                    [[r["u"], None if r["n"] is None else str(r["n"])] for r in rows])
    return DuckDBEngine(connection=con, table="t")


def test_tied_cells_are_chosen_by_key_whatever_the_scan_order() -> None:
    cols = (Column("u", ColumnType.INTEGER), Column("n", ColumnType.INTEGER))
    rng = np.random.default_rng(7)
    n_rows = len(_rows(np.arange(45)))
    for seed in range(3):
        spec = BoundingSpec((RowCount("c", Level.ROW),), ("n",), None, (), "u", 1, None,
                            seed)
        first = None
        for _ in range(4):
            rows = _rows(rng.permutation(n_rows))
            ref = ReferenceEngine(rows, cols).aggregate(spec)
            got = _duckdb(rows).aggregate(spec)
            assert got.same_as(ref)
            first = first or ref
            assert ref.same_as(first)  # the reference, too, ignores the row order
            counts = dict(zip([k[0] for k in ref.keys], ref.values["c"].tolist(), strict=True))
            # unit 1 ties LO with 0: the smaller key, LO (3 rows), is kept, never 0 (1 row);
            # unit 2 ties 0 with None only if h collides; its 2 rows of 0 are kept if so
            assert counts.get(LO) == 3
            assert counts.get(0, 0) in (0, 2)
