"""Closed forms of R_{eps,delta}, randomized response and their algebra, bracketed by
high-precision (mpmath) evaluations, exact enumeration and dp_accounting."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate

from dpsieve.accounting import families as fam
from dpsieve.accounting.gdp import gdp_delta, gdp_hockey_stick, gdp_tradeoff
from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff as T
from dpsieve.errors import UnsupportedError, ValidationError

mpmath.mp.dps = 40

EPS = [0.0, 1e-6, 0.1, 1.0, 3.0, 12.0]
DELTA = [0.0, 1e-9, 0.05, 0.5]
XS = [0.0, 1e-3, 0.2, 0.9, 1.0, 1.3, 2.7, 20.0, 1e6]


def _r_atoms(eps: float, delta: float) -> list[tuple[mpmath.mpf, mpmath.mpf]]:
    """(loss, mass) of the finite part of R_{eps,delta} in high precision."""
    e = mpmath.mpf(eps)
    keep = 1 - mpmath.mpf(delta)
    return [(e, keep / (1 + mpmath.exp(-e))), (-e, keep / (1 + mpmath.exp(e)))]


def _h_mp(atoms: list[tuple[mpmath.mpf, mpmath.mpf]], inf_mass: mpmath.mpf, x: float) -> mpmath.mpf:
    xm = mpmath.mpf(x)
    return inf_mass + mpmath.fsum(w * max(0, 1 - xm * mpmath.exp(-z)) for z, w in atoms)


def _bracket(fn, exact: mpmath.mpf, tol: float = 1e-12) -> None:  # type: ignore[no-untyped-def]
    up, lo = float(fn(True)), float(fn(False))
    assert lo <= exact <= up, (lo, float(exact), up)
    assert up - lo <= tol * max(1.0, abs(float(exact))) + 1e-14


# ----------------------------------------------------------------------------- one R_{eps,delta}
@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("delta", DELTA)
def test_hockey_stick_brackets_expectation_over_atoms(eps: float, delta: float) -> None:
    for x in XS:
        exact = _h_mp(_r_atoms(eps, delta), mpmath.mpf(delta), x)
        _bracket(lambda u, x=x: fam.approx_dp_hockey_stick(eps, delta, x, upper=u), exact)


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("delta", DELTA)
def test_delta_brackets_exact_and_is_exact_above_eps(eps: float, delta: float) -> None:
    for ep in [-5.0, -eps, -0.5 * eps, 0.0, 0.3 * eps, eps, eps + 1.0, math.inf]:
        xm = mpmath.exp(mpmath.mpf(ep)) if math.isfinite(ep) else mpmath.inf
        exact = mpmath.mpf(delta) + mpmath.fsum(
            w * max(0, 1 - xm * mpmath.exp(-z)) for z, w in _r_atoms(eps, delta)
        )
        _bracket(lambda u, ep=ep: fam.approx_dp_delta(eps, delta, ep, upper=u), exact)
        if ep >= eps:
            assert float(fam.approx_dp_delta(eps, delta, ep)) == delta


def test_infinite_members() -> None:
    for eps, delta in [(math.inf, 0.0), (1.0, 1.0)]:
        assert np.all(fam.approx_dp_hockey_stick(eps, delta, [0.0, 1.0, 1e9]) == 1.0)
        assert np.all(fam.approx_dp_tradeoff(eps, delta, [0.0, 0.5]) == 0.0)
        assert fam.approx_dp_rdp(eps, delta, 2.0)[()] == math.inf
    assert fam.approx_dp_rdp(1.0, 1e-9, [2.0, 5.0]).tolist() == [math.inf, math.inf]
    assert fam.approx_dp_rdp(0.0, 0.0, [2.0]).tolist() == [0.0]


@pytest.mark.parametrize("eps", EPS)
@pytest.mark.parametrize("delta", DELTA)
def test_tradeoff_closed_form_matches_neyman_pearson_curve(eps: float, delta: float) -> None:
    curve = T.from_approx_dp(eps, delta)
    for a in [0.0, 1e-7, 0.01, 0.3, 0.5, 0.99, 1.0]:
        am = mpmath.mpf(a)
        e = mpmath.mpf(eps)
        exact = max(0, 1 - delta - mpmath.exp(e) * am, mpmath.exp(-e) * (1 - delta - am))
        _bracket(lambda u, a=a: fam.approx_dp_tradeoff(eps, delta, a, upper=u), exact)
        # The PWL curve (E rounded up by two ulps) lies on or below the closed form.
        assert float(curve(a)) <= float(fam.approx_dp_tradeoff(eps, delta, a, upper=True))


@pytest.mark.parametrize("eps", [1e-8, 1e-3, 0.5, 2.0, 30.0])
@pytest.mark.parametrize("order", [1.0 + 1e-9, 1.001, 1.5, 2.0, 32.0, 1e4])
def test_rdp_brackets_high_precision(eps: float, order: float) -> None:
    t = mpmath.mpf(order) - 1
    mgf = mpmath.fsum(w * mpmath.exp(t * z) for z, w in _r_atoms(eps, 0.0))
    exact = mpmath.log(mgf) / t
    up = float(fam.approx_dp_rdp(eps, 0.0, order, upper=True))
    lo = float(fam.approx_dp_rdp(eps, 0.0, order, upper=False))
    assert lo <= exact <= up
    assert up - lo <= 1e-10 * float(exact) + 1e-300
    assert up <= eps * (1 + 1e-12)  # RDP of eps-DP never exceeds eps


# ----------------------------------------------------------------------------- compositions
def _brute_compose(eps: list[float], delta: list[float], ep: float) -> mpmath.mpf:
    """delta(eps') of the composition by enumerating all 2^n sign patterns."""
    keep = mpmath.fprod([1 - mpmath.mpf(d) for d in delta])
    total = mpmath.mpf(0)
    for signs in itertools.product([0, 1], repeat=len(eps)):
        z, w = mpmath.mpf(0), mpmath.mpf(1)
        for s, e in zip(signs, eps, strict=True):
            em = mpmath.mpf(e)
            z += em if s else -em
            w *= 1 / (1 + mpmath.exp(-em)) if s else 1 / (1 + mpmath.exp(em))
        total += w * max(0, -mpmath.expm1(mpmath.mpf(ep) - z))
    return 1 - keep + keep * total


@pytest.mark.parametrize("k", [0, 1, 2, 5, 9])
@pytest.mark.parametrize(("eps", "delta"), [(0.3, 0.0), (1.0, 1e-3), (0.05, 0.2)])
def test_binomial_sum_equals_brute_force_enumeration(k: int, eps: float, delta: float) -> None:
    for ep in [-1.0, 0.0, 0.2, eps, 1.5, k * eps, k * eps + 1]:
        exact = _brute_compose([eps] * k, [delta] * k, ep)
        _bracket(lambda u, ep=ep: fam.approx_dp_compose_delta(eps, delta, k, ep, upper=u), exact)
        _bracket(
            lambda u, ep=ep: fam.approx_dp_compose_heterogeneous_delta(
                [eps] * k, [delta] * k, ep, upper=u
            ),
            exact,
        )


def _kov(eps: float, delta: float, k: int, i: int) -> mpmath.mpf:
    """Kairouz-Oh-Viswanath (2015) Thm 3.3: delta at eps' = (k - 2i) eps."""
    e = mpmath.mpf(eps)
    s = mpmath.fsum(
        mpmath.binomial(k, ell) * (mpmath.exp((k - ell) * e) - mpmath.exp((k - 2 * i + ell) * e))
        for ell in range(i)
    )
    di = s / (1 + mpmath.exp(e)) ** k
    return 1 - (1 - mpmath.mpf(delta)) ** k * (1 - di)


@pytest.mark.parametrize(("eps", "delta", "k"), [(0.1, 1e-6, 50), (1.0, 0.0, 12), (0.5, 1e-3, 30)])
def test_matches_kairouz_oh_viswanath_at_their_points(eps: float, delta: float, k: int) -> None:
    for i in range(0, k // 2 + 1, max(1, k // 10)):
        exact = _kov(eps, delta, k, i)
        got = fam.approx_dp_compose_delta(eps, delta, k, (k - 2 * i) * eps, upper=True)
        assert float(got) >= exact
        assert float(got) - exact <= 1e-11 * float(exact) + 1e-14


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.0, 2.0), st.sampled_from([0.0, 1e-4, 0.1])), min_size=1, max_size=5
    ),
    st.floats(-2.0, 4.0),
)
def test_heterogeneous_equals_brute_force(params: list[tuple[float, float]], ep: float) -> None:
    eps, delta = [p[0] for p in params], [p[1] for p in params]
    exact = _brute_compose(eps, delta, ep)
    _bracket(
        lambda u: fam.approx_dp_compose_heterogeneous_delta(eps, delta, ep, upper=u), exact, 1e-11
    )


def test_heterogeneous_refuses_too_many_atoms() -> None:
    eps = [math.sqrt(p) for p in [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53]]
    eps += [math.sqrt(p) for p in [59, 61, 67, 71, 73]]
    with pytest.raises(UnsupportedError, match="distinct privacy-loss values"):
        fam.approx_dp_compose_heterogeneous_delta(eps, [0.0] * len(eps), 1.0)


def test_compose_epsilon_brackets() -> None:
    eps, delta, k, target = 0.1, 1e-9, 100, 1e-5
    up = fam.approx_dp_compose_epsilon(eps, delta, k, target, upper=True)
    lo = fam.approx_dp_compose_epsilon(eps, delta, k, target, upper=False)
    assert 0.0 < lo <= up < k * eps
    assert up - lo < 1e-9
    assert _brute_delta_binomial(eps, delta, k, up) <= target
    assert _brute_delta_binomial(eps, delta, k, lo * (1 - 1e-9)) > target
    # Better than basic composition (k eps) and than advanced composition.
    adv = math.sqrt(2 * k * math.log(1 / (target - k * delta))) * eps + k * eps * math.expm1(eps)
    assert up < adv
    assert fam.approx_dp_compose_epsilon(eps, 1e-3, k, 1e-5) == math.inf
    assert fam.approx_dp_compose_epsilon(eps, 0.0, k, 1.0) == 0.0


def _brute_delta_binomial(eps: float, delta: float, k: int, ep: float) -> mpmath.mpf:
    p = 1 / (1 + mpmath.exp(-mpmath.mpf(eps)))
    total = mpmath.fsum(
        mpmath.binomial(k, j)
        * p**j
        * (1 - p) ** (k - j)
        * max(0, 1 - mpmath.exp(mpmath.mpf(ep) - (2 * j - k) * mpmath.mpf(eps)))
        for j in range(k + 1)
    )
    keep = (1 - mpmath.mpf(delta)) ** k
    return 1 - keep + keep * total


def test_empty_composition_is_identity() -> None:
    eps_prime = np.array([-1.0, 0.0, 2.0])
    want = np.clip(-np.expm1(eps_prime), 0.0, None)
    for eps, delta in [(math.inf, 0.0), (1.0, 1.0), (0.5, 0.1)]:
        got = fam.approx_dp_compose_delta(eps, delta, 0, eps_prime)
        assert np.allclose(got, want, rtol=1e-12, atol=1e-300)


def test_pure_dp_compose_is_delta_zero_case() -> None:
    a = fam.pure_dp_compose_delta(0.4, 7, [0.0, 1.0])
    b = fam.approx_dp_compose_delta(0.4, 0.0, 7, [0.0, 1.0])
    assert a.tolist() == b.tolist()


# ----------------------------------------------------------------------------- exact algebra
@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), max_size=6))
def test_zero_delta_compose_is_exact_and_directed(ds: list[float]) -> None:
    exact = 1 - math.prod((1 - Fraction(d) for d in ds), start=Fraction(1))
    up, lo = fam.zero_delta_compose(*ds), fam.zero_delta_compose(*ds, upper=False)
    assert Fraction(lo) <= exact <= Fraction(up)
    assert up == lo or math.nextafter(lo, 2.0) == up
    assert fam.zero_delta_compose(*reversed(ds)) == up  # commutative


@settings(max_examples=40, deadline=None)
@given(st.floats(0.0, 5.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_adding_zero_delta_is_exact_on_curves(eps: float, d1: float, d2: float) -> None:
    """R_{eps,d1} (+) R_{0,d2} = R_{eps, 1-(1-d1)(1-d2)}, checked exactly on PWL curves."""
    got = T.from_approx_dp(eps, d1).compose(T.from_approx_dp(0.0, d2))
    keep = (1 - Fraction(d1)) * (1 - Fraction(d2))
    if keep == 0:
        want = T.infinity()
    elif eps == 0.0:
        tail = [1 - keep] if keep < 1 else []
        want = T.from_segments([keep, *tail], [1, 0][: 1 + len(tail)])
    else:
        big = Fraction(fam.exp_bracket(eps)[1])
        c = keep / (1 + big)
        w = [c, c * big] + ([1 - keep] if keep < 1 else [])
        want = T.from_segments(w, [big, 1 / big, 0][: len(w)])
    assert got == want


def _h_r_mp(eps: float, delta: float, x: mpmath.mpf) -> mpmath.mpf:
    return mpmath.mpf(delta) + mpmath.fsum(
        w * max(0, 1 - x * mpmath.exp(-z)) for z, w in _r_atoms(eps, delta)
    )


@settings(max_examples=150, deadline=None)
@given(st.floats(0.0, 4.0), st.floats(0.0, 1.0), st.floats(0.0, 4.0), st.floats(0.0, 1.0))
def test_approx_leq_agrees_with_exact_curve_order(
    e1: float, d1: float, e2: float, d2: float
) -> None:
    got = fam.approx_leq(e1, d1, e2, d2)
    # Independent: exact rational order of outward-rounded PWL curves brackets the truth.
    if T.from_approx_dp(e1, d1, pessimistic=True).leq(T.from_approx_dp(e2, d2, pessimistic=False)):
        assert got
    if got:
        assert T.from_approx_dp(e1, d1, pessimistic=False).leq(T.from_approx_dp(e2, d2))
        for x in [0.01, math.exp(-e2), 0.7, 1.0, math.exp(e2), math.exp(e1), 100.0]:
            xm = mpmath.mpf(x)
            assert _h_r_mp(e1, d1, xm) <= _h_r_mp(e2, d2, xm) + mpmath.mpf(1e-30)


def test_approx_leq_cases() -> None:
    assert fam.approx_leq(1.0, 0.1, 1.0, 0.1)
    assert fam.approx_leq(0.5, 0.1, 1.0, 0.1)
    assert not fam.approx_leq(1.0, 0.1, 0.5, 0.1)
    assert fam.approx_leq(1.0, 0.0, 0.5, 0.4)  # delta_1(0.5) = 0.2449
    assert not fam.approx_leq(1.0, 0.0, 0.5, 0.2)
    assert fam.approx_leq(math.inf, 0.0, 0.0, 1.0)
    assert not fam.approx_leq(math.inf, 0.0, 50.0, 0.99)
    assert fam.approx_leq(3.0, 0.2, math.inf, 0.0)


@pytest.mark.parametrize(("mu", "eps"), [(0.5, 0.1), (1.0, 1.0), (3.0, 2.0)])
def test_gdp_leq_approx_is_checked_at_one_point_only(mu: float, eps: float) -> None:
    d = float(gdp_delta(mu, eps))
    assert fam.gdp_leq_approx(mu, eps, d * (1 + 1e-9) + 1e-13)
    assert not fam.gdp_leq_approx(mu, eps, d * (1 - 1e-6))
    # Prop. F3: domination everywhere follows from the single point x = e^eps.
    xs = np.concatenate([np.geomspace(1e-4, 1e4, 400), [math.exp(eps), math.exp(-eps)]])
    hg = gdp_hockey_stick(mu, xs)
    hr = fam.approx_dp_hockey_stick(eps, d * (1 + 1e-9) + 1e-13, xs, upper=False)
    assert np.all(hg <= hr + 1e-14)


@pytest.mark.parametrize("eps", [1e-9, 0.1, 0.5, 1.0, 2.0, 2.5, 10.0, 40.0])
def test_smallest_gdp_mu_for_pure_dp(eps: float) -> None:
    mu = fam.approx_dp_gdp_mu(eps, 0.0)
    mu_lo = fam.approx_dp_gdp_mu(eps, 0.0, upper=False)
    c = 1 / (1 + mpmath.exp(mpmath.mpf(eps)))
    exact = 2 * mpmath.sqrt(2) * mpmath.erfinv(1 - 2 * c)
    assert mu_lo <= exact <= mu
    # R_eps <= G_mu*: tradeoff of G_mu* below R_eps's everywhere, touching at alpha = c.
    a = np.concatenate([np.linspace(0.0, 1.0, 201), [float(c)]])
    assert np.all(gdp_tradeoff(mu, a) <= fam.approx_dp_tradeoff(eps, 0.0, a, upper=True) + 1e-15)
    assert fam.approx_leq_gdp(eps, 0.0, mu)
    assert not fam.approx_leq_gdp(eps, 0.0, mu * (1 - 1e-6))
    assert not fam.approx_leq_gdp(eps, 1e-12, 1e6)


@pytest.mark.parametrize(
    ("mu", "eps", "naive"), [(2.0, 0.5, 1.900), (3.0, 2.0, 1.855), (1.0, 0.1, 0.992)]
)
def test_naive_gdp_filter_reference_points(mu: float, eps: float, naive: float) -> None:
    """The notes' reference points: sqrt(mu^2 - mu*(eps)^2) for a randomized-response query."""
    m = fam.approx_dp_gdp_mu(eps, 0.0)
    assert round(math.sqrt(mu * mu - m * m), 3) == naive


def test_gdp_pure_eps() -> None:
    assert fam.gdp_pure_eps(0.0) == 0.0
    assert fam.gdp_pure_eps(1e-9) == math.inf


@pytest.mark.parametrize(
    ("mu", "eps", "delta"), [(1.0, 0.5, 0.0), (0.3, 2.0, 1e-3), (2.0, 0.0, 0.1)]
)
def test_gdp_plus_approx_dp_hockey_stick_by_quadrature(mu: float, eps: float, delta: float) -> None:
    m = mu * mu / 2

    def h_num(x: float) -> float:
        total = 0.0
        for z0, w in [(eps, 1 / (1 + math.exp(-eps))), (-eps, 1 / (1 + math.exp(eps)))]:

            def f(z: float, z0: float = z0) -> float:
                dens = math.exp(-((z - m) ** 2) / (2 * mu * mu)) / (mu * math.sqrt(2 * math.pi))
                return dens * max(0.0, 1 - x * math.exp(-(z + z0)))

            val, _ = integrate.quad(
                f, m - 12 * mu, m + 12 * mu, limit=200, points=[math.log(x) - z0]
            )
            total += w * val
        return delta + (1 - delta) * total

    for x in [0.1, 1.0, 2.0, 9.0]:
        hi = float(fam.gdp_approx_dp_compose_hockey_stick(mu, eps, delta, x))
        lo = float(fam.gdp_approx_dp_compose_hockey_stick(mu, eps, delta, x, upper=False))
        assert lo - 1e-9 <= h_num(x) <= hi + 1e-9


# ----------------------------------------------------------------------------- randomized response
@pytest.mark.parametrize("k", [2, 3, 7])
@pytest.mark.parametrize("eps", [0.0, 0.3, 2.0])
def test_randomized_response_pld_from_its_output_laws(k: int, eps: float) -> None:
    z = math.exp(eps) + k - 1
    p = [math.exp(eps) / z] + [1 / z] * (k - 1)  # input x: output x is index 0
    q = [1 / z, math.exp(eps) / z] + [1 / z] * (k - 2)  # input y: output y is index 1
    losses, probs = fam.randomized_response_pld(eps, k)
    assert math.isclose(float(probs.sum()), 1.0, rel_tol=1e-15)
    assert math.isclose(float(np.sum(probs * np.exp(-losses))), 1.0, rel_tol=1e-14)
    exact_curve = T.from_distributions(p, q)
    for x in [0.05, 0.5, 1.0, 1.7, 6.0]:
        want = float(exact_curve.hockey_stick_exact(x))
        hi = float(fam.randomized_response_hockey_stick(eps, k, x))
        lo = float(fam.randomized_response_hockey_stick(eps, k, x, upper=False))
        assert lo - 1e-15 <= want <= hi + 1e-15
        assert hi - lo < 1e-12
    # Dominated by R_eps (up to the rounding of the float laws p, q); for k >= 3 and
    # eps > 0 it has three segments (two kinks), so it is no R_{eps'} (those have two).
    assert exact_curve.leq(T.from_approx_dp(eps * (1 + 1e-12) + 1e-15, 0.0))
    assert len(exact_curve.segments) == (3 if k > 2 and eps > 0 else 2 if eps > 0 else 1)


@pytest.mark.parametrize(("noise", "k", "n"), [(0.5, 2, 1), (0.8, 2, 6), (0.3, 4, 3)])
def test_randomized_response_against_dp_accounting(noise: float, k: int, n: int) -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    eps = fam.randomized_response_epsilon(noise, k)
    ref = pld_lib.from_randomized_response(noise, k, value_discretization_interval=1e-5)
    ref = ref.self_compose(n) if n > 1 else ref
    losses, probs = fam.randomized_response_pld(eps, k)
    curve = T.from_pld_atoms(losses, probs).self_compose(n)
    for ep in [0.0, 0.5 * eps, eps, 2 * eps]:
        ours_lo = float(curve.delta(ep, upper=False))
        theirs = ref.get_delta_for_epsilon(ep)
        # dp_accounting rounds losses up to its grid: at or above the exact value, close.
        assert theirs >= ours_lo - 1e-12
        assert theirs <= ours_lo + 1e-3
        if k == 2:
            closed = float(fam.approx_dp_compose_delta(eps, 0.0, n, ep))
            assert abs(closed - ours_lo) < 1e-10


def test_randomized_response_epsilon_closed_form() -> None:
    # noise 1/2, k = 2: truth w.p. 3/4, flip w.p. 1/4, eps = log 3.
    assert fam.randomized_response_epsilon(0.5, 2, upper=False) <= math.log(3.0)
    assert fam.randomized_response_epsilon(0.5, 2) >= math.log(3.0)
    assert fam.randomized_response_epsilon(1.0) == 0.0


# ----------------------------------------------------------------------------- bad input
@pytest.mark.parametrize(
    ("call", "param"),
    [
        (lambda: fam.approx_dp_hockey_stick(float("nan"), 0.1, 1.0), "eps"),
        (lambda: fam.approx_dp_hockey_stick(-1.0, 0.1, 1.0), "eps"),
        (lambda: fam.approx_dp_hockey_stick(1.0, 1.5, 1.0), "delta"),
        (lambda: fam.approx_dp_hockey_stick(1.0, 0.1, -1.0), "x"),
        (lambda: fam.approx_dp_delta(1.0, 0.1, float("nan")), "eps_prime"),
        (lambda: fam.approx_dp_tradeoff(1.0, 0.1, 1.5), "alpha"),
        (lambda: fam.approx_dp_rdp(1.0, 0.0, 1.0), "order"),
        (lambda: fam.approx_dp_compose_delta(1.0, 0.0, -1, 1.0), "k"),
        (lambda: fam.approx_dp_compose_delta(1.0, 0.0, True, 1.0), "k"),
        (lambda: fam.approx_dp_compose_heterogeneous_delta([1.0], [0.1, 0.2], 1.0), "delta"),
        (lambda: fam.approx_leq(1.0, -0.1, 1.0, 0.1), "delta1"),
        (lambda: fam.gdp_leq_approx(-1.0, 1.0, 0.1), "mu"),
        (lambda: fam.zero_delta_compose(0.1, 2.0), "deltas"),
        (lambda: fam.randomized_response_pld(1.0, 1), "k"),
        (lambda: fam.randomized_response_epsilon(0.0), "noise_parameter"),
        (lambda: fam.approx_dp_compose_epsilon(1.0, 0.0, 3, 1.5), "target_delta"),
    ],
)
def test_bad_input_names_the_parameter(call, param: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError) as ei:
        call()
    assert ei.value.parameter == param
    assert f"'{param}'" in str(ei.value)


# ----------------------------------------------------------------------------- the PLD type
_GRID = 1e-3  # coarse grid: fast, and the brackets must hold at any grid


@pytest.mark.parametrize(("eps", "k", "n"), [(0.4, 2, 6), (1.0, 3, 3), (0.05, 2, 40)])
def test_pld_randomized_response_brackets_closed_forms(eps: float, k: int, n: int) -> None:
    """PLD.randomized_response(...).self_compose(n): optimistic <= exact <= pessimistic."""
    from dpsieve.accounting.pld import PLD

    hi = PLD.randomized_response(eps, k, grid=_GRID).self_compose(n)
    lo = PLD.randomized_response(eps, k, grid=_GRID, pessimistic=False).self_compose(n)
    eps_grid = np.array([0.0, 0.5 * eps, eps, 2 * eps, n * eps / 2])
    if k == 2:
        ex_hi = fam.pure_dp_compose_delta(eps, n, eps_grid, upper=True)
        ex_lo = fam.pure_dp_compose_delta(eps, n, eps_grid, upper=False)
    else:
        losses, probs = fam.randomized_response_pld(eps, k)
        curve = T.from_pld_atoms(losses, probs).self_compose(n)
        ex_hi = curve.delta(eps_grid, upper=True)
        ex_lo = (
            T.from_pld_atoms(losses, probs, pessimistic=False)
            .self_compose(n)
            .delta(eps_grid, upper=False)
        )
    assert np.all(np.asarray(hi.delta(eps_grid)) >= ex_lo - 1e-15)
    assert np.all(np.asarray(lo.delta(eps_grid)) <= ex_hi + 1e-15)
    assert np.all(np.asarray(hi.delta(eps_grid)) - ex_lo < 2e-2)


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-3), (0.3, 0.0), (0.0, 0.2)])
def test_pld_approx_dp_brackets_closed_forms(eps: float, delta: float) -> None:
    from dpsieve.accounting.pld import PLD

    xs = np.array([0.05, 0.5, 1.0, 1.2, 3.0, 30.0])
    ex_hi = fam.approx_dp_hockey_stick(eps, delta, xs)
    ex_lo = fam.approx_dp_hockey_stick(eps, delta, xs, upper=False)
    hi, lo = (
        PLD.approx_dp(eps, delta, grid=_GRID),
        PLD.approx_dp(eps, delta, grid=_GRID, pessimistic=False),
    )
    assert np.all(hi.hockey_stick(xs) >= ex_lo)
    assert np.all(lo.hockey_stick(xs) <= ex_hi)
    k = 8
    eps_grid = np.array([0.0, eps, 3 * eps, 1.0])
    comp_hi = np.asarray(hi.self_compose(k).delta(eps_grid))
    comp_lo = np.asarray(lo.self_compose(k).delta(eps_grid))
    assert np.all(comp_hi >= fam.approx_dp_compose_delta(eps, delta, k, eps_grid, upper=False))
    assert np.all(comp_lo <= fam.approx_dp_compose_delta(eps, delta, k, eps_grid, upper=True))
    # (0, delta) family: PLD.zero_delta composes exactly as zero_delta_compose says.
    z = PLD.zero_delta(0.1).compose(PLD.zero_delta(0.2))
    assert float(np.asarray(z.delta(math.inf))) >= fam.zero_delta_compose(0.1, 0.2, upper=False)


@pytest.mark.parametrize(("eps", "delta", "k"), [(0.1, 1e-6, 20), (0.5, 1e-3, 5), (1.0, 0.0, 8)])
def test_binomial_sum_against_dp_accounting_privacy_parameters(
    eps: float, delta: float, k: int
) -> None:
    """dp_accounting's PLD of (eps, delta)-DP is R_{eps,delta}; eps is on its 1e-4 grid, so
    its composition must agree with the binomial sum to rounding."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    ref = pld_lib.from_privacy_parameters(
        common.DifferentialPrivacyParameters(eps, delta), value_discretization_interval=1e-4
    ).self_compose(k)
    for ep in [0.0, eps, 0.37, 2 * eps, 1.5]:
        ours = float(fam.approx_dp_compose_delta(eps, delta, k, ep))
        assert ref.get_delta_for_epsilon(ep) == pytest.approx(ours, rel=1e-9, abs=1e-14)


@pytest.mark.parametrize("eps", [700.0, 710.0, 800.0, 1e4])
def test_huge_eps_stays_finite_and_sound(eps: float) -> None:
    """Beyond the float range of e^eps every function still answers, on the safe side."""
    xs = np.array([0.0, 0.5, 1.0, 1e300, math.inf])
    h = fam.approx_dp_hockey_stick(eps, 1e-3, xs)
    assert np.all((h >= 0.0) & (h <= 1.0))
    assert h[-1] == 1e-3
    assert np.all(fam.approx_dp_tradeoff(eps, 0.0, [0.0, 1e-300, 0.5]) <= [1.0, 1.0, 1e-200])
    mu_hi, mu_lo = fam.approx_dp_gdp_mu(eps, 0.0), fam.approx_dp_gdp_mu(eps, 0.0, upper=False)
    assert 0 < mu_lo <= mu_hi < math.inf
    c = 1 / (1 + mpmath.exp(mpmath.mpf(eps)))  # mu* solves Phi(-mu*/2) = c
    assert mpmath.ncdf(-mpmath.mpf(mu_hi) / 2) <= c <= mpmath.ncdf(-mpmath.mpf(mu_lo) / 2)
    assert fam.approx_leq(1.0, 0.0, eps, 0.0)
    assert not fam.approx_leq(eps, 0.0, 1.0, 0.5)
    g = fam.gdp_approx_dp_compose_hockey_stick(1.0, eps, 0.0, [0.0, 1.0, math.inf])
    assert np.all((g >= 0.0) & (g <= 1.0))
    curve = T.from_approx_dp(eps, 0.0)
    assert curve.leq(T.infinity())
    assert T.from_approx_dp(eps, 0.0, pessimistic=False).leq(curve)


def test_subnormal_results_still_bracket() -> None:
    """delta = p (1 - e^-eps) ~ eps/2 is below the smallest float for eps = 5e-324."""
    exact = _brute_compose([5e-324], [0.0], 0.0)
    assert (
        float(fam.approx_dp_compose_heterogeneous_delta([5e-324], [0.0], 0.0, upper=False)) <= exact
    )
    assert exact <= float(fam.approx_dp_compose_heterogeneous_delta([5e-324], [0.0], 0.0))
    assert float(fam.approx_dp_compose_delta(5e-324, 0.0, 1, 0.0, upper=False)) <= exact


def test_exp_bracket_never_crosses_one() -> None:
    """For tiny eps > 0 a two-ulp bracket would dip below 1 (i.e. below e^0): clamped."""
    for eps in [1e-300, 1e-17, 2.220446049250313e-16]:
        lo, hi = fam.exp_bracket(eps)
        assert 1.0 <= lo <= hi
        lo, hi = fam.exp_bracket(-eps)
        assert lo <= hi <= 1.0
    # Hypothesis found this: the optimistic R_eps for eps ~ 1e-16 used to be R_{|eps'|}
    # with eps' < 0, i.e. not below R_eps.
    low = T.from_approx_dp(1e-17, 0.0, pessimistic=False)
    assert low.leq(T.from_approx_dp(1e-17, 0.0))
    assert low == T.identity()
