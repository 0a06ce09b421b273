"""Dictionary-encoded string columns give what the strings themselves give.

The numpy core (the pandas and polars engines, and the service's kept copy of a small
file) encodes a string column once as codes into its sorted distinct strings. Every step
must answer exactly as on the strings: the same groups in the same order, the same unit
words for the sampling mixer, the same predicate and category matches. Checked here
against the core run on plain object columns (no dictionary), on the conformance suite's
random tables and specs, and the sort-free unique against ``np.unique``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from engine_conformance import COLUMNS, random_spec, random_table
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.queries import ColumnType
from dpsieve.queries.engines._dictionary import string_codes, unique_inverse
from dpsieve.queries.engines._numpy import Col, aggregate_columns, string_col
from dpsieve.queries.engines.frames import PandasEngine

_FILL = {ColumnType.INTEGER: 0, ColumnType.FLOAT: 0.0, ColumnType.BOOLEAN: False}
_DTYPE = {ColumnType.INTEGER: np.int64, ColumnType.FLOAT: np.float64,
          ColumnType.BOOLEAN: np.bool_}


def _cols(rows: list[dict[str, Any]], encoded: bool) -> dict[str, Col]:
    out = {}
    for c in COLUMNS:
        raw = [r[c.name] for r in rows]
        missing = np.asarray([v is None or (isinstance(v, float) and v != v) for v in raw],
                             dtype=bool)
        if c.type == ColumnType.STRING:
            filled = ["" if m else str(v) for v, m in zip(raw, missing, strict=True)]
            out[c.name] = (string_col(filled, missing) if encoded else
                           Col(np.asarray(filled, dtype=object), missing, c.type))
        else:
            vals = np.asarray([_FILL[c.type] if m else v for v, m in zip(raw, missing,
                                                                          strict=True)],
                              dtype=_DTYPE[c.type])
            out[c.name] = Col(vals, missing, c.type)
    return out


def test_encoded_strings_aggregate_exactly_as_the_strings() -> None:
    rng = np.random.default_rng(26)
    for _ in range(60):
        rows = random_table(rng)
        plain, coded = _cols(rows, False), _cols(rows, True)
        for _ in range(4):
            spec = random_spec(rng, rows)
            want = aggregate_columns(spec, plain.__getitem__, len(rows), "numpy")
            got = aggregate_columns(spec, coded.__getitem__, len(rows), "numpy")
            assert got.keys == want.keys, spec  # same groups, same order
            assert set(got.values) == set(want.values)
            for name, v in want.values.items():
                assert np.array_equal(got.values[name], v), (spec, name)
            assert (got.units is None) == (want.units is None)
            if want.units is not None:
                assert np.array_equal(got.units, want.units)


def test_a_filled_missing_string_and_a_real_empty_string_are_one_value() -> None:
    """As on the strings: a missing entry is filled with "" (masked), a real "" is a
    value; the dictionary holds "" once and the mask tells them apart."""
    col = string_col(["", "b", "", "a"], np.asarray([True, False, False, False]))
    assert col.dictionary is not None
    assert col.dictionary.strings == ("", "a", "b")
    assert col.values.tolist() == [0, 2, 0, 1]


@pytest.mark.parametrize("dtype", ["object", "string", "str"])
def test_pandas_string_columns_by_dtype(dtype: str) -> None:
    """The pandas engine's encodings (pandas' factorize for string dtypes, value by value
    for object columns) give the reference aggregates."""
    from engine_conformance import check_engine

    def make(rows: list[dict[str, Any]], columns: Any) -> PandasEngine:
        df = pd.DataFrame(rows, columns=[c.name for c in columns])
        for c in columns:
            if c.type == ColumnType.STRING:
                df[c.name] = df[c.name].astype(dtype)
            elif c.type == ColumnType.INTEGER:
                df[c.name] = df[c.name].astype("Int64")
            elif c.type == ColumnType.BOOLEAN:
                df[c.name] = df[c.name].astype("boolean")
            else:
                df[c.name] = df[c.name].astype("float64")
        return PandasEngine(df)

    check_engine(make, cases=25, seed=7)


def test_object_column_values_of_other_types_stay_distinct_strings() -> None:
    """1, 1.0 and True hash alike in pandas; as strings they are "1", "1.0", "True"."""
    df = pd.DataFrame({"v": pd.Series([1, 1.0, True, "1"], dtype=object)})
    col = PandasEngine(df)._col("v", ColumnType.STRING)
    assert col.dictionary is not None
    assert col.dictionary.strings == ("1", "1.0", "True")
    assert col.values.tolist() == [0, 1, 2, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(2**40), 2**40), max_size=60),
       st.sampled_from([0, 1, 1000, 2**20]))
def test_unique_inverse_is_np_unique(xs: list[int], shift: int) -> None:
    x = np.asarray([abs(v) % (shift + 1) if shift else v for v in xs], dtype=np.int64)
    uniq, inv = unique_inverse(x)
    want_u, want_i = np.unique(x, return_inverse=True)
    assert np.array_equal(uniq, want_u)
    assert np.array_equal(inv, want_i.reshape(-1))
    assert inv.dtype == np.int64


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=4), max_size=40))
def test_string_codes_order_is_np_unique_order(xs: list[str]) -> None:
    codes, d = string_codes(xs)
    if not xs:
        assert codes.shape == (0,)
        return
    want_u, want_i = np.unique(np.asarray(xs, dtype=object), return_inverse=True)
    assert list(d.strings) == want_u.tolist()
    assert codes.tolist() == want_i.reshape(-1).tolist()


@pytest.mark.parametrize("dtype", [object, "string", "string[pyarrow]"])
@pytest.mark.parametrize("unit", [True, False])
def test_pandas_string_columns_factorized_read_as_value_by_value(
        dtype: Any, unit: bool, monkeypatch: Any) -> None:
    """A pandas column of strings (object or string dtype) is factorized by pandas, and
    a privacy unit's keys are unit_key of each distinct string: the same column, entry by
    entry, as reading each value through unit_key / str (strings starting with NUL, empty
    strings and missing values included)."""
    from dpsieve.queries.engines import frames

    rng = np.random.default_rng(1)
    vals = [str(rng.choice(["a", "b", "\x00x", "", "zz"])) if rng.random() > 0.1 else None
            for _ in range(500)]
    s = pd.Series(vals, dtype=dtype)
    fast = frames._series_col(s, ColumnType.STRING, unit)
    monkeypatch.setattr(frames, "_factorized_strings", lambda s: None)
    slow = frames._series_col(s, ColumnType.STRING, unit)
    assert fast.dictionary is not None
    assert slow.dictionary is not None
    assert (fast.missing == slow.missing).all()
    assert fast.missing.sum() > 0
    assert [fast.dictionary.strings[c] for c in fast.values] == [
        slow.dictionary.strings[c] for c in slow.values]
