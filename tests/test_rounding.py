"""dpsieve._rounding: every result lies on the stated side of the exact value."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve import _rounding as r
from dpsieve.accounting import PLD, gdp_compose

finite = st.floats(allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=5e-324, max_value=1e300, allow_nan=False)
edge = st.sampled_from([0.0, 5e-324, 2.2250738585072014e-308, 1e-300, 1 / 3, 1.0, 3.0, 1e300])
pos_or_edge = st.one_of(positive, edge.filter(lambda x: x > 0))


@settings(max_examples=300, deadline=None)
@given(pos_or_edge, pos_or_edge)
def test_exact_operations_are_directed_and_tight(a: float, b: float) -> None:
    fa, fb = Fraction(a), Fraction(b)
    for up, down, exact in [
        (r.div_up(a, b), r.div_down(a, b), fa / fb),
        (r.mul_up(a, b), r.mul_down(a, b), fa * fb),
        (r.add_up(a, b), r.add_down(a, b), fa + fb),
        (r.sub_up(a, b), r.sub_down(a, b), fa - fb),
        (r.hypot_up(a, b), r.hypot_down(a, b), None),
    ]:
        if exact is None:
            s2 = fa * fa + fb * fb
            assert math.isinf(up) or Fraction(up) ** 2 >= s2
            assert Fraction(down) ** 2 <= s2
            if math.isfinite(up):
                assert Fraction(math.nextafter(up, 0.0)) ** 2 < s2
            continue
        assert math.isinf(up) or Fraction(up) >= exact
        assert (down == -math.inf) or Fraction(down) <= exact
        if math.isfinite(up) and math.isfinite(down):  # tight: adjacent floats
            assert up == down or math.nextafter(down, math.inf) == up


@settings(max_examples=300, deadline=None)
@given(st.fractions(min_value=0, max_value=10**12))
def test_sqrt_directed(q: Fraction) -> None:
    up, down = r.sqrt_up(q), r.sqrt_down(q)
    assert Fraction(up) ** 2 >= q >= Fraction(down) ** 2
    assert up == down or math.nextafter(down, math.inf) == up


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.fractions(min_value=0), st.integers(min_value=0, max_value=2**2100),
                 st.floats(min_value=0.0, allow_infinity=False),
                 st.fractions(min_value=0, max_value=Fraction(1, 10**300))))
def test_sqrt_is_the_rational_definition(q: Fraction | int | float) -> None:
    """The integer implementation gives exactly the floats the definition names: the
    greatest s with s^2 <= q and the least with s^2 >= q (the largest float / inf past
    the floats), on the whole range."""
    e = Fraction(q)
    down, up = r.sqrt_down(q), r.sqrt_up(q)
    assert Fraction(down) ** 2 <= e
    above = math.nextafter(down, math.inf)
    assert math.isinf(above) or Fraction(above) ** 2 > e
    assert math.isinf(up) or Fraction(up) ** 2 >= e
    if math.isfinite(up) and up > 0:
        assert Fraction(math.nextafter(up, 0.0)) ** 2 < e


@settings(max_examples=300, deadline=None)
@given(st.floats(min_value=-745.0, max_value=709.0))
def test_libm_brackets_contain_truth(x: float) -> None:
    mpmath.mp.dps = 40
    lo, hi = r.exp_bracket(x)
    true = mpmath.exp(mpmath.mpf(x))
    assert mpmath.mpf(lo) <= true <= mpmath.mpf(hi)
    assert mpmath.mpf(r.expm1_down(x)) <= mpmath.expm1(mpmath.mpf(x)) <= mpmath.mpf(r.expm1_up(x))
    flo, fhi = r.exp_bracket_fraction(x)
    assert mpmath.mpf(flo.numerator) / flo.denominator <= true
    assert true <= mpmath.mpf(fhi.numerator) / fhi.denominator


@settings(max_examples=300, deadline=None)
@given(pos_or_edge)
def test_log_directed(x: float) -> None:
    mpmath.mp.dps = 40
    true = mpmath.log(mpmath.mpf(x))
    assert mpmath.mpf(r.log_down(x)) <= true <= mpmath.mpf(r.log_up(x))
    t1 = mpmath.log1p(mpmath.mpf(x))
    assert mpmath.mpf(r.log1p_down(x)) <= t1 <= mpmath.mpf(r.log1p_up(x))


def test_edges() -> None:
    assert r.next_up(0.0) == 5e-324
    assert r.next_down(0.0) == -5e-324
    assert r.next_up(math.inf) == math.inf
    assert r.next_down(-math.inf) == -math.inf
    assert r.round_up(Fraction(10) ** 400) == math.inf
    assert r.round_down(Fraction(10) ** 400) == 1.7976931348623157e308
    assert r.exp_bracket(0.0) == (1.0, 1.0)
    assert r.exp_bracket(800.0)[1] == math.inf
    assert r.log_up(1.0) == 0.0
    assert r.log_down(1.0) == 0.0
    assert r.rel_up(1.0, 1e-3) >= 1.001
    assert r.rel_down(1.0, 1e-3) <= 0.999
    with pytest.raises(ValueError, match="NaN"):
        r.next_up(math.nan)
    with pytest.raises(ValueError, match="NaN"):
        r.round_up(math.nan)
    with pytest.raises(ValueError, match="negative"):
        r.sqrt_up(-1)


def test_gaussian_mu_is_rounded_up() -> None:
    """Issue 10, item 8: PLD.gaussian(3.0) must get mu >= 1/3 (1/3.0 rounds below it)."""
    assert Fraction(PLD.gaussian(3.0).mu) >= Fraction(1, 3)
    assert Fraction(PLD.gaussian(7.0, 3.0).mu) >= Fraction(3, 7)
    for s in (3.0, 7.0, 11.0, 0.3):
        assert Fraction(PLD.gaussian(s).self_compose(3).mu) ** 2 >= 3 / Fraction(s) ** 2
    a, b = 0.1, 0.2
    m = PLD.gdp(a).compose(PLD.gdp(b)).mu
    assert Fraction(m) ** 2 >= Fraction(a) ** 2 + Fraction(b) ** 2
    assert Fraction(gdp_compose(a, b)) ** 2 >= Fraction(a) ** 2 + Fraction(b) ** 2
    # optimistic compositions round down
    lo = PLD.gdp(a).compose(PLD.randomized_response(1.0, pessimistic=False)).compose(
        PLD.gdp(b)
    )
    assert lo.direction == "optimistic"
    assert Fraction(lo.mu) ** 2 <= Fraction(a) ** 2 + Fraction(b) ** 2
