"""Defects 1 and 7 of issue 10, on every entry point (Session, HTTP, CLI).

1. Repeated or equal categories (``["a"] * 1000``; ``[20, 20.0]``) released one count
   several times at the charge of one. Categories are now canonicalised against the
   column's public kind and repeats refused -- before any spend.
7. A mean over a text column spent budget and returned ~0. Column kinds are public
   schema: refused before any spend.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from edges_harness import ENTRIES, entry

PURE = {"type": "pure", "eps": 0.5}


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 60
    return pd.DataFrame({
        "city": rng.choice(["a", "b", "c"], n),
        "x": np.round(rng.uniform(0, 40, n)).astype(float) + 0.5,  # a float column
        "k": rng.integers(0, 30, n),  # an integer column
        "flag": rng.choice([True, False], n),
    })


REPEATS: list[tuple[str, dict[str, Any]]] = [
    ("linear-1000-repeats", {"type": "linear", "column": "city", "categories": ["a"] * 1000,
                             "workload": [[1] * 1000]}),
    ("histogram-20-20.0-int", {"type": "histogram", "column": "k", "categories": [20, 20.0]}),
    ("histogram-20.5-float", {"type": "histogram", "column": "x", "categories": [20.5, 20.5]}),
    ("histogram-zero-signs", {"type": "histogram", "column": "x", "categories": [0.0, -0.0]}),
    ("histogram-text-repeat", {"type": "histogram", "column": "city", "categories": ["a", "a"]}),
    ("histogram-bool-repeat", {"type": "histogram", "column": "flag",
                               "categories": [True, False, True]}),
    ("linear-int-float", {"type": "linear", "column": "k", "categories": [3, 3.0, 4],
                          "workload": [[1, 1, 1]]}),
    ("histogram-wrong-type", {"type": "histogram", "column": "k", "categories": [20, "20"]}),
    ("histogram-bool-on-int", {"type": "histogram", "column": "k", "categories": [True, 2]}),
    ("histogram-number-on-text", {"type": "histogram", "column": "city",
                                  "categories": ["a", 1]}),
]

TEXT_NUMERIC: list[tuple[str, dict[str, Any]]] = [
    ("mean", {"type": "mean", "column": "city", "lower": 0, "upper": 1}),
    ("sum", {"type": "sum", "column": "city", "lower": 0, "upper": 1}),
]


@pytest.mark.parametrize("where", ENTRIES)
def test_repeated_or_equal_categories_are_refused_before_any_spend(
        where: str, tmp_path: Path) -> None:
    with entry(where, _frame(), tmp_path) as e:
        for label, spec in REPEATS:
            out = e.run({**spec, "privacy": PURE})
            assert out.kind == "refused", (label, out)
            assert "categories" in out.message, (label, out.message)
        assert e.spends() == 0
        assert e.spent() == 0


@pytest.mark.parametrize("where", ENTRIES)
def test_numeric_queries_on_a_text_column_are_refused_before_any_spend(
        where: str, tmp_path: Path) -> None:
    with entry(where, _frame(), tmp_path) as e:
        for label, spec in TEXT_NUMERIC:
            out = e.run({**spec, "privacy": PURE})
            assert out.kind == "refused", (label, out)
            assert "string" in out.message, (label, out.message)
        assert e.spends() == 0


@pytest.mark.parametrize("where", ENTRIES)
def test_distinct_categories_count_each_row_once(where: str, tmp_path: Path) -> None:
    df = _frame()
    with entry(where, df, tmp_path) as e:
        cats = [3, 4.0, 5]  # an integral float is the integer category 4
        out = e.run({"type": "histogram", "column": "k", "categories": cats,
                     "privacy": {"type": "pure", "eps": 200.0}})
        assert out.ok, out
        want = [int((df["k"] == c).sum()) for c in (3, 4, 5)]
        assert out.value["counts"] == pytest.approx(want, abs=0.5)
        out = e.run({"type": "linear", "column": "city", "categories": ["a", "b", "zz"],
                     "workload": [[1, 1, 1]], "privacy": {"type": "pure", "eps": 200.0}})
        assert out.ok, out
        want_ab = int(df["city"].isin(["a", "b"]).sum())
        assert out.value["answers"][0] == pytest.approx(want_ab, abs=0.5)
        assert e.spent() == 400


def test_mixed_object_column_maps_each_row_to_one_key() -> None:
    """A pandas object column holding 1 and '1': each row still adds to one category."""
    from dpsieve import Session
    from dpsieve.accounting.events import PureDP

    df = pd.DataFrame({"c": ["1", 1, "1", 2.0, None]})
    s = Session(df, budget=PureDP(1000.0), rng=np.random.default_rng(0))
    r = s.histogram("c", categories=["1", "2.0", "2"], privacy=PureDP(500.0))
    assert r.value["counts"] == pytest.approx([3, 1, 0], abs=0.5)
    with pytest.raises(Exception, match="categories"):
        s.histogram("c", categories=["1", 1], privacy=PureDP(1.0))
