"""The generic residue filter: the residue condition U(B, L) (+) L <= B of every rule."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from filters_oracle import dense_ts, mixture_gap
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, PureDP
from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff
from dpsieve.errors import ValidationError
from dpsieve.filters import ResidueFilter, filter_from_json, naive_gdp_cost, register_rule
from dpsieve.filters._budgets import approx_curve
from dpsieve.filters._queries import rr_atoms
from dpsieve.filters.residue import _RULES


@settings(max_examples=40, deadline=None)
@given(st.floats(0.01, 5.0), st.floats(0.0, 5.0))
def test_pure_rule_residue_condition_exact(eps: float, e: float) -> None:
    u = _RULES["pure_dp"](PureDP(eps), PureDP(e))
    if e > eps:
        assert u is None
        return
    assert u is not None
    # exact arithmetic of the rule ...
    assert Fraction(u.eps) + Fraction(e) <= Fraction(eps)
    # ... and the composition claim R_u (+) R_e <= R_eps on exact tradeoff curves (U and L
    # rounded up, the budget rounded down after a 1e-9 relative widening for the e^x brackets)
    lhs = approx_curve(u.eps).compose(approx_curve(e))
    budget = PiecewiseLinearTradeoff.from_approx_dp(eps * (1 + 1e-9), 0.0, pessimistic=False)
    assert lhs <= budget


@settings(max_examples=20, deadline=None)
@given(st.floats(0.3, 4.0), st.floats(0.05, 2.5))
def test_gdp_rules_residue_condition(mu: float, eps: float) -> None:
    a = rr_atoms(eps)
    nu = naive_gdp_cost(PureDP(eps))
    naive = _RULES["gdp_naive"](GDP(mu), PureDP(eps))
    res = _RULES["gdp_residue"](GDP(mu), PureDP(eps))
    if naive is not None:
        # G_u (+) L <= G_u (+) G_nu = G_sqrt(u^2 + nu^2) <= G_mu, exactly
        assert Fraction(naive.mu) ** 2 + Fraction(nu) ** 2 <= Fraction(mu) ** 2
        assert mixture_gap(a.z, a.p, naive.mu, mu, dense_ts(15.0, 80)) <= 0.0
    if res is not None:
        assert mixture_gap(a.z, a.p, res.mu, mu, dense_ts(15.0, 80)) <= 0.0
        if naive is not None:
            assert res.mu >= naive.mu * (1 - 1e-12)


def test_generic_filter_protocol() -> None:
    f = ResidueFilter(GDP(2.0), "gdp_residue")
    assert f.try_spend(PureDP(0.5)).admitted
    assert f.remaining()["mu"] == pytest.approx(1.9364, abs=1e-3)
    g = filter_from_json(f.to_json())
    assert g.to_json() == f.to_json()
    before = f.to_json()
    assert not f.try_spend(PureDP(9.0)).admitted
    assert f.to_json() == before
    p = ResidueFilter(PureDP(1.0), "pure_dp")
    assert sum(p.try_spend(PureDP(0.25)).admitted for _ in range(5)) == 4
    with pytest.raises(ValidationError, match="'rule'"):
        ResidueFilter(GDP(1.0), "nope")
    with pytest.raises(ValidationError, match="'name'"):
        register_rule("pure_dp", lambda b, q: None)
    assert math.isfinite(f.remaining()["mu"])
