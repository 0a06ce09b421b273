"""Training: the DP-SGD accountant, the adaptive training filter, per-record filters.

Run: ``python -m benchmarks.training_dpsgd [--repeats N] [--schedules N]``. Writes
``benchmarks/results/training.md``. Side by side in one process, interleaved repeats,
medians; ratios matter more than absolute times on the shared machine.

1. Accountant: eps(1e-5) of 2,663 Poisson-subsampled Gaussian steps (sigma 1, q 0.01):
   dpsieve's DPSGDAccountant (default grid 5e-4, certified upper bound) vs dp_accounting's
   PLDAccountant at its default grid (1e-4); "exact" is bracketed by dp_accounting at grid
   1e-5 (connect-the-dots, within ~1e-5 of the truth). Caches are cleared before every run.
2. Adaptive filter: steps admitted on the fixed schedule (sigma 1, q 0.01, target (3, 1e-5));
   on the loss-driven schedule of dpsieve.reproduce.training (sigma in [0.8, 1.2], moved
   every 100 steps by the training loss; five schedules, seeds fixed in advance) against
   the best fixed-order RDP filter (order chosen in hindsight), with an a-priori-order RDP
   filter and the non-adaptive PLD ceiling of each schedule for context; median and total
   decision time.
3. Per-record filters: time per full-batch step for 10^6 records (GDP and RDP).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def _experiment():  # type: ignore[no-untyped-def]
    """The training experiment's code (moved to dpsieve.reproduce.training in 70168a1;
    experiments/training/run.py is a thin wrapper without these functions)."""
    from dpsieve.reproduce import training

    return training


def accountant(repeats: int) -> list[str]:
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant

    from dpsieve.training import DPSGDAccountant
    from dpsieve.training import accountant as acc_mod

    ev = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(1.0))
    exact = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-5).compose(
        ev, 2663
    ).get_epsilon(1e-5)
    ours_t, ref_t = [], []
    e_ours = e_ref = 0.0
    for _ in range(repeats):
        acc_mod._STEP_CACHE.clear()
        t = time.perf_counter()
        a = DPSGDAccountant()
        a.step(1.0, 0.01, count=2663)
        e_ours = a.epsilon(1e-5)
        ours_t.append(time.perf_counter() - t)
        t = time.perf_counter()
        e_ref = pld_privacy_accountant.PLDAccountant().compose(ev, 2663).get_epsilon(1e-5)
        ref_t.append(time.perf_counter() - t)
    mo, mr = statistics.median(ours_t), statistics.median(ref_t)
    return [
        "### Accountant: 2,663 steps, sigma 1, q 0.01, eps at delta 1e-5",
        "",
        "| accountant | eps | eps - exact | median time |",
        "|---|---|---|---|",
        f"| dpsieve DPSGDAccountant (grid 5e-4, certified) | {e_ours:.6f} | "
        f"{e_ours - exact:+.2e} | {mo * 1e3:.0f} ms |",
        f"| dp_accounting PLDAccountant (default grid 1e-4) | {e_ref:.6f} | "
        f"{e_ref - exact:+.2e} | {mr * 1e3:.0f} ms |",
        "",
        f"exact ~ {exact:.6f} (dp_accounting, grid 1e-5). Time ratio dpsieve / dp_accounting: "
        f"{mo / mr:.2f} (goal <= 0.33); {repeats} interleaved repeats.",
        "",
    ]


def _pld_ceiling(sched: list[float], q: float, eps: float, delta: float) -> int:
    """The longest prefix of the (fixed) schedule that dp_accounting's non-adaptive PLD
    accountant (pessimistic, grid 1e-4) certifies at (eps, delta): no valid filter admits
    more of this schedule (a non-adaptive analyst playing it is one adaptive analyst)."""
    import itertools

    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant as pld

    def ok(t: int) -> bool:
        acc = pld.PLDAccountant(value_discretization_interval=1e-4)
        for s, g in itertools.groupby(sched[:t]):
            ev = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(s))
            acc.compose(ev, len(list(g)))
        return bool(acc.get_epsilon(delta) <= eps)

    lo, hi = 0, len(sched)
    if ok(hi):
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _rdp_a_priori(sched: list[float], q: float, eps: float, delta: float, ref: float) -> int:
    """A fixed-order RDP filter whose order is chosen *before* the run: the order that
    admits the most steps at the reference sigma (the rule's lower end)."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    orders = np.concatenate([np.linspace(1.1, 10.9, 99), np.arange(11, 64), [64, 80, 128, 256]])
    budget = eps - np.log1p(-1 / orders) + np.log(delta * orders) / (orders - 1)
    at_ref = np.array(rdp._compute_rdp_poisson_subsampled_gaussian(q, ref, orders))
    i = int(np.argmax(np.where(budget > 0, budget / at_ref, 0.0)))
    costs = {s: float(rdp._compute_rdp_poisson_subsampled_gaussian(q, s, [orders[i]])[0])
             for s in set(sched)}
    spent, n = 0.0, 0
    for s in sched:
        spent += costs[s]
        if spent > budget[i]:
            break
        n += 1
    return n


def _reference_only(sched: list[float], q: float) -> int:
    """The TrainingFilter with a budget of reference steps only (no sigma_hi)."""
    from dpsieve.filters.training import TrainingFilter

    f = TrainingFilter(3.0, 1e-5, sigma=0.8, rate=q, reserve=0.003)
    n = 0
    for s in sched:
        if not f.try_step(s, q).admitted:
            break
        n += 1
    return n


#: Seeds of the loss-driven schedules, fixed in advance: 2026 (the schedule this benchmark
#: has always reported) and the next four integers from 1 (not chosen by their results).
SCHEDULE_SEEDS = (2026, 1, 2, 3, 4)


def training_filter(schedules: int, seeds: tuple[int, ...] = SCHEDULE_SEEDS) -> list[str]:
    """The adaptive filter's rows; ``seeds``: other schedules than the benchmark's (the
    held-out seeds 5-9 of benchmarks/RESULTS.md: not used to choose the filter's core)."""
    import collections
    import os

    from dpsieve.filters.training import TrainingFilter

    f = TrainingFilter(3.0, 1e-5, sigma=1.0, rate=0.01, reserve=0.001)
    n_fixed = 0
    times = []
    while True:
        t = time.perf_counter()
        ok = f.try_step(1.0, 0.01).admitted
        times.append(time.perf_counter() - t)
        if not ok:
            break
        n_fixed += 1
    run = _experiment()
    xtr, ytr, _, _ = run._digits()
    rows, ratios, ftimes = [], [], []
    for seed in seeds[:schedules]:
        rng = np.random.default_rng(seed)
        sched = run.loss_driven_schedule(xtr, ytr, 0.01, rng, segments=40)
        n_f, ft = run.filter_steps(sched, 0.01)
        ftimes += ft
        n_0 = _reference_only(sched, 0.01)
        n_r = run.rdp_filter_steps(sched, 0.01)
        n_a = _rdp_a_priori(sched, 0.01, 3.0, 1e-5, 0.8)
        ceil = _pld_ceiling(sched, 0.01, 3.0, 1e-5)
        mix = collections.Counter(sched[:n_f])
        mix_s = ", ".join(f"{s:g}: {c}" for s, c in sorted(mix.items()))
        ratios.append(n_f / max(n_r, 1))
        rows.append(f"| {seed} | {n_f} | {n_r} | {n_f / max(n_r, 1):.3f} | {n_0} "
                    f"({n_0 / max(n_r, 1):.3f}) | {n_a} | {ceil} ({ceil / max(n_r, 1):.2f}) | "
                    f"{mix_s} |")
    met = sum(r >= 1.10 for r in ratios)
    return [
        "### Adaptive training filter (target (3, 1e-5), q 0.01)",
        "",
        "| schedule | TrainingFilter | best fixed-order RDP filter | ratio |",
        "|---|---|---|---|",
        f"| fixed sigma 1.0 | {n_fixed} (reserve 0.1 % of delta; ceiling 2,663; goal >= 2,637) | "
        "2,185-2,195 | "
        f"{n_fixed / 2190:.2f} |",
        "",
        "Loss-driven sigma in [0.8, 1.2], moved every 100 steps by the training loss "
        "(`dpsieve.reproduce.training.loss_driven_schedule`, one schedule per seed): steps "
        "admitted by the TrainingFilter (reference sigma 0.8, the rule's lower end, and "
        "sigma_hi 1.2, its upper end: a core of 12.5 % of the reference-only count plus steps "
        "at 1.2) and by the best fixed-order RDP filter (order chosen in hindsight: the "
        "issue's baseline); for context, the TrainingFilter with a budget of reference steps "
        "only (no sigma_hi, reserve 0.3 %: the filter before), an RDP filter whose order is "
        "fixed before the run (best for sigma 0.8), and "
        "the non-adaptive PLD accounting of the realized schedule (dp_accounting, grid 1e-4; "
        "no valid filter admits more of a fixed schedule; in brackets its ratio to the RDP "
        "filter). Goal: ratio >= 1.10.",
        "",
        "| seed | TrainingFilter | RDP filter, hindsight order | ratio | reference-only "
        "budget (ratio) | RDP filter, order fixed in advance | PLD ceiling (ratio) | "
        "TrainingFilter's steps by sigma |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Ratio >= 1.10 on {met} of {len(ratios)} schedules; mean ratio "
        f"{statistics.mean(ratios):.3f}.",
        "",
        f"Decision time, fixed schedule: median {1e3 * statistics.median(times):.3f} ms; "
        f"loss-driven: median {1e3 * statistics.median(ftimes):.3f} ms, max "
        f"{max(ftimes):.2f} s (an exchange), total {sum(ftimes):.1f} s for {len(ftimes)} "
        "decisions (goal: median <= 20 ms). Load average at the end: "
        + ", ".join(f"{x:.1f}" for x in os.getloadavg()) + ".",
        "",
    ]


def per_record(repeats: int) -> list[str]:
    import os

    from dpsieve.filters import PerRecordGDPFilter, PerRecordRDPFilter
    from dpsieve.filters.per_record import RecordStep

    n = 10**6
    norms = np.minimum(np.random.default_rng(0).pareto(2.0, n), 1.0)
    out = [
        "### Per-record filters: one full-batch step, 10^6 records",
        "",
        "Norms min(Pareto(2), 1), noise std 10; `step` charges in place (validation, the "
        "blocked vectorised update, the mask); `mask_for` is the ledger's pure path (the same "
        "arithmetic on a copy of the spent array). Medians of interleaved repeats.",
        "",
        "| filter | step, median ms | mask_for, median ms |",
        "|---|---|---|",
    ]
    filters = (
        PerRecordGDPFilter.for_target(n, 3.0, 1e-5),
        PerRecordRDPFilter.for_target(n, 3.0, 1e-5),
    )
    for f in filters:
        ts, ps = [], []
        for _ in range(repeats * 4):
            t = time.perf_counter()
            f.step(10.0, norms)
            ts.append(time.perf_counter() - t)
            q = RecordStep(10.0, norms)
            t = time.perf_counter()
            f.mask_for(q)
            ps.append(time.perf_counter() - t)
        out.append(f"| {type(f).__name__} | {1e3 * statistics.median(ts):.1f} (goal <= 50) | "
                   f"{1e3 * statistics.median(ps):.1f} |")
    la = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    out += ["", f"Load average during the run (other jobs share the 2 cores): {la}.", ""]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--schedules", type=int, default=len(SCHEDULE_SEEDS),
                    help="loss-driven schedules to run (1-5; about 2 minutes each)")
    args = ap.parse_args()
    lines = ["## Training (benchmarks/training_dpsgd.py)", "",
             "Command: `python -m benchmarks.training_dpsgd`.", ""]
    lines += accountant(args.repeats)
    lines += per_record(args.repeats)
    lines += training_filter(max(1, min(args.schedules, len(SCHEDULE_SEEDS))))
    path = HERE / "results" / "training.md"
    path.write_text("\n".join(lines) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
