"""Permute-and-flip's exact output law (dpsieve.mechanisms.pf_law), the analysis function the
benchmarks and tests/queries/test_auto_exact.py use: against closed forms, an exact
enumeration in rationals over every order (also in test_auto_exact), and its refusals."""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.errors import ValidationError
from dpsieve.mechanisms.pf_law import (
    MAX_CANDIDATES,
    permute_and_flip_law,
    permute_and_flip_log_law,
)


def _enumerated(p: list[Fraction]) -> list[Fraction]:
    """The law by enumerating every visiting order (exact rationals, coins p_r)."""
    n = len(p)
    out = [Fraction(0)] * n
    perms = list(itertools.permutations(range(n)))
    for order in perms:
        fail = Fraction(1)
        for r in order:
            out[r] += fail * p[r]
            fail *= 1 - p[r]
    return [x / len(perms) for x in out]


def test_two_candidates_closed_form() -> None:
    """n = 2, gaps (0, g): the worse is released only when visited first and its coin
    comes up: P = e^-g / 2."""
    for g in (0.0, 0.3, 5.0, 700.0):
        lp = permute_and_flip_log_law([0.0, g])
        assert lp[1] == pytest.approx(-g - math.log(2), rel=1e-15, abs=1e-15)
        assert math.exp(lp[0]) == pytest.approx(1 - math.exp(-g) / 2, rel=1e-14)
    assert permute_and_flip_log_law([0.0]).tolist() == [0.0]


def test_against_enumeration_with_dyadic_coins() -> None:
    """Gaps log 2^j: coins 2^-j exactly, so the enumeration is exact rationals; the floats
    agree to a few ulps per candidate."""
    rng = np.random.default_rng(3)
    for _ in range(15):
        n = int(rng.integers(2, 7))
        js = [int(j) for j in rng.integers(0, 6, n)]
        js[int(rng.integers(0, n))] = 0
        exact = _enumerated([Fraction(1, 2**j) for j in js])
        got = np.exp(permute_and_flip_log_law([j * math.log(2) for j in js]))
        for a, b in zip(exact, got.tolist(), strict=True):
            assert b == pytest.approx(float(a), rel=1e-13)
        assert math.fsum(got) == pytest.approx(1.0, abs=1e-14)


def test_the_normalised_law_of_scores() -> None:
    """Scores (3, 1, 3) at coef 0.5: ties are best (gap 0) and the law is symmetric."""
    p = permute_and_flip_law([3.0, 1.0, 3.0], 0.5)
    assert p[0] == pytest.approx(p[2], rel=1e-15)
    exact = _enumerated([Fraction(1), Fraction(math.exp(-1.0)), Fraction(1)])
    assert p.tolist() == pytest.approx([float(x) for x in exact], rel=1e-13)
    assert math.fsum(p) == pytest.approx(1.0, abs=1e-15)
    never = np.exp(permute_and_flip_log_law([0.0, math.inf, 1.0]))
    assert never[1] == 0.0


@pytest.mark.parametrize("bad", [[], [1.0, 2.0], [0.0, -1.0], [0.0, math.nan],
                                 [0.0] * (MAX_CANDIDATES + 1)])
def test_bad_gaps_are_refused_naming_the_parameter(bad: list[float]) -> None:
    with pytest.raises(ValidationError) as e:
        permute_and_flip_log_law(bad)
    assert e.value.parameter == "gaps"
    with pytest.raises(ValidationError):
        permute_and_flip_law([1.0], 0.0)
