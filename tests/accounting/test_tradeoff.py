"""Exact piecewise-linear tradeoff curves: validation, brute-force Neyman-Pearson on
product distributions, composition laws, Prop. 9 round trips, PLD conversions."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting import families as fam
from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff as T
from dpsieve.errors import ValidationError

# ----------------------------------------------------------------------------- strategies
weights = st.lists(st.integers(0, 6), min_size=2, max_size=3)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[list[Fraction], list[Fraction]]:
    """A pair (P, Q) of small finite laws with rational masses (zeros allowed: singular parts)."""
    n = draw(st.integers(1, 3))
    p = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n).filter(lambda v: sum(v) > 0))
    q = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n).filter(lambda v: sum(v) > 0))
    return [Fraction(x, sum(p)) for x in p], [Fraction(x, sum(q)) for x in q]


def _curve(pq: tuple[list[Fraction], list[Fraction]]) -> T:
    return T.from_distributions(pq[0], pq[1])  # type: ignore[arg-type]


curves = pairs().map(_curve)


def _brute_np(p: list[Fraction], q: list[Fraction]) -> list[tuple[Fraction, Fraction]]:
    """All deterministic tests: (type I error 1 - P(E), type II error Q(E)) for every E."""
    pts = []
    for mask in itertools.product([0, 1], repeat=len(p)):
        pe = sum((pi for pi, m in zip(p, mask, strict=True) if m), Fraction(0))
        qe = sum((qi for qi, m in zip(q, mask, strict=True) if m), Fraction(0))
        pts.append((1 - pe, qe))
    return pts


def _product(a: list[Fraction], b: list[Fraction]) -> list[Fraction]:
    return [x * y for x in a for y in b]


def _assert_is_lower_envelope(curve: T, pts: list[tuple[Fraction, Fraction]]) -> None:
    """curve = lower convex envelope of pts: no test beats it, and each vertex is a test."""
    for a, b in pts:
        assert curve.value(a) <= b
    achieved = set(pts)
    for vertex in zip(curve.alphas, curve.betas, strict=True):
        assert vertex in achieved


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("alphas", "betas", "param"),
    [
        ([0, 1], [1], "alphas"),
        ([0.1, 1], [1, 0], "alphas"),
        ([0, 0.5, 0.5, 1], [1, 0.5, 0.5, 0], "alphas"),
        ([0, 1], [1, 0.1], "betas"),
        ([0, 1], [1.5, 0], "betas"),
        ([0, 0.5, 1], [0.2, 0.4, 0], "betas"),  # increasing
        ([0, 0.5, 1], [1, 0.9, 0], "betas"),  # concave
        ([0, float("nan"), 1], [1, 0.5, 0], "alphas"),
        ([0, True], [1, 0], "alphas"),
        ([0, "1"], [1, 0], "alphas"),
    ],
)
def test_validation_names_parameter(alphas: list[object], betas: list[object], param: str) -> None:
    with pytest.raises(ValidationError) as ei:
        T(tuple(alphas), tuple(betas))  # type: ignore[arg-type]
    assert ei.value.parameter == param


def test_canonical_form_and_float_input() -> None:
    c = T((0, 0.25, 0.5, 1), (1, 0.75, 0.5, 0))  # type: ignore[arg-type]
    assert c == T.identity()
    assert c.alphas == (Fraction(0), Fraction(1))
    assert c.segments == ((Fraction(1), Fraction(1)),)
    assert T.from_segments([0.5, 0.5], [0, 1]) == T((0, 0.5, 1), (0.5, 0, 0))  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="'widths'"):
        T.from_segments([0.5, 0.4], [1, 1])
    with pytest.raises(ValidationError, match="'magnitudes'"):
        T.from_segments([0.5, 0.5], [3, 0])  # f(0) = 1.5 > 1


def test_evaluation_float_and_exact() -> None:
    c = T.from_approx_dp(1.0, 0.1)
    a = np.linspace(0, 1, 101)
    exact = np.array([float(c.value(Fraction(x))) for x in a])
    lo, hi = c(a), c(a, upper=True)
    assert np.all(lo <= exact)
    assert np.all(exact <= hi)
    assert np.max(hi - lo) < 1e-13
    with pytest.raises(ValidationError, match="'alpha'"):
        c([0.5, 1.5])
    with pytest.raises(ValidationError, match="'alpha'"):
        c.value(2)


# ----------------------------------------------------------------------------- Neyman-Pearson
@settings(max_examples=60, deadline=None)
@given(pairs())
def test_from_distributions_is_the_neyman_pearson_curve(
    pq: tuple[list[Fraction], list[Fraction]],
) -> None:
    _assert_is_lower_envelope(_curve(pq), _brute_np(*pq))


@settings(max_examples=60, deadline=None)
@given(pairs(), pairs())
def test_composition_equals_brute_force_on_product_laws(
    pq1: tuple[list[Fraction], list[Fraction]], pq2: tuple[list[Fraction], list[Fraction]]
) -> None:
    """Section 6's segment-product rule against Neyman-Pearson on (P1 x P2, Q1 x Q2)."""
    composed = _curve(pq1).compose(_curve(pq2))
    p, q = _product(pq1[0], pq2[0]), _product(pq1[1], pq2[1])
    _assert_is_lower_envelope(composed, _brute_np(p, q))
    assert composed == T.from_distributions(p, q)  # type: ignore[arg-type]
    d1, d2 = 1 - _curve(pq1).betas[0], 1 - _curve(pq2).betas[0]
    assert 1 - composed.betas[0] == d1 + d2 - d1 * d2


# ----------------------------------------------------------------------------- laws
@settings(max_examples=50, deadline=None)
@given(curves, curves, curves)
def test_composition_laws(a: T, b: T, c: T) -> None:
    assert a.compose(b) == b.compose(a)
    assert a.compose(b).compose(c) == a.compose(b.compose(c))
    assert a.compose(T.identity()) == a
    assert a.compose(T.infinity()) == T.infinity()
    assert T.identity().leq(a)
    assert a.leq(T.infinity())
    if a.leq(b):  # composition is monotone in the Blackwell order
        assert a.compose(c).leq(b.compose(c))
    assert a.compose(b).leq(a.compose(b))
    assert a.leq(a.compose(b))


@settings(max_examples=30, deadline=None)
@given(curves, st.integers(0, 5))
def test_self_compose_is_repeated_composition(a: T, k: int) -> None:
    want = T.identity()
    for _ in range(k):
        want = want.compose(a)
    assert a.self_compose(k) == want


@pytest.mark.parametrize(("eps", "delta"), [(0.5, 0.0), (1.0, 1e-3), (0.0, 0.1)])
def test_r_eps_delta_power_is_small_and_matches_binomial_sum(eps: float, delta: float) -> None:
    k = 25
    c = T.from_approx_dp(eps, delta).self_compose(k)
    assert len(c.segments) <= k + 2
    lo = T.from_approx_dp(eps, delta, pessimistic=False).self_compose(k)
    assert lo.leq(c)
    for ep in [0.0, 0.7, 2.0, 5.0]:
        hi_v = float(c.delta(ep, upper=True))
        lo_v = float(lo.delta(ep, upper=False))
        exact_lo = float(fam.approx_dp_compose_delta(eps, delta, k, ep, upper=False))
        exact_hi = float(fam.approx_dp_compose_delta(eps, delta, k, ep, upper=True))
        assert lo_v <= exact_hi
        assert exact_lo <= hi_v
        assert hi_v - lo_v < 1e-12


# ----------------------------------------------------------------------------- hockey stick
@settings(max_examples=60, deadline=None)
@given(curves, st.fractions(0, 50))
def test_hockey_stick_is_max_over_breakpoints_and_expectation_over_atoms(a: T, x: Fraction) -> None:
    """Prop. 9 (max over breakpoints) against h(x) = E_P[(1 - x e^-Z)_+] over the atoms."""
    via_atoms = sum((w * max(Fraction(0), 1 - x * m) for w, m in a.segments), Fraction(0))
    assert a.hockey_stick_exact(x) == via_atoms
    fx = float(x)
    assert float(a.hockey_stick(fx, upper=False)) <= via_atoms <= float(a.hockey_stick(fx))


@settings(max_examples=60, deadline=None)
@given(curves, st.fractions(0, 1))
def test_tradeoff_recovered_from_hockey_stick(a: T, alpha: Fraction) -> None:
    """Round trip through Prop. 9: f(alpha) = max(0, sup_x (1 - alpha - h(x)) / x), the
    sup attained at the kinks x = 1/m of h."""
    cands = [Fraction(0)]
    for _, m in a.segments:
        if m > 0:
            x = 1 / m
            cands.append((1 - alpha - a.hockey_stick_exact(x)) / x)
    assert max(cands) == a.value(alpha)


def test_hockey_stick_of_r_eps_delta() -> None:
    c = T.from_approx_dp(1.0, 0.05)
    xs = np.array([0.0, 0.1, 0.5, 1.0, 2.0, math.e, 10.0, math.inf])
    assert np.all(c.hockey_stick(xs) >= fam.approx_dp_hockey_stick(1.0, 0.05, xs, upper=False))
    assert np.all(c.hockey_stick(xs, upper=False) <= fam.approx_dp_hockey_stick(1.0, 0.05, xs))
    assert float(c.hockey_stick(math.inf, upper=False)) <= 0.05 <= float(c.hockey_stick(math.inf))
    with pytest.raises(ValidationError, match="'x'"):
        c.hockey_stick([-1.0])


# ----------------------------------------------------------------------------- PLD atoms
@settings(max_examples=40, deadline=None)
@given(curves)
def test_pld_atom_round_trip_is_pessimistic(a: T) -> None:
    losses, probs = a.to_pld_atoms()
    assert np.all(np.diff(losses) > 0) or losses.size <= 1
    back = T.from_pld_atoms(losses, probs)
    assert a.leq(back)
    for ep in [-1.0, 0.0, 0.5, 2.0]:
        assert float(back.delta(ep)) - float(a.delta(ep)) < 1e-12


def test_from_pld_atoms_conventions() -> None:
    # Missing mass goes to +inf; losses need not be sorted.
    c = T.from_pld_atoms([1.0, -1.0], [0.5, 0.3])
    assert c.alphas[-2] == Fraction(1) - Fraction(0.2)  # zero-slope segment of width 0.2
    # Excess mass (rounding) is removed from the lowest losses when pessimistic.
    pm, pp = 1 / (1 + math.e), math.e / (1 + math.e)
    c2 = T.from_pld_atoms([-1.0, 1.0], [pm, pp + 1e-12])
    assert c2.leq(T.from_pld_atoms([-1.0, 1.0], [pm - 1e-12, pp + 1e-12]))
    assert T.from_pld_atoms([-1.0, 1.0], [pm - 1e-12, pp + 1e-12]).leq(c2)
    with pytest.raises(ValidationError, match="'probs'"):
        T.from_pld_atoms([0.0], [1.1])
    with pytest.raises(ValidationError, match="'losses'"):
        T.from_pld_atoms([-math.inf], [1.0])
    # Pessimistic rounding of e^-z: curve below the optimistic one.
    lo = T.from_pld_atoms([0.3, -0.3], [0.5744425168116589, 0.4255574831883411], pessimistic=False)
    hi = T.from_pld_atoms([0.3, -0.3], [0.5744425168116589, 0.4255574831883411])
    assert lo.leq(hi)


def test_from_approx_dp_brackets() -> None:
    for eps, delta in [
        (0.0, 0.0),
        (0.0, 0.3),
        (1e-9, 0.0),
        (2.0, 1e-6),
        (math.inf, 0.0),
        (1.0, 1.0),
    ]:
        lo = T.from_approx_dp(eps, delta, pessimistic=False)
        hi = T.from_approx_dp(eps, delta)
        assert lo.leq(hi)
        a = np.linspace(0, 1, 57)
        assert np.all(hi(a) <= fam.approx_dp_tradeoff(eps, delta, a, upper=True))
        assert np.all(lo(a, upper=True) >= fam.approx_dp_tradeoff(eps, delta, a))
    assert T.from_approx_dp(0.0, 0.0) == T.identity()
    assert T.from_approx_dp(math.inf, 0.3) == T.infinity()


# ----------------------------------------------------------------------------- oracles
def test_against_dp_accounting_pmf_pld() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    p1, q1 = [0.5, 0.3, 0.2], [0.2, 0.3, 0.5]
    p2, q2 = [0.7, 0.3, 0.0], [0.1, 0.6, 0.3]
    ours = T.from_distributions(p1, q1).compose(T.from_distributions(p2, q2))

    def pmf(p: list[float], q: list[float]) -> pld_lib.PrivacyLossDistribution:
        # dp_accounting takes log-pmfs, Q ("lower") first, P ("upper") second.
        def logs(v: list[float]) -> dict[int, float]:
            return {i: math.log(x) for i, x in enumerate(v) if x > 0}

        return pld_lib.from_two_probability_mass_functions(
            logs(q), logs(p), value_discretization_interval=1e-5
        )

    ref = pmf(p1, q1).compose(pmf(p2, q2))
    for ep in [0.0, 0.3, 1.0, 2.0]:
        mine = float(ours.delta(ep, upper=False))
        theirs = ref.get_delta_for_epsilon(ep)
        assert mine - 1e-12 <= theirs <= mine + 1e-4  # their grid rounds losses up


def test_against_pld_type_when_available() -> None:
    pld_mod = pytest.importorskip("dpsieve.accounting.pld")
    pld_cls = pld_mod.PLD
    eps, k = 0.4, 6
    ours = T.from_approx_dp(eps, 0.0).self_compose(k)
    theirs = pld_cls.randomized_response(eps).self_compose(k)
    approx = pld_cls.approx_dp(1.0, 1e-3)
    mine_approx = T.from_approx_dp(1.0, 1e-3)
    for ep in [0.0, 0.4, 1.2, 2.4]:
        lo = float(ours.delta(ep, upper=False))
        got = float(np.asarray(theirs.delta(ep)))
        assert lo - 1e-12 <= got <= lo + 1e-3  # pessimistic discretization: at or above
        lo_a = float(mine_approx.delta(ep, upper=False))
        got_a = float(np.asarray(approx.delta(ep)))
        assert lo_a - 1e-12 <= got_a <= lo_a + 1e-3


# ----------------------------------------------------------------------------- supremum
@settings(max_examples=40, deadline=None)
@given(st.lists(curves, min_size=1, max_size=3), st.fractions(0, 20))
def test_supremum_hockey_stick_is_pointwise_max(cs: list[T], x: Fraction) -> None:
    """Prop. 11: h_sup = max_i h_i (exactly, at x and at every kink), and sup is an upper bound."""
    sup = T.supremum(cs)
    kinks = [1 / m for c in cs for _, m in c.segments if m > 0]
    for y in [x, *kinks]:
        assert sup.hockey_stick_exact(y) == max(c.hockey_stick_exact(y) for c in cs)
    for c in cs:
        assert c.leq(sup)
    assert T.supremum([*cs, T.identity()]) == sup
    assert T.supremum([sup, sup]) == sup


def test_natural_filter_witness_from_the_notes() -> None:
    """L1 = R(1,0), L2 = R(0.1,0.05), B = sup{L1 (+) L1, L1 (+) L2}: L1 (+) sup{L1, L2} is
    not <= B, and its delta exceeds B's by 0.01345 (the notes' grid value), exactly."""
    l1, l2 = T.from_approx_dp(1.0, 0.0), T.from_approx_dp(0.1, 0.05)
    budget = T.supremum([l1.compose(l1), l1.compose(l2)])
    worst = l1.compose(T.supremum([l1, l2]))
    assert not worst.leq(budget)
    assert budget.leq(worst)
    eps = np.linspace(0.0, 3.0, 301)
    gap = worst.delta(eps, upper=False) - budget.delta(eps)
    assert round(float(gap.max()), 5) == 0.01345
    assert np.all(gap[(eps >= 0.2) & (eps <= 1.9)] > 0.0134)


def test_supremum_rejects_empty() -> None:
    with pytest.raises(ValidationError, match="'curves'"):
        T.supremum([])


# ----------------------------------------------------------------------------- RDP, dict
@pytest.mark.parametrize("eps", [0.01, 0.5, 2.0])
def test_rdp_matches_closed_form_and_adds_under_composition(eps: float) -> None:
    orders = np.array([1.5, 2.0, 8.0, 64.0])
    c = T.from_approx_dp(eps, 0.0)  # E rounded up: its RDP is at or above R_eps's
    assert np.all(c.rdp(orders) >= fam.approx_dp_rdp(eps, 0.0, orders, upper=False))
    assert np.allclose(c.rdp(orders), fam.approx_dp_rdp(eps, 0.0, orders), rtol=1e-12)
    d = T.from_distributions([0.5, 0.3, 0.2], [0.2, 0.3, 0.5])
    both = c.compose(d).rdp(orders)
    assert np.allclose(both, c.rdp(orders) + d.rdp(orders), rtol=1e-12)
    assert np.all(c.compose(d).rdp(orders, upper=False) <= c.rdp(orders) + d.rdp(orders))
    assert np.all(T.from_approx_dp(eps, 1e-9).rdp(orders) == math.inf)
    with pytest.raises(ValidationError, match="'order'"):
        c.rdp(1.0)


@settings(max_examples=30, deadline=None)
@given(curves, curves)
def test_dict_round_trip_is_exact(a: T, b: T) -> None:
    c = a.compose(b)
    assert T.from_dict(c.to_dict()) == c
    with pytest.raises(ValidationError, match="'d'"):
        T.from_dict({"type": "pwl_tradeoff", "alphas": ["x"], "betas": []})
