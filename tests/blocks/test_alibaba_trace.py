"""The Alibaba-DP-parameter trace of benchmarks/_alibaba_dp.py (its docstring states the
parameters and their sources): its marginals stay within the published ranges, it is
reproducible from its seed, its curves are the stated mechanisms', and a tiny online run
conserves tasks and replays through fresh filters (no timing is checked)."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import _alibaba_dp as ali  # noqa: E402


@pytest.fixture(scope="module")
def tasks() -> list[ali.AliTask]:
    rng = np.random.default_rng(2026)
    return [ali.make_task(rng, 0.0) for _ in range(400)]


def test_marginals_within_the_published_ranges(tasks: list[ali.AliTask]) -> None:
    ks = [t.k for t in tasks]
    assert min(ks) >= 1
    assert max(ks) <= ali.K_MAX
    for t in tasks:
        assert ali.D_MIN <= t.d_star <= ali.D_MAX
        # the curve's demand at the best order, normalised by DPack's block, is d*
        # (noisier side; the subsampled Gaussian's widened bound within 1e-5)
        assert t.d_star * (1 - 1e-6) <= t.normalised() <= t.d_star * (1 + 1e-5), t
        assert t.rho > 0
        assert all(x >= 0 for x in t.rdp)
        if t.mechanism in ("subsampled_gaussian", "subsampled_laplace"):
            size = ali.BLOCK_SIZE * t.k
            assert 64 / size - 1e-12 <= t.q <= min(4096, size // 10) / size + 1e-12
            assert t.steps >= 1
    # log-uniform d* and k: about a third of d* per decade, half of k below 10
    dec = Counter(min(2, int(-math.log10(t.d_star))) for t in tasks)
    assert all(90 <= dec[i] <= 180 for i in range(3)), dec
    assert 0.35 <= np.mean([k < 10 for k in ks]) <= 0.65
    mech = Counter(t.mechanism for t in tasks)
    assert set(mech) == set(ali.CPU + ali.GPU)
    cpu = sum(mech[m] for m in ali.CPU) / len(tasks)
    assert 0.4 <= cpu <= 0.6


def test_curves_are_the_mechanisms(tasks: list[ali.AliTask]) -> None:
    a = np.array(ali.ORDERS, dtype=np.float64)
    for t in tasks:
        if t.mechanism in ali.GAUSSIAN_KINDS:  # c a, rho = c
            np.testing.assert_allclose(np.array(t.rdp), t.rho * a, rtol=1e-12)
        elif t.mechanism == "laplace":
            np.testing.assert_allclose(t.rdp, ali.laplace_rdp(t.noise), rtol=1e-12)
            assert t.rho == pytest.approx(1 / (2 * t.noise ** 2))
        elif t.mechanism == "subsampled_gaussian":
            np.testing.assert_allclose(
                t.rdp, t.steps * ali.subsampled_gaussian_rdp(t.noise, t.q), rtol=1e-12)
    # Mironov's Laplace RDP at order 2, in closed form
    b = 0.7
    two = math.log(2 / 3 * math.exp(1 / b) + 1 / 3 * math.exp(-2 / b))
    assert ali.laplace_rdp(b, np.array([2.0]))[0] == pytest.approx(two, rel=1e-12)
    # subsampled Laplace: within the Laplace's own RDP and the pure bound, and it
    # vanishes with the noise (the calibration can reach every d*)
    for b, q in ((0.3, 0.01), (1.0, 0.1), (5.0, 0.002)):
        s = ali.subsampled_laplace_rdp(b, q)
        eps1 = math.log1p(q * math.expm1(1 / b))
        assert np.all(s <= ali.laplace_rdp(b) + 1e-15)
        assert np.all(s <= a * eps1 * eps1 / 2 + 1e-15)
    assert float(np.max(ali.subsampled_laplace_rdp(1e6, 0.05))) < 1e-12


def test_trace_is_reproducible_from_its_seed() -> None:
    t1, t2, t3 = ali.trace(3, 1), ali.trace(3, 1), ali.trace(4, 1)
    assert t1 == t2
    assert t1 != t3
    assert [t.arrival for t in t1[:ali.INITIAL_TASKS]] == [0.0] * ali.INITIAL_TASKS
    assert all(0.0 <= t.arrival < 1.0 for t in t1)
    assert [t.arrival for t in t1] == sorted(t.arrival for t in t1)


def test_tiny_run_conserves_tasks_and_replays() -> None:
    ts = ali.trace(5, 1)
    for acc, pol, one in (("any", "dpack", False), ("any", "dpf", True), ("zcdp", "dpf", False)):
        r = ali.simulate(ts, 1, pol, acc, one_currency=one)
        assert r["completed"] + r["never"] + r["waiting_at_end"] == len(ts)
        assert r["replay_refusals"] == 0
        assert r["completed"] > 0


def test_unlocking_and_passes() -> None:
    u = ali.unlocked(0.0, 3)
    assert np.all(u == 0)  # DPF-T: nothing at arrival
    u = ali.unlocked(ali.LIFETIME / 2, 3)
    step = 1 / ali.UNLOCK_N
    assert u[0] == pytest.approx(0.5, abs=step)
    assert u[-1] == pytest.approx((ali.LIFETIME / 2 - 2) / ali.LIFETIME, abs=step)
    assert np.all(ali.unlocked(2 + ali.LIFETIME, 3) == 1)
    assert ali.pass_times(30) == [0.0, 10.0, 20.0, 30.0, 40.0, 50.0, 59.0]
