"""GDP residue filter: reference values, closed forms, residue condition against an oracle."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from filters_oracle import dense_ts, h_gauss_mp, mixture_gap
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, ApproxDP, PureDP
from dpsieve.accounting.gdp import gdp_mu_for
from dpsieve.accounting.pld import PLD
from dpsieve.filters import (
    ApproxGDPResidueFilter,
    GDPResidueFilter,
    NaiveGDPFilter,
    gdp_residue_update,
    naive_gdp_cost,
)
from dpsieve.filters._gdp_core import Atoms, gdp_leq_mixture, log_h
from dpsieve.filters._queries import rr_atoms

# (mu, eps) -> (naive, residue), three decimals (notes on the paper, grid computation)
REFERENCE = {(2.0, 0.5): (1.900, 1.936), (3.0, 2.0): (1.855, 2.273), (1.0, 0.1): (0.992, 0.995)}


@pytest.mark.parametrize(("mu", "eps"), list(REFERENCE))
def test_reference_values(mu: float, eps: float) -> None:
    naive_ref, res_ref = REFERENCE[(mu, eps)]
    nu = naive_gdp_cost(PureDP(eps))
    naive = math.sqrt(mu * mu - nu * nu)
    res = gdp_residue_update(mu, PureDP(eps))
    assert round(naive, 3) == naive_ref
    assert round(res, 3) == res_ref
    assert res >= naive


def test_gaussian_queries_are_closed_form() -> None:
    assert gdp_residue_update(1.0, GDP(0.6)) == pytest.approx(0.8, abs=1e-15)
    assert gdp_residue_update(1.0, GDP(0.6)) ** 2 + 0.36 <= 1.0
    assert gdp_residue_update(1.0, GDP(1.0)) == 0.0
    assert gdp_residue_update(1.0, GDP(1.0000001)) == -1.0
    # a Gaussian PLD is kept in closed form by the accounting layer
    assert gdp_residue_update(2.0, PLD.gaussian(2.0)) == pytest.approx(math.sqrt(3.75), rel=1e-15)
    f = GDPResidueFilter(1.0)
    for _ in range(4):
        assert f.try_spend(GDP(0.5)).admitted
    assert not f.try_spend(GDP(1e-3)).admitted


def test_log_h_against_mpmath() -> None:
    """The float log h_{G_mu}(e^s) is within its stated error bound of the mpmath value."""
    from dpsieve.filters._gdp_core import _log_err

    for mu in (0.05, 0.3, 1.0, 1.848, 4.0):
        s = np.array([0.0, 0.1, 1.0, 3.0, 10.0, 30.0, 100.0, 400.0])
        lh, _ = log_h(mu, s)
        err = _log_err(mu, s)
        for si, li, ei in zip(s, lh, err, strict=True):
            exact = float(mpmath.log(h_gauss_mp(mu, mpmath.e ** mpmath.mpf(float(si)))))
            assert abs(li - exact) <= ei, (mu, si, li, exact, ei)


@pytest.mark.parametrize(("mu", "eps"), [(2.0, 0.5), (3.0, 2.0), (1.0, 0.1), (0.5, 0.3)])
def test_residue_condition_and_near_optimality_with_mpmath(mu: float, eps: float) -> None:
    """G_mu' (+) R_eps <= G_mu at a dense grid (mpmath), and mu' is at most 2e-4 below a
    value where the inequality fails: the search is sound and tight."""
    a = rr_atoms(eps)
    m = gdp_residue_update(mu, PureDP(eps))
    ts = dense_ts(25.0, 300)
    assert mixture_gap(a.z, a.p, m, mu, ts) <= 0.0
    assert mixture_gap(a.z, a.p, m * (1 + 2e-4) + 1e-6, mu, ts) > 0.0


@settings(max_examples=25, deadline=None)
@given(
    mu=st.floats(0.2, 4.0),
    eps=st.floats(0.01, 3.0),
)
def test_residue_condition_random(mu: float, eps: float) -> None:
    """Residue condition U(B, L) (+) L <= B and never worse than naive, over random inputs."""
    m = gdp_residue_update(mu, PureDP(eps))
    nu = naive_gdp_cost(PureDP(eps))
    if nu > mu:
        assert m < mu  # may still be admissible only if L <= G_mu
        return
    assert m >= math.sqrt(mu * mu - nu * nu) * (1 - 1e-12)
    a = rr_atoms(eps)
    assert mixture_gap(a.z, a.p, m, mu, dense_ts(20.0, 120)) <= 0.0


def test_check_refuses_false_inequalities() -> None:
    a = rr_atoms(1.0)
    nu = naive_gdp_cost(PureDP(1.0))  # exact closed form, rounded up by 1e-12 relative
    assert gdp_leq_mixture(a, 0.0, nu * (1 + 1e-9))  # the certified check needs its margins
    assert not gdp_leq_mixture(a, 0.0, nu * 0.999)
    assert not gdp_leq_mixture(Atoms(np.array([0.5]), np.array([0.5]), 0.5), 0.0, 10.0)


def test_approx_dp_queries() -> None:
    # a GDP budget can never pay for delta > 0 ...
    assert gdp_residue_update(2.0, ApproxDP(0.5, 1e-6)) == -1.0
    # ... an approximate-GDP budget can: delta' satisfies (1-delta')(1-d) >= 1-delta
    f = ApproxGDPResidueFilter(2.0, 1e-3)
    d = f.try_spend(ApproxDP(0.5, 4e-4))
    assert d.admitted
    left = f.remaining()
    assert (1 - left["delta"]) * (1 - 4e-4) >= 1 - 1e-3
    assert left["mu"] == pytest.approx(gdp_residue_update(2.0, PureDP(0.5)), rel=1e-12)
    assert not f.try_spend(ApproxDP(0.1, 7e-4)).admitted


def test_approx_gdp_residue_condition_exactly() -> None:
    """R_{0,d'} (+) G_m' (+) R_{e,d} <= R_{0,d} (+) G_mu at a dense grid (mpmath)."""
    mu, delta, e, d = 1.5, 1e-3, 0.4, 3e-4
    f = ApproxGDPResidueFilter(mu, delta)
    assert f.try_spend(ApproxDP(e, d)).admitted
    m, d2 = f.remaining()["mu"], f.remaining()["delta"]
    a = rr_atoms(e)
    for t in dense_ts(15.0, 120):
        x = mpmath.e ** mpmath.mpf(float(t))
        inner = mpmath.fsum(
            mpmath.mpf(float(pj)) * h_gauss_mp(m, x * mpmath.e ** (-mpmath.mpf(float(zj))))
            for zj, pj in zip(a.z, a.p, strict=True)
        )
        keep = (1 - mpmath.mpf(d2)) * (1 - mpmath.mpf(d))
        lhs = 1 - keep + keep * inner
        rhs = mpmath.mpf(delta) + (1 - mpmath.mpf(delta)) * h_gauss_mp(mu, x)
        assert lhs <= rhs


def test_pld_queries_laplace_and_rr() -> None:
    mu = gdp_mu_for(10.0, 1e-6)
    for q in (PLD.laplace(10.0), PLD.randomized_response(0.1)):
        m = gdp_residue_update(mu, q)
        cost = math.sqrt(mu * mu - m * m)
        assert 0.09 < cost < naive_gdp_cost(q)  # far below the naive charge
    # optimistic or asymmetric PLDs are refused: they could under-state the query
    assert gdp_residue_update(mu, PLD.laplace(10.0, pessimistic=False)) == -1.0


def test_naive_filter_matches_closed_form() -> None:
    f = NaiveGDPFilter(1.0)
    for _ in range(4):
        assert f.try_spend(GDP(0.5)).admitted
    assert not f.try_spend(GDP(1e-9)).admitted
    assert f.remaining()["mu"] == 0.0


@pytest.mark.slow
def test_adaptive_workload_counts() -> None:
    """The workload of the notes: 2,000 queries, budget G_mu0 with delta(10) = 1e-6."""
    mu0 = gdp_mu_for(10.0, 1e-6)
    qs = [PLD.laplace(10.0), PLD.gaussian(10.0), PLD.randomized_response(0.1)]
    f, g = GDPResidueFilter(mu0), NaiveGDPFilter(mu0)
    n_res = sum(f.try_spend(qs[i % 3]).admitted for i in range(2000))
    n_naive = sum(g.try_spend(qs[i % 3]).admitted for i in range(2000))
    assert n_res >= 340
    assert 245 <= n_naive <= 255


@settings(max_examples=15, deadline=None)
@given(
    mu=st.floats(0.3, 3.0),
    parts=st.lists(st.tuples(st.floats(0.01, 1.0), st.floats(0.02, 2.0)), min_size=1, max_size=4),
)
def test_residue_condition_random_symmetric_mixtures(
    mu: float, parts: list[tuple[float, float]]
) -> None:
    """Random symmetric discrete queries (index-revealed mixtures of RR_e): the certified
    residue satisfies G_mu' (+) L <= G_mu at a dense grid (mpmath)."""
    tot = sum(w for w, _ in parts)
    z, p = [], []
    for w, e in parts:
        z += [e, -e]
        p += [w / tot / (1 + math.exp(-e)), w / tot / (1 + math.exp(e))]
    atoms = Atoms(np.array(z), np.array(p), 0.0)
    from dpsieve.filters._gdp_search import residue_mu

    m = residue_mu(atoms, mu)
    if m < 0:
        assert not gdp_leq_mixture(atoms, 0.0, mu)
        return
    assert mixture_gap(atoms.z, atoms.p, m, mu, dense_ts(20.0, 100)) <= 0.0
