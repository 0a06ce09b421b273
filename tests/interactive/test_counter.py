"""The continual counter: its noise is B z for the BLT factorization (checked against dense
matrices), its sensitivity is exact, its declared mu, error and state."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.accounting.events import GDP, Neighbouring
from dpsieve.errors import ValidationError
from dpsieve.interactive import BLT, DEFAULT_BLT, ContinualCounter, CounterSpec, child_from_state
from dpsieve.interactive.blt import sqrt_factorization_max_std


def _dense(blt: BLT, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(C, B) as dense n x n matrices, B = A C^{-1}."""
    c = blt.coefficients(n)
    cm = np.zeros((n, n))
    for i in range(n):
        cm[i, : i + 1] = c[i::-1]
    a = np.tril(np.ones((n, n)))
    return cm, a @ np.linalg.inv(cm)


def _inject(counter: ContinualCounter, z: np.ndarray) -> None:
    """Make the counter use the given Gaussian draws (in order) to compare with dense algebra."""
    counter._pending = [float(v) for v in z[::-1]]


def test_releases_are_b_of_the_gaussian_mechanism() -> None:
    """Released = round_g(A x + B z) = round_g(B (C x + z)), against dense matrices."""
    n = 200
    rng = np.random.default_rng(0)
    spec = CounterSpec(3.0, granularity=2.0**-20)
    counter = ContinualCounter(spec, rng)
    z = rng.normal(0.0, spec.sigma, n)
    _inject(counter, z)
    x = rng.integers(0, 5, n)
    out = np.array([counter.step(int(v)) for v in x])
    cm, bm = _dense(spec.blt, n)
    ideal = bm @ (cm @ x + z)
    assert np.max(np.abs(out - ideal)) < 1e-5
    assert np.allclose(bm @ cm, np.tril(np.ones((n, n))), atol=1e-9)


@pytest.mark.parametrize("blt", [DEFAULT_BLT, BLT((0.5,), (0.3,)), BLT((0.9, 0.2), (0.1, -0.05))])
def test_sensitivity_is_exact_and_brackets_the_partial_sums(blt: BLT) -> None:
    s2 = blt.sensitivity_sq()
    c = blt.coefficients(400_000)
    partial = math.fsum((c * c).tolist())
    assert partial <= float(s2) * (1 + 1e-12)
    assert float(s2) - partial < 1e-6 * float(s2) or max(blt.theta) > 0.9999
    assert blt.sensitivity() ** 2 >= s2


def test_mu_is_rounded_up_and_scales_with_units_and_relation() -> None:
    spec = CounterSpec.for_mu(0.5)
    assert spec.gdp_mu() <= 0.5
    assert spec.gdp_mu() > 0.5 * (1 - 1e-12)
    assert Fraction(spec.gdp_mu()) ** 2 >= spec.blt.sensitivity_sq() / Fraction(spec.sigma) ** 2
    unit = CounterSpec(spec.sigma, events_per_unit=3)
    assert unit.gdp_mu() == pytest.approx(3 * spec.gdp_mu(), rel=1e-12)
    rep = CounterSpec(spec.sigma, neighbouring=Neighbouring.REPLACE_ONE)
    assert rep.gdp_mu() == pytest.approx(2 * spec.gdp_mu(), rel=1e-12)
    assert spec.declared() == GDP(spec.gdp_mu())


def test_default_error_at_two_to_the_sixteen() -> None:
    """Max std per unit mu at T = 2^16: <= 4.65 and within 1.01x the square-root
    factorization (4.596); the binary tree gives 16.49."""
    n = 2**16
    ours = DEFAULT_BLT.max_std_per_mu(n)
    root = sqrt_factorization_max_std(n)
    assert root == pytest.approx(4.5964, abs=1e-3)
    assert ours <= 4.65
    assert ours <= 1.01 * root
    spec = CounterSpec.for_mu(1.0)
    assert spec.max_std(n) == pytest.approx(ours, rel=1e-9)


def test_state_round_trip_and_secrets() -> None:
    spec = CounterSpec.for_mu(1.0, events_per_unit=2)
    a = ContinualCounter(spec, np.random.default_rng(1))
    for v in (3, 0, 7):
        a.step(v)
    state = json.loads(json.dumps(a.to_state()))
    b = child_from_state(state, np.random.default_rng(9))
    c = ContinualCounter.from_state(state, np.random.default_rng(9))
    assert isinstance(b, ContinualCounter)
    assert b.to_state() == a.to_state()
    assert [b.step(1) for _ in range(5)] == [c.step(1) for _ in range(5)]
    pub = json.dumps(a.public())
    for secret in ("total", "buffers", "noise"):
        assert secret not in pub
    assert a.public()["steps"] == 3


def test_memory_does_not_grow_with_steps() -> None:
    counter = ContinualCounter(CounterSpec(1.0), np.random.default_rng(2))
    for _ in range(3000):
        counter.step(1)
    state = counter.to_state()
    assert len(state["buffers"]) == len(DEFAULT_BLT.theta)
    assert len(json.dumps(state)) < 2000


def test_bad_input() -> None:
    counter = ContinualCounter(CounterSpec(1.0), np.random.default_rng(3))
    with pytest.raises(ValidationError, match="'count'") as e:
        counter.step(-4)
    assert "-4" not in str(e.value)
    with pytest.raises(ValidationError, match="'count'"):
        counter.step(1.5)  # type: ignore[arg-type]
    assert counter.steps == 0
    with pytest.raises(ValidationError, match="'theta'"):
        BLT((1.0,), (0.1,))
    with pytest.raises(ValidationError, match="'omega'"):
        BLT((0.5,), (-3.0,))  # 1/c has a pole inside the unit disk
    with pytest.raises(ValidationError, match="'granularity'"):
        CounterSpec(1.0, granularity=0.3)


def test_fast_release_is_the_exact_sum() -> None:
    """The float path ``total + m g`` equals the rational sum (no rounding) in its range."""
    rng = np.random.default_rng(4)
    for e in range(0, 11):
        g = 2.0**-e
        for _ in range(200):
            total = int(rng.integers(0, 2**42))
            m = int(rng.integers(-(2**42) + 1, 2**42))
            assert Fraction(total + m * g) == total + Fraction(m) * Fraction(g)
