"""Strings with a lone surrogate: refused before the spend in a plan, harmless in a row.

A Python string may hold a lone surrogate (``"\\ud800"``), which no UTF-8 engine can
hold, compare or hash. In a plan (a key, a category, a constant, a column name) it once
reached DuckDB after the charge and failed there; now it is refused before the spend,
alike on neighbouring data sets, on every entry point. In a row -- only a pandas
``object`` column can hold one -- it once failed every query after the charge, through
the keyed sampling's MD5 of the unit or key (``UnicodeEncodeError``), if and only if
the person holding it was in the data: an exact membership oracle. Now the encoding is
total (``surrogatepass``; UTF-8's own on every valid string, so nothing else changes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from differential import ENTRIES, Pair, neighbours, spark_skip_reason

from dpsieve import Session
from dpsieve.accounting.events import ApproxDP, Neighbouring
from dpsieve.errors import DPError

LONE = "\ud800"
P = {"type": "pure", "eps": 0.5}
COUNT = [{"type": "count", "per": "unit"}]
#: Plans holding a lone surrogate where a string of the plan goes, and the parameter
#: each refusal must name.
PLANS: list[tuple[dict[str, Any], str]] = [
    ({"type": "query", "privacy": P, "aggregations": COUNT,
      "where": [{"column": "s", "op": "==", "value": LONE}]}, "where"),
    ({"type": "query", "privacy": P, "aggregations": COUNT,
      "where": [{"column": "s", "op": "in", "value": ["a", "b" + LONE]}]}, "where"),
    ({"type": "query", "privacy": P, "aggregations": COUNT, "group_by": ["s"],
      "keys": [["a"], [LONE]]}, "keys"),
    ({"type": "query", "privacy": P, "contribution": {"max_rows": 3},
      "aggregations": [{"type": "histogram", "column": "s", "categories": ["a", LONE]}]},
     "categories"),
    ({"type": "query", "privacy": P, "aggregations": COUNT,
      "where": [{"column": LONE, "op": "is_null"}]}, "column"),
]


@pytest.mark.timeout(1500)  # Spark: a JVM to start
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_lone_surrogate_in_a_plan_is_refused_alike_before_the_spend(entry: str,
                                                                     tmp_path: Path) -> None:
    if entry == "spark" and (reason := spark_skip_reason()) is not None:
        pytest.skip(reason)
    d0, d1 = neighbours(1)
    pair = Pair(entry, d0, d1, tmp_path)
    try:
        plans = [p for p, _ in PLANS]
        assert pair.compare(plans) == []  # alike on both, no failure after a charge
        for (plan, param), (a, _) in zip(PLANS, pair.run(plans), strict=True):
            assert a.kind == "refused", (entry, plan, a)
            assert a.cost is None
            if entry not in ("cli",):  # the CLI states it in its own JSON line
                assert param in a.text, (entry, param, a.text)
    finally:
        pair.close()


def _frame(extra: bool) -> pd.DataFrame:
    """Units ``u0..u7`` with string groups; with ``extra``, one more unit whose id and
    group hold lone surrogates."""
    pids = [f"u{i % 8}" for i in range(40)] + ([LONE, LONE] if extra else [])
    groups = ["a", "b", "c", "a"] * 10 + (["b" + LONE, "\udc00"] if extra else [])
    d = pd.DataFrame({"pid": pd.Series(np.array(pids, dtype=object), dtype=object),
                      "s": pd.Series(np.array(groups, dtype=object), dtype=object)})
    d["x"] = np.linspace(0.0, 5.0, len(d))
    return d


ROW_PLANS: list[dict[str, Any]] = [
    {"type": "query", "privacy": P, "aggregations": COUNT},
    {"type": "query", "privacy": P, "aggregations": COUNT, "group_by": ["s"],
     "select": {"delta": 1e-7}},
    {"type": "query", "privacy": P, "aggregations": COUNT, "group_by": ["s"],
     "keys": [["a"], ["b"]], "contribution": {"max_groups": 2}},
    {"type": "query", "privacy": P, "aggregations": COUNT,
     "where": [{"column": "s", "op": ">", "value": "a"}]},
    {"type": "query", "privacy": P, "contribution": {"max_rows": 3},
     "aggregations": [{"type": "sum", "column": "x", "lower": 0, "upper": 5},
                      {"type": "histogram", "column": "s", "categories": ["a", "b"]}]},
    {"type": "histogram", "column": "s", "categories": ["a", "b"], "privacy": P,
     "contribution": {"max_rows": 3}},
]


@pytest.mark.parametrize("unit", ["pid", None])
def test_a_lone_surrogate_in_a_pandas_row_never_fails_a_charged_query(unit: str | None
                                                                      ) -> None:
    for plan in ROW_PLANS:
        outs = []
        for extra in (False, True):
            s = Session(_frame(extra), budget=ApproxDP(100.0, 1e-3), privacy_unit=unit)
            try:
                s.run(plan)
                outs.append("ok")
            except DPError as e:
                outs.append(f"{type(e).__name__}: {e}")
        assert outs[0] == outs[1], (plan, outs)
        assert outs[0] == "ok" or "max_rows" in outs[0], (plan, outs)


def test_a_lone_surrogate_in_a_release_row() -> None:
    ro = ApproxDP(100.0, 1e-3, neighbouring=Neighbouring.REPLACE_ONE)
    frame = _frame(True)
    s = Session(frame, budget=ro, row_count=lambda: len(frame))
    r = s.run({"type": "release", "mechanism": "laplace", "columns": ["s"],
               "domain": {"s": ["a", "b"]}, "workload": "marginals", "n": len(frame),
               "privacy": {"type": "pure", "eps": 1.0, "neighbouring": "replace_one"}})
    assert r.value is not None  # answered: no failure after the charge
