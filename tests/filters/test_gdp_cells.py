"""The cell bounds of the certified GDP residue check, against an mpmath oracle.

* The lemma behind the quadratic cell bound: s -> log H_m(s) + s^2/(2 m^2) is convex
  (docs/proofs/filters.md, Sec. 1), next to the log-concavity the tangent/chord bound uses.
* Every cell the quadratic bound accepts really has f <= g inside it, for m just above
  and below the certified residue (where the bound is tightest).
* Adaptive refinement keeps the check tight: a near-identity query (eps = 0.01 against
  mu = 2) is certified within 1e-7 (relative) of where the inequality starts to fail.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from filters_oracle import dense_ts, h_gauss_mp, mixture_gap
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.filters._gdp_core import (
    DT_MIN,
    DT_REL,
    _cells_ok_quadratic,
    _grid,
    _log_f_up,
    _tail_start,
    gdp_leq_mixture,
)
from dpsieve.filters._gdp_search import residue_mu
from dpsieve.filters._queries import rr_atoms


def _log_h_mp(m: float, s: mpmath.mpf) -> mpmath.mpf:
    return mpmath.log(h_gauss_mp(m, mpmath.e**s))


@pytest.mark.parametrize("m", [0.05, 0.3, 1.0, 2.0, 4.0])
def test_log_h_plus_gaussian_quadratic_is_convex_and_log_h_concave(m: float) -> None:
    """Second differences in mpmath: log H_m + s^2/(2m^2) >= 0 (convex), log H_m <= 0."""
    step = mpmath.mpf("1e-4")
    for s0 in (-5.0, -1.0, 0.0, 0.3, 1.0, 3.0, 10.0, 40.0):
        s = mpmath.mpf(s0) * max(m, 0.5)
        d2 = (_log_h_mp(m, s + step) - 2 * _log_h_mp(m, s) + _log_h_mp(m, s - step)) / step**2
        assert d2 <= 0, (m, s0, d2)  # log-concave (Prekopa)
        assert d2 + 1 / mpmath.mpf(m) ** 2 >= 0, (m, s0, d2)  # the quadratic lemma


def _f_minus_g_mp(z: np.ndarray, p: np.ndarray, m: float, mu: float, t: float) -> mpmath.mpf:
    x = mpmath.e ** mpmath.mpf(t)
    lhs = mpmath.fsum(
        mpmath.mpf(float(pj)) * h_gauss_mp(m, x * mpmath.e ** (-mpmath.mpf(float(zj))))
        for zj, pj in zip(z, p, strict=True)
    )
    return lhs - h_gauss_mp(mu, x)


@settings(max_examples=12, deadline=None)
@given(
    mu=st.floats(0.3, 3.0),
    eps=st.floats(0.01, 1.5),
    rel=st.sampled_from([-1e-4, 0.0, 1e-6, 1e-4, 1e-2]),
)
def test_accepted_cells_hold_inside(mu: float, eps: float, rel: float) -> None:
    """Cells accepted by the quadratic bound have f <= g at interior points (mpmath), for m
    around the certified residue; the tightest accepted cells are the ones checked."""
    a = rr_atoms(eps)
    m0 = residue_mu(a, mu)
    if m0 <= 0.0:
        return
    m = min(m0 * (1.0 + rel), mu * (1 - 1e-9))
    t = _grid(_tail_start(a, m, mu), DT_MIN, DT_REL)
    lf = _log_f_up(a, m, t)
    ok, excess, _ = _cells_ok_quadratic(m, mu, t[:-1], t[1:], lf[:-1], lf[1:])
    idx = np.nonzero(ok)[0]
    tight = idx[np.argsort(-excess[idx])[:8]]  # accepted cells with the least room
    for i in tight:
        for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
            ti = float(t[i] + (t[i + 1] - t[i]) * frac)
            assert _f_minus_g_mp(a.z, a.p, m, mu, ti) <= 0, (m, mu, eps, ti)


def test_near_identity_query_is_certified_tightly() -> None:
    """eps = 0.01 against mu = 2: the inequality holds at the certified m and fails 1e-7
    (relative) above it; the check refuses there."""
    a = rr_atoms(0.01)
    m = residue_mu(a, 2.0)
    ts = np.concatenate([dense_ts(20.0, 100), np.geomspace(20.0, 800.0, 30)])
    assert mixture_gap(a.z, a.p, m, 2.0, ts) <= 0.0
    above = m * (1.0 + 1e-7)
    assert mixture_gap(a.z, a.p, above, 2.0, ts) > 0.0
    assert not gdp_leq_mixture(a, above, 2.0)
    assert math.sqrt(4.0 - m * m) < 0.0101  # charge ~ eps: far below naive (~0.0125)
