"""The preview's predicted std against the realized std, for every kind the preview states
noise for (slow, statistical).

Each check draws ``N`` independent noise values (>= 200 runs of the query; the groups and
the coordinates of a run are independent draws too) and compares the root mean square of
(released - bounded truth) with the predicted std. The tolerance is derived from the
sampling distribution of the mean of ``Z^2``: its standard error is
``sqrt(E[Z^4] - var^2 / N)`` with the fourth moment of the noise computed exactly (the
discrete Laplace's in closed form, the discrete Gaussian's by summation, or 3 var^2 where
it is the continuous one's to within 1e-30), and the check allows ``Z_ALARM = 6``
standard errors (a false alarm about 2e-9 per check under the normal approximation, whose
error at these ``N`` is far smaller than the margin): it cannot flake, and it catches a
predicted std off by a factor 2 (or by 3 %, where ``N`` is large: each check states its
tolerance, and the ones with ``N`` >= 120,000 are held to at most 2.5 %).

Kinds: every aggregation type of a plan (count and sum per row and per unit, the mean's,
variance's, quantile's, histogram's and linear workload's released parts) under pure DP
and zCDP over public keys; a group-by with DP key selection (the released count it
thresholds, groups far above the threshold) end to end; the count, sum and histogram
shapes end to end; the Laplace release. The robust estimators and the data-adaptive
release mechanisms state no noise before they run (``noise`` is None: checked).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.mechanisms import DiscreteLaplaceMechanism
from dpsieve.queries import Schema
from dpsieve.queries.calibrate import Calibrated
from dpsieve.queries.engines.frames import PandasEngine
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare
from dpsieve.queries.preview import preview

pytestmark = pytest.mark.slow

Z_ALARM = 6.0
RUNS = 200
GROUPS = 600


def moments(c: Calibrated) -> tuple[float, float]:
    """(variance, fourth moment) of one coordinate's noise, in lattice units."""
    m = c.mechanism
    if isinstance(m, DiscreteLaplaceMechanism):
        t = float(m.scale)
        q = math.exp(-1.0 / t)
        om = -math.expm1(-1.0 / t)
        var = 2.0 * q / om**2
        m4 = 2.0 * q * (1 + 11 * q + 11 * q * q + q**3) / ((1 + q) * om**4)
        return var, m4
    s2 = float(m.sampled_sigma2)
    if s2 > 2500.0:  # the continuous Gaussian's moments, to within e^(-2 pi^2 s2)
        return s2, 3.0 * s2 * s2
    k = int(40 * math.sqrt(s2)) + 2
    z = np.arange(-k, k + 1, dtype=np.float64)
    w = np.exp(-z * z / (2.0 * s2))
    w /= w.sum()
    return float((w * z**2).sum()), float((w * z**4).sum())


def check(err: np.ndarray, predicted: float, c: Calibrated, what: str) -> float:
    """Assert the realized std of ``err`` (answer units) is the predicted one within the
    sampling tolerance; returns the tolerance (relative, on the std)."""
    e = np.asarray(err, dtype=np.float64).reshape(-1)
    n = e.size
    var, m4 = moments(c)
    unit = c.release.unit
    true_std = math.sqrt(var) * unit  # the noise's exact std (Gaussian: <= predicted)
    se_ratio = math.sqrt((m4 - var * var) / n) / (2.0 * var)  # of realized / true std
    tol = Z_ALARM * se_ratio + abs(true_std / predicted - 1.0)
    realized = math.sqrt(float(np.mean(e * e)))
    assert abs(realized / predicted - 1.0) <= tol, (what, realized, predicted, tol, n)
    return tol


def _frame(rng: np.random.Generator, units: int = 30_000, rows_per_unit: int = 2
           ) -> pd.DataFrame:
    pid = np.repeat(np.arange(units), rows_per_unit)
    n = pid.size
    return pd.DataFrame({"pid": pid, "g": (pid % GROUPS).astype(np.int64),
                         "x": rng.uniform(1.0, 9.0, n), "c": rng.choice(list("abcd"), n)})


AGGS: dict[str, dict[str, Any]] = {
    "count rows": {"type": "count"},
    "count units": {"type": "count", "per": "unit"},
    "sum rows": {"type": "sum", "column": "x", "lower": 0, "upper": 10},
    "sum units": {"type": "sum", "column": "x", "lower": 0, "upper": 30, "per": "unit"},
    "mean": {"type": "mean", "column": "x", "lower": 0, "upper": 10},
    "mean units": {"type": "mean", "column": "x", "lower": 0, "upper": 30, "per": "unit"},
    "variance": {"type": "variance", "column": "x", "lower": 0, "upper": 10},
    "quantile": {"type": "quantile", "column": "x", "lower": 0, "upper": 10, "bins": 8},
    "histogram": {"type": "histogram", "column": "c", "categories": ["a", "b", "c", "d"]},
    "linear": {"type": "linear", "column": "c", "categories": ["a", "b", "c", "d"],
               "workload": [[1, 1, 0, 0], [0.5, 0, -2, 1]]},
}
PRIVACY = {"pure": {"type": "pure", "eps": 1.0}, "zcdp": {"type": "zcdp", "rho": 0.5}}


@pytest.mark.parametrize("privacy", sorted(PRIVACY))
@pytest.mark.parametrize("agg", sorted(AGGS))
def test_every_released_part_of_every_aggregation(agg: str, privacy: str) -> None:
    """A plan over 600 public groups, prepared once; each of 200 runs draws each part's
    noise as ``Prepared.run`` does (``Calibrated.draw`` on the engine's bounded integers)."""
    rng = np.random.default_rng(zlib.crc32(f"{agg} {privacy}".encode()))
    df = _frame(rng)
    schema = Schema.of([("pid", "integer"), ("g", "integer"), ("x", "float"),
                        ("c", "string")], "pid")
    spec = {"type": "query", "privacy": PRIVACY[privacy], "aggregations": [AGGS[agg]],
            "raw": True, "group_by": ["g"], "keys": [[k] for k in range(GROUPS)],
            "contribution": {"max_groups": 1, "max_rows": 2}}
    p = prepare(from_spec(spec), schema, Neighbouring.ADD_REMOVE)
    figures = preview(p)
    aggs = PandasEngine(df).aggregate(replace(p.spec, seed=7))
    label = p.labels[0]
    for c, part in zip(p.charge.parts, p.plans[0].parts, strict=True):
        exact = part.exact(aggs)
        truth = np.asarray(exact, dtype=np.float64) * c.release.unit
        err = np.stack([c.draw(exact, rng) - truth for _ in range(RUNS)])
        want = figures["noise"][label][part.release.name]["std"]
        tol = check(err, want, c, f"{agg} {privacy} {part.release.name}")
        assert tol <= 0.025  # N >= 120,000: the check holds the std to 2.5 %


def test_group_by_with_key_selection_end_to_end() -> None:
    """DP key selection thresholding the released count (600 groups of 200 units each,
    far above the threshold: every group is kept, the conditioning is negligible), and a
    mean beside it: 200 runs through Session.run, fresh sampling keys."""
    rng = np.random.default_rng(24)
    units = GROUPS * 200
    df = pd.DataFrame({"pid": np.arange(units), "g": np.arange(units) % GROUPS,
                       "x": rng.uniform(0, 10, units)})
    s = Session(df, budget=ApproxDP(1e9, 0.5), privacy_unit="pid",
                rng=np.random.default_rng(3))
    spec = {"type": "query", "privacy": {"type": "pure", "eps": 1.0}, "raw": True,
            "aggregations": [{"type": "count", "per": "unit"},
                             {"type": "sum", "column": "x", "lower": 0, "upper": 10,
                              "per": "unit"}],
            "group_by": ["g"], "select": {"delta": 1e-6, "by": "count"},
            "contribution": {"max_groups": 1}}
    pv = s.preview(spec)
    assert pv["selection"]["released_count"] is True
    assert pv["selection"]["units_95"] < 150
    truth_sum = df.groupby("g")["x"].sum().to_numpy()
    schema = Schema.of([("pid", "integer"), ("g", "integer"), ("x", "float")], "pid")
    p = prepare(from_spec(spec), schema, Neighbouring.ADD_REMOVE)
    cal = dict(zip([pt.release.name for kp in p.plans for pt in kp.parts], p.charge.parts,
                   strict=True))
    errs: list[np.ndarray] = []
    for _ in range(RUNS):
        v = s.run(spec).value
        assert len(v["groups"]) == GROUPS
        keys = [g["key"][0] for g in v["groups"]]
        got = np.array([[e["value"] for e in g["estimates"]] for g in v["groups"]])
        errs.append(got - np.stack([np.full(GROUPS, 200.0), truth_sum[keys]], axis=1))
    err = np.stack(errs)
    for j, (label, name) in enumerate((("count", "a0.count"), ("sum(x)", "a1.sum"))):
        # a sum's lattice rounds each value by at most half a step: far below the noise
        check(err[:, :, j], pv["noise"][label][name]["std"], cal[name], name)


@pytest.mark.parametrize("kind", ["count", "sum", "histogram"])
def test_one_aggregation_shapes_end_to_end(kind: str) -> None:
    """The shapes release one to four numbers: 4,000 runs each. The derived tolerance is
    ~11 % for one number, ~5.5 % for the histogram's four (2 % would take ~120,000 runs;
    the same mechanisms are held to 2.5 % above): these check the wiring end to end."""
    rng = np.random.default_rng(8)
    df = pd.DataFrame({"pid": np.arange(300), "x": rng.uniform(0, 10, 300),
                       "c": rng.choice(list("abcd"), 300)})
    s = Session(df, budget=PureDP(1e9), privacy_unit="pid", rng=np.random.default_rng(9))
    base = {"privacy": {"type": "pure", "eps": 1.0},
            "contribution": {"max_groups": 1, "max_rows": 1}}
    spec: dict[str, Any] = {
        "count": {"type": "count"},
        "sum": {"type": "sum", "column": "x", "lower": 0, "upper": 10},
        "histogram": {"type": "histogram", "column": "c", "categories": list("abcd")},
    }[kind] | base
    truth = {"count": np.array([300.0]), "sum": np.array([df["x"].sum()]),
             "histogram": df["c"].value_counts().reindex(list("abcd")).to_numpy(float)}[kind]
    pv = s.preview(spec)
    ((_, parts),) = pv["noise"].items()
    ((name, fig),) = parts.items()
    schema = Schema.of([("pid", "integer"), ("x", "float"), ("c", "string")], "pid")
    p = prepare(from_spec(spec), schema, Neighbouring.ADD_REMOVE)
    errs = []
    for _ in range(4000):
        v = s.run(spec).value
        got = np.asarray(v["counts"] if isinstance(v, dict) else [v], dtype=np.float64)
        errs.append(got - truth)
    tol = check(np.stack(errs), fig["std"], p.charge.parts[0], f"{kind} {name}")
    assert tol <= (0.06 if kind == "histogram" else 0.12)


def test_laplace_release_end_to_end() -> None:
    """The Laplace release's answers (fractions of n, 2-way marginals): 400 runs (~0.5 s
    each; the tolerance is ~7 %); answers far from 0 and 1, so its clipping to [0, 1]
    never binds."""
    rng = np.random.default_rng(12)
    n = 20_000
    cols = {f"c{i}": rng.choice(list("abc"), n) for i in range(3)}
    df = pd.DataFrame(cols)
    spec = {"type": "release", "mechanism": "laplace", "columns": list(cols),
            "domain": {c: list("abc") for c in cols}, "n": n, "workload": "marginals:2",
            "privacy": {"type": "pure", "eps": 1.0}}
    s = Session(df, budget=PureDP(1e9, Neighbouring.REPLACE_ONE),
                rng=np.random.default_rng(13))
    want = s.preview(spec)["noise"]["release"]["answers"]["std"]
    first = s.run(spec).value
    truth = np.array([_marginal(df, q) for q in first["queries"]])
    assert truth.min() > 50 * want
    err = np.stack([np.asarray(s.run(spec).value["answers"]) - truth for _ in range(400)])
    # an answer sums several cells' noise and answers share cells: the runs are the
    # independent draws, so the standard error is the runs' (of each run's mean square)
    per_run = np.mean(err * err, axis=1)
    ratio = float(per_run.mean()) / want**2
    se = float(per_run.std(ddof=1)) / math.sqrt(per_run.size) / want**2 / 2.0
    realized = math.sqrt(ratio) * want
    assert abs(realized / want - 1.0) <= Z_ALARM * se, (realized, want, Z_ALARM * se)
    assert Z_ALARM * se <= 0.08


def _marginal(df: pd.DataFrame, name: str) -> float:
    mask = np.ones(len(df), dtype=bool)
    for term in name.replace(" ", "").replace("&", ",").split(","):
        col, val = term.split("=", 1)
        mask &= (df[col] == val).to_numpy()
    return float(mask.mean())


def test_kinds_without_a_stated_noise_say_so() -> None:
    """Robust estimators state no noise before they run (it depends on the data)."""
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"x": rng.normal(5, 1, 2000)})
    s = Session(df, budget=ApproxDP(3.0, 1e-5, Neighbouring.REPLACE_ONE))
    for kind in ("robust_mean", "robust_median"):
        pv = s.preview({"type": kind, "column": "x", "bound": 100.0,
                        "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}})
        assert pv["noise"] is None
        assert pv["noise_note"]
