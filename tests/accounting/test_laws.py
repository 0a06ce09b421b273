"""Algebraic laws of PLDs with hypothesis (small grids keep the run short)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dpsieve.accounting import PLD, gdp_hockey_stick, leq

GRID = 1e-2
XS = np.exp(np.linspace(-3.0, 3.0, 61))
SETTINGS = settings(max_examples=25, deadline=None)


@st.composite
def plds(draw: st.DrawFn, gaussian: bool = True) -> PLD:
    kind = draw(st.sampled_from(["lap", "rr", "approx", "dist"] + (["gdp"] if gaussian else [])))
    if kind == "lap":
        return PLD.laplace(draw(st.floats(0.5, 20.0)), grid=GRID)
    if kind == "rr":
        return PLD.randomized_response(
            draw(st.floats(0.01, 1.5)), draw(st.integers(2, 4)), grid=GRID
        )
    if kind == "approx":
        return PLD.approx_dp(draw(st.floats(0.0, 1.0)), draw(st.floats(0.0, 0.1)), grid=GRID)
    if kind == "gdp":
        return PLD.gdp(draw(st.floats(0.0, 1.5)), grid=GRID)
    n = draw(st.integers(2, 5))
    w = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=2 * n, max_size=2 * n)))
    return PLD.from_distributions(w[:n] / w[:n].sum(), w[n:] / w[n:].sum(), grid=GRID)


def close(a: PLD, b: PLD, tol: float = 1e-12) -> bool:
    return bool(np.allclose(a.hockey_stick(XS), b.hockey_stick(XS), atol=tol, rtol=0))


@SETTINGS
@given(plds(), plds())
def test_composition_commutes(a: PLD, b: PLD) -> None:
    assert close(a.compose(b), b.compose(a))


@SETTINGS
@given(plds(), plds(), plds())
def test_composition_associates(a: PLD, b: PLD, c: PLD) -> None:
    assert close(a.compose(b).compose(c), a.compose(b.compose(c)), 1e-11)


@SETTINGS
@given(plds())
def test_identity_is_neutral_and_least(a: PLD) -> None:
    e = a.compose(PLD.identity(grid=GRID))
    assert np.array_equal(e.hockey_stick(XS), a.hockey_stick(XS))
    assert PLD.identity(grid=GRID) <= a
    assert a <= PLD.approx_dp(math.inf, 0.0, grid=GRID)


@SETTINGS
@given(plds())
def test_hockey_stick_is_a_hockey_stick_curve(a: PLD) -> None:
    x = np.exp(np.linspace(-4, 4, 401))
    h = a.hockey_stick(x)
    assert np.all(np.diff(h) <= 1e-14)  # decreasing
    slopes = np.diff(h) / np.diff(x)
    assert np.all(np.diff(slopes) >= -1e-9 * (1 + np.abs(slopes[1:])))  # convex
    assert np.all(h >= 1 - x - 1e-14)
    assert np.all((h >= 0) & (h <= 1))


@SETTINGS
@given(plds(gaussian=False), plds(gaussian=False), plds(gaussian=False))
def test_order_is_transitive_and_composition_monotone(a: PLD, b: PLD, c: PLD) -> None:
    # The check is sound but may refuse ties within float margins, so the laws are asserted
    # up to a slack of 1e-9 (composing with R_{0,1e-9} moves 1e-9 of the mass to +inf, a
    # margin on both sides x > 1 and x < 1).
    slack = PLD.zero_delta(1e-9, grid=GRID)
    if leq(a, b) and leq(b, c):
        assert leq(a, c.compose(slack))
    if leq(a, b):
        assert leq(a.compose(c), b.compose(c).compose(slack))
        # sound: an admitted pair really is ordered on a dense grid (for symmetric exact PLDs
        # the claim is about them, and x >= 1 is what the grid objects must satisfy)
        lo = 0.0 if (a.symmetric and b.symmetric) else -5.0
        x = np.exp(np.linspace(lo, 5, 2001))
        (ha, ea), (hb, eb) = a.h_with_error(x), b.h_with_error(x)
        assert np.all(ha <= hb + ea + eb)


@SETTINGS
@given(st.floats(0.3, 20.0), st.floats(1e-3, 0.1))
def test_laplace_pessimistic_exact_optimistic(scale: float, grid: float) -> None:
    a = 1.0 / scale
    hi = PLD.laplace(scale, grid=grid)
    lo = PLD.laplace(scale, grid=grid, pessimistic=False)
    x = np.exp(np.linspace(-a - 0.5, a + 0.5, 301))
    exact = np.where(x <= math.exp(-a), 1 - x, np.maximum(0, 1 - np.sqrt(x) * math.exp(-a / 2)))
    assert np.all(lo.hockey_stick(x) <= exact + 1e-15)
    assert np.all(exact <= hi.hockey_stick(x) + 1e-15)


@SETTINGS
@given(st.floats(0.05, 3.0), st.floats(1e-3, 0.05))
def test_gaussian_discretizations_bracket_gdp(mu: float, grid: float) -> None:
    hi = PLD.gdp(mu, grid=grid).discretize()
    lo = PLD(grid, 0, np.ones(1), 0.0, mu, "optimistic", True).discretize()
    x = np.exp(np.linspace(-4, 4, 301))
    exact = gdp_hockey_stick(mu, x)
    assert np.all(lo.hockey_stick(x) <= exact + 1e-14)
    assert np.all(exact <= hi.hockey_stick(x) + 1e-14)


@SETTINGS
@given(plds())
def test_dual_is_an_involution_and_serialization_round_trips(a: PLD) -> None:
    assert close(a.dual().dual(), a, 1e-12)
    assert PLD.from_dict(a.to_dict()) == a
    if a.symmetric:
        assert close(a.dual(), a, 1e-9)


@SETTINGS
@given(plds(), st.lists(st.floats(1e-9, 0.5), min_size=1, max_size=4))
@example(PLD.laplace(4.7518796992481205, grid=GRID), [1e-9])  # delta(eps) = d + 2.3e-18
def test_epsilon_is_the_inverse_of_delta(a: PLD, deltas: list[float]) -> None:
    es = np.atleast_1d(a.epsilon(np.array(deltas)))
    for d, e in zip(deltas, es, strict=True):
        if math.isfinite(e):
            # epsilon() certifies h(e^eps) <= d with its own round-off margin; delta() adds
            # its (larger: it also bounds exp(eps)) margin on top, so delta(eps) may exceed d
            # by that margin (1e-9 + 2.3e-18 at Laplace(4.7519), grid 0.01): compare d with
            # the lower end of delta's certified interval
            h, err = a.h_log_with_error(float(e))
            assert float(h[0] - err[0]) <= d
            assert a.delta(float(e)) <= d + 2.0 * float(err[0])
            if e > 1e-6:
                assert a.delta(float(e) * (1 - 1e-6) - 1e-9) > d * (1 - 1e-6)
        else:
            assert a.inf_mass >= d * (1 - 1e-9)


@SETTINGS
@given(
    st.lists(st.floats(0.01, 1.0), min_size=2, max_size=6),
    st.lists(st.floats(0.01, 1.0), min_size=2, max_size=6),
    st.floats(1e-3, 0.2),
)
def test_finite_pairs_pessimistic_exact_optimistic(
    pw: list[float], qw: list[float], grid: float
) -> None:
    n = min(len(pw), len(qw))
    p = np.array(pw[:n]) / sum(pw[:n])
    q = np.array(qw[:n]) / sum(qw[:n])
    hi = PLD.from_distributions(p, q, grid=grid)
    lo = PLD.from_distributions(p, q, grid=grid, pessimistic=False)
    x = np.exp(np.linspace(-4, 4, 161))
    exact = np.maximum(p[None, :] - x[:, None] * q[None, :], 0.0).sum(axis=1)
    assert np.all(lo.hockey_stick(x) <= exact + 1e-14)
    assert np.all(exact <= hi.hockey_stick(x) + 1e-14)
    # both have E[e^-Z] = 1 up to round-off: the dual tails tie, so compare with a slack
    assert leq(lo, hi.compose(PLD.zero_delta(1e-9, grid=grid)))


@SETTINGS
@given(plds(gaussian=False), st.floats(0.0, 2.0), st.floats(0.01, 3.0), st.floats(0, 0.05))
def test_gaussian_order_checks_are_sound(d: PLD, a: float, b: float, delta: float) -> None:
    L = d.compose(PLD.gdp(a, grid=GRID))
    B = PLD.gdp(b, grid=GRID).compose(PLD.zero_delta(delta, grid=GRID))
    if leq(L, B):
        lo = 0.0 if L.symmetric else -8.0
        t = np.linspace(lo, 40.0, 8001)
        (hl, el), (hb, eb) = L.h_log_with_error(t), B.h_log_with_error(t)
        assert np.all(hl <= hb + el + eb)
