"""The DP-SGD accountant and its calibration."""

from __future__ import annotations

import math

import pytest

from dpsieve.accounting.gdp import gdp_epsilon
from dpsieve.errors import UnsupportedError, ValidationError
from dpsieve.training import DPSGDAccountant, Step, dpsgd_sigma_for, dpsgd_steps_for

# dp_accounting at grid 1e-5 (pessimistic); its optimistic estimate at that grid (Privacy
# Buckets: connect-the-dots has no optimistic mode) is 2.98476, so the lower end below is a
# regression check, not a certified bracket
EXACT_2663 = 2.998073


def test_reference_2663_steps_brackets_the_exact_value() -> None:
    acc = DPSGDAccountant()
    acc.step(1.0, 0.01, count=2663)
    e = acc.epsilon(1e-5)
    assert EXACT_2663 - 2e-5 <= e <= EXACT_2663 + 1e-3, e


def test_against_dp_accounting_both_sides() -> None:
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    acc = DPSGDAccountant(grid=1e-4)
    acc.step(1.5, 0.02, count=300)
    mk = dpa.from_gaussian_mechanism
    lo = mk(1.5, sampling_prob=0.02, pessimistic_estimate=False).self_compose(300)
    hi = mk(1.5, sampling_prob=0.02).self_compose(300)
    e = acc.epsilon(1e-5)
    assert lo.get_epsilon_for_delta(1e-5) - 1e-9 <= e <= hi.get_epsilon_for_delta(1e-5) + 1e-4
    d = acc.delta(1.0)
    assert lo.get_delta_for_epsilon(1.0) - 1e-12 <= d <= hi.get_delta_for_epsilon(1.0) * 1.001


def test_thousands_of_steps_stay_finite_and_tight() -> None:
    """Regression: the addition direction was the dual of the composed removal direction;
    the removal composition's cut lower tail came back multiplied by e^{-z}, so at sigma 1,
    rate 0.01 the accountant reported eps(1e-5) = inf from 8,000 steps on (dual inf mass
    1.9e-5). Each direction is composed separately now."""
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    acc = DPSGDAccountant()
    acc.step(1.0, 0.01, count=8000)
    e = acc.epsilon(1e-5)
    assert math.isfinite(e)
    assert acc.pld().add.inf_mass < 1e-6
    mk = dpa.from_gaussian_mechanism
    lo = mk(1.0, sampling_prob=0.01, pessimistic_estimate=False,
            value_discretization_interval=1e-3).self_compose(8000)
    hi = mk(1.0, sampling_prob=0.01, value_discretization_interval=1e-3).self_compose(8000)
    assert lo.get_epsilon_for_delta(1e-5) - 1e-9 <= e <= hi.get_epsilon_for_delta(1e-5) + 1e-3


def test_varying_sigma_and_rate_is_order_free_and_between_the_extremes() -> None:
    a = DPSGDAccountant()
    a.step(1.0, 0.01, count=100)
    a.step(2.0, 0.02, count=50)
    a.step(1.0, 0.01, count=100)
    b = DPSGDAccountant()
    b.step(2.0, 0.02, count=50)
    b.step(1.0, 0.01, count=200)
    assert a.epsilon(1e-5) == b.epsilon(1e-5)
    assert len(a) == 250
    assert len(a.history) == 3
    only = DPSGDAccountant()
    only.step(1.0, 0.01, count=200)
    assert only.epsilon(1e-5) < a.epsilon(1e-5)


def test_full_batch_is_the_gaussian_closed_form() -> None:
    acc = DPSGDAccountant()
    acc.step(4.0, 1.0, count=64, sampling="full_batch")
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.dps = 40
    mu = mpmath.mpf(math.sqrt(64) / 4.0)

    def f(e: object) -> object:
        return mpmath.ncdf(-e / mu + mu / 2) - mpmath.exp(e) * mpmath.ncdf(-e / mu - mu / 2) - 1e-5

    exact = float(mpmath.findroot(f, gdp_epsilon(2.0, 1e-5)))
    assert exact <= acc.epsilon(1e-5) <= exact + 1e-6


def test_fixed_size_sampling_is_refused() -> None:
    acc = DPSGDAccountant()
    with pytest.raises(UnsupportedError, match="fixed-size"):
        acc.step(1.0, 0.01, sampling="fixed_size")
    with pytest.raises(ValidationError, match="sampling"):
        Step(1.0, 0.01, "bogus")
    with pytest.raises(ValidationError, match="rate"):
        Step(1.0, 0.5, "full_batch")


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_sigma(bad: float) -> None:
    with pytest.raises(ValidationError, match="sigma"):
        DPSGDAccountant().step(bad, 0.1)


def test_empty_history_is_free_and_state_round_trips() -> None:
    acc = DPSGDAccountant()
    assert acc.epsilon(1e-6) == 0.0
    acc.step(1.0, 0.05, count=10)
    acc.step(0.8, 0.05, count=3)
    again = DPSGDAccountant.from_state_dict(acc.state_dict())
    assert again.history == acc.history
    assert again.epsilon(1e-5) == acc.epsilon(1e-5)
    with pytest.raises(ValidationError, match="state"):
        DPSGDAccountant.from_state_dict({"nope": 1})


def test_calibration_never_misses_and_is_tight() -> None:
    sigma = dpsgd_sigma_for(2.0, 1e-5, 500, 0.02, rtol=1e-3)
    acc = DPSGDAccountant()
    acc.step(sigma, 0.02, count=500)
    assert acc.epsilon(1e-5) <= 2.0
    lower = DPSGDAccountant()
    lower.step(sigma * (1 - 3e-3), 0.02, count=500)
    assert lower.epsilon(1e-5) > 2.0


def test_steps_for_is_the_largest_count() -> None:
    k = dpsgd_steps_for(2.0, 0.05, 1.0, 1e-5)
    a, b = DPSGDAccountant(), DPSGDAccountant()
    a.step(2.0, 0.05, count=k)
    b.step(2.0, 0.05, count=k + 1)
    assert a.epsilon(1e-5) <= 1.0 < b.epsilon(1e-5)
