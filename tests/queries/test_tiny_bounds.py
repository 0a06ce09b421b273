"""Bounds at the bottom of the double range (subnormal 5e-324 .. 1e-300): the lattice step
is floored at 2^-1074 (it underflowed to 0 and a sum with ``upper = 5e-324`` raised
ZeroDivisionError, a crash before the spend and a 5xx on the service); a variance whose
squares cannot be represented is refused naming ``upper``. Either way nothing crashes and
a refusal spends nothing."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ZCDP, PureDP
from dpsieve.errors import ValidationError

TINY = [5e-324, 1e-320, math.ldexp(1.0, -1022), 1e-300, math.ldexp(1.0, -522),
        math.ldexp(1.0, -523)]
FRAME = pd.DataFrame({"x": [1.0, 0.0, 3e-320, -5e-324, 2e-310]})


def _data(kind: str, tmp_path: Path) -> Any:
    if kind == "pandas":
        return FRAME
    path = tmp_path / "t.parquet"
    duckdb.from_df(FRAME).write_parquet(str(path))
    return str(path)


@pytest.mark.parametrize("kind", ["pandas", "duckdb"])
@pytest.mark.parametrize("privacy", [{"type": "pure", "eps": 1.0}, {"type": "zcdp", "rho": 1.0}])
def test_tiny_bounds_are_answered_within_them_or_refused_unspent(
        kind: str, privacy: dict[str, Any], tmp_path: Path) -> None:
    s = Session(_data(kind, tmp_path),
                budget=PureDP(1e6) if privacy["type"] == "pure" else ZCDP(1e6))
    for hi in TINY:
        for agg in ({"type": "sum", "column": "x", "lower": 0, "upper": hi},
                    {"type": "mean", "column": "x", "lower": -hi, "upper": hi},
                    {"type": "quantile", "column": "x", "lower": 0, "upper": hi,
                     "quantiles": [0.5]},
                    {"type": "variance", "column": "x", "lower": 0, "upper": hi}):
            before = s.remaining()
            query = {"type": "query", "privacy": privacy, "aggregations": [agg]}
            if agg["type"] == "variance" and hi < math.ldexp(1.0, -522):
                with pytest.raises(ValidationError, match="'upper'"):
                    s.run(query)
                assert s.remaining() == before
                continue
            r = s.run(query)
            v = r.value["groups"][0]["estimates"][0]["value"]
            assert math.isfinite(v), (agg, v)
            if agg["type"] in ("mean", "quantile"):
                assert agg["lower"] <= v <= agg["upper"], (agg, v)
            g = r.details.get("a0.sum", r.details.get("a0.bins", {})).get("granularity")
            assert g is None or g >= 5e-324
