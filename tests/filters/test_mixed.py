"""The mixed-budget filter R_a (+) G_mu (docs/proofs/mixed.md): bounds, residue condition,
validity of admitted sequences against the target, the split choice and stored states."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction

import mpmath
import pytest
from filters_oracle import dense_ts, h_gauss_mp, mixture_gap
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ValidationError
from dpsieve.filters import (
    GDPResidueFilter,
    MixedFilter,
    PureDPFilter,
    choose_split,
    filter_from_json,
)
from dpsieve.filters._mixed_math import delta_upper, epsilon_upper, h_gauss, mu_for
from dpsieve.filters._queries import rr_atoms

mpmath.mp.dps = 40


def _h_mixed_mp(a: float | Fraction, mu: float, t: float) -> mpmath.mpf:
    """Exact h_{R_a (+) G_mu}(e^t) (Lemma 3 of docs/proofs/mixed.md) in 40-digit mpmath."""
    a_mp = mpmath.mpf(a.numerator) / a.denominator if isinstance(a, Fraction) else mpmath.mpf(a)
    p = 1 / (1 + mpmath.e ** (-a_mp))
    q = 1 / (1 + mpmath.e ** a_mp)
    t_mp = mpmath.mpf(t)
    return p * h_gauss_mp(mu, mpmath.e ** (t_mp - a_mp)) + q * h_gauss_mp(
        mu, mpmath.e ** (t_mp + a_mp))


def test_h_gauss_error_within_allowance() -> None:
    rng = random.Random(7)
    worst = 0.0
    for _ in range(1500):
        mu = 10 ** rng.uniform(-4, math.log10(30.0))
        s = rng.uniform(-20.0, 60.0)
        exact = h_gauss_mp(mu, mpmath.e ** mpmath.mpf(s))
        err = abs(h_gauss(mu, s) - float(exact))
        assert err <= 1e-14 * (1 + mu), (mu, s, err)
        worst = max(worst, err)
    assert worst < 1e-14  # the allowance is generous (docs/proofs/mixed.md §3 says 6e-16)


@settings(max_examples=60, deadline=None)
@given(a=st.floats(0.0, 12.0), mu=st.just(0.0) | st.floats(1e-6, 8.0), t=st.floats(-5.0, 25.0))
def test_delta_upper_is_an_upper_bound(a: float, mu: float, t: float) -> None:
    assert delta_upper(a, mu, t) >= _h_mixed_mp(a, mu, t)


@settings(max_examples=25, deadline=None)
@given(eps=st.floats(0.05, 15.0), log_delta=st.floats(-12.0, -2.0), frac=st.floats(0.0, 1.0))
def test_split_lies_inside_the_target_and_is_tight(eps: float, log_delta: float,
                                                    frac: float) -> None:
    delta = 10.0 ** log_delta
    a = Fraction(eps) * Fraction(frac)
    m = mu_for(a, eps, delta)
    assert m >= 0.0
    assert _h_mixed_mp(a, m, eps) <= delta  # B = R_a (+) G_m is (eps, delta)-DP exactly
    if m > 1e-3:  # and not needlessly small: a slightly larger mu breaks the target
        assert _h_mixed_mp(a, m * (1 + 1e-7), eps) > delta - 3e-14 * (1 + m)


@settings(max_examples=40, deadline=None)
@given(a=st.floats(0.0, 10.0), mu=st.just(0.0) | st.floats(1e-6, 5.0),
       log_delta=st.floats(-12.0, -2.0))
def test_epsilon_left_is_never_understated(a: float, mu: float, log_delta: float) -> None:
    delta = 10.0 ** log_delta
    e = epsilon_upper(a, mu, delta)
    assert math.isfinite(e)
    assert _h_mixed_mp(a, mu, e) <= delta
    if e > 1e-6:
        # tight up to the certified allowance of docs/proofs/mixed.md §3
        below = e - 2e-10 * max(1.0, e)  # the search stops within 1e-10 max(1, eps)
        assert _h_mixed_mp(a, mu, below) > delta - 3e-14 * (1 + mu)


def _state(f: MixedFilter) -> tuple[Fraction, float]:
    st_ = json.loads(f.to_json())["state"]
    return Fraction(st_["pure"]), math.sqrt(Fraction(st_["mu2"]))


@pytest.mark.parametrize(("pure", "e"), [(1.0, 0.3), (5.0, 2.0), (0.4, 0.4)])
def test_pure_route_residue_condition(pure: float, e: float) -> None:
    """U (+) L = R_{a-e} (+) G_mu (+) R_e <= R_a (+) G_mu on a dense grid (mpmath)."""
    f = MixedFilter(pure + 0.5, 1e-6, pure=pure)  # a small Gaussian part: pure is cheaper
    a0, mu0 = _state(f)
    assert mu0 > 0
    d = f.try_spend(PureDP(e))
    assert d.admitted
    assert d.cost["route"] == "pure"
    a1, mu1 = _state(f)
    assert a1 + Fraction(e) == a0
    assert mu1 == mu0
    atoms = rr_atoms(e)
    for t in dense_ts(20.0, 120):
        lhs = mpmath.fsum(mpmath.mpf(float(pj)) * _h_mixed_mp(a1, mu0, float(t) - float(zj))
                          for zj, pj in zip(atoms.z, atoms.p, strict=True))
        assert lhs <= _h_mixed_mp(a0, mu0, float(t)) * (1 + 1e-12) + 1e-15


def test_gaussian_route_residue_condition() -> None:
    """A small pure query against a mostly Gaussian split goes to G_mu: G_mu' (+) L <= G_mu."""
    f = MixedFilter(10.0, 1e-6, pure=0.5)
    a0, mu0 = _state(f)
    d = f.try_spend(PureDP(0.05))
    assert d.admitted
    assert d.cost["route"] == "gaussian"
    a1, mu1 = _state(f)
    assert a1 == a0
    assert mu1 < mu0
    atoms = rr_atoms(0.05)
    assert mixture_gap(atoms.z, atoms.p, mu1, mu0, dense_ts(20.0, 120)) <= 0.0
    # a Gaussian query is removed exactly: mu'^2 = mu^2 - g^2
    before = Fraction(json.loads(f.to_json())["state"]["mu2"])
    g = f.try_spend(GDP(0.3))
    assert g.admitted
    assert g.cost["route"] == "gaussian"
    assert Fraction(json.loads(f.to_json())["state"]["mu2"]) == before - Fraction(0.3) ** 2


def _composed_delta(pures: list[float], gauss2: Fraction, eps: float) -> mpmath.mpf:
    """h_{(+)_i R_{e_i} (+) G_g}(e^eps) exactly: enumerate the randomized-response sums."""
    dist: dict[float, mpmath.mpf] = {0.0: mpmath.mpf(1)}
    for e in pures:
        em = mpmath.mpf(e)
        p, q = 1 / (1 + mpmath.e ** (-em)), 1 / (1 + mpmath.e ** em)
        nxt: dict[float, mpmath.mpf] = {}
        for z, w in dist.items():
            for dz, pw in ((e, p), (-e, q)):
                key = round(z + dz, 12)
                nxt[key] = nxt.get(key, mpmath.mpf(0)) + w * pw
        dist = nxt
    g = math.sqrt(gauss2)
    x = mpmath.e ** mpmath.mpf(eps)
    return mpmath.fsum(w * h_gauss_mp(g, x * mpmath.e ** (-mpmath.mpf(z)))
                       for z, w in dist.items())


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_admitted_sequences_compose_within_the_target(seed: int) -> None:
    """End to end: whatever the filter admits, composed, is (eps, delta)-DP (exact check)."""
    rng = random.Random(seed)
    eps, delta = 3.0, 1e-5
    f = MixedFilter(eps, delta, typical=[PureDP(0.6), GDP(0.2)])
    pures: list[float] = []
    gauss2 = Fraction(0)
    for _ in range(60):
        if rng.random() < 0.5:
            q_e = rng.choice([0.05, 0.2, 0.6, 1.1])
            if f.try_spend(PureDP(q_e)).admitted:
                pures.append(q_e)
        else:
            g = rng.choice([0.1, 0.3, 0.7])
            if f.try_spend(GDP(g)).admitted:
                gauss2 += Fraction(g) ** 2
    assert len(pures) <= 14  # the exact enumeration stays small
    assert pures
    assert gauss2 > 0
    assert _composed_delta(pures, gauss2, eps) <= delta


@pytest.mark.parametrize(("eps", "delta", "e", "goal"), [
    (1.0, 1e-6, 0.2, 4), (2.0, 1e-6, 0.5, 4), (10.0, 1e-6, 0.5, 20),
    pytest.param(10.0, 1e-6, 0.05, 1357, marks=pytest.mark.slow),  # ~3 s idle; benchmarks too
])
def test_issue_table_with_the_typical_query_declared(eps: float, delta: float, e: float,
                                                     goal: int) -> None:
    """Issue 15's table: at least the better of the additive and GDP-residue columns."""
    f = MixedFilter(eps, delta, typical=PureDP(e))
    n = 0
    while f.try_spend(PureDP(e)).admitted:
        n += 1
    add, gdp = PureDPFilter(eps), GDPResidueFilter(eps=eps, delta=delta)
    n_add = sum(add.try_spend(PureDP(e)).admitted for _ in range(goal + 5))
    n_gdp = sum(gdp.try_spend(PureDP(e)).admitted for _ in range(min(goal, 30) + 5)) \
        if goal < 100 else goal
    assert n >= max(n_add, n_gdp, goal)


def test_undecided_budget_is_set_by_the_first_admitted_query() -> None:
    f = MixedFilter(1.0, 1e-6)
    assert not f.decided
    assert f.remaining()["split"] == "undecided"
    before = f.to_json()
    refused = f.try_spend(ZCDP(0.01))  # no pure and no GDP form: refused, still undecided
    assert not refused.admitted
    assert f.to_json() == before
    assert f.dry_run(ApproxDP(0.1, 1e-9)).admitted  # a delta part: test_mixed_delta.py
    assert f.to_json() == before
    dry = f.dry_run(PureDP(0.2))
    assert f.to_json() == before
    real = f.try_spend(PureDP(0.2))
    assert real.to_dict() == dry.to_dict()
    assert real.admitted
    split = f.split()
    assert split is not None
    assert split["chosen"] == "first query"
    assert Fraction(split["pure"]) >= 4 * Fraction(0.2)  # four eps-0.2 queries fit
    assert sum(f.try_spend(PureDP(0.2)).admitted for _ in range(6)) == 3


def test_choose_split_picks_the_corner_that_admits_most() -> None:
    assert choose_split(10.0, 1e-6, [PureDP(0.05)]) == 0  # all Gaussian: 1357 vs 199
    assert choose_split(2.0, 1e-6, [PureDP(0.5)]) == Fraction(2)  # all pure: 4 vs 0
    # the same pure count with a Gaussian part left over beats a pure-only corner
    a = choose_split(1.0, 1e-6, [PureDP(0.2)])
    assert a == 4 * Fraction(0.2)
    assert a < 1
    assert choose_split(10.0, 1e-6, [GDP(0.3)]) == 0


def test_large_and_small_pure_queries_go_where_they_cost_least() -> None:
    f = MixedFilter(10.0, 1e-6, pure=5.0)
    assert f.try_spend(PureDP(1.0)).cost["route"] == "pure"
    assert f.try_spend(PureDP(0.02)).cost["route"] == "gaussian"
    assert f.try_spend(PLD.gaussian(10.0)).cost["route"] == "gaussian"
    assert f.try_spend(PLD.laplace(1.0)).cost["route"] == "pure"


def test_refusals_say_what_was_asked_and_what_is_left() -> None:
    f = MixedFilter(1.0, 1e-6, pure=1.0)
    d = f.try_spend(PureDP(1.5))
    assert not d.admitted
    assert "eps 1.5" in d.reason
    assert "pure part left" in d.reason


@pytest.mark.parametrize(("field", "value", "name"), [
    ("pure", "-1/1", "pure"),
    ("pure", "3/1", "pure"),
    ("mu2", "100/1", "mu2"),
    ("mu2", "x", "mu2"),
    ("eps", -1.0, "eps"),
    ("delta", 2.0, "delta"),
])
def test_stored_states_are_validated(field: str, value: object, name: str) -> None:
    f = MixedFilter(2.0, 1e-6, pure=1.0)
    d = json.loads(f.to_json())
    d["state"][field] = value
    with pytest.raises(ValidationError, match=f"'{name}'"):
        filter_from_json(json.dumps(d))


def test_stored_split_outside_the_target_is_refused() -> None:
    f = MixedFilter(2.0, 1e-6, pure=1.0)
    d = json.loads(f.to_json())
    d["state"]["split"]["mu"] = 5.0  # R_1 (+) G_5 is far outside (2, 1e-6)
    d["state"]["mu2"] = "25/1"
    with pytest.raises(ValidationError, match="'split'"):
        filter_from_json(json.dumps(d))
    g = MixedFilter(2.0, 1e-6)
    assert filter_from_json(g.to_json()).to_json() == g.to_json()  # undecided round trip


def test_constructor_validation() -> None:
    with pytest.raises(ValidationError, match="'delta'"):
        MixedFilter(1.0, 0.0)
    with pytest.raises(ValidationError, match="'eps'"):
        MixedFilter(-1.0, 1e-6)
    with pytest.raises(ValidationError, match="'pure'"):
        MixedFilter(1.0, 1e-6, pure=0.5, typical=PureDP(0.1))


def test_tiny_delta_keeps_the_pure_corner() -> None:
    """Below the float allowance (delta = 1e-15) mu = 0 is certified exactly (R_a <= R_eps):
    the pure part still works and the state round-trips (it was refused before)."""
    f = MixedFilter(1.0, 1e-15, typical=PureDP(0.2))
    assert sum(f.try_spend(PureDP(0.2)).admitted for _ in range(6)) == 4
    assert filter_from_json(f.to_json()).to_json() == f.to_json()
    assert f.epsilon_left() == 0.0  # the pure part is spent and mu = 0: exactly 0 left
    g = MixedFilter(1.0, 1e-15)
    assert g.try_spend(PureDP(0.2)).admitted
    assert g.epsilon_left() == pytest.approx(0.6)  # split a = 4 x 0.2: 0.6 of it left
    assert filter_from_json(g.to_json()).to_json() == g.to_json()
