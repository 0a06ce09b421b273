"""Every registered kind's sensitivity, checked by brute force on small tables.

For each plan, the exact integer vectors a query releases are computed (reference engine,
one sampling key) on a table and on every neighbour obtained by removing one privacy unit,
by adding one of a set of adversarial units (many rows, many groups, NaN, +-inf, huge and
subnormal values, values at and beyond the bounds), and -- under replace-one -- by
replacing a unit's rows. The change must never exceed the L1 / squared-L2 sensitivity the
query is calibrated to (and, for DP key selection, the unit counts change by at most one
in at most L0 groups).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpsieve.accounting.events import Neighbouring
from dpsieve.queries import Column, ColumnType, Schema
from dpsieve.queries.engines import ReferenceEngine
from dpsieve.queries.kinds import KINDS
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import Prepared, prepare

COLS = (Column("pid", ColumnType.INTEGER), Column("city", ColumnType.STRING),
        Column("x", ColumnType.FLOAT), Column("n", ColumnType.INTEGER))
CITIES = ["a", "b", "c"]
WEIRD = [math.nan, math.inf, -math.inf, None, 1e308, -1e308, 5e-324, -0.0, 3.0, -7.5]


def _rows(rng: np.random.Generator, units: list[int], per_unit: int) -> list[dict[str, Any]]:
    rows = []
    for u in units:
        for _ in range(int(rng.integers(1, per_unit + 1))):
            x: Any = float(rng.uniform(-4, 12))
            if rng.random() < 0.2:
                x = WEIRD[int(rng.integers(0, len(WEIRD)))]
            rows.append({"pid": u, "city": CITIES[int(rng.integers(0, 3))], "x": x,
                         "n": int(rng.integers(-3, 4))})
    return rows


def _adversaries(rng: np.random.Generator, uid: int) -> list[list[dict[str, Any]]]:
    out = []
    for x in (1e308, -1e308, math.inf, -math.inf, math.nan, 10.0, -2.0, 0.0):
        out.append([{"pid": uid, "city": c, "x": x, "n": 3} for c in CITIES for _ in range(6)])
    out.append(_rows(rng, [uid], 12))
    out.append([{"pid": uid, "city": "a", "x": 10.0, "n": -3}])
    return out


AGGS: list[dict[str, Any]] = [
    {"type": "count"}, {"type": "count", "per": "unit"},
    {"type": "sum", "column": "x", "lower": -2, "upper": 10},
    {"type": "sum", "column": "x", "lower": 1, "upper": 10},
    {"type": "sum", "column": "x", "lower": -2, "upper": 10, "per": "unit"},
    {"type": "sum", "column": "n", "lower": -1.5, "upper": 2.25},
    {"type": "mean", "column": "x", "lower": -2, "upper": 10},
    {"type": "mean", "column": "x", "lower": 0, "upper": 30, "per": "unit"},
    {"type": "variance", "column": "x", "lower": -2, "upper": 10},
    {"type": "quantile", "column": "x", "lower": -2, "upper": 10, "bins": 8},
    {"type": "histogram", "column": "city", "categories": ["a", "c", "zz"]},
    {"type": "linear", "column": "city", "categories": ["a", "b"],
     "workload": [[1, 0.5], [2, -3], [0.1, 0.0]]},
]


def _reference(rows: list[dict[str, Any]]) -> Any:
    return ReferenceEngine(rows, COLS)


def _exact(p: Prepared, rows: list[dict[str, Any]], seed: int,
           make: Callable[[list[dict[str, Any]]], Any] = _reference) -> tuple[list[Any], Any]:
    aggs = make(rows).aggregate(p.spec.__class__(
        **{**{f: getattr(p.spec, f) for f in p.spec.__dataclass_fields__}, "seed": seed}))
    parts = [part.exact(aggs) for k in p.plans for part in k.parts]
    return parts, aggs


def _aligned(parts: list[Any], keys: tuple[Any, ...], ref_keys: list[Any]) -> list[Any]:
    pos = {k: i for i, k in enumerate(keys)}
    out = []
    for v in parts:
        z = np.zeros((len(ref_keys), v.shape[1]), dtype=object)
        for j, k in enumerate(ref_keys):
            if k in pos:
                z[j] = v[pos[k]]
        out.append(z)
    return out


def _check(p: Prepared, d: list[dict[str, Any]], d2: list[dict[str, Any]], seed: int,
           l0: int, make: Callable[[list[dict[str, Any]]], Any] = _reference) -> None:
    """The change from ``d`` to ``d2`` of what ``p`` releases (aggregates computed by the
    engine ``make`` builds, the reference engine by default) is within its sensitivity."""
    a, ag = _exact(p, d, seed, make)
    b, bg = _exact(p, d2, seed, make)
    keys = sorted(set(ag.keys) | set(bg.keys), key=repr)
    a, b = _aligned(a, ag.keys, keys), _aligned(b, bg.keys, keys)
    for c, x, y in zip(p.charge.parts, a, b, strict=True):
        delta = (np.asarray(y, dtype=object) - np.asarray(x, dtype=object)).reshape(-1)
        l1 = sum(abs(int(v)) for v in delta)
        l2sq = sum(int(v) ** 2 for v in delta)
        assert l1 <= c.sens.l1, (c.release.name, l1, c.sens)
        assert l2sq <= c.sens.l2sq, (c.release.name, l2sq, c.sens)
        if c.sens.k is not None:  # scalar: at most k groups, each by at most a1
            per = np.asarray(y, dtype=object) - np.asarray(x, dtype=object)
            nz = [int(v) for v in per.reshape(-1) if v != 0]
            assert len(nz) <= c.sens.k
            assert all(abs(v) <= c.release.contrib.a1 for v in nz)
    if ag.units is not None:  # DP key selection: unit counts move by <= 1 in <= L0 groups
        ua = dict(zip(ag.keys, ag.units.tolist(), strict=True))
        ub = dict(zip(bg.keys, bg.units.tolist(), strict=True))
        diffs = [ub.get(k, 0) - ua.get(k, 0) for k in keys]
        assert all(abs(v) <= 1 for v in diffs)
        assert sum(v != 0 for v in diffs) <= l0


CONFIGS = [  # (unit?, group_by, public keys?, max_groups, max_rows, neighbouring)
    (True, True, True, 1, 1, "add_remove"), (True, True, True, 2, 3, "add_remove"),
    (True, False, True, 1, 2, "add_remove"), (True, True, False, 2, 2, "add_remove"),
    (False, True, True, 1, None, "add_remove"), (False, False, True, 1, None, "add_remove"),
    (True, True, True, 2, 3, "replace_one"), (False, True, True, 1, None, "replace_one"),
    (False, False, True, 1, None, "replace_one"), (True, False, True, 3, 2, "replace_one"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(map(str, c)))
def test_every_kind_respects_its_sensitivity_on_every_neighbour(config: Any) -> None:
    has_unit, grouped, public, l0, linf, nb = config
    rng = np.random.default_rng(zlib.crc32(repr(config).encode()))
    schema = Schema(COLS, "pid" if has_unit else None)
    seen = set()
    for agg in AGGS:
        spec: dict[str, Any] = {"type": "query", "aggregations": [agg],
                                "privacy": {"type": "pure", "eps": 1.0}}
        if has_unit:
            spec["contribution"] = {"max_groups": l0, "max_rows": linf}
        if grouped:
            spec["group_by"] = ["city"]
            if public:
                spec["keys"] = [["a"], ["b"], ["zz"]]
            else:
                spec["select"] = {"delta": 1e-6}
        if not grouped and not public:
            continue
        p = prepare(from_spec(spec, nb), schema, Neighbouring(nb))
        seen.add(agg["type"])
        for _trial in range(3):
            seed = int(rng.integers(0, 2**63))
            if has_unit:
                d = _rows(rng, [1, 2, 3, 4], 6)
                removals = [[r for r in d if r["pid"] != u] for u in (1, 2, 3, 4)]
                adds = [d + extra for extra in _adversaries(rng, 99)]
                swaps = [[r for r in d if r["pid"] != 2] + [{**r, "pid": 2} for r in extra]
                         for extra in _adversaries(rng, 2)]
            else:
                d = _rows(rng, list(range(8)), 1)
                removals = [d[:i] + d[i + 1:] for i in range(len(d))]
                adds = [[*d, r] for extra in _adversaries(rng, 99) for r in extra[:1]]
                swaps = [[*d[:i], r, *d[i + 1:]] for i in range(0, len(d), 3)
                         for extra in _adversaries(rng, 99) for r in extra[:1]]
            if nb == "add_remove":
                for d2 in removals + adds:
                    _check(p, d, d2, seed, l0)
            else:
                for d2 in swaps:
                    _check(p, d, d2, seed, l0)
    assert seen == set(KINDS)  # every registered kind was exercised
