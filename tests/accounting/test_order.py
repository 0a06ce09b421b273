"""Blackwell order, suprema and smallest budgets: closed forms and paper reference points."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.accounting import (
    PLD,
    compose_with_supremum,
    gdp_hockey_stick,
    leq,
    leq_approx,
    leq_gdp,
    smallest_gdp_mu,
    smallest_pure_eps,
    supremum,
)
from dpsieve.errors import UnsupportedError


def test_gaussian_order_is_the_order_of_mu() -> None:
    assert PLD.gdp(1.0) <= PLD.gdp(1.0 + 1e-6)
    assert not PLD.gdp(1.0 + 1e-6) <= PLD.gdp(1.0)
    assert leq_gdp(PLD.gaussian(2.0), 0.5)
    assert not leq_gdp(PLD.gaussian(2.0), 0.4999)
    assert PLD.identity() <= PLD.laplace(10.0)
    assert PLD.laplace(10.0) <= PLD.approx_dp(math.inf, 0.0)


def test_laplace_is_exactly_a_over_scale_pure_dp() -> None:
    lap = PLD.laplace(10.0)
    assert leq_approx(lap, 0.1, 0.0)
    assert not leq_approx(lap, 0.0999, 0.0)
    assert lap <= PLD.pure_dp(0.1)
    assert smallest_pure_eps(lap) == pytest.approx(0.1, abs=1e-12)
    assert smallest_pure_eps(lap) >= 0.1


def test_approx_budget_needs_every_x_not_only_e_eps() -> None:
    # R_{1,0} has delta(1) = 0 <= 0.1 but h(1) = tanh(1/2) > 0.1 + 0.9 tanh(0.05)
    r = PLD.pure_dp(1.0, grid=1e-2)
    assert r.delta(1.0) <= 1e-12
    assert not leq_approx(r, 0.1, 0.1)


def test_gdp_residue_reference_points_of_the_paper() -> None:
    # notes/filters.md: (mu, eps) -> naive sqrt(mu^2 - nu^2) and residue mu'
    for mu, eps, naive, residue in [(2, 0.5, 1.900, 1.936), (3, 2, 1.855, 2.273)]:
        r = PLD.pure_dp(eps)
        nu = smallest_gdp_mu(r)
        assert math.sqrt(mu * mu - nu * nu) == pytest.approx(naive, abs=1e-3)
        assert leq(PLD.gdp(residue - 1e-3).compose(r), PLD.gdp(mu))
        assert not leq(PLD.gdp(residue + 1e-3).compose(r), PLD.gdp(mu))


def test_smallest_gdp_mu_brackets_a_dense_grid_check() -> None:
    r = PLD.pure_dp(0.5)
    nu = smallest_gdp_mu(r)
    xs = np.exp(np.linspace(-3, 3, 20001))
    h = r.hockey_stick(xs)
    assert np.all(h <= gdp_hockey_stick(nu, xs) + 1e-15)
    assert np.any(h > gdp_hockey_stick(nu * (1 - 1e-4), xs))
    assert smallest_gdp_mu(PLD.gdp(0.7)) == 0.7
    assert smallest_gdp_mu(PLD.approx_dp(1.0, 1e-6)) == math.inf


def test_asymmetric_pld_checks_both_sides() -> None:
    p, q = [0.5, 0.5, 0.0], [0.25, 0.25, 0.5]  # loss log 2 surely; Q has a singular part
    pld = PLD.from_distributions(p, q, grid=1e-3)
    assert not pld.symmetric
    assert leq_approx(pld, math.log(2) + 2e-3, 0.0) is False  # h(x) for x < 1 is 1 - x/2
    assert leq_approx(pld.dual(), math.inf, 0.0)
    sym = supremum([pld, pld.dual()])
    assert pld <= sym
    assert pld.dual() <= sym


def test_supremum_dominates_members_and_is_least_on_examples() -> None:
    lap = PLD.laplace(10.0, grid=1e-3)
    rr = PLD.randomized_response(0.1, grid=1e-3)
    g = PLD.gdp(0.1, grid=1e-3)
    s = supremum([lap, rr, g])
    xs = np.exp(np.linspace(-1, 1, 401))
    for m in (lap, rr, g):
        assert np.all(s.hockey_stick(xs) >= m.hockey_stick(xs) - 1e-15)
    # any discrete PLD dominating all members dominates the supremum (up to the chords)
    upper = PLD.approx_dp(0.11, 0.01, grid=1e-3)
    assert lap <= upper
    assert rr <= upper
    assert g.discretize() <= upper
    assert s <= upper
    assert supremum([lap]) == lap
    with pytest.raises(UnsupportedError):
        supremum([PLD.laplace(1.0, pessimistic=False)])


def test_compose_with_supremum_is_monotone() -> None:
    a, b = PLD.laplace(10.0, grid=1e-3), PLD.randomized_response(0.05, grid=1e-3)
    c = compose_with_supremum(a, [a, b])
    assert a.compose(a) <= c
    assert a.compose(b) <= c


def test_optimistic_below_pessimistic() -> None:
    for make in (
        lambda pess: PLD.laplace(3.0, grid=1e-3, pessimistic=pess),
        lambda pess: PLD.approx_dp(0.37, 1e-3, grid=1e-2, pessimistic=pess),
        lambda pess: (
            PLD.gdp(1.0, grid=1e-3).discretize()
            if pess
            else PLD(1e-3, 0, np.ones(1), 0.0, 1.0, "optimistic", True).discretize()
        ),
    ):
        lo, hi = make(False), make(True)
        assert lo.direction == "optimistic"
        assert lo <= hi


def test_symmetrize_dominates_both_sides() -> None:
    from dpsieve.accounting import symmetrize

    pld = PLD.from_distributions([0.6, 0.4], [0.3, 0.7], grid=1e-3)
    s = symmetrize(pld)
    assert s.symmetric
    xs = np.exp(np.linspace(-2, 2, 201))
    assert np.all(s.hockey_stick(xs) >= pld.hockey_stick(xs) - 1e-15)
    assert np.all(s.hockey_stick(xs) >= pld.dual().hockey_stick(xs) - 1e-15)


def test_rdp_description_of_laplace() -> None:
    lap = PLD.laplace(1.0, grid=1e-4)
    r = lap.to_rdp((2.0,))
    # Mironov 2017: Laplace RDP at order 2 = log(2/3 e^{1} + 1/3 e^{-2})
    exact = math.log(2 / 3 * math.exp(1.0) + 1 / 3 * math.exp(-2.0))
    assert exact <= r.values[0] <= exact + 1e-3


def test_fft_compositions_stay_comparable_with_gaussian_budgets() -> None:
    # 100-fold Laplace goes through the FFT; its round-off bound is added entrywise, so no
    # +inf mass appears and the composition can still be <= some G_mu
    lap = PLD.laplace(10.0, grid=1e-3).self_compose(100)
    assert lap.inf_mass == 0.0
    mu = smallest_gdp_mu(lap)
    # never below what the optimistic composition (direct convolution, rounded down) needs;
    # within 0.2 % of it since the tilted FFTs of issue 18.7 (the flat bound gave > 1.0)
    lower = smallest_gdp_mu(PLD.laplace(10.0, grid=1e-3, pessimistic=False).self_compose(100))
    assert lower <= mu <= 1.002 * lower
    assert leq_gdp(lap, mu)


def test_side_lemma_rr_compositions_dominate_double_eps() -> None:
    # notes/filters.md: 12 compositions of eps-RR dominate one at 2 eps; 5 do not (eps = 0.01)
    r = PLD.randomized_response(0.01, grid=1e-4)
    big = PLD.pure_dp(0.02, grid=1e-4)
    assert leq(big, r.self_compose(12))
    assert not leq(big, r.self_compose(5))
    # the boundary found by the check (7 yes, 6 no) agrees with exact binomial sums at x = 1,
    # where R_{0.02} has h(1) = tanh(0.01) (it is linear on [1, e^0.02] and 0 beyond)
    p = math.exp(0.01) / (1 + math.exp(0.01))

    def tv(k: int) -> float:
        return sum(
            math.comb(k, j) * p**j * (1 - p) ** (k - j) * -math.expm1(-(2 * j - k) * 0.01)
            for j in range(k + 1)
            if 2 * j > k
        )

    assert tv(7) >= math.tanh(0.01)
    assert tv(6) < math.tanh(0.01)
    assert leq(big, r.self_compose(7))
    assert not leq(big, r.self_compose(6))
