"""PLD constructors and curves against closed forms (exact enumeration, GDP formulas)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import special

from dpsieve.accounting import PLD, gdp_delta, gdp_epsilon
from dpsieve.errors import UnsupportedError, ValidationError


def laplace_delta(a: float, eps: float) -> float:
    """Exact delta(eps) of the Laplace mechanism with a = sensitivity/scale."""
    return max(0.0, 1.0 - math.exp((eps - a) / 2.0)) if eps < a else 0.0


def rr_composed_delta(eps: float, k: int, e: float) -> float:
    """Exact delta(e) of k-fold binary randomized response (binomial sum)."""
    p = math.exp(eps) / (1.0 + math.exp(eps))
    tot = 0.0
    for j in range(k + 1):  # j = number of +eps outcomes
        z = (2 * j - k) * eps
        if z > e:
            tot += math.comb(k, j) * p**j * (1 - p) ** (k - j) * -math.expm1(e - z)
    return tot


@pytest.mark.parametrize("k", [1, 10, 100, 1000, 10_000])
def test_k_fold_gaussian_is_exact_gdp(k: int) -> None:
    g = PLD.gaussian(20.0).self_compose(k)
    mu = math.sqrt(k) / 20.0
    assert g.mu == pytest.approx(mu, rel=1e-15)
    for e in (0.0, 0.5, 1.0, 3.0):
        exact = float(gdp_delta(mu, e))
        assert exact <= g.delta(e) <= exact + 1e-13
    eps = g.epsilon(1e-6)
    # gdp_epsilon brackets the exact value with a 1e-14 margin on h
    assert gdp_epsilon(mu, 1e-6, upper=False) <= eps <= gdp_epsilon(mu, 1e-6) + 1e-9


@pytest.mark.parametrize("scale", [1.0, 10.0, 3.3])
def test_laplace_pessimistic_and_optimistic_bracket_truth(scale: float) -> None:
    a = 1.0 / scale
    hi = PLD.laplace(scale, grid=1e-3)
    lo = PLD.laplace(scale, grid=1e-3, pessimistic=False)
    for e in np.linspace(0.0, a, 7):
        exact = laplace_delta(a, float(e))
        assert lo.delta(float(e)) <= exact <= hi.delta(float(e))
        assert hi.delta(float(e)) - exact < 5e-5  # a kink off the grid costs O(grid)


@pytest.mark.parametrize(("eps", "k"), [(0.1, 50), (0.5, 20), (1.0, 7)])
def test_randomized_response_composition_matches_binomial_sums(eps: float, k: int) -> None:
    r = PLD.randomized_response(eps, grid=eps / 100).self_compose(k)
    for e in (0.0, eps, 2.5 * eps, 4 * eps):
        exact = rr_composed_delta(eps, k, e)
        assert exact <= r.delta(e) <= exact + 1e-9


def test_kary_randomized_response_closed_form() -> None:
    eps, k = 0.7, 5
    r = PLD.randomized_response(eps, k, grid=0.007)
    den = math.exp(eps) + k - 1
    exact = math.exp(eps) / den * -math.expm1(0.3 - eps)
    assert exact <= r.delta(0.3) <= exact + 1e-12


def test_approx_dp_and_zero_delta() -> None:
    r = PLD.approx_dp(1.0, 1e-3, grid=1e-2)
    assert r.inf_mass == 1e-3
    assert r.delta(1.0) == pytest.approx(1e-3, abs=1e-14)
    assert r.delta(1.0) >= 1e-3
    z = PLD.zero_delta(0.01)
    assert z.delta(0.0) == pytest.approx(0.01)
    zz = z.compose(PLD.zero_delta(0.02))
    assert zz.inf_mass == pytest.approx(0.01 + 0.02 - 0.0002, abs=1e-15)
    assert PLD.approx_dp(math.inf, 0.0).inf_mass == 1.0


def test_from_distributions_matches_direct_hockey_stick() -> None:
    p = np.array([0.5, 0.3, 0.2, 0.0])
    q = np.array([0.1, 0.3, 0.4, 0.2])
    pld = PLD.from_distributions(p, q, grid=1e-3)
    for x in (0.3, 1.0, 2.0, 4.9):
        exact = float(np.sum(np.maximum(p - x * q, 0.0)))
        assert exact - 1e-15 <= pld.hockey_stick(x) <= exact + 2e-3


def test_discrete_laplace_and_gaussian_closed_forms() -> None:
    t = 2.0
    dl = PLD.discrete_laplace(t, 1, grid=1e-3)
    r = math.exp(-1 / t)
    # losses +-1/t only: delta(0) = P(+)(1 - e^{-1/t})
    assert dl.delta(0.0) >= 1 / (1 + r) * (1 - r) - 1e-15
    assert dl.delta(0.0) <= 1 / (1 + r) * (1 - r) + 1e-9
    sigma = 1.5
    dg = PLD.discrete_gaussian(sigma, 1, grid=1e-3)
    ys = np.arange(-60, 61)
    w = np.exp(-(ys**2) / (2 * sigma**2))
    pp, qq = w / w.sum(), np.exp(-((ys - 1) ** 2) / (2 * sigma**2)) / w.sum()
    for e in (0.0, 0.5, 1.0):
        exact = float(np.sum(np.maximum(pp - math.exp(e) * qq, 0.0)))
        assert exact - 1e-14 <= dg.delta(e) <= exact + 1e-5


def test_epsilon_inverts_delta_and_is_vectorized() -> None:
    lap = PLD.laplace(2.0, grid=1e-3).self_compose(5)
    ds = np.array([1e-1, 1e-3, 1e-6])
    es = lap.epsilon(ds)
    assert es.shape == (3,)
    for d, e in zip(ds, es, strict=True):
        assert lap.delta(float(e)) <= d
        assert lap.delta(max(0.0, float(e) - 1e-6)) > d * (1 - 1e-9)
    mixed = lap.compose(PLD.gaussian(3.0))
    em = mixed.epsilon(ds)
    for d, e in zip(ds, em, strict=True):
        assert mixed.delta(float(e)) <= d


def test_tradeoff_of_gaussian_and_rr() -> None:
    rr = PLD.pure_dp(1.0, grid=1e-2)
    alpha = np.linspace(0, 1, 11)
    # f-DP of eps-DP: max(0, 1 - e^eps a, e^-eps (1 - a))
    exact = np.maximum.reduce([np.zeros(11), 1 - math.e * alpha, math.exp(-1) * (1 - alpha)])
    assert np.allclose(rr.tradeoff(alpha), exact, atol=1e-12)
    g = PLD.gdp(1.0, grid=1e-3)
    exact_g = special.ndtr(special.ndtri(1 - alpha) - 1.0)
    tg = g.tradeoff(alpha)
    assert np.all(tg <= exact_g + 1e-12)
    assert np.all(tg >= exact_g - 1e-3)


def test_rdp_of_gaussian() -> None:
    g = PLD.gdp(0.5)
    assert g.rdp(np.array([2.0, 8.0])) == pytest.approx([2 * 0.125, 8 * 0.125])


def test_serialization_round_trip() -> None:
    for p in (PLD.laplace(3.0, grid=1e-3).compose(PLD.gdp(0.3)), PLD.identity()):
        q = PLD.from_dict(p.to_dict())
        assert q == p
        assert q.delta(0.2) == p.delta(0.2)


def test_from_description() -> None:
    from dpsieve.accounting import GDP, ZCDP, ApproxDP, PureDP

    assert PLD.from_description(GDP(1.5)).mu == 1.5
    assert PLD.from_description(ApproxDP(1.0, 1e-5)).inf_mass == 1e-5
    assert PLD.from_description(PureDP(0.5)).inf_mass == 0.0
    with pytest.raises(UnsupportedError):
        PLD.from_description(ZCDP(1.0))


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: PLD.gaussian(-1.0), "sigma"),
        (lambda: PLD.gaussian(float("nan")), "sigma"),
        (lambda: PLD.laplace(0.0), "scale"),
        (lambda: PLD.approx_dp(1.0, 1.5), "delta"),
        (lambda: PLD.approx_dp(1.0, float("nan")), "delta"),
        (lambda: PLD.from_distributions([0.5, 0.6], [0.5, 0.5]), "p"),
        (lambda: PLD.from_distributions([0.5, 0.5], [0.5, 0.5, 0.0]), "q"),
        (lambda: PLD.randomized_response(1.0, k=1), "k"),
        (lambda: PLD.identity().self_compose(-1), "k"),
        (lambda: PLD.identity().epsilon(2.0), "delta"),
    ],
)
def test_bad_input_names_parameter(call: object, name: str) -> None:
    with pytest.raises(ValidationError) as ei:
        call()  # type: ignore[operator]
    assert f"'{name}'" in str(ei.value)
    assert "Got" in str(ei.value)


def test_pld_condition_enforced() -> None:
    with pytest.raises(ValidationError, match="E\\[e\\^-Z\\]"):
        PLD(1.0, -1, np.array([1.0]))  # all mass at loss -1: E[e^-Z] = e > 1
    with pytest.raises(ValidationError, match="'probs'"):
        PLD(1.0, 0, np.array([0.5]))


def test_mixing_directions_is_refused() -> None:
    with pytest.raises(UnsupportedError):
        PLD.laplace(1.0).compose(PLD.laplace(1.0, pessimistic=False))


def test_cached_gaussian_terms_match_the_direct_sum() -> None:
    from dpsieve.accounting import _curves

    p = PLD.laplace(3.0, grid=1e-3).self_compose(4).compose(PLD.gdp(0.8))
    for t in (0.0, 0.7, 3.0):
        h1, e1 = _curves.h_mixed(p.losses, p.probs, p.inf_mass, p.mu, np.array([t]))
        h2, e2 = p.h_log_with_error(t)  # single t: cached Gaussian terms per knot
        assert abs(h1[0] - h2[0]) <= e1[0] + e2[0]
        assert p.h_log_with_error(t)[0][0] == h2[0]  # second call hits the cache


def test_curve_conversions_of_proposition_9() -> None:
    r = PLD.pure_dp(1.0, grid=1e-2)
    e = math.e
    # eps-DP tradeoff curve: vertices (0, 1), (1/(1+e), 1/(1+e)), (1, 0)
    q = PLD.from_tradeoff([0.0, 1 / (1 + e), 1.0], [1.0, 1 / (1 + e), 0.0], grid=1e-2)
    xs = np.exp(np.linspace(-3, 3, 61))
    assert np.allclose(q.hockey_stick(xs), r.hockey_stick(xs), atol=1e-12)
    assert np.allclose(
        q.tradeoff(np.linspace(0, 1, 11)), r.tradeoff(np.linspace(0, 1, 11)), atol=1e-12
    )
    # from samples of a curve: dominates it everywhere (chords of a convex curve)
    g = PLD.gdp(1.0)
    s = PLD.from_hockey_stick(xs, g.hockey_stick(xs), grid=1e-3)
    fine = np.exp(np.linspace(-3, 3, 3001))
    assert np.all(s.hockey_stick(fine) >= gdp_delta(1.0, np.log(fine)) - 1e-15)
    with pytest.raises(ValidationError, match="'tau'"):
        PLD.from_tradeoff([0.0, 0.5, 1.0], [1.0, 0.7, 0.0])  # tau > 1 - alpha
    with pytest.raises(ValidationError, match="'h'"):
        PLD.from_hockey_stick([0.5, 1.0], [0.2, 0.4])  # increasing


def test_delta_zero_and_infinite_x() -> None:
    assert PLD.laplace(1.0).epsilon(0.0) == 1.0  # pure DP: h = 0 beyond the largest loss
    assert PLD.gdp(1.0).epsilon(0.0) == math.inf
    assert PLD.approx_dp(1.0, 0.01, grid=0.01).epsilon(0.0099) == math.inf
    assert PLD.gdp(1.0).hockey_stick(math.inf) == 0.0
    assert PLD.zero_delta(0.3).hockey_stick(math.inf) == 0.3


def test_sparse_kernels_compose_exactly_without_fft_noise() -> None:
    # 300 queries: the state reaches 40,001 points; the randomized-response kernel has two
    # non-zero masses and is applied as shifted copies (no FFT floor in the far tail)
    g = 1e-3
    s = PLD.identity(grid=g)
    qs = [PLD.laplace(10.0, grid=g), PLD.randomized_response(0.1, grid=g)]
    for i in range(200):
        s = s.compose(qs[i % 2])
    p_top = 0.5**100 * (math.exp(0.1) / (1 + math.exp(0.1))) ** 100
    assert s.losses[-1] == pytest.approx(20.0)
    assert s.probs[-1] == pytest.approx(p_top, rel=1e-9)
