"""The extremes suite for the training filters (issue 17): adaptive runs of DP-SGD steps and
of per-record full-batch steps with subnormal, tiny, ordinary, huge and overflowing noise,
norms and rates; what was admitted, checked by an independent oracle, never exceeds the
budget.

* Per-record filters (``per_record_gdp``, ``per_record_rdp``): record i's steps are exactly
  G_{c_t/s_t}; its exact sum of (c_t/s_t)^2 over the steps that charged it (``Fraction``)
  is at most mu^2 (GDP), alpha/2 times it at most the RDP budget; for ``for_target``
  budgets the exact hockey-stick delta(eps) of G_{sqrt(sum)} (mpmath, 50 digits) is at most
  delta. A record left out of a step is not charged (its spent row unchanged).
* The training filter (``training_pld``): Poisson-subsampled Gaussian compositions have no
  closed form, so the oracle is dp_accounting's PLD (connect-the-dots, pessimistic, 1e-4
  grid; an independent implementation, test-only dependency) of what was admitted, in both
  directions: its delta at the target eps is at most the target delta. Each admitted step is
  given its own (sigma, rate), sigma capped at the kind cap (less noise only dominates).

Each kind has its cases in ``CASES`` below; tests/filters/test_extremes.py checks that every
registered filter kind has a case here or there.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pytest
from exact_oracle import DPS, h_gauss, mpq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsieve.filters import filter_from_json
from dpsieve.filters.per_record import PerRecordGDPFilter, PerRecordRDPFilter, RecordStep
from dpsieve.filters.training import SIGMA_CAP, TrainingFilter
from dpsieve.mechanisms import DPSGDStep

NOISE = [5e-324, 1e-300, 1e-9, 0.05, 0.5, 1.0, 3.0, 1e6, 1e300, 1.7976931348623157e308]
NORMS = [0.0, 5e-324, 1e-310, 1e-300, 1e-9, 0.05, 0.3, 1.0, 2.0, 1e6, 1e300, 1.7e308]
N_RECORDS = 4

# -- per-record filters ----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordCase:
    """A per-record filter, its exact bound on a record's sum of (c/s)^2, and an optional
    target (eps, delta) each record must meet."""

    build: Callable[[], Any]
    limit: Callable[[Any], Fraction]  # the largest allowed sum of (c/s)^2
    target: tuple[float, float] | None = None


def _gdp_limit(f: PerRecordGDPFilter) -> Fraction:
    return Fraction(f.mu) ** 2


def _rdp_limit(f: PerRecordRDPFilter) -> Fraction:
    # alpha/2 * sum <= budget  <=>  sum <= 2 budget / alpha
    return 2 * Fraction(json.loads(f.to_json())["state"]["budget"]) / Fraction(f.order)


RECORD_CASES: dict[str, list[RecordCase]] = {
    "per_record_gdp": [
        RecordCase(lambda m=m: PerRecordGDPFilter(N_RECORDS, m), _gdp_limit)
        for m in (5e-324, 1e-150, 1.0, 1e150)
    ]
    + [
        RecordCase(
            lambda: PerRecordGDPFilter.for_target(N_RECORDS, 1.0, 1e-5), _gdp_limit, (1.0, 1e-5)
        )
    ],
    "per_record_rdp": [
        RecordCase(lambda a=a, b=b: PerRecordRDPFilter(N_RECORDS, a, b), _rdp_limit)
        for a, b in ((1.0000001, 1e-300), (2.0, 1.0), (64.0, 1e300))
    ]
    + [
        RecordCase(
            lambda: PerRecordRDPFilter.for_target(N_RECORDS, 1.0, 1e-5), _rdp_limit, (1.0, 1e-5)
        )
    ],
}


@st.composite
def record_run(draw: st.DrawFn, case: RecordCase) -> tuple[Any, list[Fraction]]:
    """An adaptive run: each record asks for more after it was charged, less after it was
    left out. Returns the filter and each record's exact charged sum of (c/s)^2."""
    f = case.build()
    sums = [Fraction(0)] * N_RECORDS
    level = [draw(st.integers(0, len(NORMS) - 1)) for _ in range(N_RECORDS)]
    for t in range(draw(st.integers(1, 8))):
        s = draw(st.sampled_from(NOISE))
        norms = np.array([NORMS[lv] for lv in level])
        before = f.remaining_private().copy()
        clipped = isinstance(f, PerRecordGDPFilter) and draw(st.booleans())
        if clipped:  # the training loop's pattern: clip to what each budget still pays for
            norms = np.minimum(norms, f.allowance(s))
        if draw(st.booleans()):
            mask = f.step(s, norms)
        else:  # the ledger's path: a query, then the decision
            q = RecordStep(s, norms, expected_step=f.steps)
            mask = f.mask_for(q)
            d = f.try_spend(q)
            assert d.admitted
            # public numbers only
            assert d.remaining.to_dict() == {"records": N_RECORDS, "steps": t + 1}
        after = f.remaining_private()
        assert f.steps == t + 1
        if clipped:
            # the allowance is always paid for (a zero norm contributes nothing either way)
            assert mask[norms > 0].all(), (s, norms, before)
        for i in range(N_RECORDS):
            if mask[i]:
                sums[i] += (Fraction(norms[i]) / Fraction(s)) ** 2
                level[i] = draw(st.integers(level[i], len(NORMS) - 1))
            else:
                assert np.array_equal(after[i], before[i])  # left out: not charged
                level[i] = draw(st.integers(0, level[i]))
    # a stored state rebuilds to the same filter
    assert filter_from_json(f.to_json()).to_json() == f.to_json()
    return f, sums


def _delta_of_gauss(mu2: Fraction, eps: float) -> mpmath.mpf:
    with mpmath.workdps(DPS):
        return h_gauss(mpmath.sqrt(mpq(mu2)), mpmath.exp(mpq(eps)))


RECORD_ALL = [(k, i) for k, cs in RECORD_CASES.items() for i in range(len(cs))]


@pytest.mark.parametrize(("kind", "i"), RECORD_ALL, ids=[f"{k}-{i}" for k, i in RECORD_ALL])
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_per_record_admitted_never_exceed_the_budget(
    kind: str, i: int, data: st.DataObject
) -> None:
    case = RECORD_CASES[kind][i]
    f, sums = data.draw(record_run(case))
    limit = case.limit(f)
    for s in sums:
        assert s <= limit, (float(s), float(limit))
        if case.target is not None:
            eps, delta = case.target
            assert _delta_of_gauss(s, eps) <= mpq(delta)


def test_per_record_cases_admit_something() -> None:
    """Not vacuous: every non-degenerate case charges an ordinary record."""
    for kind, cases in RECORD_CASES.items():
        assert any(c.build().step(1.0, np.full(N_RECORDS, 0.01)).all() for c in cases), kind


# -- the training filter ---------------------------------------------------------------------

SIGMAS = [5e-324, 1e-9, 1.0, 2.0, 2.05, 2.5, 4.0, 50.0, 1e6, 1e308]
RATES = [2.0**-60, 1e-3, 0.1, 0.3, 0.5, 0.7, 1.0]
EPS, DELTA = 2.0, 1e-5


@dataclass(frozen=True)
class TrainingCase:
    build: Callable[[], TrainingFilter]


TRAINING_CASES: dict[str, list[TrainingCase]] = {
    "training_pld": [
        TrainingCase(lambda: TrainingFilter(EPS, DELTA, sigma=2.0, rate=0.5)),
        TrainingCase(lambda: TrainingFilter(EPS, DELTA, sigma=2.0, rate=0.5, reserve=0.0)),
        TrainingCase(lambda: TrainingFilter(EPS, DELTA, sigma=50.0, rate=1e-3, exchange_steps=8)),
    ]
}
_BUILT: dict[tuple[str, int], str] = {}


def _fresh(kind: str, i: int) -> TrainingFilter:
    """A fresh filter of the case (built once, then rebuilt from its stored state)."""
    if (kind, i) not in _BUILT:
        _BUILT[(kind, i)] = TRAINING_CASES[kind][i].build().to_json()
    f = filter_from_json(_BUILT[(kind, i)])
    assert isinstance(f, TrainingFilter)
    return f


@st.composite
def training_run(draw: st.DrawFn, kind: str, i: int) -> Counter[tuple[float, float]]:
    """An adaptive run of DP-SGD steps; returns the admitted (sigma, rate) with counts."""
    f = _fresh(kind, i)
    admitted: Counter[tuple[float, float]] = Counter()
    level = draw(st.integers(0, len(SIGMAS) - 1))
    for _ in range(draw(st.integers(1, 10))):
        s = SIGMAS[level]
        r = draw(st.sampled_from(RATES))
        before = f.to_json()
        d = f.try_spend(DPSGDStep(s, r))
        if d.admitted:
            admitted[(min(s, SIGMA_CAP), r)] += 1
            level = draw(st.integers(max(0, level - 1), len(SIGMAS) - 1))
        else:
            assert f.to_json() == before
            level = draw(st.integers(0, len(SIGMAS) - 1))
    return admitted


def _dp_accounting_delta(admitted: Counter[tuple[float, float]], eps: float) -> float:
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    total = None
    for (s, r), n in sorted(admitted.items()):
        p = dpa.from_gaussian_mechanism(
            s, sampling_prob=r, value_discretization_interval=1e-4
        ).self_compose(n)
        total = p if total is None else total.compose(p)
    return 0.0 if total is None else float(total.get_delta_for_epsilon(eps))


TRAINING_ALL = [(k, i) for k, cs in TRAINING_CASES.items() for i in range(len(cs))]


@pytest.mark.parametrize(("kind", "i"), TRAINING_ALL, ids=[f"{k}-{i}" for k, i in TRAINING_ALL])
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_training_admitted_never_exceed_the_target(kind: str, i: int, data: st.DataObject) -> None:
    admitted = data.draw(training_run(kind, i))
    assert all(r < 1.0 for _, r in admitted)  # full-batch steps belong to GDP filters
    assert _dp_accounting_delta(admitted, EPS) <= DELTA


def test_training_reference_schedule_is_tight() -> None:
    """Not vacuous: a fixed schedule at the reference is admitted up to the budget, and by
    the oracle one more step would miss the target."""
    f = _fresh("training_pld", 0)
    n = 0
    while f.try_spend(DPSGDStep(2.0, 0.5)).admitted:
        n += 1
    assert n >= 1
    assert _dp_accounting_delta(Counter({(2.0, 0.5): n}), EPS) <= DELTA
    assert _dp_accounting_delta(Counter({(2.0, 0.5): n + 1}), EPS) > DELTA


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "i"), RECORD_ALL, ids=[f"{k}-{i}" for k, i in RECORD_ALL])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_per_record_admitted_never_exceed_the_budget_long(
    kind: str, i: int, data: st.DataObject
) -> None:
    """The same property with more adaptive runs per case (the slow suite)."""
    test_per_record_admitted_never_exceed_the_budget.hypothesis.inner_test(kind, i, data)  # type: ignore[attr-defined]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "i"), TRAINING_ALL, ids=[f"{k}-{i}" for k, i in TRAINING_ALL])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_training_admitted_never_exceed_the_target_long(
    kind: str, i: int, data: st.DataObject
) -> None:
    """The same property with more adaptive runs per case (the slow suite)."""
    test_training_admitted_never_exceed_the_target.hypothesis.inner_test(kind, i, data)  # type: ignore[attr-defined]
