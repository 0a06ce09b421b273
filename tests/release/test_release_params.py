"""Theorem-parameter calculator and the practical rule."""

from __future__ import annotations

import math

import pytest

from dpsieve.errors import ValidationError
from dpsieve.release import (
    THEOREM_CONSTANT,
    auto_rounds,
    enumeration_cost,
    practical_parameters,
    smallest_nontrivial_n,
    theorem_parameters,
)


def test_theorem_branch_threshold_matches_section_8() -> None:
    n0 = smallest_nontrivial_n(2, 1, 1.0)
    assert 4e6 < n0 < 5e6  # notes: n >= 4e6 even for T = 2, k = 1
    assert not theorem_parameters(2, 1, n0 - 1, 1.0).nontrivial
    tp = theorem_parameters(2, 1, n0, 1.0)
    assert tp.nontrivial
    assert tp.alpha is not None
    assert tp.rounds is not None
    assert tp.alpha <= 1.0
    # (8.3): J = ceil(16 L_D / alpha^2), eta = 128 L_Q / alpha, gamma = alpha / 4
    assert tp.rounds == math.ceil(16 * math.log(4) / tp.alpha**2)
    assert tp.eta == pytest.approx(128 * math.log(2) / tp.alpha)
    assert tp.gamma == pytest.approx(tp.alpha / 4)
    # the envelope growth condition (8.5) holds at these choices
    assert 2 * tp.rounds * tp.eta**2 / n0**2 <= 2**-20 / math.log(2**2 + 1) * 1.0 + 1e-15


def test_bound_is_c_min_one_tau() -> None:
    tp = theorem_parameters(16, 8, 100, 1.0)
    assert tp.bound == pytest.approx(THEOREM_CONSTANT * min(1.0, tp.tau))
    assert not tp.bound_below_one
    big = theorem_parameters(2, 1, 10**13, 1.0)
    assert big.bound_below_one  # C tau < 1 only past n ~ 1e12


def test_practical_parameters_and_validation() -> None:
    p = practical_parameters(4, 10, 1.0, 9)
    assert p.gamma == pytest.approx(min(1.0, 2 * math.sqrt(2 * math.log(4) / 9)))
    assert p.eta == pytest.approx(2 * 10 / math.sqrt(9 * math.log(17)))
    with pytest.raises(ValidationError, match="'eps'"):
        practical_parameters(4, 10, float("nan"), 9)
    with pytest.raises(ValidationError, match="'rounds'"):
        practical_parameters(4, 10, 1.0, 0)


def test_auto_rounds_is_largest_within_budget() -> None:
    J = auto_rounds(4, 121, 2e8)
    assert enumeration_cost(4, J - 1, 121) <= 2e8 < enumeration_cost(4, J, 121)


def test_worst_case_expected_error_dominates_every_database() -> None:
    import numpy as np

    from dpsieve.release import (
        Dataset,
        Domain,
        PMWParams,
        envelope_release,
        marginals,
        worst_case_expected_error,
    )
    from dpsieve.release.groups import enumerate_histograms

    wl = marginals(Domain.from_sizes([2, 2]), 1)
    p = PMWParams(3, 6.0, 0.8)
    worst = worst_case_expected_error(wl, 3, 1.0, p)
    errs = [envelope_release(wl, Dataset.from_histogram(h), 1.0, p, compute_error=True,
                             rng=np.random.default_rng(0)).expected_error
            for h in enumerate_histograms(3, 4)]
    assert worst == pytest.approx(max(e for e in errs if e is not None), rel=1e-12)
