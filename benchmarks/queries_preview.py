"""Preview: the std it predicts against the std of the noise the answers carry.

Usage::

    python -m benchmarks.queries_preview               # 200 runs of every kind
    python -m benchmarks.queries_preview --runs 50 --no-write

For every kind of query the registry has (``dpsieve.queries.requests.KINDS``) and every
aggregation type of a plan, the figure ``Session.preview`` states before the spend is
compared with the realized noise over ``--runs`` runs:

* **parts** (every aggregation type, pure eps 1 and zCDP rho 0.5): a plan over 300 public
  groups is prepared once; each run draws each released part's noise exactly as
  ``Prepared.run`` does (``Calibrated.draw`` on the engine's bounded integers), and the
  realized std is the root mean square of (released - bounded truth) over groups and runs
  (runs x 300 x the part's numbers per group independent draws).
* **end to end** (the registered kinds whose answer is a released number: ``query``,
  with public keys and with DP key selection, ``count``, ``sum``, ``histogram``,
  ``linear``; ``release`` with the Laplace mechanism):
  ``Session.run`` on a table whose bounds bind nowhere (each unit within the contribution
  bounds, values inside theirs, counts far from 0), so (answer - truth) is the noise alone,
  with the answers as the analyst gets them (a fresh sampling key each run). The kinds
  that release one to four numbers run ``--shape-runs`` times (default 10,000: at 200
  runs one Laplace number's sample std has a standard error of ~8 %).

``mean``, ``variance`` and ``quantile`` finish their parts by division or look-up: their
released parts are checked (above), their finished value has no single predicted std.
``robust_mean`` / ``robust_median`` and the data-adaptive release mechanisms state no
noise before they run (their noise depends on the data): listed, not measured.
The standard error of a realized std is the delta method's, sd(err^2) / (2 std sqrt(N))
(the release's answers share cells: its N counts dependent draws, so its standard error is
optimistic; tests/queries/test_preview_accuracy.py takes it over runs). The slow test
tests/queries/test_preview_accuracy.py checks the same figures with a tolerance derived
from the noise's exact fourth moment (six standard errors).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

OUT = Path(__file__).parent / "results" / "queries-preview.md"
GROUPS = 300


def _realized(err: np.ndarray) -> tuple[float, float, int]:
    e2 = np.asarray(err, dtype=np.float64).reshape(-1) ** 2
    n = e2.size
    std = math.sqrt(float(e2.mean()))
    se = float(e2.std(ddof=1)) / (2 * std * math.sqrt(n)) if std > 0 else 0.0
    return std, se, n


def _frame(rng: np.random.Generator, rows_per_unit: int = 3) -> pd.DataFrame:
    units = 20_000
    pid = np.repeat(np.arange(units), rows_per_unit)
    n = pid.size
    return pd.DataFrame({"pid": pid, "g": (pid % GROUPS).astype(np.int64),
                         "x": rng.uniform(1.0, 9.0, n), "c": rng.choice(list("abcd"), n)})


AGGS: dict[str, dict[str, Any]] = {
    "count (rows)": {"type": "count"},
    "count (units)": {"type": "count", "per": "unit"},
    "sum (rows)": {"type": "sum", "column": "x", "lower": 0, "upper": 10},
    "sum (units)": {"type": "sum", "column": "x", "lower": 0, "upper": 30, "per": "unit"},
    "mean": {"type": "mean", "column": "x", "lower": 0, "upper": 10},
    "mean (units)": {"type": "mean", "column": "x", "lower": 0, "upper": 30, "per": "unit"},
    "variance": {"type": "variance", "column": "x", "lower": 0, "upper": 10},
    "quantile": {"type": "quantile", "column": "x", "lower": 0, "upper": 10, "bins": 16},
    "histogram": {"type": "histogram", "column": "c", "categories": ["a", "b", "c", "d"]},
    "linear": {"type": "linear", "column": "c", "categories": ["a", "b", "c", "d"],
               "workload": [[1, 1, 0, 0], [0.5, 0, -2, 1]]},
}
PRIVACY = {"pure eps 1": {"type": "pure", "eps": 1.0}, "zCDP rho 0.5":
           {"type": "zcdp", "rho": 0.5}}


def parts_rows(runs: int, seed: int) -> list[list[str]]:
    from dpsieve.accounting.events import Neighbouring
    from dpsieve.queries import Schema
    from dpsieve.queries.engines.frames import PandasEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare
    from dpsieve.queries.preview import preview

    rng = np.random.default_rng(seed)
    df = _frame(rng)
    engine = PandasEngine(df)
    schema = Schema.of([("pid", "integer"), ("g", "integer"), ("x", "float"),
                        ("c", "string")], "pid")
    keys = [[k] for k in range(GROUPS)]
    rows = []
    for pname, priv in PRIVACY.items():
        for aname, agg in AGGS.items():
            spec = {"type": "query", "privacy": priv, "aggregations": [agg], "raw": True,
                    "group_by": ["g"], "keys": keys,
                    "contribution": {"max_groups": 1, "max_rows": 3}}
            p = prepare(from_spec(spec), schema, Neighbouring.ADD_REMOVE)
            figures = preview(p)
            aggs = engine.aggregate(replace(p.spec, seed=int(rng.integers(2**63))))
            label = p.labels[0]
            for c, part in zip(p.charge.parts, p.plans[0].parts, strict=True):
                exact = part.exact(aggs)
                truth = np.asarray(exact, dtype=np.float64) * c.release.unit
                err = np.stack([c.draw(exact, rng) - truth for _ in range(runs)])
                std, se, n = _realized(err)
                want = figures["noise"][label][part.release.name]["std"]
                rows.append([pname, aname, part.release.name, f"{want:.6g}", f"{std:.6g}",
                             f"{std / want:.4f} ± {se / want:.4f}", f"{n:,}"])
    return rows


def end_to_end_rows(runs: int, shape_runs: int, seed: int) -> list[list[str]]:
    from dpsieve import Session
    from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP

    rng = np.random.default_rng(seed + 1)
    df = _frame(rng)
    small = df[df["pid"] < 500].reset_index(drop=True)  # one-number shapes: many runs
    keys = [[k] for k in range(GROUPS)]
    pure = {"type": "pure", "eps": 1.0}
    contrib = {"max_groups": 1, "max_rows": 3}
    truth_count = df.groupby("g").size().reindex(range(GROUPS)).to_numpy(np.float64)
    truth_sum = df.groupby("g")["x"].sum().reindex(range(GROUPS)).to_numpy(np.float64)
    h = small["c"].value_counts().reindex(list("abcd")).to_numpy(np.float64)
    w = [[1, 1, 0, 0], [0.5, 0, -2, 1]]
    cases: dict[str, tuple[dict[str, Any], np.ndarray, pd.DataFrame, int]] = {
        "query (count, sum per group)": ({
            "type": "query", "privacy": pure, "raw": True, "group_by": ["g"], "keys": keys,
            "aggregations": [{"type": "count"},
                             {"type": "sum", "column": "x", "lower": 0, "upper": 10}],
            "contribution": contrib}, np.stack([truth_count, truth_sum], axis=1), df, runs),
        "count": ({"type": "count", "privacy": pure, "contribution": contrib},
                  np.array([len(small)], dtype=np.float64), small, shape_runs),
        "sum": ({"type": "sum", "column": "x", "lower": 0, "upper": 10, "privacy": pure,
                 "contribution": contrib}, np.array([small["x"].sum()]), small, shape_runs),
        "histogram": ({"type": "histogram", "column": "c", "categories": list("abcd"),
                       "privacy": pure, "contribution": contrib}, h, small, shape_runs),
        "linear": ({"type": "linear", "column": "c", "categories": list("abcd"),
                    "workload": w, "privacy": pure, "contribution": contrib},
                   np.array(w) @ h, small, shape_runs),
    }
    rows = []
    for kind, (spec, truth, data, n_runs) in cases.items():
        s = Session(data, budget=PureDP(1e9), privacy_unit="pid",
                    rng=np.random.default_rng(seed + 2))
        p = s.preview(spec)
        stds = sorted({n["std"] for parts in p["noise"].values() for n in parts.values()})
        errs: list[np.ndarray] = []
        for _ in range(n_runs):
            v = s.run(spec).value
            if spec["type"] == "query":
                got = np.array([[e["value"] for e in g["estimates"]] for g in v["groups"]])
            elif isinstance(v, dict):
                got = np.asarray(v.get("counts", v.get("answers")), dtype=np.float64)
            else:
                got = np.array([v], dtype=np.float64)
            errs.append(got - truth)
        err = np.stack(errs)
        if spec["type"] == "query":  # one column per aggregation, each its own std
            for j, want in enumerate([p["noise"][lab][n]["std"] for lab in p["labels"]
                                      for n in p["noise"][lab]]):
                std, se, n = _realized(err[:, :, j])
                rows.append([kind, p["labels"][j], f"{want:.6g}", f"{std:.6g}",
                             f"{std / want:.4f} ± {se / want:.4f}", f"{n:,}"])
            continue
        want = stds[0]
        std, se, n = _realized(err)
        rows.append([kind, "answer", f"{want:.6g}", f"{std:.6g}",
                     f"{std / want:.4f} ± {se / want:.4f}", f"{n:,}"])
    # group-by with DP key selection thresholding the released count: 300 groups of 200
    # units each, far above the threshold (every group kept: no conditioning to speak of)
    units = GROUPS * 200
    sel_df = pd.DataFrame({"pid": np.arange(units), "g": np.arange(units) % GROUPS,
                           "x": rng.uniform(0, 10, units)})
    sel_spec = {"type": "query", "privacy": pure, "raw": True, "group_by": ["g"],
                "select": {"delta": 1e-6, "by": "count"}, "contribution": {"max_groups": 1},
                "aggregations": [{"type": "count", "per": "unit"},
                                 {"type": "sum", "column": "x", "lower": 0, "upper": 10,
                                  "per": "unit"}]}
    s = Session(sel_df, budget=ApproxDP(1e9, 0.5), privacy_unit="pid",
                rng=np.random.default_rng(seed + 4))
    p = s.preview(sel_spec)
    tsum = sel_df.groupby("g")["x"].sum().to_numpy()
    errs = []
    for _ in range(runs):
        v = s.run(sel_spec).value
        keys = [g["key"][0] for g in v["groups"]]
        got = np.array([[e["value"] for e in g["estimates"]] for g in v["groups"]])
        full = np.full((GROUPS, 2), np.nan)
        full[keys] = got - np.stack([np.full(len(keys), 200.0), tsum[keys]], axis=1)
        errs.append(full)
    err = np.stack(errs)
    kept = float(np.mean(~np.isnan(err[:, :, 0])))
    for j, (lab, name) in enumerate((("count", "a0.count"), ("sum(x)", "a1.sum"))):
        want = p["noise"][lab][name]["std"]
        e = err[:, :, j][~np.isnan(err[:, :, j])]
        std, se, n = _realized(e)
        rows.append([f"query with key selection ({p['selection']['method']}, "
                     f"{kept:.0%} kept)", lab, f"{want:.6g}", f"{std:.6g}",
                     f"{std / want:.4f} ± {se / want:.4f}", f"{n:,}"])
    # release (Laplace): replace-one, public n; answers are fractions, clipped to [0, 1]
    n_rows = 20_000
    cols = {f"c{i}": rng.choice(list("abcde"), n_rows) for i in range(4)}
    rel_df = pd.DataFrame(cols)
    spec = {"type": "release", "mechanism": "laplace", "columns": list(cols),
            "domain": {c: list("abcde") for c in cols}, "n": n_rows,
            "workload": "marginals:2", "privacy": {"type": "pure", "eps": 1.0}}
    s = Session(rel_df, budget=PureDP(1e9, Neighbouring.REPLACE_ONE),
                rng=np.random.default_rng(seed + 3))
    p = s.preview(spec)
    want = p["noise"]["release"]["answers"]["std"]
    first = s.run(spec).value
    names = first["queries"]
    truth = np.array([_marginal(rel_df, q) for q in names])
    err = np.stack([np.asarray(s.run(spec).value["answers"]) - truth for _ in range(runs)])
    std, se, n = _realized(err)
    rows.append(["release (laplace)", f"{len(names)} 2-way marginal cells", f"{want:.6g}",
                 f"{std:.6g}", f"{std / want:.4f} ± {se / want:.4f}", f"{n:,}"])
    return rows


def _marginal(df: pd.DataFrame, name: str) -> float:
    """The true fraction of rows a release query counts (names like ``c0=a,c1=b``)."""
    mask = np.ones(len(df), dtype=bool)
    for term in name.replace(" ", "").replace("&", ",").split(","):
        col, val = term.split("=", 1)
        mask &= (df[col] == val).to_numpy()
    return float(mask.mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--shape-runs", type=int, default=10_000,
                    help="runs of the kinds that release one to four numbers")
    ap.add_argument("--seed", type=int, default=2024)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    load0 = os.getloadavg()[0]
    parts = parts_rows(args.runs, args.seed)
    e2e = end_to_end_rows(args.runs, args.shape_runs, args.seed)
    took = time.time() - t0
    lines = [
        "## Queries: preview's predicted std against the realized std "
        "(benchmarks/queries_preview.py)", "",
        f"`python -m benchmarks.queries_preview --runs {args.runs} --shape-runs "
        f"{args.shape_runs}` ({took:.0f} s, load "
        f"{load0:.1f} -> {os.getloadavg()[0]:.1f}). Ratio = realized / predicted, ± its "
        "standard error; N independent draws.", "",
        "### Every released part of every aggregation type (300 public groups)", "",
        "| privacy | aggregation | part | predicted std | realized std | ratio | N |",
        "|---|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in parts), "",
        "### End to end through `Session.run` (bounds bind nowhere)", "",
        "| kind | number | predicted std | realized std | ratio | N |",
        "|---|---|---|---|---|---|",
        *("| " + " | ".join(r) + " |" for r in e2e), "",
        "Not measured: `mean`, `variance` and `quantile` finish their parts (checked above) "
        "by division or look-up; `robust_mean`, `robust_median` and the release mechanisms "
        "`envelope`, `pmw`, `mwem`, `blr` state no noise before they run (`noise_note`).", "",
    ]
    text = "\n".join(lines)
    print(text)
    if not args.no_write:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
