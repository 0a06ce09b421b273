"""Algebraic laws (hypothesis): snapping (proofs Lemma 1), relation conversion, scales."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from dpsieve.accounting.events import Neighbouring
from dpsieve.mechanisms import (
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    snap_to_lattice,
)

AR, RO = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE
reals = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False)
steps = st.integers(min_value=-20, max_value=5).map(lambda e: 2.0**e)


@given(reals, reals, steps)
def test_snap_sensitivity_bound(a: float, b: float, g: float) -> None:
    ra, rb = snap_to_lattice([a, b], g)
    assert abs(int(ra) - int(rb)) <= math.ceil(abs(a - b) / g)


@given(st.lists(st.tuples(reals, reals), min_size=1, max_size=6), steps)
def test_snap_vector_l1_bound(pairs: list[tuple[float, float]], g: float) -> None:
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    delta = float(np.sum(np.abs(a - b)))
    diff = int(np.sum(np.abs(snap_to_lattice(a, g) - snap_to_lattice(b, g))))
    # delta is a float sum (may round down by a few ulp): allow for that, nothing more
    assert diff <= math.ceil(delta / g * (1 + 1e-12)) + len(pairs) - 1


@given(reals, steps, st.integers(min_value=-1000, max_value=1000))
def test_snap_shift_equivariant(a: float, g: float, n: int) -> None:
    assert int(snap_to_lattice([a + n * g], g)[0]) == int(snap_to_lattice([a], g)[0]) + n


@given(st.floats(min_value=0.01, max_value=100), st.floats(min_value=0.01, max_value=100))
def test_under_is_idempotent_and_doubles(scale: float, sens: float) -> None:
    m = LaplaceMechanism(scale, sens)
    assert m.under(AR) == m
    r = m.under(RO)
    assert r.under(RO) == r
    assert r.lattice_sensitivity >= 2 * m.lattice_sensitivity - 1
    assert r.pure_eps() >= m.pure_eps()
    g = GaussianMechanism(scale, sens).under(RO)
    assert g.sensitivity == 2 * sens
    exact = (2 * sens / g.step) ** 2 / (2 * float(g.lattice_sigma2))  # no lattice rounding
    assert g.zcdp_rho() >= exact * (1 - 1e-12)
    e = ExponentialMechanism(scale, sens).under(RO)
    assert math.isclose(e.eps / e.sensitivity, scale / sens, rel_tol=1e-15)


@given(st.floats(min_value=0.01, max_value=1e3), st.integers(min_value=1, max_value=50))
def test_discrete_laplace_eps_monotone_in_scale(scale: float, k: int) -> None:
    a = DiscreteLaplaceMechanism(scale, k).pure_eps()
    b = DiscreteLaplaceMechanism(scale * 2, k).pure_eps()
    assert b <= a
    assert a >= k / scale * (1 - 1e-15)
