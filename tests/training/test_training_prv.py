"""The training filter against PRV's certified lower bound (slow).

Every admitted history is composed by prv_accountant (Gopi, Lee & Wutschitz 2021), an
implementation independent of ours, which returns certified bounds [delta_lower,
delta_upper] on the exact delta(eps) of the Poisson-subsampled Gaussian composition (one
direction: a lower bound of the add/remove guarantee too). A filter that admits a history
whose *lower* bound exceeds the target has overspent, whatever our own bounds say.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from dpsieve.filters.training import TrainingFilter

pytestmark = pytest.mark.slow


def prv_delta_bounds(history: Counter[tuple[float, float]], eps: float,
                     eps_error: float = 3e-3) -> tuple[float, float]:
    """PRV's certified (delta_lower, delta_upper) at eps for the steps counted in history."""
    prv = pytest.importorskip("prv_accountant")
    from prv_accountant.privacy_random_variables import PoissonSubsampledGaussianMechanism

    kinds = sorted(history)
    mechs = [PoissonSubsampledGaussianMechanism(noise_multiplier=s, sampling_probability=q)
             for s, q in kinds]
    counts = [history[k] for k in kinds]
    acc = prv.PRVAccountant(prvs=mechs, max_self_compositions=counts, eps_error=eps_error,
                            delta_error=1e-10)
    lo, _, hi = acc.compute_delta(eps, counts)
    return float(lo), float(hi)


def _spend(f: TrainingFilter, schedule: list[tuple[float, float]],
           history: Counter[tuple[float, float]]) -> int:
    n = 0
    for s, q in schedule:
        if not f.try_step(s, q).admitted:
            break
        history[(s, q)] += 1
        n += 1
    return n


def test_the_fine_grid_schedule_stays_inside_the_target() -> None:
    """grid 5e-6 (compositions past max_points, coarsened): '100 steps at sigma 1.5, then
    sigma 1 until refused' was admitted as 100 + 252 steps (one reference unit for 100
    steps; PRV: delta(1) in [1.3676e-5, 1.3706e-5] against 1e-5). Now refused in time."""
    f = TrainingFilter(1.0, 1e-5, sigma=1.0, rate=0.01, grid=5e-6)
    n_ref = f.remaining()["reference_steps"]
    assert n_ref == 253
    history: Counter[tuple[float, float]] = Counter()
    assert _spend(f, [(1.5, 0.01)] * 100, history) == 100
    n = _spend(f, [(1.0, 0.01)] * 1000, history)
    assert 0 < n < 252
    lo, hi = prv_delta_bounds(history, 1.0)
    assert lo <= 1e-5, (dict(history), lo, hi)
    before = Counter(history)
    before[(1.0, 0.01)] = 252
    assert prv_delta_bounds(before, 1.0)[0] > 1e-5  # the old admission overspent


#: (grid, with sigma_hi) by seed. Fine grids are slow (every exchange searches compositions
#: of up to 2^21 points): 2e-5 took 3,190 s and sigma_hi at 2e-5 longer, on a loaded 2-core
#: machine, so 5e-6 appears once without sigma_hi (and in the fixed case above). Measured
#: PRV lower bounds of these cases: 7.4e-6, 4.5e-6, 6.7e-6, 4.6e-6, 7.3e-8 (target 1e-5).
_CASES = {0: (5e-6, False), 2: (1e-4, True), 3: (1e-4, False), 4: (5e-4, True),
          5: (5e-4, False)}


def _random_case(seed: int) -> tuple[dict[str, Any], list[list[tuple[float, float]]]]:
    """A target, a reference and a schedule that drives the filter to its end: one to three
    segments of random noise (sometimes at half the rate), then reference steps, then the
    segments again (spending whatever the reference left)."""
    rng = np.random.default_rng(seed)
    grid, with_hi = _CASES[seed]
    ref_s = float(rng.choice([0.8, 1.0, 1.2]))
    rate = float(rng.choice([0.005, 0.01, 0.02]))
    eps = float(rng.choice([0.5, 1.0, 2.0]))
    kw: dict[str, Any] = {"sigma": ref_s, "rate": rate, "grid": grid}
    if with_hi:
        kw["sigma_hi"] = ref_s + 1.0
    segments: list[tuple[float, float]] = []
    for _ in range(int(rng.integers(1, 4))):
        s = round(ref_s + float(rng.choice([0.2, 0.3, 0.5, 1.0])), 2)
        q = rate if rng.random() < 0.75 else rate / 2
        segments += [(s, q)] * int(rng.integers(30, 300))
    parts = [segments, [(ref_s, rate)] * 20_000, segments * 20]
    return {"eps": eps, **kw}, parts


@pytest.mark.parametrize("seed", sorted(_CASES))
def test_random_schedules_spent_until_refusal_stay_inside_the_target(seed: int) -> None:
    """Random multi-sigma schedules (and half rates), with and without sigma_hi, at grids
    from 5e-6 to 5e-4, spent until refusal (a refused step is skipped and the schedule goes
    on, up to 50 refusals in a row, then the next part): PRV's lower bound on delta(eps) of
    everything admitted never exceeds the target."""
    kw, parts = _random_case(seed)
    eps = kw.pop("eps")
    f = TrainingFilter(eps, 1e-5, **kw)
    history: Counter[tuple[float, float]] = Counter()
    for part in parts:
        refused_in_a_row = 0
        for s, q in part:
            if f.try_step(s, q).admitted:
                history[(s, q)] += 1
                refused_in_a_row = 0
            else:
                refused_in_a_row += 1
                if refused_in_a_row > 50:
                    break
    assert refused_in_a_row > 50  # spent: the budget ran out before the schedule
    lo, hi = prv_delta_bounds(history, eps)
    assert lo <= 1e-5, (seed, kw, dict(history), lo, hi)
