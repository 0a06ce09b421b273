"""Unlocking policies and the fraction of a budget used (dpsieve.blocks)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, PureDP
from dpsieve.blocks import Unlock, demand, unlock_from_dict, used_fraction
from dpsieve.errors import ValidationError
from dpsieve.filters import GDPResidueFilter, PureDPFilter, ZCDPFilter, filter_from_json
from dpsieve.session.budgets import filter_for_budget


def test_periodic_closed_form() -> None:
    u = unlock_from_dict({"type": "periodic", "fraction": 0.25, "period": 10})
    assert [u.unlocked(t, 0) for t in (0, 9.99, 10, 29, 30, 1e9)] == [
        Fraction(1, 4), Fraction(1, 4), Fraction(1, 2), Fraction(3, 4), Fraction(1),
        Fraction(1)]
    assert u.unlocked(-5, 0) == Fraction(1, 4)  # a clock behind the arrival: the first step


def test_arrivals_closed_form_and_n() -> None:
    u = unlock_from_dict({"type": "arrivals", "n": 3, "by": "request"})
    assert u.fraction == Fraction(1, 3)
    assert u.by == "request"
    assert [u.unlocked(0, k) for k in range(5)] == [0, Fraction(1, 3), Fraction(2, 3), 1, 1]
    assert Unlock().unlocked(0, 0) == 1


@given(st.sampled_from([0.1, 0.3, 1.0, 1 / 7]), st.floats(0, 1e6), st.floats(0, 1e6),
       st.integers(0, 50), st.integers(0, 50))
def test_unlocked_never_decreases(f: float, a: float, b: float, m: int, n: int) -> None:
    for d in ({"type": "periodic", "fraction": f, "period": 3600},
              {"type": "arrivals", "fraction": f}):
        u = unlock_from_dict(d)
        lo, hi = sorted((a, b))
        k, j = sorted((m, n))
        assert 0 <= u.unlocked(lo, k) <= u.unlocked(hi, j) <= 1
        assert unlock_from_dict(u.to_dict()) == u


@pytest.mark.parametrize(("bad", "name"), [
    ({"type": "monthly"}, "type"), ({"type": "periodic", "fraction": 0, "period": 1}, "fraction"),
    ({"type": "periodic", "fraction": 1.5, "period": 1}, "fraction"),
    ({"type": "periodic", "fraction": float("nan"), "period": 1}, "fraction"),
    ({"type": "periodic", "fraction": 0.1, "period": 0}, "period"),
    ({"type": "periodic", "fraction": 0.1}, "period"),
    ({"type": "arrivals", "n": 0}, "n"),
    ({"type": "arrivals", "n": 2, "fraction": 0.5}, "fraction"),
    ({"type": "arrivals", "n": 2, "by": "team"}, "by"), ({"type": "none", "n": 2}, "n"),
    ([1], "unlock")])
def test_bad_policies_name_the_parameter(bad: object, name: str) -> None:
    with pytest.raises(ValidationError) as e:
        unlock_from_dict(bad)
    assert e.value.parameter == name


def _spent(flt: object, charges: list[object]) -> object:
    f = filter_from_json(flt.to_json())  # type: ignore[attr-defined]
    for q in charges:
        assert f.try_spend(q).admitted
    return f


def test_used_fraction_exact_for_additive_budgets() -> None:
    p = PureDPFilter(1.0)
    assert used_fraction(_spent(p, [PureDP(0.25)] * 3), p) == Fraction(3, 4)  # type: ignore[arg-type]
    z = ZCDPFilter(0.5)
    assert used_fraction(_spent(z, [ZCDP(0.125)]), z) == Fraction(1, 4)  # type: ignore[arg-type]
    g = GDPResidueFilter(mu=1.0)
    # Gaussian charges add in mu^2: GDP(0.5) twice uses exactly 1/2 of G_1
    assert used_fraction(_spent(g, [GDP(0.5), GDP(0.5)]), g) == Fraction(1, 2)  # type: ignore[arg-type]
    assert demand(GDP(0.5), g) == Fraction(1, 4)
    assert demand(GDP(1.5), g) is None  # more than the whole budget: never fits
    assert used_fraction(g, g) == 0


def test_used_fraction_of_a_mixed_budget_is_monotone_and_bounded() -> None:
    m = filter_for_budget(ApproxDP(1.0, 1e-6))
    cur = filter_from_json(m.to_json())
    last = Fraction(0)
    for _ in range(30):
        if not cur.try_spend(PureDP(0.05)).admitted:
            break
        u = used_fraction(cur, m)
        assert last <= u <= 1
        last = u
    assert last > Fraction(1, 2)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(0.01, 0.4), min_size=1, max_size=6))
def test_gdp_demands_add_up_to_the_used_fraction(mus: list[float]) -> None:
    g = GDPResidueFilter(mu=1.0)
    cur = filter_from_json(g.to_json())
    total = Fraction(0)
    for mu in mus:
        if not cur.try_spend(GDP(mu)).admitted:
            break
        d = demand(GDP(mu), g)
        assert d is not None
        total += d
    assert used_fraction(cur, g) == total
