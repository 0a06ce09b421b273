"""Algebraic laws of the envelope (hypothesis) and the plain PMW sampler's law (slow)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dpsieve.release import (
    Dataset,
    Domain,
    PMWParams,
    collapse,
    enumerate_envelope,
    group_histograms,
    marginals,
    random_counting,
)
from dpsieve.release.mechanism import center_only_groups
from dpsieve.release.transcript import sample_transcript

WL = marginals(Domain.from_sizes([2, 2]), 1)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=6), st.floats(0.5, 20.0),
       st.floats(0.1, 1.0), st.floats(0.1, 3.0), st.integers(0, 3))
def test_normaliser_bounds_and_monotone_in_eps(rows: list[int], eta: float, gamma: float,
                                               eps: float, sel: int) -> None:
    cw = collapse(WL)
    x = Dataset.from_rows(rows, 4)
    g = group_histograms(cw, cw.counts(x))
    p = PMWParams(max(sel, 1), eta, gamma)
    z1 = enumerate_envelope(cw, g, p, eps, selections=sel, sample=False).log_z
    z2 = enumerate_envelope(cw, g, p, 2 * eps, selections=sel, sample=False).log_z
    w = float(np.log(np.exp(-eps / 2 * g.distance).sum()))
    assert -1e-12 <= z2 <= z1 + 1e-12  # 1 <= Z, and Z decreases as eps grows
    assert z1 <= w + 1e-12  # Z <= sum_g e^{-lambda D_g} (each p_g sums to one)


@settings(max_examples=8, deadline=None)
@given(st.integers(1, 3), st.integers(0, 10_000))
def test_drop_last_mass_is_dominated_by_full(sel: int, seed: int) -> None:
    # p~'(w') <= sum_s p~(w', s)  (docs/proofs/release.md, section 4)
    wl = random_counting(5, 2, seed=seed % 7)
    cw = collapse(wl)
    rng = np.random.default_rng(seed)
    x = Dataset.from_histogram(rng.multinomial(3, np.full(5, 0.2)))
    g = group_histograms(cw, cw.counts(x))
    p = PMWParams(sel + 1, 8.0, 0.6)
    short = enumerate_envelope(cw, g, p, 1.0, selections=sel, keep_all=True, sample=False)
    full = enumerate_envelope(cw, g, p, 1.0, selections=sel + 1, keep_all=True, sample=False)
    assert short.log_masses is not None
    assert full.log_masses is not None
    K = cw.signed_classes
    un_short = short.log_masses + short.log_z
    un_full = (full.log_masses + full.log_z).reshape(-1, K)
    assert np.all(un_short <= np.logaddexp.reduce(un_full, axis=1) + 1e-12)


@pytest.mark.slow
def test_plain_pmw_sampler_matches_exact_law() -> None:
    cw = collapse(WL)
    x = Dataset.from_rows([0, 0, 3, 1], 4)
    p = PMWParams(3, 6.0, 0.8)
    exact = enumerate_envelope(cw, center_only_groups(cw, x), p, 1.0, selections=2,
                               keep_all=True, sample=False)
    assert exact.log_masses is not None
    rng = np.random.default_rng(21)
    K = cw.signed_classes
    counts = np.zeros(K * K)
    target = cw.target(cw.counts(x), x.n)
    for _ in range(5000):
        s = sample_transcript(cw, target, 2, p.eta, p.gamma, rng)
        counts[s[0] * K + s[1]] += 1
    probs = np.exp(exact.log_masses)
    assert stats.chisquare(counts, probs * counts.sum()).pvalue > 1e-3
