"""The training filter with a public noise range (``sigma_hi``): a core of reference steps
plus steps at sigma_hi, exchanges between any kinds with the rest of the state kept on both
sides (docs/proofs/training.md §2)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpsieve.errors import ValidationError
from dpsieve.filters import filter_from_json
from dpsieve.filters.training import TrainingFilter
from dpsieve.training import DPSGDAccountant

EPS, DELTA, Q = 1.0, 1e-5, 0.02
LO, HI = 1.5, 2.5


@pytest.fixture(scope="module")
def mixed() -> TrainingFilter:
    return TrainingFilter(EPS, DELTA, sigma=LO, rate=Q, sigma_hi=HI, core=0.25)


def _units(f: TrainingFilter) -> dict[str, int]:
    return dict(f.remaining()["units"])


def test_the_initial_state_meets_the_target_and_fills_it(mixed: TrainingFilter) -> None:
    u = _units(mixed)
    a, c = u[f"{LO:g}@{Q:g}"], u[f"{HI:g}@{Q:g}"]
    n0 = json.loads(mixed.to_json())["state"]["n0"]
    assert a == int(0.25 * n0)
    assert c > 0
    acc = DPSGDAccountant()
    acc.step(LO, Q, count=a)
    acc.step(HI, Q, count=c)
    assert acc.epsilon(DELTA * 0.9) <= EPS  # reserve 10 % of delta by default
    more = DPSGDAccountant()
    more.step(LO, Q, count=a)
    more.step(HI, Q, count=int(c * 1.02) + 2)
    assert more.epsilon(DELTA) > EPS  # the rest of the target went to sigma_hi units


def test_a_drifting_schedule_gets_more_than_from_reference_steps_and_meets_the_target(
    mixed: TrainingFilter,
) -> None:
    plain = TrainingFilter(EPS, DELTA, sigma=LO, rate=Q)
    sched = ([2.0] * 20 + [2.5] * 40 + [1.5] * 10) * 40
    counts = []
    for f0 in (plain, filter_from_json(mixed.to_json())):
        f, n, acc = filter_from_json(f0.to_json()), 0, DPSGDAccountant()
        for s in sched:
            if not f.try_step(s, Q).admitted:  # type: ignore[attr-defined]
                break
            n += 1
            acc.step(s, Q)
        # necessary condition: the non-adaptive accounting of what ran meets the target
        assert acc.epsilon(DELTA) <= EPS
        counts.append(n)
    assert counts[1] > counts[0] * 1.15


def test_a_reference_step_at_the_core_is_bought_with_sigma_hi_units(
    mixed: TrainingFilter,
) -> None:
    f = filter_from_json(mixed.to_json())
    before = _units(f)
    d = f.try_step(LO, Q)  # type: ignore[attr-defined]
    assert d.admitted
    ex = d.cost["exchange"]
    assert ex["from"] == [HI, Q]
    assert ex["to"] == [LO, Q]
    assert ex["got"] >= 1
    after = _units(f)
    assert after[f"{LO:g}@{Q:g}"] == before[f"{LO:g}@{Q:g}"] + ex["got"] - 1  # core kept
    assert after[f"{HI:g}@{Q:g}"] == before[f"{HI:g}@{Q:g}"] - ex["units"]


@pytest.mark.slow
def test_exchange_into_the_reference_residue_condition_against_dp_accounting(
    mixed: TrainingFilter,
) -> None:
    """'a + k steps at 1.5 and m at 2.5 <= R_{0,d} (+) a at 1.5 and n at 2.5' (the core a on
    both sides) recomputed with the independent oracle, dp_accounting connect-the-dots at
    a fine grid, on both directions up to eps = 8. The exchange needs its reserve: without
    d the left side exceeds the right by 2.8e-8 at eps = 1.2 (measured)."""
    dpa = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
    f = filter_from_json(mixed.to_json())
    u = _units(f)
    a, n = u[f"{LO:g}@{Q:g}"], u[f"{HI:g}@{Q:g}"]
    ex = f.try_step(LO, Q).cost["exchange"]  # type: ignore[attr-defined]
    k, m, d = ex["got"], n - ex["units"], ex["reserve_spent"]

    def pld(s: float, count: int):  # type: ignore[no-untyped-def]
        p = dpa.from_gaussian_mechanism(s, sampling_prob=Q, value_discretization_interval=2e-5)
        return p.self_compose(count)

    left = pld(LO, a + k).compose(pld(HI, m))
    right = pld(LO, a).compose(pld(HI, n))
    for e in np.linspace(0.0, 8.0, 81):
        lhs = left.get_delta_for_epsilon(e)
        rhs = d + (1 - d) * right.get_delta_for_epsilon(e)
        assert lhs <= rhs + 1e-10, (e, lhs, rhs)


def test_bad_range_parameters_are_refused() -> None:
    with pytest.raises(ValidationError, match="sigma_hi"):
        TrainingFilter(EPS, DELTA, sigma=LO, rate=Q, sigma_hi=LO)
    with pytest.raises(ValidationError, match="sigma_hi"):
        TrainingFilter(EPS, DELTA, sigma=LO, rate=Q, sigma_hi=1.0)
    with pytest.raises(ValidationError, match="core"):
        TrainingFilter(EPS, DELTA, sigma=LO, rate=Q, sigma_hi=HI, core=1.5)


@pytest.mark.parametrize(("field", "value"), [("keep", -1), ("keep", 10**9), ("mixed", 1)])
def test_tampered_range_fields_are_refused(
    mixed: TrainingFilter, field: str, value: object
) -> None:
    d = json.loads(mixed.to_json())
    d["state"][field] = value
    with pytest.raises(ValidationError, match=field):
        filter_from_json(json.dumps(d))


def test_states_stored_before_the_range_fields_load_as_reference_budgets() -> None:
    f = TrainingFilter(EPS, DELTA, sigma=LO, rate=Q)
    d = json.loads(f.to_json())
    for k in ("keep", "mixed", "cert"):
        del d["state"][k]
    g = filter_from_json(json.dumps(d))
    assert g.try_step(2.0, Q).admitted  # type: ignore[attr-defined]
    st = json.loads(g.to_json())["state"]
    assert st["keep"] == 0
    assert st["mixed"] is False
