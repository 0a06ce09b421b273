"""The adaptive training filter: budget of reference steps, exchanges, residue conditions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpsieve.errors import ValidationError
from dpsieve.filters import filter_from_json
from dpsieve.filters._sgm_powers import lower_power, upper_power
from dpsieve.filters.training import TrainingFilter, kind_of
from dpsieve.mechanisms import DPSGDStep
from dpsieve.training import DPSGDAccountant

EPS, DELTA = 1.0, 1e-5
REF = {"sigma": 1.5, "rate": 0.02}


@pytest.fixture(scope="module")
def small() -> TrainingFilter:
    return TrainingFilter(EPS, DELTA, **REF)


def test_fixed_schedule_admits_exactly_the_accountants_count(small: TrainingFilter) -> None:
    f = filter_from_json(small.to_json())
    n = 0
    while f.try_step(1.5, 0.02).admitted:  # type: ignore[attr-defined]
        n += 1
    acc = DPSGDAccountant()
    acc.step(1.5, 0.02, count=n)
    assert acc.epsilon(DELTA * 0.99) <= EPS  # what was admitted meets the target
    more = DPSGDAccountant()
    more.step(1.5, 0.02, count=n + 2)
    assert more.epsilon(DELTA) > EPS  # and nearly nothing was left on the table
    before = f.to_json()
    assert not f.try_step(1.5, 0.02).admitted  # type: ignore[attr-defined]
    assert f.to_json() == before


def test_cheaper_steps_spend_less_and_the_realised_run_meets_the_target(
    small: TrainingFilter,
) -> None:
    f = filter_from_json(small.to_json())
    sched = [1.5] * 40 + [2.0] * 60 + [1.5] * 20 + [2.5] * 80
    acc = DPSGDAccountant()
    admitted = 0
    for s in sched * 10:
        d = f.try_step(s, 0.02)  # type: ignore[attr-defined]
        if not d.admitted:
            break
        admitted += 1
        acc.step(s, 0.02)
    ref_only = small.remaining()["reference_steps"]
    assert admitted > ref_only * 1.1  # cheaper steps were exchanged at a profit
    # necessary condition: the non-adaptive accounting of what ran is within the target
    assert acc.epsilon(DELTA) <= EPS


@pytest.mark.slow
def test_exchange_residue_condition_against_dp_accounting() -> None:
    """The exchange 'k steps at 2.0 + m at 1.5 <= n at 1.5' recomputed with the independent
    oracle: dp_accounting connect-the-dots at a fine grid on both sides (within ~1e-9 of the
    exact curves; its optimistic mode is too coarse to resolve the margin)."""
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    f = TrainingFilter(EPS, DELTA, **REF)
    n_s = f.remaining()["reference_steps"]
    d = f.try_step(2.0, 0.02)
    ex = d.cost["exchange"]
    k, m = ex["got"], n_s - ex["units"]
    mk = dpa.from_gaussian_mechanism
    left = mk(2.0, sampling_prob=0.02, value_discretization_interval=2e-5).self_compose(k)
    left = left.compose(
        mk(1.5, sampling_prob=0.02, value_discretization_interval=2e-5).self_compose(m)
    )
    right = mk(1.5, sampling_prob=0.02, value_discretization_interval=2e-5).self_compose(n_s)
    for e in np.linspace(0.0, 4.0, 41):
        assert left.get_delta_for_epsilon(e) <= right.get_delta_for_epsilon(e) + ex[
            "reserve_spent"
        ] + 1e-8, e


def test_lower_and_upper_powers_bracket_each_other() -> None:
    lo, hi = lower_power(1.5, 0.02, 5e-4, 300), upper_power(1.5, 0.02, 5e-4, 300)
    lo_add = lower_power(1.5, 0.02, 5e-4, 300, add=True)
    xs = np.exp(np.linspace(0.0, 3.0, 31))
    assert np.all(lo.hockey_stick(xs) <= hi.hockey_stick(xs))
    assert np.all(lo_add.hockey_stick(xs) <= hi.dual().hockey_stick(xs))
    assert np.all(hi.hockey_stick(xs) - lo.hockey_stick(xs) <= 1e-6)


def test_more_expensive_steps_than_the_reference_are_refused(small: TrainingFilter) -> None:
    f = filter_from_json(small.to_json())
    before = f.to_json()
    d = f.try_step(1.0, 0.02)  # type: ignore[attr-defined]
    assert not d.admitted
    assert f.to_json() == before
    # the reason names the cause (not "no budget left": the budget is intact) and the remedy
    assert "dearer than the filter's reference" in d.reason
    assert "noise multiplier 1 is below the reference's 1.5" in d.reason
    assert "smallest noise multiplier and the largest sampling rate" in d.reason
    d = f.try_step(1.5, 0.05)  # type: ignore[attr-defined]
    assert not d.admitted
    assert "sampling rate 0.05 is above the reference's 0.02" in d.reason
    d = f.try_step(1.499, 0.05)  # type: ignore[attr-defined]
    assert "1.499 (a kind of 1.49) is below" in d.reason
    assert "and its sampling rate 0.05" in d.reason
    assert f.to_json() == before


def test_a_spent_budget_says_so() -> None:
    f = TrainingFilter(0.5, 1e-5, sigma=4.0, rate=0.1, reserve=0.0)
    n = f.remaining()["reference_steps"]
    assert n >= 1
    for _ in range(n):
        assert f.try_step(4.0, 0.1).admitted
    d = f.try_step(4.0, 0.1)
    assert not d.admitted
    assert d.reason.startswith("the budget is spent")


def test_kind_rounds_sigma_down() -> None:
    assert kind_of(1.234, 0.01) == (1.23, 0.01)
    assert kind_of(0.29, 0.1)[0] <= 0.29
    assert kind_of(2.0, 0.5) == (2.0, 0.5)


def test_other_queries_are_refused_and_json_round_trips(small: TrainingFilter) -> None:
    from dpsieve.accounting.events import PureDP

    f = filter_from_json(small.to_json())
    assert not f.try_spend(PureDP(0.1)).admitted
    assert not f.try_spend(DPSGDStep(1.0, 1.0, "full_batch")).admitted
    assert f.try_spend(DPSGDStep(1.5, 0.02)).admitted
    g = filter_from_json(f.to_json())
    assert g.to_json() == f.to_json()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("version", "old"),
        ("units", [[1.5, 0.02, -3]]),
        ("units", [[1.0, 0.02, 3]]),
        ("units", [[2e6, 0.02, 3]]),
        ("reference", [1.5, 1.0]),
        ("reserve", "1/1"),
        ("n0", -1),
        ("steps", 1.5),
        ("delta", 2.0),
    ],
)
def test_tampered_states_are_refused_naming_the_field(
    small: TrainingFilter, field: str, value: object
) -> None:
    d = json.loads(small.to_json())
    d["state"][field] = value
    with pytest.raises(ValidationError, match=field):
        filter_from_json(json.dumps(d))


def test_too_many_reference_units_are_refused(small: TrainingFilter) -> None:
    d = json.loads(small.to_json())
    d["state"]["units"] = [[1.5, 0.02, d["state"]["n0"] + 1]]
    with pytest.raises(ValidationError, match="units"):
        filter_from_json(json.dumps(d))


@pytest.mark.parametrize(
    ("kw", "name"),
    [
        ({"sigma": -1.0, "rate": 0.1}, "sigma"),
        ({"sigma": 1.0, "rate": 2.0}, "rate"),
        ({"sigma": 1.0, "rate": 0.1, "reserve": 1.0}, "reserve"),
        ({"sigma": 1.0, "rate": 0.1, "exchange_steps": 0}, "exchange_steps"),
    ],
)
def test_bad_parameters(kw: dict[str, float], name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        TrainingFilter(1.0, 1e-5, **kw)  # type: ignore[arg-type]


def test_full_batch_rate_one_is_refused_everywhere() -> None:
    """Regression: a rate-1 reference (the full-batch Gaussian G_{1/sigma}) has a PLD with an
    analytic Gaussian part, which the exchange's lower bound of the pool dropped (identity):
    TrainingFilter(2, 1e-5, sigma=4, rate=1) budgets 4 steps at sigma 4 (exactly 16 at
    sigma 8: G_{1/2}) but admitted 40 at sigma 8 (exact delta(2) = 3.7e-3 > 1e-5). Rate 1 is
    now refused: as the reference, as a step, in a stored state, and by the powers."""
    with pytest.raises(ValidationError, match="rate") as e:
        TrainingFilter(2.0, 1e-5, sigma=4.0, rate=1.0)
    assert "GDP filter" in str(e.value)
    f = TrainingFilter(2.0, 1e-5, sigma=4.0, rate=0.5)
    before = f.to_json()
    d = f.try_step(8.0, 1.0)
    assert not d.admitted
    assert "full-batch" in d.reason
    assert f.to_json() == before
    st = json.loads(before)
    st["state"]["reference"] = [4.0, 1.0]
    st["state"]["units"] = [[4.0, 1.0, st["state"]["n0"]]]
    with pytest.raises(ValidationError, match="reference"):
        filter_from_json(json.dumps(st))
    with pytest.raises(ValueError, match="Gaussian part"):
        lower_power(4.0, 1.0, 5e-4, 4)


def test_huge_sigma_is_a_kind_not_an_overflow() -> None:
    """Regression: kind_of(1e308, .) computed floor(sigma * 100) = floor(inf) and raised
    OverflowError out of try_step (and the step PLD at sigma = 1e308 cannot be built)."""
    assert kind_of(1e308, 0.5) == (1e6, 0.5)  # charged as the most noise a kind has
    assert kind_of(1.7976931348623157e308, 0.01) == (1e6, 0.01)
    assert kind_of(1e6, 0.01) == (1e6, 0.01)
    f = TrainingFilter(2.0, 1e-5, sigma=4.0, rate=0.5)
    assert f.try_step(1e308, 0.5).admitted  # a step with (almost) no privacy cost


def test_lower_bounds_of_long_pools_keep_total_mass_at_most_one() -> None:
    """Regression (extremes suite): the addition-direction lower bound of 2^13 steps at
    sigma 50, rate 1e-3 raised 'masses ... sum to 1. Got 1.0000012' (the restore step kept
    the +inf mass and a unit atom at 0: 1 + 1.5e-10 per step, doubled by each squaring),
    so an exchange from a reference pool of 8,388,607 such steps crashed try_step. The
    lower bounds now total at most 1 and stay below the upper bounds."""
    xs = np.exp(np.linspace(0.0, 2.0, 9))
    for k in (2**13, 2**20 + 3):
        lo = lower_power(50.0, 1e-3, 5e-4, k, add=True)
        assert float(np.sum(lo.probs)) + lo.inf_mass <= 1.0
        hi = upper_power(50.0, 1e-3, 5e-4, k).dual()
        assert np.all(lo.hockey_stick(xs) <= hi.hockey_stick(xs))


def test_an_exchange_never_costs_a_unit_per_step_or_more() -> None:
    """Regression: with a pool too long for the bounds to separate (8,388,607 steps at
    sigma 50, rate 1e-3) the best exchange for 8 steps at sigma 1e6 was m = 0: the whole
    pool traded for 8 steps. Now a step is paid by one dominating reference unit instead."""
    f = TrainingFilter(2.0, 1e-5, sigma=50.0, rate=1e-3, exchange_steps=8)
    n = f.remaining()["reference_steps"]
    d = f.try_step(1e6, 1e-3)
    assert d.admitted
    assert "exchange" not in d.cost
    assert d.cost["charged_as"] == [50.0, 1e-3]
    assert f.remaining()["reference_steps"] == n - 1


def test_a_large_budget_is_not_capped_by_the_dual_of_the_removal_power() -> None:
    """Regression: the addition side of the budget was bounded by the dual of the removal
    power, whose cut lower tail came back multiplied by e^{-z}: at sigma 1, rate 0.01,
    delta 1e-5 the pool stopped at 6,871 reference steps for every eps >= 5.45 (the
    accountant allows 15,588 at eps 8). The dual steps are composed instead."""
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    f = TrainingFilter(8.0, 1e-5, sigma=1.0, rate=0.01)
    n = f.remaining()["reference_steps"]
    assert n > 15_000  # was 6,871
    acc = DPSGDAccountant()
    acc.step(1.0, 0.01, count=n)
    assert acc.epsilon(1e-5 * 0.99) <= 8.0  # the pool meets the target (reserve 1 %)
    lo = dpa.from_gaussian_mechanism(1.0, sampling_prob=0.01, pessimistic_estimate=False,
                                     value_discretization_interval=1e-3).self_compose(n)
    assert lo.get_epsilon_for_delta(1e-5) <= 8.0  # independent lower estimate
