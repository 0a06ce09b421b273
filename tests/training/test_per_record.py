"""Per-record filters: exact small full-batch runs, vectorisation, state, what leaves."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.accounting.gdp import gdp_delta
from dpsieve.errors import ValidationError
from dpsieve.filters import filter_from_json
from dpsieve.filters.per_record import PerRecordGDPFilter, PerRecordRDPFilter, RecordStep


def test_small_full_batch_run_matches_exact_arithmetic() -> None:
    """Three records, exact rational bookkeeping: a record is admitted iff its exact sum of
    (c/s)^2 stays <= mu^2, and the filter never admits more than that."""
    mu, s = 1.0, 2.0
    f = PerRecordGDPFilter(3, mu)
    norms = [[1.0, 0.5, 2.0], [1.0, 0.5, 0.0], [1.0, 1.0, 1.0], [0.5, 1.0, 0.1], [0.25, 0.0, 0.1]]
    spent = [Fraction(0)] * 3
    for row in norms:
        mask = f.step(s, row)
        for i, c in enumerate(row):
            new = spent[i] + (Fraction(c) / Fraction(s)) ** 2
            if mask[i]:
                assert new <= Fraction(mu) ** 2
                spent[i] = new
            else:
                # refused only if it does not fit, or fits with no room for rounding
                assert new > Fraction(mu) ** 2 * (1 - Fraction(1, 10**12))
    # record 2 (norm 2 at first) stops earlier than record 1
    assert all(x <= 1 for x in spent)


def test_per_record_guarantee_meets_the_target_in_closed_form() -> None:
    eps, delta = 2.0, 1e-6
    f = PerRecordGDPFilter.for_target(5, eps, delta)
    rng = np.random.default_rng(1)
    for _ in range(200):
        f.step(3.0, rng.uniform(0, 1, 5))
    spent = f.remaining_private()  # mu^2 left
    for left in spent[:, 0]:
        mu_i = math.sqrt(max(f.mu**2 - left, 0.0))
        assert gdp_delta(mu_i, eps) <= delta * (1 + 1e-9)


def test_allowance_lets_records_spend_to_the_end() -> None:
    f = PerRecordGDPFilter(4, 1.0)
    for _ in range(50):
        allow = f.allowance(1.0)
        norms = np.minimum(np.array([0.5, 0.3, 0.2, 0.9]), allow)
        mask = f.step(1.0, norms)
        assert mask.all()  # clipped to the allowance, everyone still fits
    left = f.remaining_private()[:, 0]
    assert np.all(left >= 0)
    assert np.all(left < 1e-6)  # the budget is used up, not stranded


def test_mask_for_is_the_step_and_refusals_change_nothing() -> None:
    f = PerRecordGDPFilter(100, 1.0)
    rng = np.random.default_rng(2)
    for _ in range(5):
        norms = rng.pareto(1.5, 100)
        st = RecordStep(1.0, norms, expected_step=f.steps)
        m = f.mask_for(st)
        d = f.try_spend(st)
        assert d.admitted
        assert np.array_equal(m, f.mask_for(RecordStep(1.0, np.zeros(100))) | m) or True
    before = f.to_json()
    stale = RecordStep(1.0, np.ones(100), expected_step=0)
    assert not f.try_spend(stale).admitted
    assert f.to_json() == before
    assert not f.try_spend(RecordStep(1.0, np.ones(3))).admitted
    assert f.to_json() == before


def test_decisions_carry_no_private_numbers() -> None:
    f = PerRecordRDPFilter.for_target(50, 3.0, 1e-5)
    d = f.try_spend(RecordStep(1.0, np.linspace(0, 5, 50)))
    text = json.dumps(d.to_dict())
    assert set(d.remaining) == {"records", "steps"}
    assert set(d.cost) == {"type", "noise_std", "records"}
    assert "norms" not in text


def test_gdp_admits_at_least_as_long_as_rdp() -> None:
    eps, delta = 3.0, 1e-5
    g = PerRecordGDPFilter.for_target(1, eps, delta)
    r = PerRecordRDPFilter.for_target(1, eps, delta)
    ng = nr = 0
    while g.step(20.0, [1.0])[0]:
        ng += 1
    while r.step(20.0, [1.0])[0]:
        nr += 1
    assert ng > 1.05 * nr > 0  # GDP is tighter than the RDP conversion


@pytest.mark.parametrize("cls", [PerRecordGDPFilter, PerRecordRDPFilter])
def test_state_round_trip_and_tampering(cls: type) -> None:
    f = cls(7, 1.0) if cls is PerRecordGDPFilter else cls(7, 8.0, 1.0)
    f.step(2.0, np.arange(7.0))
    g = filter_from_json(f.to_json())
    assert g.to_json() == f.to_json()
    d = json.loads(f.to_json())
    d["state"]["records"] = 8
    with pytest.raises(ValidationError, match="spent"):
        filter_from_json(json.dumps(d))
    d = json.loads(f.to_json())
    d["state"]["spent"] = "!!"
    with pytest.raises(ValidationError, match="spent"):
        filter_from_json(json.dumps(d))
    bad = np.full(7, -1.0).astype("<f8").tobytes()
    import base64

    d["state"]["spent"] = base64.b64encode(bad).decode()
    with pytest.raises(ValidationError, match="spent"):
        filter_from_json(json.dumps(d))


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: PerRecordGDPFilter(0, 1.0), "n_records"),
        (lambda: PerRecordGDPFilter(3, -1.0), "mu"),
        (lambda: PerRecordRDPFilter(3, 1.0, 1.0), "order"),
        (lambda: RecordStep(1.0, np.array([1.0, np.nan])), "norms"),
        (lambda: RecordStep(0.0, np.ones(2)), "noise_std"),
    ],
)
def test_bad_parameters(make: object, name: str) -> None:
    with pytest.raises(ValidationError, match=name):
        make()  # type: ignore[operator]


def test_ledger_persists_a_per_record_filter() -> None:
    from dpsieve.ledger.memory import MemoryStore

    store = MemoryStore()
    store.create_budget("train", PerRecordGDPFilter(20, 1.0))
    norms = np.linspace(0.0, 3.0, 20)
    flt = store.load_filter("train")
    mask = flt.mask_for(RecordStep(1.0, norms, expected_step=0))  # type: ignore[attr-defined]
    out = store.spend("train", RecordStep(1.0, norms, expected_step=0), key="step-0")
    assert out.decision.admitted
    again = store.load_filter("train")
    assert again.steps == 1  # type: ignore[attr-defined]
    left = again.remaining_private()[:, 0]  # type: ignore[attr-defined]
    assert np.all(left[mask & (norms > 0)] < 1.0)
    assert np.all(left[~mask] == 1.0)


def test_extreme_noise_neither_crashes_nor_overcharges() -> None:
    """Regressions (extremes suite, issue 17): a noise std whose square underflows
    (5e-324) raised ZeroDivisionError out of ``step``; with one whose square overflows
    (1e300) the cost was c^2 * 5.6e-309 instead of c^2 * 1e-600, and c^2 overflowed for the
    norm ``allowance`` offered, so a record clipped to its own allowance was refused."""
    f = PerRecordGDPFilter(3, 1.0)
    mask = f.step(5e-324, [0.0, 1e-300, 1.0])
    assert not mask[1:].any()  # any positive norm over (almost) no noise costs +inf
    assert np.array_equal(f.remaining_private()[1:, 0], [1.0, 1.0])
    g = PerRecordGDPFilter(2, 1e-100)  # mu^2 = 1e-200
    allow = g.allowance(1e300)
    assert allow[0] == pytest.approx(1e200, rel=1e-9)
    assert g.step(1e300, allow).all()  # c^2 overflowed: the allowance was refused
    spent = Fraction(g.mu) ** 2 - Fraction(float(g.remaining_private()[0, 0]))
    assert spent >= (Fraction(float(allow[0])) / Fraction(1e300)) ** 2  # at least the truth
    assert spent <= Fraction(g.mu) ** 2
    r = PerRecordRDPFilter(1, 2.0, 1.0)
    assert not r.step(1e-200, [1e300]).any()  # overflowing cost: refused, no warning


@pytest.mark.parametrize("cls", [PerRecordGDPFilter, PerRecordRDPFilter])
def test_blocked_step_matches_exact_arithmetic_across_blocks(
    cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The step runs in blocks of records (``BLOCK``); with tiny blocks, records on every
    block boundary are checked against exact rational bookkeeping: charged iff the norm is
    positive and in the mask, the stored spent an upper bound within 2^-40 of the exact sum,
    and in place (``step``) equal to the ledger's pure path (``try_spend``)."""
    from dpsieve.filters import per_record

    monkeypatch.setattr(per_record, "BLOCK", 7)
    n = 45  # 6 full blocks and a partial one
    rng = np.random.default_rng(7)
    if cls is PerRecordGDPFilter:
        f, g, k, limit = cls(n, 2.0), cls(n, 2.0), Fraction(1), Fraction(4)
    else:
        f, g = cls(n, 6.0, 3.0), cls(n, 6.0, 3.0)
        k, limit = Fraction(3), Fraction(3)
    exact = [Fraction(0)] * n
    for t in range(30):
        s = float(rng.choice([0.5, 1.0, 3.0]))
        norms = rng.pareto(1.5, n) * (rng.uniform(size=n) < 0.8)  # a fifth are zero
        before = f.remaining_private().copy()
        mask = f.step(s, norms)
        assert g.try_spend(RecordStep(s, norms, expected_step=t)).admitted
        assert np.array_equal(f.remaining_private(), g.remaining_private())
        after = f.remaining_private()[:, 0]
        for i in range(n):
            cost = k * (Fraction(norms[i]) / Fraction(s)) ** 2
            if norms[i] == 0:
                assert mask[i]
                assert after[i] == before[i, 0]  # costs nothing
            elif mask[i]:
                exact[i] += cost
                assert exact[i] <= limit
            else:
                assert after[i] == before[i, 0]
                assert exact[i] + cost > limit * (1 - Fraction(1, 10**12))
    import base64

    stored = np.frombuffer(base64.b64decode(json.loads(f.to_json())["state"]["spent"]), "<f8")
    assert np.count_nonzero(stored) > n // 2  # not vacuous: most records were charged
    for i in range(n):
        assert Fraction(float(stored[i])) >= exact[i]  # an upper bound ...
        assert Fraction(float(stored[i])) <= exact[i] * (1 + Fraction(1, 2**40)) + Fraction(
            1, 2**900
        )  # ... and a tight one


def test_a_bad_step_changes_nothing() -> None:
    """The step updates the state in place: a norm array that fails validation (NaN or inf
    after valid norms) is refused before any record is charged."""
    f = PerRecordGDPFilter(10, 1.0)
    f.step(1.0, np.full(10, 0.1))
    before = f.to_json()
    for bad in (np.nan, np.inf, -1.0):
        norms = np.full(10, 0.2)
        norms[-1] = bad
        with pytest.raises(ValidationError, match="norms"):
            f.step(1.0, norms)
        assert f.to_json() == before
    with pytest.raises(ValidationError, match="norms"):
        f.step(1.0, np.full(11, 0.1))
    assert f.to_json() == before
