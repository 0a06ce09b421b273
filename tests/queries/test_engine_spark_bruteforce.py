"""The privacy-unit brute force of ``test_sensitivity_bruteforce`` run on the Spark engine.

Every registered kind at once (one plan, so one Spark job per table): on a small table and
on neighbours obtained by removing a privacy unit, adding an adversarial one (many rows,
many groups, NaN, +-inf, huge and subnormal values) or, under replace-one, replacing a
unit's rows, the exact vectors the plan releases -- computed from the aggregates Spark
returns -- (a) are exactly the reference engine's and (b) never change by more than the
sensitivity the query is calibrated to (DP key selection: unit counts by at most one in at
most L0 groups). (b) is checked on the reference engine's vectors, which (a) shows to be
Spark's. The default suite runs one configuration (privacy units, DP key selection) on two
neighbours (a unit removed, an adversarial unit added: each Spark job costs seconds, ~17 s
on a loaded 2-core machine); the slow suite runs every configuration on eight.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from spark_support import session_or_skip, spark_frame
from test_sensitivity_bruteforce import (
    AGGS,
    COLS,
    CONFIGS,
    _adversaries,
    _aligned,
    _check,
    _exact,
    _rows,
)

from dpsieve.accounting.events import Neighbouring
from dpsieve.queries import Schema
from dpsieve.queries.kinds import KINDS
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare

# The first test starts a JVM; on a loaded 2-core machine a Spark job takes minutes.
pytestmark = pytest.mark.timeout(1500)

@pytest.fixture(scope="module")
def spark() -> Any:
    return session_or_skip()


def _run(spark: Any, config: Any, limit: int | None) -> None:
    has_unit, grouped, public, l0, linf, nb = config
    rng = np.random.default_rng(zlib.crc32(repr(config).encode()))
    spec: dict[str, Any] = {"type": "query", "aggregations": AGGS,
                            "privacy": {"type": "pure", "eps": 1.0}}
    if has_unit:
        spec["contribution"] = {"max_groups": l0, "max_rows": linf}
    if grouped:
        spec["group_by"] = ["city"]
        if public:
            spec["keys"] = [["a"], ["b"], ["zz"]]
        else:
            spec["select"] = {"delta": 1e-6}
    assert {a["type"] for a in AGGS} == set(KINDS)
    p = prepare(from_spec(spec, nb), Schema(COLS, "pid" if has_unit else None),
                Neighbouring(nb))
    assert len(p.plans) == len(AGGS)  # every registered kind, one plan

    def on_spark(rows: list[dict[str, Any]]) -> Any:
        from dpsieve.queries.engines.spark import SparkEngine

        return SparkEngine(spark_frame(spark, rows, COLS, 2))

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
    neighbours = removals + adds if nb == "add_remove" else swaps
    if limit is not None:  # both kinds of neighbour: the first and the last ones
        neighbours = neighbours[:limit // 2] + neighbours[-(limit - limit // 2):]
    for d2 in [d, *neighbours]:  # Spark releases exactly what the reference engine does ...
        got, gk = _exact(p, d2, seed, on_spark)
        ref, rk = _exact(p, d2, seed)
        assert sorted(gk.keys, key=repr) == sorted(rk.keys, key=repr)  # observed keys: any order
        keys = sorted(rk.keys, key=repr)
        got, ref = _aligned(got, gk.keys, keys), _aligned(ref, rk.keys, keys)
        for x, y in zip(got, ref, strict=True):
            assert np.array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object))
    for d2 in neighbours:  # ... which moves by at most the calibrated sensitivity
        _check(p, d, d2, seed, l0)

def test_spark_releases_respect_sensitivity_on_some_neighbours(spark: Any) -> None:
    _run(spark, CONFIGS[3], limit=2)  # privacy units, L0 = Linf = 2, DP key selection


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(map(str, c)))
def test_spark_releases_respect_sensitivity_on_every_neighbour(spark: Any, config: Any) -> None:
    _run(spark, config, limit=8)
