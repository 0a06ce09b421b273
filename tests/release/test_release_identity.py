"""The identity mechanism, clipping and consistent answers (issue 16)."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.errors import ValidationError
from dpsieve.release import (
    Dataset,
    Domain,
    Workload,
    blr_release,
    collapse,
    envelope_release,
    identity_release,
    laplace_release,
    least_squares_simplex,
    marginals,
    mwem_release,
    pmw_release,
    project_simplex,
    random_counting,
    range_1d,
)
from dpsieve.release.baselines import clipped_laplace_expected_max_error
from dpsieve.release.identity import count_noise_scale

WL = marginals(Domain.from_sizes([2, 2]), 1)
X = Dataset.from_rows([0, 0, 0, 1, 1, 2, 3, 3, 3, 3], 4)


def _dlap_logpmf(z: np.ndarray, t: float) -> np.ndarray:
    a = math.exp(-1.0 / t)
    return np.log((1 - a) / (1 + a)) - np.abs(z) / t


@pytest.mark.parametrize("eps", [0.1, 0.5, 1.0, 3.0])
def test_identity_noisy_histogram_is_exactly_eps_dp(eps: float) -> None:
    """Exact law of the noisy class counts for every replace-one neighbour of a small
    dataset, on a box of outputs wide enough to contain the worst ratio: max log ratio
    <= eps, and it is attained (2/t = eps up to float rounding of t)."""
    t = count_noise_scale(eps)
    assert Fraction(t) >= Fraction(2) / Fraction(eps)
    assert Fraction(math.nextafter(t, 0)) < Fraction(2) / Fraction(eps)  # the smallest
    cw = collapse(WL)
    c = cw.counts(X)
    worst = 0.0
    box = np.array(list(itertools.product(range(-3, 8), repeat=cw.size)))
    for a, b in itertools.permutations(range(cw.size), 2):
        if c[a] == 0:
            continue
        c2 = c.copy()
        c2[a] -= 1
        c2[b] += 1
        lp = _dlap_logpmf(box - c, t).sum(axis=1)
        lq = _dlap_logpmf(box - c2, t).sum(axis=1)
        worst = max(worst, float(np.abs(lp - lq).max()))
    assert worst <= eps * (1 + 1e-12)
    assert worst >= eps * (1 - 1e-9)


ALL = {
    "envelope": lambda wl, x, g: envelope_release(wl, x, 1.0, rounds=4, rng=g),
    "pmw": lambda wl, x, g: pmw_release(wl, x, 1.0, rounds=3, rng=g),
    "mwem": lambda wl, x, g: mwem_release(wl, x, 1.0, rounds=3, rng=g),
    "laplace": lambda wl, x, g: laplace_release(wl, x, 1.0, rng=g),
    "laplace_consistent": lambda wl, x, g: laplace_release(wl, x, 1.0, rng=g, consistent=True),
    "identity": lambda wl, x, g: identity_release(wl, x, 1.0, rng=g),
    "identity_ls": lambda wl, x, g: identity_release(wl, x, 1.0, projection="workload", rng=g),
    "identity_none": lambda wl, x, g: identity_release(wl, x, 1.0, projection="none", rng=g),
    "blr": lambda wl, x, g: blr_release(wl, x, 1.0, rng=g),
}


@pytest.mark.parametrize("mech", sorted(ALL))
def test_every_mechanism_answers_lie_in_the_answer_range(mech: str) -> None:
    """Issue 16: the unclipped Laplace baseline released answers far outside [0, 1] (errors
    up to 4.4); every mechanism's answers now lie in each query's range."""
    g = np.random.default_rng(5)
    for wl, x in [(WL, X), (range_1d(4), Dataset.from_histogram([3, 0, 4, 1]))]:
        lo, hi = wl.matrix.min(axis=1), wl.matrix.max(axis=1)
        for _ in range(30):
            a = ALL[mech](wl, x, g).answers
            assert np.all(a >= lo - 1e-12)
            assert np.all(a <= hi + 1e-12)


def test_unclipped_laplace_still_available_and_leaves_the_range() -> None:
    g = np.random.default_rng(6)
    wl, x = range_1d(4), Dataset.from_histogram([3, 0, 4, 1])
    out = [laplace_release(wl, x, 0.5, rng=g, clip=False).answers for _ in range(20)]
    assert any(np.any((a < 0) | (a > 1)) for a in out)
    assert laplace_release(wl, x, 0.5, rng=g, clip=False).mechanism == "laplace_unclipped"


def _distribution_answers(wl: Workload, answers: np.ndarray) -> bool:
    """Is ``answers`` = C p for some p on the simplex (to 1e-7)?"""
    cw = collapse(wl)
    p = least_squares_simplex(cw.columns, answers)
    return bool(np.abs(cw.columns @ p - answers).max() < 1e-7)


@pytest.mark.parametrize("mech", ["identity", "identity_ls", "laplace_consistent"])
def test_projected_releases_are_consistent(mech: str) -> None:
    g = np.random.default_rng(7)
    wl = random_counting(8, 5, seed=3)
    x = Dataset.from_histogram([1, 0, 2, 5, 0, 0, 1, 3])
    for _ in range(10):
        assert _distribution_answers(wl, ALL[mech](wl, x, g).answers)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-5, 5), min_size=1, max_size=12))
def test_project_simplex_kkt(v: list[float]) -> None:
    """The projection p of v satisfies the KKT conditions: p >= 0, sum 1, and v - p is
    constant (= theta) on the support and <= theta off it."""
    x = np.array(v)
    p = project_simplex(x)
    assert np.all(p >= 0)
    assert abs(p.sum() - 1) < 1e-9
    r = x - p
    sup = p > 0
    theta = r[sup].mean()
    assert np.allclose(r[sup], theta, atol=1e-9)
    assert np.all(r[~sup] <= theta + 1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000))
def test_least_squares_simplex_kkt(seed: int) -> None:
    """Optimality on the simplex: the gradient C^T (C p - y) equals a constant lambda on the
    support of p and is >= lambda off it (KKT), and p is feasible."""
    g = np.random.default_rng(seed)
    C = g.random((int(g.integers(1, 6)), int(g.integers(1, 8))))
    y = g.normal(size=C.shape[0])
    p = least_squares_simplex(C, y)
    assert np.all(p >= 0)
    assert abs(p.sum() - 1) < 1e-12
    grad = C.T @ (C @ p - y)
    sup = p > 1e-9
    lam = float(grad[sup].min())
    assert np.all(np.abs(grad[sup] - lam) < 1e-6)
    assert np.all(grad[~sup] >= lam - 1e-6)


def test_clipped_laplace_expected_error_closed_form() -> None:
    f = np.array([0.1, 0.5, 0.9, 0.3])
    exact = clipped_laplace_expected_max_error(0.4, f, np.zeros(4), np.ones(4))
    g = np.random.default_rng(8)
    e = np.abs(np.clip(f + g.laplace(0, 0.4, (200_000, 4)), 0, 1) - f).max(axis=1)
    assert abs(e.mean() - exact) < 4 * e.std() / math.sqrt(len(e))
    # no clipping in effect: the unclipped closed form scale * H_k
    wide = clipped_laplace_expected_max_error(0.4, f, f - 1e6, f + 1e6)
    assert wide == pytest.approx(0.4 * (1 + 1 / 2 + 1 / 3 + 1 / 4), rel=1e-12)


def test_laplace_release_reports_the_clipped_expected_error() -> None:
    g = np.random.default_rng(9)
    rel = laplace_release(WL, X, 1.0, rng=g)
    assert rel.details["clip"] is True
    f = WL.answers(X)
    errs = [np.abs(laplace_release(WL, X, 1.0, rng=g).answers - f).max() for _ in range(1200)]
    se = np.std(errs) / np.sqrt(len(errs))
    assert rel.expected_error is not None
    assert abs(np.mean(errs) - rel.expected_error) < 4 * se + 2 * rel.details["lattice_step"]
    assert rel.expected_error < 0.4 * (1 + 1 / 2 + 1 / 3 + 1 / 4)


def test_identity_noise_scale_matches_its_error() -> None:
    """Unprojected identity on 1-way marginals of {0,1}^2: answer q = (c_a + c_b + Z_a + Z_b)/n
    exactly, so its variance is 2 * Var(DLap(t)) / n^2 (checked by simulation)."""
    g = np.random.default_rng(10)
    t = count_noise_scale(1.0)
    a = math.exp(-1 / t)
    var_dlap = 2 * a / (1 - a) ** 2
    f = WL.answers(X)
    wide = Workload(WL.matrix * 0.5)  # range [0, 0.5]: clipping rarely binds at n = 1e4
    big = Dataset.from_histogram(X.counts * 1000)
    d = np.array([identity_release(wide, big, 1.0, projection="none", rng=g).answers
                  - wide.answers(big) for _ in range(2500)])
    assert np.var(d[:, 0]) == pytest.approx(0.25 * 2 * var_dlap / big.n ** 2, rel=0.15)
    assert f.shape == (4,)


def test_identity_validates() -> None:
    with pytest.raises(ValidationError, match="'projection'"):
        identity_release(WL, X, 1.0, projection="l2")
    with pytest.raises(ValidationError, match="'eps'"):
        identity_release(WL, X, 0.0)
    rel = identity_release(WL, X, 2.0, rng=np.random.default_rng(0))
    assert rel.privacy.eps == 2.0
    assert rel.expected_error is None
    assert rel.details["cells"] == 4
