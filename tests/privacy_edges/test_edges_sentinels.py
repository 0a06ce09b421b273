"""Defect 5 of issue 10: no message ever echoes a private value, on any path.

The data carry unique sentinels -- a text cell, a numeric cell, and a cell that does not
parse as its column's type placed after DuckDB's type-sniffing sample -- and every error
path we can reach through the Python ``Session``, the HTTP service and the CLI (``query``,
``release``, ``robust``) is driven. No message, answer or noise description may contain a
sentinel; no path may crash (5xx, traceback); a refusal spends nothing.

The unparseable late cell once made every query on the file fail *after* its spend, with
DuckDB's message quoting the whole record (and the failure itself told whether such a
record exists); files are now read cell by cell (``session._read_file``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from edges_harness import ENTRIES, entry
from typer.testing import CliRunner

from dpsieve.cli import app

TEXT = "ZQXSENTINEL"
NUM = 7319.8251
LATE = "QJVLATECELL"
#: strings that must appear in no message (the numeric sentinel in its usual spellings)
NEEDLES = (TEXT, LATE, "7319.8251", "7319.825")
ROWS = 21_000  # beyond DuckDB's sniffing sample (20,480 rows)


#: The owner's declared types of the CSV written from :func:`_frame`.
TYPES = {"city": "string", "x": "float", "k": "integer", "late": "integer"}


def _frame(rows: int = ROWS) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    df = pd.DataFrame({
        "city": rng.choice(["a", "b"], rows),
        "x": np.round(rng.uniform(0, 5, rows), 2),
        "k": rng.integers(0, 4, rows),
        "late": rng.integers(0, 9, rows).astype(str),
    })
    df.loc[7, "city"] = TEXT
    df.loc[9, "x"] = NUM
    df.loc[rows - 3, "late"] = LATE  # 'late' is declared an integer column
    return df


def _clean(text: str) -> bool:
    return not any(n in text for n in NEEDLES)


ADD_REMOVE_SPECS: list[dict[str, Any]] = [
    {"type": "mean", "column": "city", "lower": 0, "upper": 1},
    {"type": "sum", "column": "city", "lower": 0, "upper": 1},
    {"type": "histogram", "column": "city", "categories": [1, 2]},
    {"type": "histogram", "column": "x", "categories": ["a"]},
    {"type": "histogram", "column": "x", "categories": [1.0, 1]},
    {"type": "linear", "column": "k", "categories": [1], "workload": [[0]]},
    {"type": "histogram", "column": "nope", "categories": ["a"]},
    {"type": "sum", "column": "x", "lower": 5, "upper": 1},
    {"type": "mean", "column": "x", "lower": 0, "upper": 1, "privacy": {"type": "gdp", "mu": 1}},
    {"type": "robust_median", "column": "x", "bound": 10},
    {"type": "count", "privacy": {"type": "pure", "eps": 5e-324}},
    {"type": "count", "privacy": {"type": "pure", "eps": 1e300}},  # over the budget
    # answered: the column with the late unparseable cell, and the numeric sentinel's column
    {"type": "mean", "column": "late", "lower": 0, "upper": 9},
    {"type": "histogram", "column": "late", "categories": [0, 1, 2]},
    {"type": "sum", "column": "x", "lower": 0, "upper": 1e4},
]

REPLACE_ONE_SPECS: list[dict[str, Any]] = [
    {"type": "release", "mechanism": "laplace", "columns": ["city"],
     "domain": {"city": ["a", "b"]}, "n": ROWS + 1},
    {"type": "release", "mechanism": "laplace", "columns": ["city"],
     "domain": {"city": ["a", "b"]}, "n": ROWS},
    {"type": "release", "mechanism": "laplace", "columns": ["late"],
     "domain": {"late": ["1", "2"]}, "n": ROWS},
    {"type": "release", "mechanism": "mwem", "columns": ["x"], "domain": {"x": [1, 2]},
     "n": ROWS, "rounds": 2},
    {"type": "robust_mean", "column": "city", "bound": 10,
     "privacy": {"type": "approx", "eps": 1, "delta": 1e-6}},
    {"type": "robust_median", "column": "late", "bound": 10,
     "privacy": {"type": "approx", "eps": 1, "delta": 1e-6}},
    {"type": "robust_mean", "column": "x", "bound": 1e-300,
     "privacy": {"type": "approx", "eps": 1, "delta": 1e-6}},
]


def _check(where: str, budget: dict[str, Any], specs: list[dict[str, Any]],
           tmp: Path) -> None:
    with entry(where, _frame(), tmp, budget=budget) as e:
        for spec in specs:
            spec = {"privacy": {"type": "pure", "eps": 1.0}, **spec}
            before = e.spends()
            out = e.run(spec)
            assert out.kind in ("ok", "refused"), (spec, out.kind, out.message[-500:])
            text = out.message + json.dumps([out.value, out.noise, out.details], default=str)
            assert _clean(text), (spec, text[:2000])
            if out.kind == "refused":
                assert e.spends() == before, ("refused after a spend", spec)


@pytest.mark.parametrize("where", ENTRIES)
def test_no_query_path_echoes_a_data_value(where: str, tmp_path: Path) -> None:
    _check(where, {"type": "pure", "eps": 1e6, "neighbouring": "add_remove"},
           ADD_REMOVE_SPECS, tmp_path)


@pytest.mark.parametrize("where", ENTRIES)
def test_no_release_or_robust_path_echoes_a_data_value(where: str, tmp_path: Path) -> None:
    _check(where, {"type": "approx_zcdp", "rho": 1e6, "delta": 0.5,
                   "neighbouring": "replace_one"}, REPLACE_ONE_SPECS, tmp_path)
    _check(where, {"type": "pure", "eps": 1e6, "neighbouring": "replace_one"},
           REPLACE_ONE_SPECS[:4], tmp_path)


def test_a_late_unparseable_cell_is_missing_not_a_crash(tmp_path: Path) -> None:
    """The file reads; the cell is missing (as an empty cell is); every row is kept."""
    from dpsieve.session import load_frame

    path = tmp_path / "d.csv"
    _frame().to_csv(path, index=False)
    df = load_frame(str(path), TYPES)  # the owner's declarations
    assert len(df) == ROWS
    assert int(df["late"].isna().sum()) == 1
    assert float(df["x"].max()) == NUM  # other columns keep their types and values


runner = CliRunner()


@pytest.mark.parametrize("args", [
    ["release", "--mechanism", "laplace", "--eps", "1", "--json", "--domain", "{dom}"],
    ["release", "--mechanism", "envelope", "--eps", "1", "--rounds", "3", "--json",
     "--domain", "{dom}"],
    ["release", "--mechanism", "laplace", "--eps", "1", "--json", "--domain-from-data"],
    ["release", "--mechanism", "laplace", "--eps", "1", "--json", "--workload", "range1d",
     "--domain", "{dom}"],
    ["release", "--mechanism", "laplace", "--eps", "1e-320", "--json", "--domain", "{dom}"],
    ["robust", "mean", "--eps", "1", "--bound", "10"],
    ["robust", "median", "--eps", "1", "--bound", "10"],
    ["robust", "mean", "--eps", "1", "--bound", "10", "--columns", "0"],
    ["robust", "mean", "--eps", "1", "--bound", "10", "--columns", "5"],
    ["robust", "median", "--eps", "1", "--bound", "10", "--method", "friendly"],
    ["robust", "mean", "--eps", "1e-300", "--bound", "10"],
])
def test_release_and_robust_commands_never_echo_a_data_value(args: list[str],
                                                              tmp_path: Path) -> None:
    dom = tmp_path / "domain.json"
    dom.write_text(json.dumps({"city": ["a", "b"], "k": [0, 1, 2, 3]}))
    data = tmp_path / "d.csv"
    cols = ["city", "k"] if args[0] == "release" else ["x", "city"]
    _frame(300)[cols].to_csv(data, index=False)
    argv = [a.replace("{dom}", str(dom)) for a in args] + ["--data", str(data)]
    r = runner.invoke(app, argv)
    assert r.exit_code in (0, 2), (argv, r.output, r.exception)
    if "--domain-from-data" in args:  # the opt-in prints the levels found, flagged not private
        assert "not private" in r.stderr
        return
    assert _clean(r.output), (argv, r.output[:2000])


def test_the_duckdb_query_engine_reads_a_late_unparseable_cell_as_missing(tmp_path: Path
                                                                          ) -> None:
    """The query layer's DuckDB engine had the same failure (after the spend, quoting the
    record): it now answers, the cell missing, and agrees with the pandas engine on the
    frame :func:`dpsieve.session.load_frame` reads."""
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries import Schema
    from dpsieve.queries.engines.duckdb import DuckDBEngine
    from dpsieve.queries.engines.frames import PandasEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare
    from dpsieve.session import load_frame

    path = tmp_path / "d.csv"
    _frame().to_csv(path, index=False)
    eng = DuckDBEngine(path, types=TYPES)
    ref = PandasEngine(load_frame(str(path), TYPES))
    schema = Schema(eng.columns())
    for spec in ({"type": "sum", "column": "late", "lower": 0, "upper": 9},
                 {"type": "histogram", "column": "late", "categories": [0, 1, 2]},
                 {"type": "count"}):
        p = prepare(from_spec({**spec, "privacy": {"type": "pure", "eps": 1e9}},
                              "add_remove"), schema, Neighbouring.ADD_REMOVE)
        got = p.run(eng, rng=np.random.default_rng(0)).groups[0].estimates[0].value
        want = p.run(ref, rng=np.random.default_rng(0)).groups[0].estimates[0].value
        assert got == pytest.approx(want, abs=1e-3), spec
