"""The data owner's utility analysis (dpsieve.queries.utility, Session.utility_analysis,
``dpsieve analyze``): bias exact on a frame computed by hand, noise equal to the preview's,
the recommended candidate the one of smallest reported error, the expectation over the
random bounding checked against the engine's own bounding, nothing spent or logged, and no
analyst route."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries import Schema
from dpsieve.queries.engines.frames import PandasEngine
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare
from dpsieve.queries.utility import Candidate, analyze, candidates_from

# unit 1: a (1, 2), b (10); unit 2: a (3), b (4); unit 3: b (20)
SMALL = pd.DataFrame({"pid": [1, 1, 1, 2, 2, 3], "g": ["a", "a", "b", "a", "b", "b"],
                      "x": [1.0, 2.0, 10.0, 3.0, 4.0, 20.0]})


def _plan(*aggs: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
            "aggregations": list(aggs), "group_by": ["g"], "keys": [["a"], ["b"]],
            "contribution": {"max_groups": 1, "max_rows": 1}, **extra}


COUNT = {"type": "count"}
SUM5 = {"type": "sum", "column": "x", "lower": 0, "upper": 5}
MEAN5 = {"type": "mean", "column": "x", "lower": 0, "upper": 5}


def _agg(out: dict[str, Any], cand: int, label: str, nth: int = 0) -> dict[str, Any]:
    found = [a for a in out["candidates"][cand]["aggregations"] if a["label"] == label]
    return found[nth]


def _groups(a: dict[str, Any], field: str) -> list[float]:
    return [g[field] for g in a["per_group"]]


def test_bias_exact_on_a_small_frame_by_hand() -> None:
    s = Session(SMALL, budget=PureDP(1.0), privacy_unit="pid")
    out = s.utility_analysis(_plan(COUNT, SUM5, MEAN5, {"type": "count", "per": "unit"}),
                             [{"max_groups": 1, "max_rows": 1}, {"max_groups": 2,
                                                                 "max_rows": 2}],
                             per_group=True)
    # max_groups 1: units 1 and 2 (two cells each) keep each cell with probability 1/2,
    # unit 3 its one cell; max_rows 1: unit 1's cell a keeps one of its two rows
    count = _agg(out, 0, "count")
    assert _groups(count, "truth") == [3.0, 3.0]
    assert _groups(count, "bounded") == [0.5 + 0.5, 0.5 + 0.5 + 1.0]
    assert _groups(count, "bias") == [-2.0, -1.0]
    assert count["bias_mean"] == -1.5
    per_unit = _agg(out, 0, "count", 1)
    assert _groups(per_unit, "truth") == [2.0, 3.0]
    assert _groups(per_unit, "bounded") == [1.0, 2.0]
    total = _agg(out, 0, "sum(x)")
    assert _groups(total, "truth") == [6.0, 34.0]
    # a: 1/2 * 1/2 * (1 + 2) + 1/2 * 3; b: 1/2 * 5 (10 clamped) + 1/2 * 4 + 5 (20 clamped)
    assert _groups(total, "bounded") == pytest.approx([2.25, 9.5], abs=1e-12)
    mean = _agg(out, 0, "mean(x)")
    assert _groups(mean, "truth") == pytest.approx([2.0, 34.0 / 3.0])
    assert _groups(mean, "bounded") == pytest.approx([2.25 / 1.0, 9.5 / 2.0])
    # the mean's answer lies in [0, 5]: its error is capped by the truth's farther bound
    assert _groups(mean, "rmse")[0] <= 3.0 + 1e-12
    assert out["candidates"][0]["rows_dropped"] == pytest.approx(1 - 3.0 / 6.0)
    assert out["candidates"][0]["cells_dropped"] == pytest.approx(1 - 3.0 / 5.0)
    # bounds that bind nowhere for counts: no bias, nothing dropped
    c2 = _agg(out, 1, "count")
    assert _groups(c2, "bias") == [0.0, 0.0]
    assert out["candidates"][1]["rows_dropped"] == 0.0
    assert out["candidates"][1]["cells_dropped"] == 0.0
    # the sum's clamping bias remains: b's 10 and 20 clamped to 5
    assert _groups(_agg(out, 1, "sum(x)"), "bias") == pytest.approx([0.0, -20.0])
    assert out["private"] is False


def test_clamped_error_against_closed_forms() -> None:
    """The expected squared error of a clamped answer: Laplace noise of std s on a true 0
    clamped at 0 gives s^2 / 2; a normal one clamped at 0 from a mean of 0 also s^2 / 2;
    no clamp, bias^2 + s^2 exactly; a far clamp changes nothing (to 5e-3: the midpoints
    cut the tails, low)."""
    from dpsieve.queries.utility import _clamped_mse

    z, s = np.zeros(1), np.full(1, 3.0)
    for fam in ("laplace", "gaussian"):
        assert _clamped_mse(z, s, z, 0.0, None, fam)[0] == pytest.approx(4.5, rel=5e-3)
        assert _clamped_mse(z + 2, s, z, -1e9, None, fam)[0] == pytest.approx(13.0,
                                                                             rel=5e-3)
    assert _clamped_mse(z + 2, s, z, None, None, "laplace")[0] == 13.0
    # a mean with no expected rows (infinite std) clamped into [0, 5], truth 1: half at
    # each bound
    assert _clamped_mse(z + 2.5, np.full(1, np.inf), z + 1, 0.0, 5.0, "gaussian")[0] == \
        pytest.approx((1 + 16) / 2)


def test_per_unit_sum_clamps_each_units_total() -> None:
    plan = _plan({"type": "sum", "column": "x", "lower": 0, "upper": 6, "per": "unit"})
    out = Session(SMALL, budget=PureDP(1.0), privacy_unit="pid").utility_analysis(
        plan, {"max_groups": 2}, per_group=True)
    a = _agg(out, 0, "sum(x)")
    # totals: a: unit 1 3, unit 2 3; b: unit 1 10 -> 6, unit 2 4, unit 3 20 -> 6
    assert _groups(a, "bounded") == pytest.approx([6.0, 16.0])
    assert _groups(a, "truth") == pytest.approx([6.0, 34.0])


def test_where_and_public_keys_as_the_engines_read_them() -> None:
    df = SMALL.assign(x=[1.0, np.nan, 10.0, 3.0, 4.0, 20.0])
    plan = _plan(COUNT, SUM5, keys=[["a"]], where=[{"column": "x", "op": "<", "value": 15}])
    out = Session(df, budget=PureDP(1.0), privacy_unit="pid").utility_analysis(
        plan, {"max_groups": 5, "max_rows": 5}, per_group=True)
    # the NaN row fails '<' (missing: every comparison false); b is not a public key,
    # so each unit has one cell
    assert _groups(_agg(out, 0, "count"), "truth") == [2.0]
    assert _groups(_agg(out, 0, "sum(x)"), "truth") == [4.0]
    assert out["candidates"][0]["cells_dropped"] == 0.0


def test_noise_equals_the_previews() -> None:
    s = Session(SMALL, budget=PureDP(1.0), privacy_unit="pid")
    plan = _plan(COUNT, MEAN5, {"type": "sum", "column": "x", "lower": -2, "upper": 8})
    cands = [{"max_groups": 1, "max_rows": 1}, {"max_groups": 2, "max_rows": 3,
                                               "lower": -1, "upper": 9}]
    out = s.utility_analysis(plan, cands)
    for i, c in enumerate(cands):
        p = dict(plan, contribution={"max_groups": c["max_groups"],
                                     "max_rows": c["max_rows"]})
        if "lower" in c:
            p["aggregations"] = [COUNT, {**MEAN5, "lower": -1, "upper": 9},
                                 {"type": "sum", "column": "x", "lower": -1, "upper": 9}]
        pv = s.preview(p)
        for a in out["candidates"][i]["aggregations"]:
            want = {name.split(".", 1)[1]: n["std"] for name, n in pv["noise"][a["label"]].items()}
            assert a["noise_std"] == want
        assert out["candidates"][i]["charge"] == pv["charge"]


def test_the_recommended_candidate_has_the_smallest_reported_error() -> None:
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame({"pid": rng.integers(0, 200, n), "g": rng.choice(list("abcd"), n),
                       "x": rng.exponential(20.0, n)})
    s = Session(df, budget=PureDP(1.0), privacy_unit="pid")
    keys = [["a"], ["b"], ["c"], ["d"]]
    for agg in (COUNT, {"type": "mean", "column": "x", "lower": 0, "upper": 50}):
        out = s.utility_analysis(_plan(agg, keys=keys),
                                 {"max_groups": [1, 2, 4], "max_rows": [1, 4, 16, 64],
                                  "upper": [25, 50, 200]} if agg is not COUNT else
                                 {"max_groups": [1, 2, 4], "max_rows": [1, 4, 16, 64]})
        rows = out["candidates"]
        rmse = [r["aggregations"][0]["rmse"] for r in rows]
        best = out["recommended"]
        assert rmse[best] == min(rmse)
        assert rows[best]["score"] == min(r["score"] for r in rows)
        # it is not a corner of the grid by construction: the error varies
        assert max(rmse) > 1.5 * min(rmse)
    assert s.remaining() == Session(SMALL, budget=PureDP(1.0)).remaining()


def test_expected_bounding_matches_the_engines_bounding() -> None:
    """The closed-form expectation against the mean of the engine's own bounding over
    400 sampling keys: within 6 standard errors (a bracket that a wrong keep probability,
    e.g. max_groups / G replaced by 1 or by 1/G, misses by far)."""
    rng = np.random.default_rng(11)
    n = 400
    df = pd.DataFrame({"pid": rng.integers(0, 40, n), "g": rng.integers(0, 5, n),
                       "x": rng.uniform(-3, 12, n)})
    schema = Schema.of([("pid", "integer"), ("g", "integer"), ("x", "float")], "pid")
    plan = from_spec(_plan(COUNT, {"type": "sum", "column": "x", "lower": 0, "upper": 10},
                           keys=[[k] for k in range(5)],
                           contribution={"max_groups": 2, "max_rows": 3}))
    out = analyze(df, schema, plan, None, per_group=True)
    p = prepare(plan, schema, Neighbouring.ADD_REMOVE)
    eng = PandasEngine(df)
    names = [pt.release.name for kp in p.plans for pt in kp.parts]
    draws: dict[str, list[np.ndarray]] = {nm: [] for nm in names}
    for seed in range(400):
        aggs = eng.aggregate(replace(p.spec, seed=seed))
        for kp in p.plans:
            for pt in kp.parts:
                draws[pt.release.name].append(
                    np.asarray(pt.exact(aggs), dtype=np.float64).reshape(-1))
    unit = {c.release.name: c.release.unit for c in p.charge.parts}
    for name, label in zip(names, ("count", "sum(x)"), strict=True):
        got = np.stack(draws[name]) * unit[name]
        want = np.asarray(_groups(_agg(out, 0, label), "bounded"))
        se = got.std(axis=0, ddof=1) / math.sqrt(got.shape[0])
        # the lattice rounds each row by at most half a step: far below 1e-3 here
        assert np.all(np.abs(got.mean(axis=0) - want) <= 6 * se + 1e-3), (name, got.mean(0),
                                                                        want)
        assert np.all(se > 0)


def test_key_selection_reports_release_probabilities() -> None:
    rng = np.random.default_rng(2)
    big = pd.DataFrame({"pid": np.arange(4000), "g": rng.choice(["big", "mid"], 4000,
                                                                p=[0.9, 0.1])})
    tiny = pd.DataFrame({"pid": [90_000, 90_001], "g": ["tiny", "tiny"]})
    df = pd.concat([big, tiny], ignore_index=True)
    plan = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
            "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["g"],
            "select": {"delta": 1e-6}, "contribution": {"max_groups": 1}}
    out = Session(df, budget=PureDP(1.0), privacy_unit="pid").utility_analysis(
        plan, {"max_groups": [1, 3]}, per_group=True)
    for row in out["candidates"]:
        a = row["aggregations"][0]
        probs = {tuple(g["key"]): g["release_probability"] for g in a["per_group"]}
        assert probs[("big",)] == pytest.approx(1.0)
        assert probs[("tiny",)] < 1e-3
        assert row["groups_released"] == pytest.approx(sum(probs.values()))
        # a group not released costs its whole count: 'tiny''s error is about 2
        tiny_row = next(g for g in a["per_group"] if g["key"] == ["tiny"])
        assert tiny_row["rmse"] == pytest.approx(2.0, rel=1e-2)
        assert row["selection"]["units_50"] >= 1


def test_candidates_and_refusals_name_the_parameter() -> None:
    assert len(candidates_from({"max_groups": [1, 2], "max_rows": [1, 2, 3]})) == 6
    assert candidates_from(None) == [Candidate()]
    with pytest.raises(ValidationError) as e:
        candidates_from({"max_groups": [1], "max_cols": [2]})
    assert e.value.parameter == "max_cols"
    with pytest.raises(ValidationError) as e:
        candidates_from([{"max_groups": 0}])
    assert e.value.parameter == "max_groups"
    with pytest.raises(ValidationError) as e:
        candidates_from({"max_rows": list(range(1, 2000))})
    assert e.value.parameter == "candidates"
    s = Session(SMALL, budget=PureDP(1.0), privacy_unit="pid")
    with pytest.raises(ValidationError) as e:
        s.utility_analysis(_plan({"type": "variance", "column": "x", "lower": 0,
                                  "upper": 5}))
    assert e.value.parameter == "aggregations"
    # a candidate the plan's checks refuse is reported, never recommended
    out = s.utility_analysis(_plan(SUM5), [{"lower": 9, "upper": 1}, {"upper": 6}])
    assert out["candidates"][0]["parameter"] == "upper"
    assert out["recommended"] == 1
    with pytest.raises(ValidationError) as e:  # every candidate refused: the plan's error
        s.utility_analysis(_plan(SUM5), [{"lower": 9, "upper": 1}])
    assert e.value.parameter == "upper"


def test_nothing_spent_or_logged() -> None:
    s = Session(SMALL, budget=PureDP(1.0), privacy_unit="pid")
    before = s.store.load_filter(s.budget_id).to_json()
    s.utility_analysis(_plan(COUNT), {"max_groups": [1, 2]})
    assert s.store.load_filter(s.budget_id).to_json() == before
    assert s.remaining() == Session(SMALL, budget=PureDP(1.0)).remaining()


def test_no_service_route_reaches_it() -> None:
    """The analysis is the owner's, never an analyst's: no route of the service calls it
    (the analyst routes answer only paid or previewed queries)."""
    root = Path(__file__).resolve().parents[2] / "src" / "dpsieve" / "service"
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "utility_analysis" not in text, path
        assert "queries.utility" not in text, path


def test_cli_analyze(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from dpsieve.cli import main

    csv = tmp_path / "d.csv"
    SMALL.to_csv(csv, index=False)
    plan = json.dumps(_plan(MEAN5))
    args = ["analyze", str(csv), "--privacy-unit", "pid", "--column-types",
            '{"pid": "integer", "x": "float"}', "--plan", plan, "--candidates",
            '{"max_groups": [1, 2], "upper": [5, 20]}']
    with pytest.raises(SystemExit) as e:
        main([*args, "--json"])
    assert e.value.code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["private"] is False
    assert len(out["candidates"]) == 4
    direct = Session(SMALL, budget=PureDP(1.0), privacy_unit="pid").utility_analysis(
        _plan(MEAN5), {"max_groups": [1, 2], "upper": [5, 20]})
    assert [c["score"] for c in out["candidates"]] == pytest.approx(
        [c["score"] for c in direct["candidates"]])
    with pytest.raises(SystemExit) as e:
        main(args)
    text = capsys.readouterr().out
    assert text.startswith("NOT PRIVATE")
    assert "recommended:" in text
    assert not list(tmp_path.glob("*.db"))  # no ledger written
