"""Plans asking for (eps, delta)-DP (issue 24): Gaussian noise at the largest rho whose
zCDP implies (eps, delta), or Laplace at pure eps, whichever is less noisy, decided from
public values (docs/proofs/queries.md §8); the preview states the choice the run makes,
and the charge is sound."""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import optimize, stats

from dpsieve import Session
from dpsieve.accounting.events import (
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PureDP,
)
from dpsieve.errors import BudgetExceededError, ValidationError
from dpsieve.queries import Schema
from dpsieve.queries.approx import gaussian_charge, gaussian_rho, prefer_gaussian
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare

AR = Neighbouring.ADD_REMOVE
SCHEMA = Schema.of([("pid", "integer"), ("g", "integer"), ("x", "float")], "pid")


def _spec(eps: float, k: int, delta: float = 1e-6, **extra: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": {"type": "approx", "eps": eps, "delta": delta},
            "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["g"],
            "keys": [[i] for i in range(20)], "contribution": {"max_groups": k}, **extra}


def _frame(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    return pd.DataFrame({"pid": rng.integers(0, 400, n), "g": rng.integers(0, 20, n),
                         "x": rng.uniform(0, 10, n)})


# -- the conversion: closed forms against independent oracles ------------------------------

def _cks_delta(rho: float, eps: float) -> float:
    """Canonne, Kamath & Steinke 2020 (Cor. 13): the delta at eps of rho-zCDP, the infimum
    over orders a > 1 of e^((a-1)(a rho - eps)) (1 - 1/a)^(a-1) / a, minimised over a
    continuous order by scipy (in logs)."""
    def log_d(u: float) -> float:
        a = 1.0 + math.exp(u)
        return (a - 1) * (a * rho - eps) + (a - 1) * math.log1p(-1 / a) - math.log(a)
    r = optimize.minimize_scalar(log_d, bounds=(-20.0, 20.0), method="bounded",
                                 options={"xatol": 1e-12})
    return math.exp(float(r.fun))


def _analytic_gaussian_sigma(eps: float, delta: float) -> float:
    """Balle & Wang 2018 (Thm. 8): the least sigma (sensitivity 1) with
    Phi(1/(2s) - eps s) - e^eps Phi(-1/(2s) - eps s) <= delta, by bisection."""
    def excess(s: float) -> float:
        return float(stats.norm.cdf(0.5 / s - eps * s)
                     - math.exp(eps) * stats.norm.cdf(-0.5 / s - eps * s)) - delta
    return float(optimize.brentq(excess, 1e-3, 1e4, xtol=1e-13, rtol=1e-14))


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (0.1, 1e-6), (0.25, 2.5e-7),
                                            (3.0, 1e-9), (0.5, 1e-5)])
def test_rho_is_the_largest_whose_zcdp_implies_the_request(eps: float, delta: float) -> None:
    """The CKS conversion, minimised independently over a continuous order: rho meets the
    request and 0.1 % more would not (rho is the largest, not rounded far down), and it is
    at least Bun & Steinke's closed form (sqrt(L + eps) - sqrt(L))^2, L = ln(1/delta).
    dp_accounting's RDP accountant (its own order grid) finds the Gaussian of sigma =
    1/sqrt(2 rho) (eps', delta)-DP with eps <= eps' <= 1.05 eps, its PLD accountant inside
    the request; the analytic Gaussian (Balle & Wang) needs a sigma at most ours (sound)
    and within 10 % (the zCDP conversion's price)."""
    import dp_accounting

    rho = gaussian_rho(ApproxDP(eps, delta))
    assert _cks_delta(rho, eps) <= delta < _cks_delta(rho * 1.001, eps)
    big_l = math.log(1 / delta)
    assert rho >= (math.sqrt(big_l + eps) - math.sqrt(big_l)) ** 2 * (1 - 1e-12)
    sigma = 1.0 / math.sqrt(2.0 * rho)
    acc = dp_accounting.rdp.RdpAccountant()
    acc.compose(dp_accounting.GaussianDpEvent(sigma))
    eps_rdp = acc.get_epsilon(delta)
    assert eps * (1 - 1e-9) <= eps_rdp <= eps * 1.05
    pld = dp_accounting.pld.PLDAccountant()
    pld.compose(dp_accounting.GaussianDpEvent(sigma))
    assert pld.get_epsilon(delta) <= eps
    s_ag = _analytic_gaussian_sigma(eps, delta)
    assert s_ag <= sigma <= 1.10 * s_ag
    # rounded down: the certified conversion's delta at eps holds with room to spare
    bw = float(stats.norm.cdf(0.5 / sigma - eps * sigma)
               - math.exp(eps) * stats.norm.cdf(-0.5 / sigma - eps * sigma))
    assert bw <= delta


def test_the_gaussian_candidate_is_the_zcdp_plan_at_that_rho() -> None:
    """The Gaussian noise of an (eps, delta) plan is exactly that of the ZCDP(rho) plan:
    the discrete Gaussian with s^2 >= L2^2 / (2 rho) (L2^2 = max_groups for a unit
    count), within a part in 10^4 of it."""
    p = prepare(from_spec(_spec(1.0, 14)), SCHEMA, AR)
    rho = gaussian_rho(ApproxDP(1.0, 1e-6))
    z = prepare(from_spec({**_spec(1.0, 14), "privacy": {"type": "zcdp", "rho": rho}}),
                SCHEMA, AR)
    (c,), (cz,) = p.charge.parts, z.charge.parts
    assert c.family == "gaussian"
    assert c.mechanism == cz.mechanism
    s2 = float(c.mechanism.sampled_sigma2)  # type: ignore[union-attr]
    assert 14 / (2 * rho) <= s2 <= 14 / (2 * rho) * (1 + 1e-4)
    assert c.charge == ZCDP(rho, AR)


# -- the choice ----------------------------------------------------------------------------

def test_the_choice_follows_the_variance_ratio_computed_independently() -> None:
    """Laplace std sqrt(2q)/(1-q) at scale k/eps against the Gaussian's sqrt(k/(2 rho)):
    Gaussian exactly where the ratio of variances is below 1 (one part here)."""
    for eps in (1.0, 0.1):
        rho = gaussian_rho(ApproxDP(eps, 1e-6))
        for k in (1, 2, 4, 8, 14, 16):
            p = prepare(from_spec(_spec(eps, k)), SCHEMA, AR)
            c = p.calibration
            assert c is not None
            t = k / eps
            q = math.exp(-1 / t)
            lap_var = 2 * q / (1 - q) ** 2
            ratio = (k / (2 * rho)) / lap_var
            assert c["variance_ratio"] == pytest.approx(ratio, rel=1e-3)
            want = "gaussian" if ratio < 1 else "laplace"
            assert c["mechanism"] == want
            (part,) = p.charge.parts
            assert part.family == want
            assert p.charge.description == (ApproxDP(eps, 1e-6, AR) if want == "gaussian"
                                            else PureDP(eps, AR))
    # the boundary: ties go to Laplace
    assert prefer_gaussian(0.999)
    assert not prefer_gaussian(1.0)


def test_a_mean_compares_both_parts() -> None:
    spec = {**_spec(1.0, 14), "aggregations": [{"type": "mean", "column": "x", "lower": 0,
                                                "upper": 10}],
            "contribution": {"max_groups": 14, "max_rows": 8}}
    p = prepare(from_spec(spec), SCHEMA, AR)
    lap = prepare(from_spec({**spec, "privacy": {"type": "pure", "eps": 1.0}}), SCHEMA, AR)
    rho = gaussian_rho(ApproxDP(1.0, 1e-6))
    gau = prepare(from_spec({**spec, "privacy": {"type": "zcdp", "rho": rho}}), SCHEMA, AR)
    ratios = [(g.noise().std / a.noise().std) ** 2
              for a, g in zip(lap.charge.parts, gau.charge.parts, strict=True)]
    assert p.calibration is not None
    assert p.calibration["variance_ratio"] == pytest.approx(sum(ratios) / 2, rel=1e-12)
    assert [c.noise() for c in p.charge.parts] == (
        [c.noise() for c in gau.charge.parts] if sum(ratios) < 2
        else [c.noise() for c in lap.charge.parts])


def test_delta_zero_is_the_pure_plan() -> None:
    p = prepare(from_spec(_spec(1.0, 14, delta=0.0)), SCHEMA, AR)
    assert p.charge.description == PureDP(1.0, AR)
    assert p.calibration is not None
    assert p.calibration["mechanism"] == "laplace"
    assert p.calibration["rho"] == 0.0


# -- key selection: the existing selections, the deltas added ------------------------------

def test_key_selection_keeps_its_selection_and_adds_its_delta() -> None:
    for k, family in ((1, "laplace"), (14, "gaussian")):
        spec = {**_spec(1.0, k), "select": {"delta": 1e-7}}
        del spec["keys"]
        p = prepare(from_spec(spec), SCHEMA, AR)
        assert p.calibration is not None
        assert p.calibration["mechanism"] == family
        sel = p.charge.selection
        assert sel is not None
        if family == "laplace":
            pure = prepare(from_spec({**spec, "privacy": {"type": "pure", "eps": 1.0}}),
                           SCHEMA, AR)
            assert p.charge.description == ApproxDP(1.0, 1e-7, AR) == \
                pure.charge.description
            assert sel.info() == pure.charge.selection.info()  # type: ignore[union-attr]
        else:
            rho = gaussian_rho(ApproxDP(1.0, 1e-6))
            z = prepare(from_spec({**spec, "privacy": {"type": "zcdp", "rho": rho}}),
                        SCHEMA, AR)
            assert z.charge.description == ApproxZCDP(rho, 1e-7, AR)
            assert sel.info() == z.charge.selection.info()  # type: ignore[union-attr]
            d = p.charge.description
            assert isinstance(d, ApproxDP)
            assert d.eps == 1.0
            assert Fraction(d.delta) >= Fraction(1e-6) + Fraction(1e-7)
            assert d.delta == pytest.approx(1.1e-6, rel=1e-15)
    assert gaussian_charge(ApproxDP(1.0, 0.6), 0.6).delta == 1.0


# -- Session: the preview is the run; the charge; refusals ---------------------------------

@pytest.mark.parametrize("k", [1, 14])
def test_session_preview_states_the_choice_the_query_makes(k: int) -> None:
    s = Session(_frame(), budget=ApproxDP(4.0, 1e-5), privacy_unit="pid")
    plan = _spec(1.0, k)
    before = s.remaining()
    p = s.preview(plan)
    assert s.remaining() == before
    assert s.store.history(s.budget_id) == []
    assert p["calibration"]["mechanism"] == ("gaussian" if k == 14 else "laplace")
    assert p["calibration"]["requested"] == ApproxDP(1.0, 1e-6).to_dict()
    r = s.query(plan)
    assert r.cost.to_dict()["query"] == p["charge"]
    assert s.remaining().to_dict() == p["budget_after"]
    mech = "discrete_" + p["calibration"]["mechanism"]
    for label, parts in r.noise.items():
        for name, n in parts.items():
            want = p["noise"][label][name]
            assert n["mechanism"] == want["mechanism"] == mech
            assert (n["std"], n["ci95"]) == (want["std"], want["ci95"])


def test_gaussian_plans_under_an_eps_delta_budget_admit_what_the_request_says() -> None:
    """Four (0.25, 2.5e-7) Gaussian plans fit a (1, 1e-6) budget, a fifth is refused with
    nothing spent (the charge is the request)."""
    s = Session(_frame(), budget=ApproxDP(1.0, 1e-6), privacy_unit="pid")
    plan = _spec(0.25, 14, delta=2.5e-7)
    assert s.preview(plan)["calibration"]["mechanism"] == "gaussian"
    for _ in range(4):
        s.query(plan)
    with pytest.raises(BudgetExceededError):
        s.query(plan)
    assert len(s.store.history(s.budget_id)) == 4


def test_refusals_name_the_parameter_and_spend_nothing() -> None:
    s = Session(_frame(), budget=ApproxDP(4.0, 1e-5), privacy_unit="pid")
    bad = [
        ({"type": "approx", "eps": 0.0, "delta": 1e-6}, "eps"),
        ({"type": "approx", "eps": 1.0, "delta": 1.0}, "delta"),
        ({"type": "approx", "eps": 1.0, "delta": 1e-6, "neighbouring": "replace_one"},
         "privacy"),
    ]
    for privacy, name in bad:
        with pytest.raises(ValidationError) as e:
            s.query({**_spec(1.0, 14), "privacy": privacy})
        assert e.value.parameter == name
    # 'auto' bounds take a pure or zCDP privacy
    auto = {**_spec(1.0, 14), "contribution": "auto"}
    with pytest.raises(ValidationError) as e:
        s.query(auto)
    assert e.value.parameter == "privacy"
    assert "auto" in str(e.value)
    # a zCDP budget takes the Gaussian as its rho (it was refused as incompatible: its
    # ApproxDP charge has a delta), but no plan with key selection (every candidate's
    # charge has a delta): refused before the spend naming privacy and the budget
    z = Session(_frame(), budget=ZCDP(1.0), privacy_unit="pid")
    sel = {**_spec(1.0, 14), "select": {"delta": 1e-7}}
    del sel["keys"]
    with pytest.raises(ValidationError) as e:
        z.query(sel)
    assert e.value.parameter == "privacy"
    assert "a zCDP budget" in str(e.value)
    assert z.store.history(z.budget_id) == []
    z.query(_spec(1.0, 14))
    rho = gaussian_rho(ApproxDP(1.0, 1e-6))
    assert Fraction(z.remaining()["exact"]) == 1 - Fraction(rho)
    # a pure budget takes Laplace, whatever the variance ratio
    pure = Session(_frame(), budget=PureDP(2.0), privacy_unit="pid")
    pure.query(_spec(1.0, 1))
    pure.query(_spec(1.0, 14))
    assert Fraction(pure.remaining()["exact"]) == 0
    assert s.store.history(s.budget_id) == []


# -- extreme requests: decided before the spend, never a crash (audit h24gaudit) -------------

@pytest.mark.parametrize("delta", [5e-324, 1e-6, 0.5, 1 - 2**-53])
def test_rho_at_the_top_of_the_float_range_is_finite_and_certified(delta: float) -> None:
    """eps = the largest float: Bun & Steinke's closed form overflowed ((eps / s)^2) and
    its ulp walk up reached inf (Fraction(inf)): an OverflowError before the spend. The
    rho now is finite and satisfies rho + 2 sqrt(rho L) <= eps in exact arithmetic
    (L = ln(1/delta) bounded above), or CKS's certificate, which is at least it."""
    eps = sys.float_info.max
    rho = gaussian_rho(ApproxDP(eps, delta))
    assert 0 < rho <= eps
    assert math.isfinite(rho)
    big_l = Fraction(-math.log(delta)) * (1 + Fraction(1, 10**12))
    bs = _bs_closed_form(eps, delta)
    assert Fraction(rho) >= bs * (1 - Fraction(1, 10**12))  # the largest, not rounded far
    if Fraction(rho) <= bs:  # Bun-Steinke's own certificate (CKS's: tested above)
        assert 4 * Fraction(rho) * big_l <= (Fraction(eps) - Fraction(rho)) ** 2


def _bs_closed_form(eps: float, delta: float) -> Fraction:
    """(sqrt(L + eps) - sqrt(L))^2 = eps^2 / s^2 in exact rationals (s from floats)."""
    s = Fraction(math.sqrt(-math.log(delta) + eps) + math.sqrt(-math.log(delta)))
    return Fraction(eps) ** 2 / s ** 2


def test_variance_ratio_is_total_when_a_std_is_below_the_float_range() -> None:
    """A huge eps makes the Laplace std 0.0: the ratio divided by zero (ZeroDivisionError
    before the spend, a 500 in the service). 0 / 0 is a tie (Laplace), g / 0 and a
    quotient past the float range inf (Laplace), 0 / a zero (Gaussian)."""
    from dpsieve.queries.approx import _ratio

    assert _ratio(0.0, 0.0) == 1.0
    assert _ratio(1.0, 0.0) == math.inf
    assert _ratio(1e200, 1e-200) == math.inf
    assert _ratio(0.0, 1.0) == 0.0
    assert _ratio(3.0, 2.0) == 2.25
    assert not prefer_gaussian(_ratio(0.0, 0.0))


@pytest.mark.parametrize("eps", [1e6, 1e300, sys.float_info.max])
@pytest.mark.parametrize("k", [1, 14])
def test_a_huge_eps_is_answered_or_refused_by_the_budget_never_a_crash(eps: float,
                                                                      k: int) -> None:
    """Laplace's std is 0.0 or far below the Gaussian's here (Laplace, charged pure eps_L:
    on an approximate zCDP budget the candidates are compared at equal charge, eps_L the
    largest float <= eps with eps_L^2/2 <= rho, exactly); the preview and the run agree;
    an eps the budget cannot take is a BudgetExceededError with nothing spent."""
    s = Session(_frame(300), budget=ApproxZCDP(1e300, 0.5), privacy_unit="pid")
    plan = _spec(eps, k)
    p = s.preview(plan)
    cal = p["calibration"]
    assert cal["mechanism"] == "laplace"
    eps_l = cal["laplace_eps"]
    assert 0 < eps_l <= eps
    assert Fraction(eps_l) ** 2 / 2 <= Fraction(cal["rho"])
    assert p["charge"] == PureDP(eps_l).to_dict()
    if p["admitted"]:
        r = s.query(plan)
        assert r.cost.to_dict()["query"] == p["charge"]
    else:
        with pytest.raises(BudgetExceededError):
            s.query(plan)
        assert s.store.history(s.budget_id) == []


def test_the_stated_choice_is_strict_json_when_laplace_noise_is_below_the_float_range() -> None:
    """eps 1e6, one group a unit: the Laplace std is 0.0 and the Gaussian's is not, the
    ratio +inf (Laplace). The preview's calibration printed ``Infinity`` through the CLI
    (the service said null): both now say null, and the choice is Laplace. (On this
    approximate zCDP budget Laplace is at eps_L = sqrt(2 rho) ~ 1409, equal charge: its
    std underflows from eps_L ~ 745 on; eps 800 was the case before equal charge.)"""
    import json

    s = Session(_frame(300), budget=ApproxZCDP(1e9, 0.5), privacy_unit="pid")
    p = s.preview(_spec(1e6, 1))
    assert p["noise"]["count"]["a0.count"]["std"] == 0.0
    cal = p["calibration"]
    assert cal["mechanism"] == "laplace"
    assert cal["variance_ratio"] is None
    assert "other_refused" not in cal
    json.dumps(p, allow_nan=False)


def test_rho_implies_the_request_across_the_whole_range() -> None:
    """60 (eps, delta) drawn log-uniformly from eps in [1e-19, 1e6] and delta in
    [1e-300, 0.9998]: rho-zCDP implies (eps, delta) by Bun-Steinke (exact in 60-digit
    arithmetic) or by CKS at its best order (minimised in 60 digits over a = 1 + e^u), the
    rounding never up (an independent oracle; the other tests stay at moderate values)."""
    from mpmath import log as mlog
    from mpmath import mp, mpf
    from mpmath import sqrt as msqrt

    mp.dps = 60

    def log_cks(rho: float, eps: float, u: float) -> float:
        a = 1 + mp.exp(mpf(u))
        return float((a - 1) * (a * mpf(rho) - mpf(eps)) + (a - 1) * mlog(1 - 1 / a)
                     - mlog(a))

    rng = np.random.default_rng(20261207)
    positive = 0
    for _ in range(60):
        eps, delta = float(10 ** rng.uniform(-19, 6)), float(10 ** rng.uniform(-300, -1e-4))
        rho = gaussian_rho(ApproxDP(eps, delta))
        assert 0 <= rho <= eps
        if rho == 0:
            continue
        positive += 1
        if mpf(rho) + 2 * msqrt(mpf(rho) * -mlog(mpf(delta))) <= mpf(eps):
            continue
        grid = np.linspace(-40.0, 60.0, 201)
        u0 = float(grid[int(np.argmin([log_cks(rho, eps, u) for u in grid]))])
        r = optimize.minimize_scalar(lambda u, r_=rho, e_=eps: log_cks(r_, e_, u),
                                     bounds=(u0 - 1, u0 + 1), method="bounded",
                                     options={"xatol": 1e-10})
        assert min(float(r.fun), log_cks(rho, eps, u0)) <= math.log(delta) * (1 - 1e-9), (
            eps, delta, rho)
    assert positive >= 50
