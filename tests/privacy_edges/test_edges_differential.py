"""The differential outcome suite: no outcome may depend on one person's rows.

Random plans (adversarial constants, column names, bounds, deltas, privacy; a few fixed
ones from past defects) run on random neighbouring pairs ``(D, D + one unit)`` whose added
unit holds adversarial rows (NaN, +-inf, NULL, int64 extremes, NUL bytes, quotes, line
breaks, long strings), through every engine and entry point (pandas and polars frames,
a Spark DataFrame (skipped with the reason without a Java runtime), Parquet read by
DuckDB's SQL, the kept in-memory engine, a CSV with declared types, the HTTP service, the
CLI; :mod:`differential`). For every plan:

* the outcome class (answered, or refused before the spend) and the whole error text and
  status are identical on both data sets, and so is the charge;
* nothing fails after a charge (no ``QueryFailedError``) and nothing fails unexpectedly
  (no 5xx, no traceback, no exception outside dpsieve's).

The default suite runs one pair and ~30 plans per entry but Spark (about a minute of CPU);
the slow suite that pair on Spark (the 9 fixed plans and 3 random ones: each a Spark job),
and 4 more pairs and 150 plans each (60 on Spark). The frame and HTTP entries run one more
pair under an (eps, delta) budget (the mixed filter).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
from differential import ENTRIES, I64, Pair, neighbours, random_plan, spark_skip_reason

#: Plans from past defects, run first on every entry.
FIXED: list[dict[str, Any]] = [
    {"type": "query", "privacy": {"type": "pure", "eps": 0.01},
     "aggregations": [{"type": "count", "per": "unit"}],
     "where": [{"column": "pid", "op": "==", "value": I64[1]},
               {"column": "n", "op": "==", "value": 2**70}],
     "contribution": {"max_groups": 1}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.01},
     "aggregations": [{"type": "count", "per": "unit"}],
     "where": [{"column": "pid", "op": "==", "value": I64[1]},
               {"column": "x", "op": ">", "value": 50}],
     "contribution": {"max_groups": 1}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
     "aggregations": [{"type": "histogram", "column": "v", "categories": [0, 1, 2**64]}],
     "group_by": ["k0"], "keys": [["u"], ["w"]],
     "contribution": {"max_groups": 1, "max_rows": 3}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
     "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["gid", "v"],
     "select": {"delta": 5e-324}, "contribution": {"max_groups": 40}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
     "aggregations": [{"type": "sum", "column": "x", "lower": 0, "upper": 1e306,
                       "per": "unit"}], "contribution": {"max_groups": 1}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
     "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["s"],
     "keys": [["a"], ["\ud800"]], "contribution": {"max_groups": 1}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
     "aggregations": [{"type": "sum", "column": "x", "lower": -1e306, "upper": 1e306}],
     "contribution": {"max_rows": 100}},
    # (eps, delta) plans: Gaussian (40 groups a unit) with Gaussian key selection, and at
    # a huge eps (both candidates' stds 0.0: the variance ratio divided by zero, h24gaudit)
    {"type": "query", "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6},
     "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["gid", "v"],
     "select": {"delta": 1e-6}, "contribution": {"max_groups": 40}},
    {"type": "query", "privacy": {"type": "approx", "eps": 1e300, "delta": 1e-6},
     "aggregations": [{"type": "count", "per": "unit"}], "contribution": {"max_groups": 1}},
]


def _plans(seed: int, n: int) -> list[dict[str, Any]]:
    r = random.Random(seed)
    return FIXED + [random_plan(r) for _ in range(n)]


def _check(entry: str, seeds: list[int], n: int, tmp: Path,
           budget: dict[str, Any] | None = None) -> None:
    if entry == "spark" and (reason := spark_skip_reason()) is not None:
        pytest.skip(reason)
    bad: list[str] = []
    for seed in seeds:
        d0, d1 = neighbours(seed)
        pair = Pair(entry, d0, d1, tmp, budget)
        try:
            bad += pair.compare(_plans(1000 + seed, n))
        finally:
            pair.close()
    assert not bad, "\n".join(bad[:20])


#: Plans per pair in the default suite (HTTP, the CLI and Spark cost more a plan: fewer).
DEFAULT_PLANS = {"frame": 40, "polars": 30, "spark": 3, "parquet": 30, "kept": 30,
                 "csv": 30, "http": 25, "cli": 30}
#: Plans per pair in the slow suite.
SLOW_PLANS = {"spark": 60}


#: The default test's entries: Spark's (a JVM to start, each plan a Spark job: ~80 s at
#: load 10) runs in the slow suite, with the large test; the default suite keeps Spark's
#: answers equal to pandas' (tests/queries/test_session_spark.py) and the other entries here.
_DEFAULT_ENTRIES = [pytest.param(e, marks=pytest.mark.slow) if e == "spark" else e
                    for e in ENTRIES]


@pytest.mark.timeout(1500)  # Spark: a JVM to start, each plan a Spark job
@pytest.mark.parametrize("entry", _DEFAULT_ENTRIES)
def test_outcomes_do_not_depend_on_one_unit(entry: str, tmp_path: Path) -> None:
    _check(entry, [1], DEFAULT_PLANS[entry], tmp_path)


#: An (eps, delta) data-set budget (the mixed filter: pure and (eps, delta) charges, the
#: Gaussian plans' ApproxDP through its delta part); large enough for every plan drawn.
EPS_DELTA_BUDGET = {"type": "approx", "eps": 100.0, "delta": 1e-3}


@pytest.mark.timeout(1500)
@pytest.mark.parametrize("entry", ["frame", "http"])
def test_outcomes_under_an_eps_delta_budget(entry: str, tmp_path: Path) -> None:
    """The same under an (eps, delta) budget, whose filter takes (eps, delta) plans'
    charges by another path than approximate zCDP."""
    _check(entry, [6], DEFAULT_PLANS[entry] // 2, tmp_path, EPS_DELTA_BUDGET)


@pytest.mark.slow
@pytest.mark.timeout(7200)
@pytest.mark.parametrize("entry", ENTRIES)
def test_outcomes_do_not_depend_on_one_unit_large(entry: str, tmp_path: Path) -> None:
    _check(entry, [2, 3, 4, 5], SLOW_PLANS.get(entry, 150), tmp_path)


def test_the_suite_sees_a_failure_after_the_charge(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite can fail: an engine that fails when the added unit's extreme id reaches
    it (the shape of the old oracle) is reported on the neighbours it tells apart."""
    from dpsieve.queries.engines import frames

    real = frames.PandasEngine.aggregate

    def oracle(self: Any, spec: Any) -> Any:
        if any(p.column == "pid" and p.value == I64[1] for p in spec.where) and bool(
                (self._df["pid"] == I64[1]).any()):
            raise ValueError("conversion failed")
        return real(self, spec)
    monkeypatch.setattr(frames.PandasEngine, "aggregate", oracle)
    d0, d1 = next(p for p in map(neighbours, range(100)) if I64[1] in p[1]["pid"].tolist())
    pair = Pair("frame", d0, d1, tmp_path)
    bad = pair.compare(FIXED[:2])
    assert any("failed" in b for b in bad), bad
