"""Conformance suite for query engines: random specs on random tables, compared with the
reference engine (the executable definition of a BoundingSpec).

Any engine (the Spark one too) passes ``check_engine(make)`` where ``make(rows, columns)``
builds the engine over a table given as a list of dict rows and its public columns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dpsieve.queries import (
    Bins,
    BoundingSpec,
    BucketCount,
    Column,
    ColumnType,
    Engine,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
)
from dpsieve.queries.engines import ReferenceEngine

Rows = list[dict[str, Any]]
MakeEngine = Callable[[Rows, Sequence[Column]], Engine]

COLUMNS = (
    Column("pid", ColumnType.INTEGER),
    Column("name", ColumnType.STRING),
    Column("city", ColumnType.STRING),
    Column("k", ColumnType.INTEGER),
    Column("x", ColumnType.FLOAT),
    Column("y", ColumnType.INTEGER),
    Column("flag", ColumnType.BOOLEAN),
)
CITIES = ("a", "b", "c", "é", "d")


def random_table(rng: np.random.Generator, n: int | None = None) -> Rows:
    """Rows with repeated units, missing values, NaN, infinities, negative ids, unicode."""
    n = int(rng.integers(0, 40)) if n is None else n
    pids = rng.integers(-3, 6, size=n)
    specials = [math.nan, math.inf, -math.inf, None, 0.0, -0.0, 1e300, 5e-324]
    rows: Rows = []
    for i in range(n):
        x: Any = float(np.round(rng.normal(2.0, 3.0), 2))
        if rng.random() < 0.15:
            x = specials[int(rng.integers(0, len(specials)))]
        rows.append({
            "pid": None if rng.random() < 0.05 else int(pids[i]) * 1_000_003,
            "name": f"p{int(pids[i])}" if rng.random() > 0.05 else None,
            "city": None if rng.random() < 0.08 else CITIES[int(rng.integers(0, 5))],
            "k": int(rng.integers(0, 4)) if rng.random() > 0.05 else None,
            "x": x,
            "y": int(rng.integers(-5, 20)) if rng.random() > 0.05 else None,
            "flag": bool(rng.random() < 0.5) if rng.random() > 0.05 else None,
        })
    return rows


def _value_sum(rng: np.random.Generator, name: str, level: Level) -> ValueSum:
    col = str(rng.choice(["x", "y", "flag"]))
    lo = float(rng.choice([-3.0, -1.5, 0.0, 0.25]))
    hi = lo + float(rng.choice([0.5, 2.0, 7.25]))
    g = 2.0 ** int(rng.integers(-4, 1))
    rlo, rhi = math.floor(lo / g), math.ceil(hi / g)
    if rng.random() < 0.3:  # a tighter integer clamp than the float clip
        rhi = max(rlo, rhi - 1)
    shift = None if rng.random() < 0.7 else int(rng.integers(0, 3))
    if level == Level.UNIT:
        ulo = int(rng.integers(-6, 1))
        return ValueSum(name, col, g, lo, hi, rlo, rhi, Level.UNIT, ulo,
                        ulo + int(rng.integers(0, 12)), shift)
    return ValueSum(name, col, g, lo, hi, rlo, rhi, square_shift=shift)


def random_spec(rng: np.random.Generator, rows: Rows) -> BoundingSpec:
    unit = rng.choice([None, "pid", "name"])
    group_by: tuple[str, ...] = [(), ("city",), ("city", "k"), ("k",), ("flag",)][
        int(rng.integers(0, 5))]
    observed = bool(group_by) and rng.random() < 0.4
    keys: Any = None
    if not observed:
        domain = {"city": [*CITIES, "zz"], "k": [0, 1, 2, 3, 7], "flag": [True, False]}
        if group_by:
            cand = sorted({tuple(rng.choice(domain[c]).item() if c != "city"
                                 else str(rng.choice(domain[c])) for c in group_by)
                           for _ in range(int(rng.integers(1, 8)))})
            keys = tuple(tuple(bool(v) if c == "flag" else v for v, c in zip(k, group_by,
                                                                             strict=True))
                         for k in cand)
        else:
            keys = ((),)
    measures: list[Any] = []
    for j in range(int(rng.integers(1, 5))):
        kind = int(rng.integers(0, 5))
        if kind == 0:
            measures.append(RowCount(f"m{j}", Level(str(rng.choice(["row", "unit"])))))
        elif kind == 1:
            measures.append(_value_sum(rng, f"m{j}", Level.ROW))
        elif kind == 2:
            measures.append(_value_sum(rng, f"m{j}", Level.UNIT))
        elif kind == 3:
            cats = tuple(str(c) for c in rng.choice([*CITIES, "q"], size=int(
                rng.integers(1, 5)), replace=False))
            measures.append(BucketCount(f"m{j}", "city", categories=cats))
        else:
            lo = float(rng.choice([-2.0, 0.0]))
            measures.append(BucketCount(f"m{j}", "x", bins=Bins(0.25, lo, lo + 4.0, int(
                lo / 0.25), int((lo + 4.0) / 0.25), int(rng.integers(1, 6)))))
    where: list[Predicate] = []
    for _ in range(int(rng.integers(0, 3))):
        p = int(rng.integers(0, 6))
        if p == 0:
            where.append(Predicate("y", Op(str(rng.choice(["<", "<=", ">", ">=", "==", "!="]))),
                                   int(rng.integers(-2, 15))))
        elif p == 1:
            where.append(Predicate("city", Op.IN, ("a", "é")))
        elif p == 2:
            where.append(Predicate("city", Op.NOT_IN, ("b",)))
        elif p == 3:
            where.append(Predicate("x", Op(str(rng.choice(["is_null", "not_null"])))))
        elif p == 4:
            where.append(Predicate("x", Op.GT, float(rng.normal())))
        else:
            where.append(Predicate("flag", Op.EQ, bool(rng.random() < 0.5)))
    spec_unit = None if unit is None else str(unit)
    row_needed = any(isinstance(m, BucketCount) or (isinstance(m, ValueSum)
                     and m.level == Level.ROW) for m in measures)
    max_rows = int(rng.integers(1, 4)) if (row_needed or rng.random() < 0.7) else None
    return BoundingSpec(tuple(measures), group_by, keys, tuple(where), spec_unit,
                        int(rng.integers(1, 4)), max_rows, int(rng.integers(0, 2**63)))


def check_engine(make: MakeEngine, *, cases: int = 60, seed: int = 0) -> None:
    """``make``'s engine gives the reference aggregates on ``cases`` random specs."""
    rng = np.random.default_rng(seed)
    for case in range(cases):
        rows = random_table(rng)
        ref = ReferenceEngine(rows, COLUMNS)
        eng = make(rows, COLUMNS)
        for _ in range(3):
            spec = random_spec(rng, rows)
            want = ref.aggregate(spec)
            got = eng.aggregate(spec)
            assert got.same_as(want), (
                f"case {case}: {eng.name} differs from the reference\nspec={spec}\n"
                f"rows={rows}\nwant={want.sorted()}\ngot={got.sorted()}")
