"""Rejection sampler: fixed budget, refusal accounting, exact law (slow chi-square)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpsieve.release import (
    Dataset,
    Domain,
    PMWParams,
    RejectionBudgetExceededError,
    collapse,
    enumerate_envelope,
    envelope_release,
    group_histograms,
    marginals,
    sample_envelope_rejection,
)
from dpsieve.release.rejection import budget_for, refusal_delta, weight_bound

WL = marginals(Domain.from_sizes([2, 2]), 1)
X = Dataset.from_rows([0, 0, 3, 1], 4)
P = PMWParams(3, 6.0, 0.8)


def test_weight_bound_dominates_every_dataset() -> None:
    cw = collapse(WL)
    from dpsieve.release.groups import enumerate_histograms

    for h in enumerate_histograms(4, 4):
        g = group_histograms(cw, h)
        w = float(np.exp(-0.5 * g.distance).sum())
        assert w <= weight_bound(4, cw.size, g.size, 1.0) + 1e-12


def test_budget_and_delta() -> None:
    b = budget_for(1e-6, 50.0)
    assert (1 - 1 / 50) ** b <= 1e-6 < (1 - 1 / 50) ** (b - 1)
    assert refusal_delta(1.0, b, 50.0) == pytest.approx((1 + math.e) * (1 - 1 / 50) ** b)


def test_refusal_raises_clearly() -> None:
    cw = collapse(WL)
    g = group_histograms(cw, cw.counts(X))
    errors: list[RejectionBudgetExceededError] = []
    for seed in range(30):
        try:
            sample_envelope_rejection(cw, g, P, 1.0, n=4, selections=2, budget=1,
                                      rng=np.random.default_rng(seed))
        except RejectionBudgetExceededError as e:
            errors.append(e)
    assert 0 < len(errors) < 30
    assert all(e.budget == 1 for e in errors)
    assert all(0 < e.failure_bound < 1 for e in errors)


def test_rejection_release_reports_approx_dp() -> None:
    rel = envelope_release(WL, X, 1.0, P, method="rejection", rejection_delta=1e-6,
                           rng=np.random.default_rng(0))
    assert rel.privacy.to_dict()["type"] == "approx"
    assert 0 < rel.details["refusal_delta"] <= (1 + math.e) * 1e-6


def _chi_square(counts: np.ndarray, probs: np.ndarray) -> float:
    keep = probs * counts.sum() >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(probs[keep], probs[~keep].sum()) * counts.sum()
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return float(stats.chisquare(obs, exp).pvalue)


@pytest.mark.slow
def test_rejection_sampler_matches_exact_law() -> None:
    cw = collapse(WL)
    g = group_histograms(cw, cw.counts(X))
    exact = enumerate_envelope(cw, g, P, 1.0, selections=2, keep_all=True, sample=False)
    assert exact.log_masses is not None
    rng = np.random.default_rng(11)
    counts = np.zeros(cw.signed_classes**2)
    for _ in range(6000):
        s = sample_envelope_rejection(cw, g, P, 1.0, n=4, selections=2, budget=60, rng=rng)
        counts[s.selections[0] * cw.signed_classes + s.selections[1]] += 1
    assert _chi_square(counts, np.exp(exact.log_masses)) > 1e-3


@pytest.mark.slow
def test_gumbel_max_enumeration_sampler_matches_exact_law() -> None:
    cw = collapse(WL)
    g = group_histograms(cw, cw.counts(X))
    exact = enumerate_envelope(cw, g, P, 1.0, selections=2, keep_all=True, sample=False)
    assert exact.log_masses is not None
    rng = np.random.default_rng(12)
    counts = np.zeros(cw.signed_classes**2)
    for _ in range(6000):
        r = enumerate_envelope(cw, g, P, 1.0, selections=2, rng=rng)
        assert r.selections is not None
        counts[r.selections[0] * cw.signed_classes + r.selections[1]] += 1
    assert _chi_square(counts, np.exp(exact.log_masses)) > 1e-3


@pytest.mark.slow
def test_secure_default_sampler_matches_exact_law() -> None:
    cw = collapse(WL)
    g = group_histograms(cw, cw.counts(X))
    exact = enumerate_envelope(cw, g, P, 1.0, selections=2, keep_all=True, sample=False)
    assert exact.log_masses is not None
    counts = np.zeros(cw.signed_classes**2)
    for _ in range(3000):
        r = enumerate_envelope(cw, g, P, 1.0, selections=2)  # rng=None: os.urandom
        assert r.selections is not None
        counts[r.selections[0] * cw.signed_classes + r.selections[1]] += 1
    assert _chi_square(counts, np.exp(exact.log_masses)) > 1e-3
