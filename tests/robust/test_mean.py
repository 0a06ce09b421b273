"""PFR mean: results, refusals, privacy reported, bad input, and utility on clean data."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.robust import FriendlyMean, PFRPlan, Refusal, RobustResult, pfr_mean
from dpsieve.robust.mean import default_radii


def test_rowwise_mean_is_the_default_and_pure() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(5, 1, 2000)
    out = pfr_mean(x, 1.0, 1e-6, bound=1e4, rng=rng)
    assert isinstance(out, RobustResult)
    assert isinstance(out.value, float)
    assert abs(out.value - x.mean()) < 0.1
    assert out.privacy == PureDP(1.0, Neighbouring.REPLACE_ONE)
    assert out.details["method"] == "rowwise"
    assert 1.0 < out.details["radius"] < 6.0  # about three SDs
    assert out.to_dict()["refused"] is False


def test_mean_scalar_close_and_charged_exactly_the_budget() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(5, 1, 2000)
    out = pfr_mean(x, 1.0, 1e-6, bound=1e4, rng=rng, method="friendly")
    assert isinstance(out, RobustResult)
    assert isinstance(out.value, float)
    assert abs(out.value - 5) < 0.5
    assert out.privacy.neighbouring is Neighbouring.REPLACE_ONE
    assert isinstance(out.privacy, ApproxDP)
    assert 0.999 <= out.privacy.eps <= 1.0
    assert out.privacy.delta <= 1e-6
    assert out.details["radius"] < 100
    assert out.to_dict()["refused"] is False


def test_mean_vector() -> None:
    rng = np.random.default_rng(4)
    x = rng.normal([1.0, -2.0, 3.0], 1.0, (3000, 3))
    for method in ("rowwise", "friendly"):
        out = pfr_mean(x, 2.0, 1e-6, bound=1e3, rng=rng, method=method)
        assert isinstance(out, RobustResult)
        assert np.asarray(out.value).shape == (3,)
        assert np.allclose(out.value, [1, -2, 3], atol=1.0)


def test_contaminated_data_gives_the_inlier_mean() -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.normal(0, 1, 1800), np.full(200, 1e4)])
    for method in ("rowwise", "friendly"):
        out = pfr_mean(x, 1.0, 1e-6, bound=1e5, rng=rng, method=method)
        assert isinstance(out, RobustResult)
        assert abs(out.value) < 0.5  # the 10 % outliers at 1e4 are never kept


def test_public_refusal_spends_nothing() -> None:
    out = pfr_mean(np.ones(50), 1.0, 1e-6, bound=10.0, method="friendly")
    assert isinstance(out, Refusal)
    assert out.stage == "public"
    assert out.privacy.eps == 0.0
    assert out.details["n0"] > 50
    assert pfr_mean(np.ones(3), 1.0, 1e-6, bound=10.0, method="friendly").refused
    rng = np.random.default_rng(0)
    for _ in range(20):  # constant data (every record tied) at n = 1000: found, no n0
        small = pfr_mean(np.ones(1000), 1.0, 1e-6, bound=10.0, rng=rng)
        assert isinstance(small, RobustResult)
        assert abs(small.value - 1.0) < 0.05


def test_spread_data_refuse_at_propose_with_the_full_charge() -> None:
    rng = np.random.default_rng(6)
    x = rng.uniform(-1e6, 1e6, 2000)  # no radius in the grid below 2 * bound keeps 80 %
    out = pfr_mean(x, 1.0, 1e-6, radii=np.geomspace(1e-3, 10.0, 20), rng=rng,
                   method="friendly")
    assert isinstance(out, Refusal)
    assert out.stage == "propose"
    assert out.privacy.eps > 0.99


@pytest.mark.parametrize(
    ("data", "kwargs", "param"),
    [
        ([], {"bound": 1.0}, "data"),
        ([1.0, float("nan")] * 500, {"bound": 1.0}, "data"),
        ([1.0, float("inf")] * 500, {"bound": 1.0}, "data"),
        (["a"] * 10, {"bound": 1.0}, "data"),
        ([1.0] * 1000, {"method": "friendly"}, "radii"),
        ([1.0] * 1000, {"bound": 1.0, "radii": [1.0, 2.0], "method": "friendly"}, "radii"),
        ([1.0] * 1000, {"radii": [2.0, 1.0], "method": "friendly"}, "radii"),
        ([1.0] * 1000, {"bound": -1.0}, "bound"),
        ([1.0] * 1000, {}, "bound"),
        ([1.0] * 1000, {"radii": [1.0, 2.0]}, "bound"),
        ([1.0] * 1000, {"bound": 1.0, "method": "median"}, "method"),
        ([1.0] * 1000, {"bound": 1.0, "width": 0.0}, "width"),
        ([1.0] * 1000, {"bound": 1e300}, "bound"),
    ],
)
def test_bad_input(data: object, kwargs: dict[str, object], param: str) -> None:
    with pytest.raises(ValidationError, match=f"'{param}'"):
        pfr_mean(data, 1.0, 1e-6, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("eps", "delta"), [(0.0, 1e-6), (float("nan"), 1e-6), (1.0, 0.0),
                                            (1.0, 1.0), (-1.0, 1e-6)])
def test_bad_budget(eps: float, delta: float) -> None:
    with pytest.raises(ValidationError):
        pfr_mean(np.ones(1000), eps, delta, bound=1.0)


def test_plan_accounting_is_theorem_1() -> None:
    plan = PFRPlan.build(1000, default_radii(10.0), 1.0, 1e-6)
    em, dm = plan.release_budget
    kappa = plan.params.kappa
    eps = plan.eps_propose + math.expm1(em) * kappa
    assert plan.privacy.eps == pytest.approx(eps, rel=1e-12)
    assert plan.privacy.eps <= 1.0
    assert plan.privacy.delta <= 1e-6
    rel = FriendlyMean(em, dm)
    assert rel.eps_count + rel.eps_value == pytest.approx(em)
    assert rel.n0 == 2 + rel.margin + 2


@pytest.mark.slow
def test_mean_utility_pilot() -> None:
    """Clean N(5,1), bound 1e4, eps=1, delta=1e-6, n=1000: RMSE well under 0.5 (pilot 0.18),
    refusals rare (Propose can stop at a too small radius by noise: a refusal, not an error)."""
    rng = np.random.default_rng(8)
    errs, refused = [], 0
    for _ in range(100):
        out = pfr_mean(rng.normal(5, 1, 1000), 1.0, 1e-6, bound=1e4, rng=rng,
                       method="friendly")
        if isinstance(out, Refusal):
            refused += 1
            assert out.stage in ("propose", "release")
            continue
        errs.append(out.value - 5)
    assert refused <= 10
    assert math.sqrt(np.mean(np.square(errs))) < 0.5


@pytest.mark.slow
def test_friendly_propose_never_picks_a_radius_far_above_the_spread_near_n0() -> None:
    """Issue 16: near the public threshold (n = 500) the old defaults proposed radii like
    5,818 for N(5,1) data. With the shipped defaults, 2,000 benchmark-like runs released
    radii up to 9.65 SDs (3 above 5; median 1.8); here 300 runs, none may exceed 20 SDs.
    (With the earlier defaults W = n/4, beta = 0.2, count 0.3, n_min = 2, 48 radii this
    fails: 37 of 953 released runs were off by more than 10 SDs.)"""
    rng = np.random.default_rng(16)
    radii, refused = [], 0
    for _ in range(300):
        out = pfr_mean(rng.normal(5, 1, 500), 1.0, 1e-6, bound=1e4, rng=rng,
                       method="friendly")
        if isinstance(out, Refusal):
            refused += 1
            continue
        radii.append(out.details["radius"])
    assert len(radii) >= 150, refused  # about 22 % refused at n = 500
    assert max(radii) <= 20.0, sorted(radii)[-5:]


def test_a_privacy_filter_consumes_the_plan_before_the_run() -> None:
    from dpsieve.filters.additive import ApproxZCDPFilter

    plan = PFRPlan.build(1000, default_radii(10.0), 1.0, 1e-6)
    f = ApproxZCDPFilter(0.6, 1e-5)
    assert f.try_spend(plan.privacy).admitted
    assert not f.try_spend(plan.privacy).admitted  # the second run no longer fits


def test_friendly_mean_on_an_empty_core_is_defined() -> None:
    rel = FriendlyMean(0.05, 0.4)  # wide count noise: n~ = 0 + Z - m often reaches n_min
    rng = np.random.default_rng(0)
    outs = [rel(np.empty((0, 2)), 1.0, 0.05, 0.4, rng) for _ in range(200)]
    assert any(isinstance(o, Refusal) for o in outs)
    released = [o for o in outs if not isinstance(o, Refusal)]
    assert released
    assert all(np.asarray(o[0]).shape == (2,) for o in released)


def test_run_pfr_with_a_user_metric_and_release() -> None:
    """The framework: any metric and any friendly-DP release (here: the core's size with
    discrete Laplace noise, which is friendly-DP for every metric)."""
    from dpsieve.mechanisms.noise import discrete_laplace
    from dpsieve.robust import euclidean, run_pfr
    from dpsieve.robust._noise import count_scale

    rng = np.random.default_rng(12)
    x = rng.normal(0, 1, (800, 2))
    plan = PFRPlan.build(800, np.geomspace(0.01, 100, 30), 1.0, 1e-6)

    def release(core, r, eps_m, delta_m, g):  # type: ignore[no-untyped-def]
        return len(core) + discrete_laplace(count_scale(eps_m), None, g), {"kept_bound": 800}

    out = run_pfr(x, euclidean, plan, release, rng)
    assert isinstance(out, RobustResult)
    assert out.privacy == plan.privacy
    assert isinstance(out.value, int)
    assert out.value <= 900  # at most n kept, plus noise of scale ~8
    assert out.details["radius"] in plan.radii
    with pytest.raises(ValidationError, match="'records'"):
        run_pfr(x[:700], euclidean, plan, release, rng)
