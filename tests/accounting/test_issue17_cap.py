"""Issue 17.1: losses above 40 were capped at 40, below the truth (Laplace a = 50).

References are mpmath (40 digits) closed forms of the exact Laplace PLD: atom +a w.p. 1/2,
atom -a w.p. e^{-a}/2, density e^{(z-a)/2}/4 on (-a, a).
"""

from __future__ import annotations

import math

import mpmath as mp
import numpy as np
import pytest

from dpsieve.accounting import order
from dpsieve.accounting.events import PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.filters import PureDPFilter, RDPFilter

mp.mp.dps = 40
A = mp.mpf(50)


def laplace_h(t: float, a: mp.mpf = A) -> mp.mpf:
    """h(e^t) of the exact Laplace PLD, 0 <= t <= a."""
    tt = mp.mpf(t)
    atom = (1 - mp.e ** (tt - a)) / 2
    dens = mp.quad(lambda z: mp.e ** ((z - a) / 2) / 4 * (1 - mp.e ** (tt - z)), [tt, a])
    return atom + dens


def laplace_rdp(alpha: float, a: mp.mpf = A) -> mp.mpf:
    al = mp.mpf(alpha)
    inner = al / (2 * al - 1) * mp.e ** ((al - 1) * a) + (al - 1) / (2 * al - 1) * mp.e ** (-al * a)
    return mp.log(inner) / (al - 1)


@pytest.fixture(scope="module")
def lap50() -> PLD:
    return PLD.laplace(0.02)  # sensitivity / scale = 50


def test_delta_at_45_not_below_exact(lap50: PLD) -> None:
    exact = laplace_h(45.0)
    got = lap50.delta(45.0)
    assert got >= exact  # was 0
    assert got - exact < 1e-6
    assert abs(float(exact) - 0.918) < 1e-3


def test_epsilon_at_1e_6_is_about_50(lap50: PLD) -> None:
    eps = lap50.epsilon(1e-6)
    # exact: h(e^t) = 1e-6 near t = 50 - 2e-6 (the density is negligible there)
    t = mp.findroot(lambda x: laplace_h(x) - mp.mpf("1e-6"), 49.999998)
    assert eps >= float(t)  # was 40.0
    assert eps - float(t) < 1e-3
    assert abs(eps - 49.999998) < 1e-5


def test_smallest_pure_eps_is_50(lap50: PLD) -> None:
    assert order.smallest_pure_eps(lap50) == pytest.approx(50.0, abs=1e-9)  # was 40


def test_leq_gdp_at_smallest_mu_holds_in_exact_arithmetic(lap50: PLD) -> None:
    mu = order.smallest_gdp_mu(lap50)
    assert order.leq_gdp(lap50, mu)
    m = mp.mpf(mu)

    def gdp_h(t: float) -> mp.mpf:
        tt = mp.mpf(t)
        return mp.ncdf(-tt / m + m / 2) - mp.e**tt * mp.ncdf(-tt / m - m / 2)

    # the exact Laplace curve lies below G_mu's everywhere checked (crossed before the fix)
    for t in (0.0, 1.0, 10.0, 30.0, 40.0, 42.0, 45.0, 48.0, 49.9):
        assert laplace_h(t) <= gdp_h(t), t


def test_pure_filter_refuses_then_admits_what_fits(lap50: PLD) -> None:
    f = PureDPFilter(45)
    assert not f.try_spend(lap50).admitted  # eps 50 > 45 (was admitted as 40)
    assert f.try_spend(PureDP(5)).admitted
    assert not f.try_spend(PureDP(41)).admitted  # 5 + 41 > 45


def test_rdp_filter_charges_the_order_64_rdp(lap50: PLD) -> None:
    exact = laplace_rdp(64.0)
    d = RDPFilter((64,), (45,)).try_spend(lap50)
    assert not d.admitted  # charge ~49.99 (was 39.99, admitted)
    charged = d.cost["rdp"][0]
    assert charged >= exact
    assert charged - exact < 1e-6


@pytest.mark.parametrize("eps", [41.0, 50.0, 120.0, 650.0])
def test_pure_and_rr_above_40_stay_finite_and_exact(eps: float) -> None:
    # issue 18.9: these were inf (mass above 40 pushed to +inf)
    for pld in (PLD.pure_dp(eps, grid=1e-2), PLD.randomized_response(eps, grid=1e-2)):
        assert pld.inf_mass == 0.0
        assert pld.epsilon(0.0) == pytest.approx(eps, rel=1e-12)
        assert pld.epsilon(0.0) >= eps
        assert order.smallest_pure_eps(pld) == pytest.approx(eps, rel=1e-12)


def test_compositions_beyond_exp_range_not_below_truth() -> None:
    # 20 x RR(40): losses up to 800, h at t > 709 (e^t overflows) must not drop to 0
    pld = PLD.pure_dp(40.0, grid=1.0).self_compose(20)
    p_top = mp.mpf(1) / (1 + mp.e ** -40) ** 20  # all 20 steps at +40
    p_next = 20 * p_top * mp.e**-40  # one step at -40: loss 720
    for t in (710.0, 715.0, 719.0):
        exact = p_top * (1 - mp.e ** (t - 800)) + p_next * (1 - mp.e ** (t - 720))
        assert pld.delta(t) >= exact
        assert pld.delta(t) - exact < 1e-9
    assert pld.epsilon(0.0) == 800.0
    assert math.isfinite(pld.epsilon(1e-9))


@pytest.mark.parametrize("grid", [0.05, 0.25, 0.5, 1.0, 2.0])
@pytest.mark.parametrize("k", [1, 2, 20, 100])
def test_atoms_on_a_knot_split_without_negative_mass(grid: float, k: int) -> None:
    # an atom exactly on the top knot (u = grid) got a left weight of -1 ulp when numpy's
    # expm1 and math.expm1 differ by an ulp (AVX-512 numpy): PLD.pure_dp(1.0, grid=1.0)
    # raised ValidationError (a mass of -4.8e-17); the split must stay >= 0 and pessimistic
    eps = k * grid
    for pld in (PLD.pure_dp(eps, grid=grid), PLD.randomized_response(eps, grid=grid)):
        assert float(np.min(pld.probs)) >= 0.0
        for t in (0.0, eps / 2):
            e, tt = mp.mpf(eps), mp.mpf(t)
            exact = (1 - mp.e ** (tt - e)) / (1 + mp.e**-e)
            assert pld.delta(t) >= exact
