"""dp_accounting (test-only dependency) as an independent oracle: same grid, same direction."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.accounting import PLD, gdp_delta

pldm = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")

EPS = [0.0, 0.05, 0.2, 0.5, 1.0, 2.0]


def _theirs(p: object, eps: list[float]) -> np.ndarray:
    return np.array([p.get_delta_for_epsilon(e) for e in eps])  # type: ignore[attr-defined]


@pytest.mark.parametrize(("scale", "k"), [(1.0, 1), (10.0, 1), (10.0, 20), (3.0, 8)])
def test_laplace_compositions_agree(scale: float, k: int) -> None:
    grid = 1e-3
    ours = PLD.laplace(scale, grid=grid).self_compose(k)
    theirs = pldm.from_laplace_mechanism(scale, value_discretization_interval=grid)
    theirs = theirs.self_compose(k) if k > 1 else theirs
    d_ours = np.array([ours.delta(e) for e in EPS])
    d_theirs = _theirs(theirs, EPS)
    # both pessimistic connect-the-dots on the same grid: equal up to truncation/round-off
    assert np.allclose(d_ours, d_theirs, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize(("sigma", "k"), [(1.0, 1), (5.0, 10), (20.0, 100)])
def test_gaussian_ours_exact_theirs_pessimistic(sigma: float, k: int) -> None:
    ours = PLD.gaussian(sigma).self_compose(k)
    theirs = pldm.from_gaussian_mechanism(sigma, value_discretization_interval=1e-3)
    theirs = theirs.self_compose(k) if k > 1 else theirs
    mu = math.sqrt(k) / sigma
    for e in EPS:
        exact = float(gdp_delta(mu, e))
        assert exact <= ours.delta(e) <= exact + 1e-13
        assert ours.delta(e) <= theirs.get_delta_for_epsilon(e) + 1e-12


def test_mixed_composition_agrees() -> None:
    grid = 1e-3
    ours = (
        PLD.laplace(2.0, grid=grid)
        .compose(PLD.laplace(5.0, grid=grid))
        .compose(PLD.gaussian(3.0).discretize(grid))
    )
    theirs = pldm.from_laplace_mechanism(2.0, value_discretization_interval=grid).compose(
        pldm.from_laplace_mechanism(5.0, value_discretization_interval=grid)
    )
    theirs = theirs.compose(pldm.from_gaussian_mechanism(3.0, value_discretization_interval=grid))
    d_ours = np.array([ours.delta(e) for e in EPS])
    d_theirs = _theirs(theirs, EPS)
    assert np.allclose(d_ours, d_theirs, rtol=1e-4, atol=1e-9)


def test_epsilon_for_delta_agrees() -> None:
    ours = PLD.laplace(10.0, grid=1e-3).self_compose(30)
    theirs = pldm.from_laplace_mechanism(10.0, value_discretization_interval=1e-3).self_compose(30)
    for d in (1e-3, 1e-6):
        assert float(ours.epsilon(d)) == pytest.approx(theirs.get_epsilon_for_delta(d), abs=2e-3)
