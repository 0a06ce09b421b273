"""Issue 18.1: compositions for any k up to 10^6 run in bounded memory.

When a convolution would exceed ``max_points`` grid points both sides are coarsened by the hat
split onto the coarse knots (docs/proofs/accounting.md, Lemma A5). References (valid lower bounds
of the true hockey-stick curve, so ours must never be below them):

* randomized response: the exact binomial composition (scipy log-pmf, float64 terms);
* Laplace(b): thresholding each output at D/2 is a post-processing, so k-fold randomized
  response with eps' = log((1 - e^{-a/2}/2) / (e^{-a/2}/2)), a = D/b, is below it;
* Poisson-subsampled Gaussian: the test {sum of outputs > t} on the product measures (the sum
  is N(B, k sigma^2), B ~ Bin(k, q), against N(0, k sigma^2)), maximized over t.

Memory is checked through the support length (never timing). Losses above ~700 are beyond
what the curves certify tightly today (delta is then sound but 1, eps the top loss), so the
tightness checks use mechanisms whose k-fold losses stay below that.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special, stats

from dpsieve.accounting import PLD, _grid
from dpsieve.errors import ValidationError

REL = 1e-9  # float slack of the float64 references (relative)


def rr_delta(eps0: float, k: int, eps: np.ndarray) -> np.ndarray:
    """Exact hockey stick of k-fold binary randomized response RR(eps0) (P vs Q)."""
    j = np.arange(k + 1, dtype=np.float64)
    z = eps0 * (2.0 * j - k)
    lp = stats.binom.logpmf(j, k, 1.0 / (1.0 + math.exp(-eps0)))
    out = []
    for e in np.atleast_1d(eps):
        act = z > e
        out.append(float(np.sum(np.exp(lp[act]) * -np.expm1(e - z[act]))))
    return np.array(out)


def laplace_lower(a: float, k: int, eps: np.ndarray) -> np.ndarray:
    p0 = 0.5 * math.exp(-a / 2.0)
    return rr_delta(math.log((1.0 - p0) / p0), k, eps)


def subsampled_lower(sigma: float, q: float, k: int, eps: np.ndarray) -> np.ndarray:
    """max_t P(T > t) - e^eps Q(T > t) for T the sum of the k outputs (remove direction)."""
    b = np.arange(int(k * q - 12 * math.sqrt(k * q) - 1), int(k * q + 12 * math.sqrt(k * q) + 2))
    b = b[(b >= 0) & (b <= k)]
    w = stats.binom.pmf(b, k, q)
    s = sigma * math.sqrt(k)
    ts = np.linspace(k * q - 8 * s, k * q + 12 * s, 3000)
    p_tail = (w[None, :] * special.ndtr((b[None, :] - ts[:, None]) / s)).sum(axis=1)
    q_tail = special.ndtr(-ts / s)
    return np.array([max(0.0, float(np.max(p_tail - math.exp(e) * q_tail))) for e in eps])


def assert_not_below(ours: np.ndarray, ref: np.ndarray) -> None:
    assert np.all(ours >= ref * (1.0 - REL) - 1e-300), (ours, ref)


# ------------------------------------------------------------------ the rounding itself
@pytest.mark.parametrize("m", [2, 3, 7, 1000])
def test_coarsen_hat_dominates_and_keeps_mass(m: int) -> None:
    rng = np.random.default_rng(m)
    grid, off = 1e-3, -517
    probs = rng.random(3000) ** 4
    probs /= probs.sum()
    o2, out = _grid.coarsen_hat(off, probs, grid, grid * m)
    z_in = (off + np.arange(probs.size)) * grid
    z_out = (o2 + np.arange(out.size)) * (grid * m)
    assert out.size <= probs.size // m + 3
    # the total mass and E[e^-Z] are kept (up to the stated upward scaling)
    assert out.sum() >= probs.sum()
    assert out.sum() <= probs.sum() * (1 + 1e-12)
    e_in = float(np.sum(probs * np.exp(-z_in)))
    assert float(np.sum(out * np.exp(-z_out))) == pytest.approx(e_in, rel=1e-12)
    # the curve dominates the input's at every x (mpmath-free: both are finite sums)
    for t in np.linspace(z_in[0] - 0.5, z_in[-1] + 0.5, 401):
        h_in = float(np.sum(probs * np.clip(1 - np.exp(t - z_in), 0, None)))
        h_out = float(np.sum(out * np.clip(1 - np.exp(t - z_out), 0, None)))
        assert h_out >= h_in * (1 - 1e-12) - 1e-15
    # and the chord is close: second order in the coarse step
    for t in np.linspace(z_in[0], z_in[-1], 101):
        h_in = float(np.sum(probs * np.clip(1 - np.exp(t - z_in), 0, None)))
        h_out = float(np.sum(out * np.clip(1 - np.exp(t - z_out), 0, None)))
        assert h_out - h_in <= (grid * m) ** 2 + 1e-12


def test_lattice_support_is_relabelled_not_moved() -> None:
    # RR(0.1) at grid 1e-4 lives on multiples of 1000 steps: coarsening to that lattice is exact
    fine = PLD.randomized_response(0.1).self_compose(64)
    coarse = PLD.randomized_response(0.1).self_compose(64, max_points=2000)
    assert coarse.probs.size <= 2000
    assert coarse.grid > fine.grid
    eps = np.array([0.0, 0.5, 1.0, 2.0, 3.0])
    np.testing.assert_allclose(coarse.delta(eps), fine.delta(eps), rtol=1e-9)


# ------------------------------------------------------------------ coarsened >= uncoarsened
@pytest.mark.parametrize("k", [16, 100])
def test_coarsened_dominates_uncoarsened(k: int) -> None:
    base = PLD.laplace(1.0, grid=0.01)
    fine = base.self_compose(k)
    coarse = base.self_compose(k, max_points=400)
    assert coarse.probs.size <= 400 < fine.probs.size
    eps = np.linspace(0.0, 0.8 * k, 40)
    assert np.all(coarse.delta(eps) >= fine.delta(eps) * (1 - REL))
    assert np.all(
        coarse.epsilon(np.array([1e-2, 1e-6, 1e-10])) >= fine.epsilon(np.array([1e-2, 1e-6, 1e-10]))
    )
    assert fine <= coarse  # the sound Blackwell-order check agrees
    # and it is not useless: within a few coarse steps of the fine answer
    assert coarse.epsilon(1e-6) <= fine.epsilon(1e-6) + 10 * coarse.grid * math.log2(k) + 0.5


def test_compose_coarsens_pairs() -> None:
    a = PLD.laplace(1.0, grid=0.001).self_compose(8)
    b = PLD.laplace(0.5, grid=0.001).self_compose(4)
    fine = a.compose(b)
    coarse = a.compose(b, max_points=1000)
    assert coarse.probs.size <= 1000
    eps = np.linspace(0.0, 12.0, 25)
    assert np.all(coarse.delta(eps) >= fine.delta(eps) * (1 - REL))


# ------------------------------------------------------------------ refusals
def test_optimistic_is_refused_not_coarsened() -> None:
    opt = PLD.laplace(1.0, grid=0.01, pessimistic=False)
    assert opt.direction == "optimistic"
    with pytest.raises(ValidationError) as ei:
        opt.self_compose(1000, max_points=5000)
    assert ei.value.parameter == "k"
    assert "max_points = 5000" in str(ei.value)
    assert ei.value.value > 5000  # the estimated size
    with pytest.raises(ValidationError) as ei:
        opt.compose(opt.self_compose(64), max_points=1000)
    assert ei.value.parameter == "other"
    small = opt.self_compose(4, max_points=5000)  # within the cap: still optimistic
    assert small.direction == "optimistic"


@pytest.mark.parametrize("bad", [0, 15, -1, 2.5, True])
def test_max_points_is_validated(bad: object) -> None:
    with pytest.raises(ValidationError) as ei:
        PLD.laplace(1.0).self_compose(3, max_points=bad)  # type: ignore[arg-type]
    assert ei.value.parameter == "max_points"


# ------------------------------------------------------------------ k = 10^6, tight regimes
def test_rr_small_eps_million_fold_is_tight_and_bounded() -> None:
    k, eps0 = 10**6, 0.01
    q = PLD.randomized_response(eps0).self_compose(k)
    assert q.probs.size <= 1 << 21
    eps = np.array([20.0, 50.0, 80.0, 110.0])
    ref = rr_delta(eps0, k, eps)
    ours = np.asarray(q.delta(eps))
    assert_not_below(ours, ref)
    assert np.all(ours <= ref * 1.01 + 1e-14)
    e = float(q.epsilon(1e-6))
    assert rr_delta(eps0, k, np.array([e]))[0] <= 1e-6 * (1 + REL)  # certified
    assert e <= 1.01 * float(
        np.interp(
            -6.0,
            np.log10(rr_delta(eps0, k, np.linspace(80.0, 120.0, 21)))[::-1],
            np.linspace(80.0, 120.0, 21)[::-1],
        )
    )


def test_laplace_small_a_million_fold_completes_above_reference() -> None:
    k = 10**6
    q = PLD.laplace(100.0, grid=1e-3).self_compose(k, max_points=1 << 16)
    assert q.probs.size <= 1 << 16
    eps = np.array([20.0, 50.0, 80.0, 110.0])
    assert_not_below(np.asarray(q.delta(eps)), laplace_lower(0.01, k, eps))
    assert math.isfinite(float(q.epsilon(1e-6)))


# ------------------------------------------------------------------ the inputs (slow)
@pytest.mark.slow
def test_laplace_one_million_fold_default_grid() -> None:
    k = 10**6
    q = PLD.laplace(1.0).self_compose(k)
    assert q.probs.size <= 1 << 21
    assert q.inf_mass < 1e-20
    lo = laplace_lower(1.0, k, np.array([0.0]))  # the RR mean is far below Laplace's
    eps = np.linspace(3.0e5, 4.0e5, 11)
    assert_not_below(np.asarray(q.delta(eps)), laplace_lower(1.0, k, eps))
    assert float(q.delta(0.0)) >= lo[0] * (1 - REL)
    e = float(q.epsilon(1e-6))
    assert laplace_lower(1.0, k, np.array([e]))[0] <= 1e-6


@pytest.mark.slow
def test_rr_point_one_million_fold_default_grid() -> None:
    k, eps0 = 10**6, 0.1
    q = PLD.randomized_response(eps0).self_compose(k)
    assert q.probs.size <= 1 << 21
    eps = np.linspace(4000.0, 7000.0, 7)
    assert_not_below(np.asarray(q.delta(eps)), rr_delta(eps0, k, eps))
    e = float(q.epsilon(1e-6))
    assert rr_delta(eps0, k, np.array([e]))[0] <= 1e-6 * (1 + REL)


@pytest.mark.slow
@pytest.mark.parametrize("max_points", [1 << 21, 1 << 17])
def test_subsampled_gaussian_hundred_thousand_fold(max_points: int) -> None:
    from dpsieve.mechanisms import PoissonSubsampledGaussian

    k, sigma, rate = 10**5, 1.0, 0.01
    q = PoissonSubsampledGaussian(sigma, rate).pld().self_compose(k, max_points=max_points)
    assert q.probs.size <= max_points
    eps = np.array([2.0, 5.0, 10.0, 20.0, 30.0])
    assert_not_below(np.asarray(q.delta(eps)), subsampled_lower(sigma, rate, k, eps))
    e = float(q.epsilon(1e-3))
    assert subsampled_lower(sigma, rate, k, np.array([e]))[0] <= 1e-3


def test_coarsening_cost_is_second_order() -> None:
    # rounding every loss up cost k / k_c coarse steps (23.58 against an exact 3.625 at
    # max_points 4096, k = 3,000); the hat split keeps eps within 1e-3 relative here
    base = PLD.laplace(100.0, grid=1e-3)
    fine = float(base.self_compose(3000).epsilon(1e-6))
    coarse = float(base.self_compose(3000, max_points=4096).epsilon(1e-6))
    assert fine <= coarse <= fine * (1 + 1e-3)


def test_relabelled_lattice_puts_nothing_at_inf() -> None:
    # RR(0.1) x 2,000 is relabelled from grid 1e-4 to its lattice; ulp shortfalls used to put
    # ~1e-16 at +inf, which decided eps(1e-15) (44.7448 against the exact 44.7030)
    pld = PLD.randomized_response(0.1).self_compose(2000)
    assert pld.inf_mass == 0.0
    eps = float(pld.epsilon(1e-15))
    exact = rr_delta(0.1, 2000, np.array([eps, eps * (1 - 1e-6)]))
    assert exact[0] <= 1e-15 * (1 + REL)
    assert exact[1] > 1e-15
