"""Defect 3 of issue 10: lattice releases at every magnitude up to the public bound.

The PFR mean and median snapped the private core mean to the lattice as int64: depending
on the data the run crashed (``OverflowError``) or wrapped to about -mean. Neighbouring
data sets (1,000 records at 2048 - 4e-6 vs one record moved by +0.009; eps 1, delta 1e-6,
bound 1e4) crashed with probability 0.895 vs 0 -- an empirical delta of 0.89. Ordinary
data crashed too (N(5000, 1) with n = 100,000; Unix times with bound 2e9).

Every lattice release in the code base is swept here over magnitudes up to its public
bound (and to the largest float where it has none), at small and large eps: it must
answer (or refuse as a *result*, never by an exception), and the answer must lie near
the truth (no wrap-around). A new lattice release belongs in this file; a new call of the
range-limited ``snap_to_lattice`` must be on the allow-list below with its public bound.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ApproxZCDP, Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.mechanisms import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PoissonSubsampledGaussian,
    above_threshold,
)
from dpsieve.robust import Refusal, pfr_mean, pfr_median, score_mean
from dpsieve.robust.baselines import adaptive_clipped_mean, clipped_mean

RO = Neighbouring.REPLACE_ONE
TOP = float(np.finfo(np.float64).max)
#: Magnitudes up to the largest float (releases with no public bound).
UNBOUNDED = [0.0, 1.0, 2048 - 4e-6, 5e3, 1.7e9, 2.0**62, 2.0**63, 2.0**64 + 2048, 1e20,
             1e100, 1e300, TOP]
EPSILONS = [1e-3, 1.0, 1e6]


def _magnitudes(bound: float) -> list[float]:
    """0, powers of ten and the int64 edges below ``bound``, and the bound itself."""
    ms = [m for m in UNBOUNDED if m < bound] + [bound, math.nextafter(bound, 0.0)]
    return sorted({s * m for m in ms for s in (1.0, -1.0)})


def _beyond_answer_scale(bound: float, eps: float) -> bool:
    """A pure sum over [-bound, bound] whose Laplace scale (bound / eps, give or take the
    lattice) passes the query layer's limit on noise in answer units (refused before the
    spend). The grids here stay a factor 3 or more away from the limit on either side."""
    from dpsieve.queries.prepare import MAX_ANSWER_SCALE

    return bound / eps > MAX_ANSWER_SCALE / 8


def _near(got: float, want: float, scale: float) -> bool:
    """Within 80 noise scales, float rounding of the magnitude, and saturation."""
    if abs(want) > TOP / 2:
        return math.copysign(1.0, got) == math.copysign(1.0, want) and abs(got) > TOP / 4
    return abs(got - want) <= 80.0 * scale + 1e-9 * abs(want)


# -- mechanisms: no public bound, so every finite float ------------------------------------
@pytest.mark.parametrize("eps", EPSILONS)
def test_laplace_and_gaussian_mechanisms_at_every_magnitude(eps: float) -> None:
    rng = np.random.default_rng(1)
    lap = LaplaceMechanism.for_epsilon(eps, 1.0)
    gau = GaussianMechanism(1.0 / eps, 1.0)
    for m in _magnitudes(TOP):
        a = lap.release(m, rng)
        b = gau.release(m, rng)
        assert _near(a, m, lap.scale), (m, a)
        assert _near(b, m, gau.sigma), (m, b)
        v = lap.__class__.for_epsilon(eps, 1.0, dimension=3).release([m, -m, 1.0], rng)
        assert _near(float(v[0]), m, lap.scale)
        assert _near(float(v[1]), -m, lap.scale)


def test_discrete_mechanisms_are_exact_at_any_integer_size() -> None:
    rng = np.random.default_rng(2)
    for m in [0, 2**62, 2**63 - 1, 2**63, -(2**63) - 5, 10**40, -(10**300)]:
        for mech in (DiscreteLaplaceMechanism(2.0), DiscreteGaussianMechanism(2.0)):
            out = mech.release(m, rng)
            assert isinstance(out, int)
            assert abs(out - m) <= 200, (m, out)  # exact integers: no wrap-around
        vec = DiscreteLaplaceMechanism(2.0, dimension=2).release(
            np.array([m, -m], dtype=object), rng)
        assert abs(int(vec[0]) - m) <= 200
        assert abs(int(vec[1]) + m) <= 200


@pytest.mark.parametrize("eps", EPSILONS)
def test_above_threshold_at_every_magnitude(eps: float) -> None:
    rng = np.random.default_rng(3)
    for m in _magnitudes(TOP):
        if m <= 0:
            continue
        # a query far above the threshold is found; none far below is
        assert above_threshold([m / 4, m], m / 2, eps, 1e-6 * m, rng) == 1
        assert above_threshold([m / 4, m / 8], m / 2, eps, 1e-6 * m, rng) is None
        # a fixed sensitivity: huge queries once failed the int64 snap (private values)
        if m >= 1e6 / eps:
            assert above_threshold([-m, m], 0.0, eps, 1.0, rng) == 1


def test_subsampled_gaussian_clips_every_magnitude() -> None:
    rng = np.random.default_rng(4)
    mech = PoissonSubsampledGaussian(sigma=1.0, rate=1.0, sensitivity=1.0)
    for m in _magnitudes(TOP):
        out = mech.release(np.full(10, m), rng)
        assert _near(out, 10 * math.copysign(min(abs(m), 1.0), m), 1.0), (m, out)


# -- session: sum and mean, the public bound is the clipping range -------------------------
@pytest.mark.parametrize("bound", [1.0, 2048.0, 1e4, 2e9, 1e15, 1e100, 1e300])
def test_session_sum_and_mean_up_to_the_clipping_bound(bound: float) -> None:
    ms = _magnitudes(bound)
    df = pd.DataFrame({"x": [m for m in ms for _ in range(3)]})
    s = Session(df, budget=PureDP(1e40), rng=np.random.default_rng(5))
    for eps in [*EPSILONS, 1e30]:
        for col_value in ms:
            one = df[df["x"] == col_value].reset_index(drop=True)
            s1 = Session(one, budget=PureDP(1e40), rng=np.random.default_rng(6))
            if _beyond_answer_scale(bound, eps):
                # the sum's noise would not be a finite double far from overflow: refused
                # before the spend, naming the parameter (never charged, never inf)
                with pytest.raises(ValidationError, match="'aggregations'"):
                    s1.sum("x", lower=-bound, upper=bound, privacy=PureDP(eps))
                assert s1.remaining().to_dict() == Session(
                    one, budget=PureDP(1e40)).remaining().to_dict()
                continue
            r = s1.sum("x", lower=-bound, upper=bound, privacy=PureDP(eps))
            g = r.details["granularity"]  # each row is rounded to the lattice: <= g/2 each
            assert _near(r.value, 3 * col_value, bound / eps + 3 * g / 80), (
                bound, eps, col_value, r.value)
            r = s1.mean("x", lower=-bound, upper=bound, privacy=PureDP(eps))
            assert -bound <= r.value <= bound
            if eps >= 1.0:
                g = r.details["sum"]["granularity"]
                assert _near(r.value, col_value, 40 * bound / eps + g / 80), (
                    col_value, r.value)
        if not _beyond_answer_scale(bound, eps):
            r = s.sum("x", lower=-bound, upper=bound, privacy=PureDP(eps))
            assert math.isfinite(r.value)


# -- robust: the public bound Lambda --------------------------------------------------------
@pytest.mark.parametrize("bound", [1e4, 2e9, 1e12])
def test_pfr_mean_and_median_up_to_the_public_bound(bound: float) -> None:
    rng = np.random.default_rng(7)
    for m in [*_magnitudes(bound), 2048 - 4e-6, 5000.0]:
        if abs(m) > bound:
            continue
        x = m + rng.normal(0.0, 1e-9 * bound, 1000)
        for est in (pfr_mean, pfr_median):
            out = est(x, 1.0, 1e-6, bound=bound, rng=rng)
            if isinstance(out, Refusal):
                continue  # a refusal is a result, charged as stated: fine
            assert abs(float(out.value) - m) <= 1e-3 * bound, (est.__name__, m, out.value)


def test_pfr_mean_on_the_reported_neighbours_never_fails() -> None:
    """The issue's pair: old code crashed on 89.5% of runs on D and on none on D'."""
    rng = np.random.default_rng(8)
    d = np.full(1000, 2048 - 4e-6)
    d2 = d.copy()
    d2[0] += 0.009
    for x in (d, d2):
        for _ in range(25):
            out = pfr_mean(x, 1.0, 1e-6, bound=1e4, rng=rng)
            assert not isinstance(out, Refusal)
            assert abs(float(out.value) - 2048) < 1.0  # no wrap to about -2048


def test_pfr_on_ordinary_data_that_crashed() -> None:
    rng = np.random.default_rng(9)
    x = rng.normal(5000.0, 1.0, 100_000)
    out = pfr_mean(x, 1.0, 1e-6, bound=1e4, rng=rng)
    assert not isinstance(out, Refusal)
    assert abs(float(out.value) - 5000.0) < 1.0
    t = rng.uniform(1.6e9, 1.7e9, 2000)
    for est in (pfr_mean, pfr_median):
        out = est(t, 1.0, 1e-6, bound=2e9, rng=rng)
        assert not isinstance(out, Refusal)
        assert abs(float(out.value) - t.mean()) < 5e7


@pytest.mark.parametrize("bound", [1.0, 1e4, 2e9, 1e100, 1e300])
def test_robust_baselines_and_variant_b_up_to_the_bound(bound: float) -> None:
    rng = np.random.default_rng(10)
    for m in _magnitudes(bound):
        x = np.full(200, m)
        for eps in EPSILONS:
            v = clipped_mean(x, bound, eps, rng)
            assert _near(v, m, 2 * bound / (200 * eps)), (bound, m, eps, v)
        v = adaptive_clipped_mean(x, bound, 1.0, rng=rng)
        assert math.isfinite(v)
        out = score_mean(np.abs(x).reshape(-1, 1), lambda r: r[:, 0], 1.0, bound, rng=rng)
        if not isinstance(out, Refusal):
            assert math.isfinite(float(out.value))


# -- session: robust and release kinds, through Session.run --------------------------------
def test_session_robust_queries_at_large_magnitudes() -> None:
    rng = np.random.default_rng(11)
    for m, bound in [(2048 - 4e-6, 1e4), (5000.0, 1e4), (1.65e9, 2e9), (-9e11, 1e12)]:
        df = pd.DataFrame({"x": m + rng.normal(0, 1e-6, 1000)})
        s = Session(df, budget=ApproxZCDP(100.0, 0.5, RO), rng=rng)
        for t in ("robust_mean", "robust_median"):
            r = s.run({"type": t, "column": "x", "bound": bound,
                       "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}})
            if r.value is not None:
                assert abs(r.value - m) <= 1e-3 * bound, (t, m, r.value)


@pytest.mark.parametrize("mechanism", ["laplace", "mwem"])
def test_session_release_lattice_mechanisms_at_extreme_eps(mechanism: str) -> None:
    df = pd.DataFrame({"a": ["x", "y"] * 50})
    for eps in [1e-9, 1e-3, 1.0, 1e6, 1e12]:
        s = Session(df, budget=PureDP(1e13, RO), rng=np.random.default_rng(12))
        spec: dict[str, Any] = {"type": "release", "mechanism": mechanism, "columns": ["a"],
                                "domain": {"a": ["x", "y"]}, "n": 100,
                                "privacy": {"type": "pure", "eps": eps}}
        error = None
        try:
            r = s.run(spec)
        except Exception as e:  # a refusal is fine only if nothing was charged
            error = repr(e)
        if error is not None:
            assert s.store.history("session") == [], (eps, error)
            continue
        assert all(math.isfinite(a) for a in r.value["answers"])


# -- the allow-list of range-limited snaps ---------------------------------------------------
#: Calls of the int64 ``snap_to_lattice`` and the public bound that keeps them in range.
INT64_SNAPS = {
    "session.py": "the linear workload W (public), |W / g| <= 2^20 by the choice of g",
}


def test_every_int64_snap_is_on_the_allow_list() -> None:
    src = Path(__file__).resolve().parents[2] / "src" / "dpsieve"
    found: dict[str, int] = {}
    for path in src.rglob("*.py"):
        if path.name == "noise.py" and path.parent.name == "mechanisms":
            continue  # the definition
        n = len(re.findall(r"\bsnap_to_lattice\(", path.read_text()))
        if n:
            found[str(path.relative_to(src))] = n
    assert set(found) <= set(INT64_SNAPS), (
        f"new int64 snaps {set(found) - set(INT64_SNAPS)}: use mechanisms.snap_exact, or "
        "add the call with the public bound that keeps |x / g| < 2^62 to INT64_SNAPS")


# -- the query layer (dpsieve.queries): sum and mean up to the clipping bound ---------------
@pytest.mark.parametrize("engine", ["pandas", pytest.param("duckdb", marks=pytest.mark.slow)])
@pytest.mark.parametrize("bound", [1.0, 2048.0, 2e9, 1e15, 1e100, 1e300])
def test_query_layer_sum_and_mean_up_to_the_clipping_bound(engine: str, bound: float,
                                                           tmp_path: Path) -> None:
    """Every value magnitude up to the public bound, through the engines' lattice sums
    (exact integers: no crash, no wrap-around), answers near the truth."""
    from dpsieve.queries import Schema
    from dpsieve.queries.engines.duckdb import DuckDBEngine
    from dpsieve.queries.engines.frames import PandasEngine
    from dpsieve.queries.plan import from_spec
    from dpsieve.queries.prepare import prepare

    ms = _magnitudes(bound)
    for eps in (1e-3, 1.0, 1e6):
        for m in ms:
            df = pd.DataFrame({"x": [m] * 3})
            if engine == "pandas":
                eng: Any = PandasEngine(df)
            else:
                path = tmp_path / "x.csv"
                df.to_csv(path, index=False, float_format="%.17g")
                eng = DuckDBEngine(path, types={"x": "float"})  # a CSV: declared types
            schema = Schema(eng.columns())
            for t in ("sum", "mean"):
                spec = {"type": t, "column": "x", "lower": -bound, "upper": bound,
                        "privacy": {"type": "pure", "eps": eps}}
                if _beyond_answer_scale(bound, eps):  # a mean noises its sum too
                    with pytest.raises(ValidationError, match="'aggregations'"):
                        prepare(from_spec(spec, "add_remove"), schema, Neighbouring.ADD_REMOVE)
                    continue
                p = prepare(from_spec(spec, "add_remove"), schema, Neighbouring.ADD_REMOVE)
                got = p.run(eng, rng=np.random.default_rng(13)).groups[0].estimates[0].value
                assert math.isfinite(got) or abs(m) > TOP / 4, (t, m, got)
                want = 3 * m if t == "sum" else m
                scale = (bound / eps) * (1 if t == "sum" else 40)
                if t == "mean" and eps < 1.0:
                    continue  # the noisy count may be tiny: only finiteness is claimed
                assert _near(got, want, scale), (engine, t, bound, eps, m, got)
