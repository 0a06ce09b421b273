"""The Poisson-subsampled Gaussian PLDs, per direction, against closed forms and dp_accounting."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpsieve.accounting.directed import DirectedPLD
from dpsieve.errors import ValidationError
from dpsieve.mechanisms import PoissonSubsampledGaussian
from dpsieve.mechanisms.subsampled import subsampled_gaussian_pld

mpmath.mp.dps = 40


def _gauss_h(xp: mpmath.mpf, mu: mpmath.mpf) -> mpmath.mpf:
    """H_x(N(mu,1) || N(0,1)) = H_x(N(0,1) || N(mu,1)), x > 0 (closed form)."""
    lx = mpmath.log(xp)
    return mpmath.ncdf(mu / 2 - lx / mu) - xp * mpmath.ncdf(-mu / 2 - lx / mu)


def exact_h(sigma: float, q: float, x: float, remove: bool) -> float:
    """Hockey stick of (M, P) (remove) or (P, M) (add), M = (1-q) N(0,s^2) + q N(1,s^2)."""
    s, q_, x_ = mpmath.mpf(sigma), mpmath.mpf(q), mpmath.mpf(x)
    mu = 1 / s
    if remove:  # sup_E q Q(E) - (x - 1 + q) P(E)
        c = x_ - 1 + q_
        return float(1 - x_ if c <= 0 else q_ * _gauss_h(c / q_, mu))
    c = 1 - x_ * (1 - q_)  # sup_E c P(E) - x q Q(E)
    return float(0 if c <= 0 else c * _gauss_h(x_ * q_ / c, mu))


CASES = [(1.0, 0.01), (2.0, 0.1), (0.6, 0.3), (5.0, 0.5)]
XS = [0.3, 0.8, 0.99, 1.0, 1.001, 1.05, 1.5, 3.0, 20.0]


@pytest.mark.parametrize(("sigma", "q"), CASES)
def test_single_step_brackets_the_closed_form(sigma: float, q: float) -> None:
    pess = subsampled_gaussian_pld(sigma, q)
    opt = subsampled_gaussian_pld(sigma, q, pessimistic=False)
    assert pess.direction == "pessimistic"
    assert opt.direction == "optimistic"
    for remove in (True, False):
        hp = (pess.remove if remove else pess.add).hockey_stick(np.array(XS))
        ho = (opt.remove if remove else opt.add).hockey_stick(np.array(XS))
        for x, a, b in zip(XS, ho, hp, strict=True):
            t = exact_h(sigma, q, x, remove)
            assert a <= t + 1e-15, (remove, x, a, t)
            assert t <= b + 1e-15, (remove, x, t, b)
            # pessimistic connect-the-dots is tight: second order in the grid step
            assert b - t <= 1e-5 * max(t, 1e-3) + 1e-12, (remove, x, t, b)


def test_add_is_the_dual_of_remove() -> None:
    p = subsampled_gaussian_pld(1.0, 0.05)
    d = p.remove.dual()
    xs = np.array([0.5, 1.0, 1.2, 2.0])
    assert np.allclose(d.hockey_stick(xs), p.add.hockey_stick(xs), rtol=1e-6, atol=1e-10)
    assert d.inf_mass < 1e-10


def test_rate_one_is_the_gaussian() -> None:
    p = subsampled_gaussian_pld(2.0, 1.0)
    assert p.remove.mu == pytest.approx(0.5)


@pytest.mark.parametrize(("bad", "name"), [(-1.0, "sigma"), (float("nan"), "sigma")])
def test_bad_sigma(bad: float, name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        subsampled_gaussian_pld(bad, 0.1)


def test_bad_rate() -> None:
    with pytest.raises(ValidationError, match="rate"):
        subsampled_gaussian_pld(1.0, 1.5)


def test_issue_18_6_directions_composed_separately() -> None:
    """sigma = 2, q = 0.1, k = 100: the supremum-then-compose route gave 2.888 at 1e-6;
    composing each direction and taking the worse gives 2.675 (dp_accounting, PRV)."""
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    lattice = PoissonSubsampledGaussian(2.0, 0.1).plds().self_compose(100, tail_mass=1e-14)
    cont = subsampled_gaussian_pld(2.0, 0.1).self_compose(100, tail_mass=1e-14)
    lo = dpa.from_gaussian_mechanism(
        2.0, sampling_prob=0.1, pessimistic_estimate=False, value_discretization_interval=1e-4
    ).self_compose(100).get_epsilon_for_delta(1e-6)
    for c in (lattice, cont):
        e = float(c.epsilon(1e-6))
        assert e <= 2.6755, e  # was 2.888 through the supremum
        assert e >= lo - 1e-9, (e, lo)


def test_directed_pld_round_trip_and_validation() -> None:
    p = subsampled_gaussian_pld(3.0, 0.02, grid=1e-3)
    again = DirectedPLD.from_dict(p.to_dict())
    assert again.remove == p.remove
    assert again.add == p.add
    with pytest.raises(ValidationError):
        DirectedPLD(p.remove, subsampled_gaussian_pld(3.0, 0.02, pessimistic=False).add)
    with pytest.raises(ValidationError):
        DirectedPLD.from_dict({"type": "pld"})


def test_composition_brackets_dp_accounting() -> None:
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    ours = subsampled_gaussian_pld(1.0, 0.05).self_compose(50, tail_mass=1e-14)
    mk = dpa.from_gaussian_mechanism
    lo = mk(1.0, sampling_prob=0.05, pessimistic_estimate=False, value_discretization_interval=1e-4)
    hi = mk(1.0, sampling_prob=0.05, value_discretization_interval=1e-4)
    lo, hi = lo.self_compose(50), hi.self_compose(50)
    for e in (0.0, 0.5, 1.0, 2.0):
        d = float(ours.delta(e))
        assert d >= lo.get_delta_for_epsilon(e) - 1e-12
        assert d <= hi.get_delta_for_epsilon(e) * (1 + 1e-4) + 1e-9
    assert math.isfinite(float(ours.epsilon(1e-6)))


def test_compose_plds_composes_each_direction() -> None:
    """Issue 18.6 through the generic composition API: compose_plds composed the one-step
    suprema (2.885 at 100 steps, delta 1e-6); it now composes each direction and returns
    the worse (as the supremum of the two compositions)."""
    from dpsieve.mechanisms import LaplaceMechanism, compose_plds

    m = PoissonSubsampledGaussian(2.0, 0.1)
    k = 30
    got = float(compose_plds([m] * k).epsilon(1e-6))
    directed = m.plds().self_compose(k)
    loose = float(m.pld().self_compose(k).epsilon(1e-6))
    exact_side = max(float(directed.remove.epsilon(1e-6)), float(directed.add.epsilon(1e-6)))
    assert got >= exact_side - 1e-3  # both are pessimistic bounds of the same quantity
    assert got <= exact_side + 1e-3
    assert got < loose - 0.05  # the supremum route is visibly looser
    # mixed with a symmetric mechanism: that one's pld() enters both directions
    lap = LaplaceMechanism(4.0)
    mixed = float(compose_plds([m, lap, m]).epsilon(1e-6))
    alone = float(compose_plds([m, m]).epsilon(1e-6))
    assert mixed > alone
