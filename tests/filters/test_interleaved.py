"""Interleaved adversaries over children (dpsieve.filters.interleaved): exact worst cases on
small hidden-state models, against budgets and against the composition of the children's
own worst cases (the concurrent composition theorem, docs/proofs/interactive.md §5)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.accounting.pld import PLD
from dpsieve.errors import ValidationError
from dpsieve.filters import PureDPFilter
from dpsieve.filters.interleaved import HiddenChild, audit_interleaved, worst_curve

XS = np.geomspace(0.05, 50.0, 61)


def rr(eps: float) -> np.ndarray:
    """2x2 randomized response: row = true bit, column = answer."""
    p = 1.0 / (1.0 + math.exp(-eps))
    return np.array([[p, 1 - p], [1 - p, p]])


def h_pure(eps: float):  # type: ignore[no-untyped-def]
    """Exact hockey-stick curve of R_eps."""
    p, q = 1 / (1 + math.exp(-eps)), 1 / (1 + math.exp(eps))
    return lambda x: p * np.maximum(1 - x * math.exp(-eps), 0) + q * np.maximum(
        1 - x * math.exp(eps), 0)


def bit_child(eps0: float, answer_eps: tuple[float, ...], questions: int,
              declared: float) -> HiddenChild:
    """A hidden bit h = RR_eps0(secret) (secret 0 on D1, 1 on D2); question i answers h
    through a fresh RR(answer_eps[i]). Its view is a post-processing of h: eps0-DP."""
    prior0 = rr(eps0)[0]
    prior1 = rr(eps0)[1]
    ans = np.stack([rr(e) for e in answer_eps])  # [question, hidden, answer]
    return HiddenChild((prior0, prior1), (ans, ans), PLD.pure_dp(declared), questions)


def threshold_child(shift: int) -> HiddenChild:
    """A sparse-vector-like child: hidden threshold noise r in {0, 1, 2} (same law in both
    worlds); question q compares a value v_q (moved by `shift` on D2) with r + noise."""
    prior = np.array([0.25, 0.5, 0.25])
    vals = (np.array([0, 1]), np.array([0, 1]) + shift)
    tables = []
    for v in vals:
        t = np.empty((2, 3, 2))
        for q in range(2):
            for r in range(3):
                up = 1.0 / (1.0 + math.exp(-(v[q] - r)))
                t[q, r] = (1 - up, up)
        tables.append(t)
    return HiddenChild((prior, prior), (tables[0], tables[1]), None, 2)


def test_children_under_a_pure_filter_stay_within_the_budget() -> None:
    child = bit_child(0.5, (1.0, 3.0), 2, 0.5)
    audit = audit_interleaved([child], h_pure(1.0), lambda: PureDPFilter(1.0), 6, XS)
    assert audit.within
    assert audit.gap > -0.05  # two children asked sharply come close to R_1


def test_an_under_declared_child_is_caught() -> None:
    leaky = bit_child(30.0, (1.0, 1.0), 2, 1.0)  # h = secret; two answers: ~2-DP, declares 1
    audit = audit_interleaved([leaky], h_pure(2.0), lambda: PureDPFilter(2.0), 6, XS)
    assert not audit.within
    assert audit.gap > 0.01


def test_interleaving_is_bounded_by_the_composition_of_the_children() -> None:
    """Concurrent composition, exactly on models: the worst interleaving of two children is
    below the composition of each child's own worst case, and at least the worst
    sequential order's."""
    a, b = threshold_child(1), bit_child(0.7, (0.8, 2.0), 2, 0.7)
    one = [worst_curve([c], XS, 2, opened=[0]) for c in (a, b)]
    composed = PLD.from_hockey_stick(XS, one[0]).compose(PLD.from_hockey_stick(XS, one[1]))
    both = worst_curve([a, b], XS, 4, opened=[0, 1])
    assert np.all(both <= composed.hockey_stick(XS) + 1e-9)
    assert np.all(both >= np.maximum(one[0], one[1]) - 1e-12)


def test_models_are_validated() -> None:
    with pytest.raises(ValidationError, match="'answers'"):
        HiddenChild((np.array([0.5, 0.5]),) * 2, (np.ones((1, 2, 2)),) * 2)


def test_a_filter_that_admits_too_much_is_caught() -> None:
    """A filter of 1.5 audited against a budget of 1: the third child it admits shows."""
    child = bit_child(0.5, (3.0,), 1, 0.5)
    audit = audit_interleaved([child], h_pure(1.0), lambda: PureDPFilter(1.5), 6, XS)
    assert not audit.within
