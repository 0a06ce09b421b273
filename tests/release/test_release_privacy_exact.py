"""Exact pure-DP check: the whole output law for every neighbouring pair of databases.

Neighbours differ in one row (replace-one); the transcript law depends on the database
only through its histogram, so neighbouring histograms differ by moving one unit of count.
The released answer is a function of the class transcript, so checking the transcript law
checks the answers too (post-processing) - we also check the decoded-answer law.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.release.baselines import blr_release, pmw_parameters
from dpsieve.release.data import Dataset, Domain, Workload
from dpsieve.release.envelope import enumerate_envelope
from dpsieve.release.groups import enumerate_histograms, group_histograms
from dpsieve.release.mechanism import center_only_groups, is_trivial_regime
from dpsieve.release.transcript import PMWParams, collapse, decode
from dpsieve.release.workloads import marginals, range_1d


def _neighbour_pairs(n: int, T: int) -> list[tuple[np.ndarray, np.ndarray]]:
    hs = enumerate_histograms(n, T)
    pairs = []
    for h in hs:
        for i, j in itertools.permutations(range(T), 2):
            if h[i] > 0:
                h2 = h.copy()
                h2[i] -= 1
                h2[j] += 1
                pairs.append((h, h2))
    return pairs


def _envelope_law(wl: Workload, h: np.ndarray, p: PMWParams, eps: float, sel: int,
                  plain: bool = False) -> np.ndarray:
    cw = collapse(wl)
    data = Dataset.from_histogram(h)
    groups = center_only_groups(cw, data) if plain else group_histograms(cw, cw.counts(data))
    res = enumerate_envelope(cw, groups, p, eps, selections=sel, keep_all=True, sample=False)
    assert res.log_masses is not None
    return res.log_masses


def _max_log_ratio(wl: Workload, n: int, p: PMWParams, eps: float, sel: int,
                   plain: bool = False) -> float:
    laws: dict[bytes, np.ndarray] = {}
    worst = 0.0
    for h, h2 in _neighbour_pairs(n, wl.universe_size):
        for hh in (h, h2):
            if hh.tobytes() not in laws:
                laws[hh.tobytes()] = _envelope_law(wl, hh, p, eps, sel, plain)
        worst = max(worst, float(np.abs(laws[h.tobytes()] - laws[h2.tobytes()]).max()))
    return worst


INSTANCES = [
    (marginals(Domain.from_sizes([2, 2]), 1), 3, PMWParams(3, 6.0, 0.8), 1.0),
    (marginals(Domain.from_sizes([2, 2]), 1), 4, PMWParams(4, 12.0, 1.0), 0.5),
    (range_1d(3), 3, PMWParams(3, 9.0, 0.7), 1.0),
    (marginals(Domain.from_sizes([3]), 1), 4, PMWParams(3, 20.0, 0.5), 2.0),
]


@pytest.mark.parametrize(("wl", "n", "p", "eps"), INSTANCES)
def test_envelope_is_pure_eps_dp_and_plain_pmw_is_not(wl: Workload, n: int, p: PMWParams,
                                                      eps: float) -> None:
    sel = p.rounds - 1
    assert not is_trivial_regime(p, eps, n, wl.query_range, sel)
    env = _max_log_ratio(wl, n, p, eps, sel)
    assert env <= eps + 1e-9
    assert env > 0.05 * eps  # the check can fail: the law does move between neighbours
    plain = _max_log_ratio(wl, n, p, eps, sel, plain=True)
    assert plain > eps  # plain PMW at the same parameters violates eps-DP


def test_full_variant_is_pure_eps_dp() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    p = PMWParams(2, 10.0, 0.9)
    assert _max_log_ratio(wl, 3, p, 1.0, 2) <= 1.0 + 1e-9


def test_decoded_answer_law_is_pure_eps_dp() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    p = PMWParams(3, 6.0, 0.8)
    cw = collapse(wl)
    Kc = cw.signed_classes

    def answer_law(h: np.ndarray) -> dict[tuple[float, ...], float]:
        lm = _envelope_law(wl, h, p, 1.0, 2)
        out: dict[tuple[float, ...], float] = {}
        for code, v in enumerate(lm):
            sel = np.array([code // Kc, code % Kc], dtype=np.int64)
            key = tuple(np.round(decode(cw, sel, 3, 0.8), 12))
            out[key] = out.get(key, 0.0) + math.exp(v)
        return out

    worst = 0.0
    for h, h2 in _neighbour_pairs(3, 4):
        a, b = answer_law(h), answer_law(h2)
        assert a.keys() == b.keys()
        worst = max(worst, max(abs(math.log(a[o] / b[o])) for o in a))
    assert worst <= 1.0 + 1e-9


def test_trivial_regime_envelope_equals_pmw() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    n, eps, sel = 4, 1.0, 3
    p = PMWParams(4, eps * n / (4 * sel * wl.query_range), 0.7)
    assert is_trivial_regime(p, eps, n, wl.query_range, sel)
    for h in enumerate_histograms(n, 4)[::7]:
        np.testing.assert_allclose(_envelope_law(wl, h, p, eps, sel),
                                   _envelope_law(wl, h, p, eps, sel, plain=True), atol=1e-12)


def test_pure_pmw_baseline_is_eps_dp() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    p = pmw_parameters(4, 3, 1.0, wl.query_range, 3)
    r = _max_log_ratio(wl, 3, p, 1.0, 2, plain=True)
    assert 0.3 < r <= 1.0 + 1e-9


def test_blr_output_law_is_eps_dp() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    eps, n = 1.0, 3
    cw = collapse(wl)
    H = enumerate_histograms(2, cw.size)
    cand = (H @ cw.columns.T) / 2

    def law(h: np.ndarray) -> np.ndarray:
        f = wl.answers(Dataset.from_histogram(h))
        loss = np.abs(cand - f).max(axis=1)
        logits = -eps * loss * n / (2 * wl.query_range)
        return logits - np.logaddexp.reduce(logits)

    worst = max(float(np.abs(law(a) - law(b)).max()) for a, b in _neighbour_pairs(n, 4))
    assert 0.1 < worst <= eps + 1e-12
    # the mechanism's exact expected error agrees with this law
    h = np.array([2, 0, 1, 0])
    rel = blr_release(wl, Dataset.from_histogram(h), eps, rows=2, rng=np.random.default_rng(1))
    f = wl.answers(Dataset.from_histogram(h))
    assert rel.expected_error == pytest.approx(
        float(np.exp(law(h)) @ np.abs(cand - f).max(axis=1)), rel=1e-12)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**31), st.floats(0.5, 40.0), st.floats(0.05, 1.0),
       st.floats(0.2, 3.0), st.integers(1, 3))
def test_random_real_valued_workloads_are_eps_dp(seed: int, eta: float, gamma: float,
                                                 eps: float, sel: int) -> None:
    """Queries with arbitrary values in [-1, 1] (not counting queries), random parameters."""
    rng = np.random.default_rng(seed)
    wl = Workload(np.round(rng.uniform(-1, 1, size=(2, 3)), 3))
    p = PMWParams(sel + 1, eta, gamma)
    env = _max_log_ratio(wl, 3, p, eps, sel)
    assert env <= eps + 1e-9
    if is_trivial_regime(p, eps, 3, wl.query_range, sel):
        h = np.array([1, 2, 0])
        np.testing.assert_allclose(_envelope_law(wl, h, p, eps, sel),
                                   _envelope_law(wl, h, p, eps, sel, plain=True), atol=1e-12)
