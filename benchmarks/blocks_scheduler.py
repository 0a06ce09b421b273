"""Budgets over time: tasks a block scheduler completes, and the time of one decision.

Run: ``python -m benchmarks.blocks_scheduler [--seeds 10] [--no-write]``. Writes
``benchmarks/results/blocks_scheduler.md``. Everything runs side by side in one process.

**Trace** (synthetic, seeded; ``trace(seed)``), shaped like DPack's Alibaba-DP workload
(Tholoniat et al., EuroSys 2025) -- its arrivals and demands, not its data:

* one block arrives per day for 40 days, each with an (eps, delta) = (10, 1e-7)
  budget (PrivateKube's and DPack's), unlocked 1/10 at arrival and 1/10 more per day
  (DPF-T, ``dpsieve.blocks.Unlock("periodic", 1/10, 1 day)``);
* tasks arrive in **bursts**, as job submissions do in the Alibaba 2018 cluster trace:
  burst times a Poisson process whose rate follows a day cycle (``1 + 0.8 sin(2 pi t)``),
  burst sizes Pareto (shape 1.5, at least 1 task, at most 60): heavy-tailed;
* each task asks for its **most recent k blocks** (models train on recent data), k a
  log-normal (median 2, sigma 1.4) rounded up, at most the blocks arrived -- most ask for a
  few, some for dozens;
* **mice and elephants**: 75 % of tasks are mice, a Gaussian mechanism with eps
  log-uniform in [0.5, 1.5] at delta 1e-9, the others elephants with eps log-uniform in
  [1.5, 6]; a task's charge on each of its blocks is the Gaussian's exact description
  GDP(mu), mu = ``gdp_mu_for(eps, 1e-9)`` (eps on a 1 % grid); about 1,900 tasks ask for
  about three times what the 40 blocks hold: the budget binds, as in DPack's evaluation;
* a task waits at most ``WAIT`` = 5 days for budget, then times out.

**Schedulers**: a pass every 0.1 day over the waiting tasks (``dpsieve.blocks.schedule``,
what ``schedule_pass`` runs): ``dpf`` (dominant share first) and ``dpack`` (efficiency:
``1 / sum_j d_j / available_j`` first), ``fcfs`` for reference. A task's demand on a block
is ``dpsieve.blocks.demand`` of its charge on the block's real filter:

* **dpsieve** (GDP): each block a ``GDPResidueFilter(mu_B)``, mu_B the largest mu with
  G_mu within (10, 1e-7) (``gdp_mu_for``): exact for Gaussian tasks;
* **zCDP**: each block a ``ZCDPFilter(rho_B)``, each task charged rho = mu^2 / 2 (exact for
  the Gaussian), rho_B from (10, 1e-7) by the library's own conversion
  (``zcdp_rho_for``: the better of Canonne-Kamath-Steinke's and Bun-Steinke's) and, as
  zCDP systems usually state it, by Bun-Steinke's (rho + 2 sqrt(rho log 1/delta) = eps).

After each run every block's admitted charges are replayed through a fresh real filter:
all must be admitted (the fractions only pre-select; a replay refusal would be counted and
reported). **Offline packing** (DPack's offline setting): 100 blocks fully unlocked,
3,000 tasks at once asking for k contiguous blocks at a random start (k as above, median
3), demands 0.2-2 % (mice) and 2-30 % (elephants) of a block, one pass.

**Blocks kept at several Rényi orders** (DPack's own setting; ``benchmarks._blocks_rdp``
states the mechanisms): the same trace, each task given a mechanism -- mice Laplace or
Gaussian, elephants DP-SGD (subsampled Gaussian, rate 1 %, 1,000 steps) or Gaussian, one
half each -- whose RDP curve at the orders (3, 4, 5, 6, 8, 16, 32, 64) is calibrated to
the task's eps at 1e-9; each block a (10, 1e-7) budget at those orders, either
``AnyOrderRDPFilter`` (a task fits while one order holds: DPack's and PrivateKube's blocks;
delta split over the orders) or ``RDPFilter`` (every order must hold; CKS budgets).
Policies: ``dpf`` (largest share over blocks and orders, DPack's DPF), ``dpack`` (each
block measured at the order DPack picks: ``dpsieve.blocks.measured_orders``), and both on
**one currency** (one fraction per block, as the ledger's pass has it today:
``dpsieve.blocks.currency``; each proposal then checked at every order): DPF on one
currency is the stronger DPF here, and is the one the ratio is taken against. Offline:
100 fresh blocks, 3,000 such tasks at once on k contiguous blocks, one pass.

**Online settings** (``Setting``, ``SETTINGS``; ``--part settings``). Today's: a pass
every 0.1 day, 1/10 of a block unlocked a day, a 5-day timeout, the run ending a day
after the last block. **DPack's online one**, as its artifact runs the Alibaba-DP trace
(github.com/columbia/dpack: ``experiments/ray_runner.py`` ``grid_online`` called by
``plot_alibaba.py``; ``privacypacking/schedulers``): a batch pass every T = 10 block
periods (``scheduling_wait_time``), each block unlocked in N = 1,000 equal steps over a
30-block-period lifetime (``n``, ``data_lifetime``: DPF-T), no task timeout (tasks wait
until the run ends, a lifetime after the last block, when every block is unlocked), and
DPack's metric recomputed after every 50 admissions within a pass
(``metric_recomputation_period``; ``schedule(recompute=50)``); one block a day here, so
T = 10 days, and T = 1 day beside it (a 40-day trace has only 7 passes at T = 10).
Not taken: its 100 blocks present at the start and its trace's demands (normalised
demands 0.001-1 of a block at the best order, up to 100 blocks a task, from Alibaba's
GPU trace); its DPF measures shares of the block's *initial* budget with ties broken
by the next-largest share, ours by arrival (on one currency the two orders agree up to
ties). On the mixed trace the runs add **zCDP blocks** (``ZCDPFilter``, rho from
(10, 1e-7) by ``zcdp_rho_for``), each task charged its zCDP (``_blocks_rdp.zcdp_rho``:
Gaussian exact, Laplace eps0^2 / 2, DP-SGD its steps' full-Gaussian rho, which is the
subsampled Gaussian's zCDP: subsampling buys nothing there).

**DPack's Alibaba-DP parameters** (``--part alibaba``; ``benchmarks._alibaba_dp`` states
the trace, each parameter's source in DPack's paper and artifacts, and what was chosen
where they leave it open): 100 blocks at the start and B = 30, 90, 180 more, tasks asking
normalised demands 0.001-1 at the best order of up to 100 blocks, Laplace, Gaussian,
subsampled Laplace, DP-FTRL and subsampled Gaussian curves, DPack's online setting;
any-order RDP, zCDP and (Gaussian tasks) GDP residue blocks side by side.

**Accounting capacity**: how many tasks of one kind a fresh (10, 1e-7) block admits under
the GDP residue filter and under zCDP (CKS and Bun-Steinke budgets): Gaussian (1, 1e-9)
tasks (the issue's figure) and Laplace tasks (the exact Laplace PLD against
``GDPResidueFilter``; rho = eps^2 / 2 against zCDP, within 2 % of the Laplace's own zCDP).

**Decision time** (CPU time): one pass of ``schedule`` at 1,000 blocks x 100 pending tasks
(k and demands from the trace's distributions, blocks half used at random), and the
ledger's whole pass plan (``dpsieve.ledger.passes.plan_pass``: fractions from 1,000 stored
filter states, never-fit checks, reasons in words) for the same queue; medians of 50.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
OUT = HERE / "results" / "blocks_scheduler.md"
DAYS, WAIT, STEP, UNLOCK_N = 40, 5.0, 0.1, 10
BLOCK_EPS, BLOCK_DELTA, TASK_DELTA = 10.0, 1e-7, 1e-9
RATE = 20.0  # bursts per day at the cycle's mean
MICE, ELEPHANTS, P_ELEPHANT = (0.5, 1.5), (1.5, 6.0), 0.25  # eps ranges (log-uniform)
K_MEDIAN, K_SIGMA = 2.0, 1.4  # blocks asked: log-normal


@dataclass(frozen=True, slots=True)
class Setting:
    """How the online runs schedule (module docstring): a pass every ``step`` days; each
    block unlocked in ``unlock_n`` equal steps over ``lifetime`` days (the first at
    arrival); a task waits at most ``wait`` days; the run goes on ``tail`` days after
    the last block arrives; DPack re-ranks after every ``recompute`` admissions (0:
    ranks once a pass)."""

    name: str
    step: float = STEP
    unlock_n: int = UNLOCK_N
    lifetime: float = float(UNLOCK_N)
    wait: float = WAIT
    tail: float = 1.0
    recompute: int = 0

    @property
    def horizon(self) -> float:
        return DAYS - 1 + self.tail

    def pass_times(self) -> list[float]:
        n = math.ceil(self.horizon / self.step - 1e-9)
        return [min(s * self.step, self.horizon) for s in range(n + 1)]

    def unlocked(self, ages: np.ndarray) -> np.ndarray:
        """Fraction unlocked of blocks of these ages (< 0: not arrived: 0)."""
        period = self.lifetime / self.unlock_n
        steps = np.floor(np.maximum(ages, 0.0) / period + 1e-9) + 1
        return np.where(ages >= 0, np.minimum(1.0, steps / self.unlock_n), 0.0)


#: today's setting, and DPack's online one (its artifact's Alibaba runs: a batch every
#: T = 10 block periods, unlocking over a 30-block lifetime in N = 1,000 steps, no task
#: timeout, the run continuing a lifetime after the last block, the metric recomputed
#: every 50 admissions), at T = 10 days and at T = 1 day
SETTINGS = (
    Setting("pass 0.1 d, 1/10 a day, 5-d timeout"),
    Setting("DPack's: pass 1 d, unlock over 30 d, no timeout, re-rank every 50",
            step=1.0, unlock_n=1000, lifetime=30.0, wait=math.inf, tail=30.0,
            recompute=50),
    Setting("DPack's: pass 10 d, unlock over 30 d, no timeout, re-rank every 50",
            step=10.0, unlock_n=1000, lifetime=30.0, wait=math.inf, tail=30.0,
            recompute=50),
)


@dataclass(frozen=True, slots=True)
class Task:
    arrival: float
    k: int
    eps: float
    elephant: bool
    mu: float


def trace(seed: int, days: int | None = None, rate: float | None = None) -> list[Task]:
    """The synthetic trace (module docstring), seeded."""
    days = DAYS if days is None else days
    rate = RATE if rate is None else rate
    rng = np.random.default_rng(seed)
    out: list[Task] = []
    t = 0.0
    peak = rate * 1.8
    while True:  # thinning: a Poisson process of rate rate * (1 + 0.8 sin(2 pi t))
        t += float(rng.exponential(1.0 / peak))
        if t >= days:
            break
        if rng.random() * peak > rate * (1 + 0.8 * math.sin(2 * math.pi * t)):
            continue
        size = min(60, int(rng.pareto(1.5)) + 1)
        for _ in range(size):
            elephant = bool(rng.random() < P_ELEPHANT)
            lo, hi = ELEPHANTS if elephant else MICE
            eps = float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
            k = max(1, math.ceil(float(rng.lognormal(math.log(K_MEDIAN), K_SIGMA))))
            out.append(Task(t, k, eps, elephant, _mu(eps)))
    return out


def _mu(eps: float) -> float:
    """The Gaussian's mu for (eps, TASK_DELTA): ``gdp_mu_for`` (~5 ms a call) on a grid of
    eps 1 % apart, each task's eps rounded down to it (the task is then exactly that
    Gaussian: its eps is stated, not sampled finer)."""
    grid = math.floor(math.log(eps) / math.log(1.01))
    if grid not in _MU:
        _MU[grid] = _mu_exact(1.01 ** grid)
    return _MU[grid]


_MU: dict[int, float] = {}


def _mu_exact(eps: float) -> float:
    from dpsieve.accounting.gdp import gdp_mu_for

    return float(gdp_mu_for(eps, TASK_DELTA))


def block_filters() -> dict[str, Any]:
    """A fresh block filter per accounting (module docstring)."""
    from dpsieve.accounting.gdp import gdp_mu_for
    from dpsieve.filters import GDPResidueFilter, ZCDPFilter
    from dpsieve.filters.additive import zcdp_rho_for

    big_l = math.log(1 / BLOCK_DELTA)  # Bun-Steinke: rho + 2 sqrt(rho L) = eps
    bs_rho = (math.sqrt(big_l + BLOCK_EPS) - math.sqrt(big_l)) ** 2 * (1 - 1e-12)

    return {"dpsieve GDP": GDPResidueFilter(float(gdp_mu_for(BLOCK_EPS, BLOCK_DELTA))),
            "zCDP (CKS)": ZCDPFilter(zcdp_rho_for(BLOCK_EPS, BLOCK_DELTA)),
            "zCDP (Bun-Steinke)": ZCDPFilter(bs_rho)}


def charge_of(kind: str, mu: float) -> Any:
    from dpsieve.accounting.events import GDP, ZCDP

    return GDP(mu) if kind.startswith("dpsieve") else ZCDP(mu * mu / 2)


def simulate(tasks: list[Task], policy: str, kind: str, flt: Any, *, replay: bool = True,
             setting: Setting = SETTINGS[0]) -> dict[str, Any]:
    """Run the trace under ``policy``, one accounting and ``setting``; tasks completed
    and checks."""
    from dpsieve.blocks import Pending, demand, schedule

    used = np.zeros(DAYS)
    charges: list[list[Any]] = [[] for _ in range(DAYS)]
    waiting: list[tuple[int, Task, np.ndarray, np.ndarray, Any]] = []
    done = {"mice": 0, "elephants": 0}
    never = timed_out = 0
    nxt = 0
    for now in setting.pass_times():
        while nxt < len(tasks) and tasks[nxt].arrival <= now:
            task = tasks[nxt]
            arrived = min(DAYS, math.floor(task.arrival) + 1)
            dims = np.arange(max(0, arrived - task.k), arrived, dtype=np.int64)
            mu = task.mu
            ch = charge_of(kind, mu)
            d = demand(ch, flt, key=f"{kind}:{mu!r}")
            if d is None:
                never += 1
            else:
                waiting.append((nxt, task, dims, np.full(dims.size, float(d)), ch))
            nxt += 1
        keep = [w for w in waiting if w[1].arrival + setting.wait > now]
        timed_out += len(waiting) - len(keep)
        waiting = keep
        if not waiting:
            continue
        unlocked = setting.unlocked(now - np.arange(DAYS, dtype=np.float64))
        avail = np.maximum(unlocked - used, 0.0)
        pend = [Pending(w[2], w[3], w[1].arrival) for w in waiting]
        plan = schedule(policy, pend, avail, recompute=setting.recompute)
        for i in plan.admitted:
            _, task, dims, dem, ch = waiting[i]
            used[dims] += dem
            for b in dims:
                charges[int(b)].append(ch)
            done["elephants" if task.elephant else "mice"] += 1
        gone = set(plan.admitted)
        waiting = [w for i, w in enumerate(waiting) if i not in gone]
    replay_refusals = 0
    for blk in range(DAYS if replay else 0):  # the real filters admit what the passes did
        f = type(flt).from_json(flt.to_json()) if hasattr(type(flt), "from_json") else None
        if f is None:
            from dpsieve.filters import filter_from_json

            f = filter_from_json(flt.to_json())
        for ch in charges[blk]:
            if not f.try_spend(ch).admitted:
                replay_refusals += 1
    return {"completed": done["mice"] + done["elephants"], **done, "never": never,
            "timed_out": timed_out + len(waiting), "replay_refusals": replay_refusals,
            "max_used": float(used.max())}


def capacity() -> list[tuple[str, int, int, int]]:
    """Tasks of one kind a fresh block admits: GDP residue, zCDP (CKS), zCDP (B-S)."""
    from dpsieve.accounting.events import GDP, ZCDP
    from dpsieve.accounting.pld import PLD
    from dpsieve.filters import filter_from_json

    def count(flt: Any, ch: Any) -> int:
        f = filter_from_json(flt.to_json())
        n = 0
        while n < 100_000 and f.try_spend(ch).admitted:
            n += 1
        return n

    fl = block_filters()
    out = []
    mu = _mu_exact(1.0)
    out.append(("Gaussian (1, 1e-9)", count(fl["dpsieve GDP"], GDP(mu)),
                count(fl["zCDP (CKS)"], ZCDP(mu * mu / 2)),
                count(fl["zCDP (Bun-Steinke)"], ZCDP(mu * mu / 2))))
    for e in (0.1, 0.3, 1.0):
        z = ZCDP(e * e / 2)
        out.append((f"Laplace eps {e:g}", count(fl["dpsieve GDP"], PLD.laplace(1 / e)),
                    count(fl["zCDP (CKS)"], z), count(fl["zCDP (Bun-Steinke)"], z)))
    return out


RDP_POLICIES = (("dpf", False), ("dpf", True), ("dpack", False), ("dpack", True),
                ("fcfs", False))


def rdp_label(policy: str, one: bool) -> str:
    return f"{policy}, one currency" if one else policy


def offline(seed: int, blocks: int = 100, n: int = 3000) -> dict[str, int]:
    """Tasks one pass admits with everything unlocked (module docstring)."""
    from dpsieve.blocks import Pending, schedule

    rng = np.random.default_rng(seed)
    pend = []
    for i in range(n):
        lo, hi = (0.02, 0.3) if rng.random() < P_ELEPHANT else (0.002, 0.02)
        d = math.exp(rng.uniform(math.log(lo), math.log(hi)))
        k = min(blocks, max(1, math.ceil(float(rng.lognormal(math.log(3.0), 1.5)))))
        start = int(rng.integers(0, blocks - k + 1))
        pend.append(Pending(np.arange(start, start + k), np.full(k, d), float(i)))
    return {p: len(schedule(p, pend, np.ones(blocks)).admitted)
            for p in ("dpf", "dpack", "fcfs")}


def decision_times(seed: int, blocks: int = 1000, pending: int = 100, reps: int = 50
                   ) -> dict[str, float]:
    """Median ms of one ``schedule`` pass per policy, and of ``plan_pass`` (module
    docstring)."""
    from dpsieve.blocks import Pending, schedule
    from dpsieve.filters import GDPResidueFilter
    from dpsieve.ledger.blockset import PendingRecord, block_budget_id
    from dpsieve.ledger.passes import plan_pass

    rng = np.random.default_rng(seed)
    ts = trace(seed)
    pick = rng.choice(len(ts), pending, replace=False)
    flt = block_filters()["dpsieve GDP"]
    mu_b = float(flt.remaining().to_dict()["mu"])
    avail = rng.uniform(0.0, 1.0, blocks)
    pend = []
    recs = []
    budgets = [block_budget_id("d", b) for b in range(blocks)]
    for j, i in enumerate(pick):
        task = ts[int(i)]
        k = min(blocks, task.k)
        start = int(rng.integers(0, blocks - k + 1))
        dims = np.arange(start, start + k, dtype=np.int64)
        d = (task.mu / mu_b) ** 2
        pend.append(Pending(dims, np.full(k, d), float(j)))
        recs.append(PendingRecord("d", f"t{j}", "ana", {}, tuple(budgets[b] for b in dims),
                                  tuple([d] * k), "waiting", "queued", None,
                                  "2026-01-01T00:00:00+00:00", "2100-01-01T00:00:00+00:00"))
    init = flt.to_json()
    states = {}
    for b, u in zip(budgets, rng.uniform(0.0, 0.5, blocks), strict=True):
        f = GDPResidueFilter(mu_b)
        f.try_spend(charge_of("dpsieve", mu_b * math.sqrt(float(u))))
        states[b] = (f.to_json(), init)
    out: dict[str, float] = {}
    for policy in ("dpf", "dpack", "fcfs"):
        times = []
        for _ in range(reps):
            t0 = time.process_time()
            schedule(policy, pend, avail)
            times.append((time.process_time() - t0) * 1e3)
        out[f"schedule {policy}"] = statistics.median(times)
    from benchmarks._blocks_rdp import ORDERS

    m = len(ORDERS)
    avail2 = rng.uniform(-0.2, 1.0, (blocks, m))
    pend2 = [Pending(p.dims, np.tile(rng.uniform(0.001, 0.1, m), (p.dims.size, 1)),
                     p.arrival) for p in pend]
    for policy in ("dpf", "dpack"):
        times = []
        for _ in range(reps):
            t0 = time.process_time()
            schedule(policy, pend2, avail2, rule="any")
            times.append((time.process_time() - t0) * 1e3)
        out[f"schedule {policy}, {m} orders per block (rule any)"] = statistics.median(times)
    now = time.time()
    from dpsieve.ledger import passes

    for policy in ("dpf", "dpack"):
        cold, warm = [], []
        for _ in range(max(5, reps // 5)):
            passes._USED.clear()  # cold: every state's fraction computed from its text
            t0 = time.process_time()
            plan_pass(policy, recs, states, {}, now)
            cold.append((time.process_time() - t0) * 1e3)
            t0 = time.process_time()  # warm: the states unchanged since the last pass
            plan_pass(policy, recs, states, {}, now)
            warm.append((time.process_time() - t0) * 1e3)
        out[f"plan_pass {policy}, states unchanged since the last pass"] = \
            statistics.median(warm)
        out[f"plan_pass {policy}, every state new"] = statistics.median(cold)
    out.update(ledger_pass(seed))
    return out


def ledger_pass(seed: int, blocks: int = 1000, pending: int = 100) -> dict[str, float]:
    """Median CPU ms of the SQLite ledger's whole ``schedule_pass`` (lock and check every
    budget the waiting requests name, plan, write positions and reasons) at ``blocks``
    blocks (1/10 unlocked) and ``pending`` waiting requests of 20 % on k contiguous blocks
    (k as the offline trace's), none admitted: the pass's steady state."""
    import tempfile

    from dpsieve.accounting.events import PureDP
    from dpsieve.blocks import Unlock
    from dpsieve.filters import PureDPFilter
    from dpsieve.ledger import SQLiteStore

    rng = np.random.default_rng(seed)
    with tempfile.TemporaryDirectory() as d:
        s = SQLiteStore(Path(d) / "l.db")
        s.declare_blocks("d", {"column": "day", "budget": {"type": "pure", "eps": 1.0},
                               "scheduler": "dpack"})
        unlock = Unlock("periodic", Fraction(1, 10), 1e9)
        ids = [s.add_block("d", i, PureDPFilter(1.0), unlock).budget_id
               for i in range(blocks)]
        named: set[str] = set()
        for j in range(pending):
            k = min(blocks, max(1, math.ceil(float(rng.lognormal(math.log(3.0), 1.5)))))
            start = int(rng.integers(0, blocks - k + 1))
            named.update(ids[start:start + k])
            s.enqueue("d", f"t{j}", PureDP(0.2), ids[start:start + k], [0.2] * k, wait=1e6)
        times = []
        for _ in range(7):
            t0 = time.process_time()
            s.schedule_pass("d")
            times.append((time.process_time() - t0) * 1e3)
        s.close()
    return {f"SQLite schedule_pass, whole (locks and checks {len(named)} budgets, "
            "writes positions)": statistics.median(times)}


SETTINGS_INTRO = """**Online settings** (``--part settings``; ``Setting`` in the module): the
same traces under today's setting and DPack's online one, each side by side in one run,
on the Gaussian trace (GDP residue vs zCDP blocks) and on the mixed trace (Laplace,
Gaussian and DP-SGD tasks; any-order RDP blocks vs zCDP blocks, each task charged its
zCDP: ``_blocks_rdp.zcdp_rho``)."""


#: What the numbers say about the goals (written with the table; the figures in it are
#: those of the run in benchmarks/RESULTS.md).
READING = """Reading (goals of issue 29). **dpack >= 1.3x dpf: met offline only, on blocks kept at
several Rényi orders against DPack's own DPF (1.303 +- 0.010); missed online under every
setting tried, DPack's own included.** On one currency (the Gaussian trace) dpack
completes 1.047x DPF's tasks under today's setting, 1.031x and 1.041x under DPack's at
T = 1 and 10 days (1.119x offline): with one order per block DPack's edge is ranking by
sum_j d_j / available_j instead of the largest share, and every task names the newest
blocks, whose unlocked slices are the smallest, so the two keys mostly agree (our
reading of the numbers; not isolated by a run). On the
mixed trace (Laplace, Gaussian, DP-SGD curves; ``AnyOrderRDPFilter`` blocks) DPF's
largest share over orders sits at an order Laplace and DP-SGD tasks do not need, DPack
measures each block where most waiting tasks fit: 1.103x today, 1.096x and 1.140 +-
0.003x under DPack's setting (1.126x against DPF on one currency). DPack's online setting
(its artifact's: a batch every 10 block periods, unlocking over 30 in 1,000 steps, no
timeout, the metric recomputed every 50 admissions) raises what *every* policy completes
(GDP dpf 1162 -> 1262 / 1242, dpack 1217 -> 1301 / 1294: nothing times out and the run
goes on until every block is unlocked) and the ratio only a little (larger batches give
the knapsack more choice: 1.10 -> 1.14 on the mixed trace); the final, offline-like pass
finds the blocks mostly spent. Re-ranking within a pass (``schedule(recompute=)``, new,
tested) is worth 0.3-0.9 %: every 50 admissions changes nothing under today's setting
(fewer than 50 admissions a pass) and adds 0.1-0.5 % at T = 10; after every admission
+0.5-0.8 % today, +0.3-0.9 % at T = 10 (table above). The principled reason
for the rest is the trace: DPack's
1.3-1.7x are on Alibaba-DP, whose normalised demands span three decades (0.001-1 of a
block at the best order), whose tasks read up to 100 blocks, and whose mechanisms
(Laplace, Gaussian, subsampled Laplace, DP-FTRL, subsampled Gaussian) are kept at 12
orders from 1.5; ours span 0.3-30 % of a block with k of median 2. Alibaba-DP is derived
from Alibaba's GPU trace, which is not here; a synthetic trace shaped until dpack
reaches 1.3x would be tuned to the goal, so none was made. **>= 1.2x the same scheduler
on zCDP accounting: missed against the tightest conversion under every setting** -- on
the Gaussian trace 1.034x (today), 1.030x and 1.029x (DPack's) against CKS budgets,
1.085x, 1.071x and 1.070x against Bun-Steinke budgets; the capacity table bounds it (a
(10, 1e-7) block holds 1.099x the Gaussian tasks under the GDP residue filter as under
CKS zCDP; 1.236x vs Bun-Steinke: the issue's 89 vs 72, met only for identical tasks
against Bun-Steinke budgets). Tasks completed gain less than capacity when demands
differ: the extra room goes to the marginal tasks of a smallest-first order, the
largest and widest. On DPack's mechanism mix the gap is smaller still: any-order RDP
blocks complete 1.001 +- 0.005x (today), 1.044x and 1.043x (DPack's) the tasks of zCDP
blocks running the same dpack. zCDP cannot price subsampling (the subsampled Gaussian's
zCDP is the full Gaussian's), so the ~240 DP-SGD tasks of a trace never fit a zCDP
block, but they are elephants, of which any scheduler completes few (57-82 under
any-order RDP); Laplace mice gain 10 % from per-order pricing (123.6 vs 112.2 today);
Gaussian tasks lose 10 % (617 vs 684 completed), because the any-order block splits delta over its
8 orders and converts plainly (its proof needs both), where a zCDP block converts with
CKS over every order. Exact accounting gains most on Laplace tasks at moderate eps
(capacity 1.13-1.17x CKS at eps 0.1-0.3) and on subsampled mechanisms; of dpsieve's
exact filters the GDP residue filter (and ``MixedFilter``) take Laplace and Gaussian
charges exactly but refuse DP-SGD (an asymmetric PLD), so they cannot be the block
filter for DPack's mix, and their fraction is not additive for Laplace charges (a pass
would check each proposal against the real filters); ``AnyOrderRDPFilter`` takes the
whole mix, at the delta split above. >= 1.2x would need a workload of completing
Laplace tasks at moderate eps or of subsampled tasks that fit -- not DPack's mix on
this trace. **Met: the decision time** -- one `schedule` pass 0.3-1.1 ms CPU on one
currency, 0.7-2.1 ms at 8 orders per block, the ledger's pass plan 2.6-3.1 ms when the
1,000 states are unchanged since the last pass, 7.7-8.3 ms when every state is new; the
SQLite ledger's whole durable pass (locks, checks, writes positions) takes more (the
last row): the 5 ms goal holds for the decision, not for the durable pass. The
re-ranking change to ``schedule`` was timed against main's in one process (1,000
blocks x 100 tasks, 15 alternating repeats): the same decisions, medians 0.82-1.11x
of main's (noise at load 7-9)."""


#: the online settings' runs: (accounting or block rule, policy label) per trace
GAUSS_RUNS = tuple((kind, p) for kind in ("dpsieve GDP", "zCDP (CKS)", "zCDP (Bun-Steinke)")
                   for p in ("dpf", "dpack"))
MIXED_RUNS = (("any", "dpf", False), ("any", "dpf", True), ("any", "dpack", False),
              ("zcdp", "dpf", False), ("zcdp", "dpack", False))


def settings_seed(seed: int, settings: tuple[Setting, ...] = SETTINGS) -> dict[str, Any]:
    """One seed of the settings comparison: tasks completed per setting, on the Gaussian
    trace (GAUSS_RUNS) and on the mixed trace (MIXED_RUNS: any-order RDP blocks and
    zCDP blocks); DP-SGD tasks completed and never-fitting tasks alongside."""
    from benchmarks import _blocks_rdp as rdp

    kinds = block_filters()
    ts = trace(seed)
    mechs = rdp.mechanisms(ts, seed)
    out: dict[str, Any] = {"seed": seed, "tasks": len(ts), "rows": []}
    for st in settings:
        # today's setting: the mixed trace's new rows only (the others are the tables
        # above, same code and seeds) and the any-order dpack row they are compared to
        today = st == SETTINGS[0]
        for kind, policy in () if today else GAUSS_RUNS:
            r = simulate(ts, policy, kind, kinds[kind], setting=st)
            out["rows"].append({"setting": st.name, "trace": "gaussian", "accounting": kind,
                                "policy": policy, "completed": int(r["completed"]),
                                "elephants": int(r["elephants"]), "never": int(r["never"]),
                                "replay_refusals": int(r["replay_refusals"])})
        for rule, policy, one in MIXED_RUNS:
            if today and rule == "any" and (policy, one) != ("dpack", False):
                continue
            r = rdp.simulate_rdp(ts, mechs, policy, rule, one_currency=one, days=DAYS,
                                 setting=st)
            out["rows"].append({"setting": st.name, "trace": "mixed", "accounting": rule,
                                "policy": rdp_label(policy, one),
                                "completed": int(r["completed"]),
                                "sgm": int(r["by_mechanism"].get("sgm", 0)),
                                "laplace": int(r["by_mechanism"].get("laplace", 0)),
                                "never": int(r["never"]),
                                "replay_refusals": int(r["replay_refusals"])})
    return out


def settings_tables(results: list[dict[str, Any]]) -> list[str]:
    """The settings comparison's tables (mean +- se over the seeds in ``results``)."""
    def cell(setting: str, tr: str, acc: str, pol: str, key: str = "completed"
             ) -> list[int]:
        return [int(r[key]) for res in results for r in res["rows"]
                if r["setting"] == setting and r["trace"] == tr and r["accounting"] == acc
                and r["policy"] == pol]

    def ms(xs: list[float]) -> str:
        m = statistics.fmean(xs)
        se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
        return f"{m:.3f} +- {se:.3f}"

    def ratio(a: list[int], b: list[int]) -> str:
        if not a or not b:
            return "(tables above)"
        rs = [x / y for x, y in zip(a, b, strict=True)]
        return f"{ms(rs)} (min {min(rs):.3f})"

    names = list(dict.fromkeys(r["setting"] for r in results[0]["rows"]))
    lines = ["| setting | trace | accounting | policy | completed (mean +- se) | "
             "of which elephants (Gaussian trace) or DP-SGD (mixed) | Laplace (mixed) | "
             "never fit |", "|---|---|---|---|---|---|---|---|"]
    for st in names:
        for r0 in (r for r in results[0]["rows"] if r["setting"] == st):
            tr, acc, pol = r0["trace"], r0["accounting"], r0["policy"]
            xs = cell(st, tr, acc, pol)
            se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
            big = "sgm" if tr == "mixed" else "elephants"
            lap = (f"{statistics.fmean(cell(st, tr, acc, pol, 'laplace')):.1f}"
                   if tr == "mixed" else "")
            acc_l = {"any": "any-order RDP", "zcdp": "zCDP (CKS)"}.get(acc, acc)
            lines.append(f"| {st} | {tr} | {acc_l} | {pol} | {statistics.fmean(xs):.1f} +- "
                         f"{se:.1f} | {statistics.fmean(cell(st, tr, acc, pol, big)):.1f} | "
                         f"{lap} | {statistics.fmean(cell(st, tr, acc, pol, 'never')):.1f} |")
    lines += ["", "| setting | dpack / dpf, GDP (Gaussian trace) | dpack / dpf, any-order "
              "RDP (mixed) | dpack / dpf one currency (mixed) | dpack GDP / dpack zCDP CKS "
              "(Gaussian) | dpack GDP / dpack zCDP B-S (Gaussian) | dpack any-order RDP / "
              "dpack zCDP (mixed) |", "|---|---|---|---|---|---|---|"]
    for st in names:
        g, mx, gdp = "gaussian", "mixed", "dpsieve GDP"
        pairs = [((g, gdp, "dpack"), (g, gdp, "dpf")),
                 ((mx, "any", "dpack"), (mx, "any", "dpf")),
                 ((mx, "any", "dpack"), (mx, "any", "dpf, one currency")),
                 ((g, gdp, "dpack"), (g, "zCDP (CKS)", "dpack")),
                 ((g, gdp, "dpack"), (g, "zCDP (Bun-Steinke)", "dpack")),
                 ((mx, "any", "dpack"), (mx, "zcdp", "dpack"))]
        lines.append(f"| {st} | " + " | ".join(
            ratio(cell(st, *a), cell(st, *b)) for a, b in pairs) + " |")
    refusals = sum(int(r["replay_refusals"]) for res in results for r in res["rows"])
    lines += ["", f"Replayed through fresh real filters, {refusals} admitted charges were "
              "refused (0: no block overspent)."]
    return lines


def settings_main(seeds: int, out: Path) -> None:
    """``--part settings``: the settings comparison alone, one JSON line per seed
    appended to ``out`` as it finishes, tables from every line there at the end."""
    import json

    t0 = time.perf_counter()
    load0 = os.getloadavg()[0]
    done = {json.loads(x)["seed"] for x in out.read_text().splitlines()} \
        if out.exists() else set()
    for seed in range(seeds):
        if seed in done:
            continue
        res = settings_seed(seed)
        with out.open("a") as fh:
            fh.write(json.dumps(res) + "\n")
        print(f"seed {seed} done at {time.perf_counter() - t0:.0f} s", flush=True)
    results = sorted((json.loads(x) for x in out.read_text().splitlines()),
                     key=lambda r: int(r["seed"]))[:seeds]
    lines = [f"Settings: seeds 0-{len(results) - 1}, load average {load0:.1f} at the start, "
             f"{time.perf_counter() - t0:.0f} s.", "", *settings_tables(results)]
    print("\n".join(lines))


def rerank_main(seeds: int) -> None:
    """``--part rerank``: dpack re-ranking never, every 50 and after every admission
    (``schedule(recompute=)``), under today's setting and DPack's at T = 10 days, on the
    Gaussian trace (GDP blocks) and the mixed trace (any-order RDP blocks); tasks
    completed, mean +- se over seeds."""
    import dataclasses

    from benchmarks import _blocks_rdp as rdp

    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    flt = block_filters()["dpsieve GDP"]
    rows: dict[tuple[str, int, str], list[int]] = {}
    for seed in range(seeds):
        ts = trace(seed)
        mechs = rdp.mechanisms(ts, seed)
        for base in (SETTINGS[0], SETTINGS[2]):
            for rc in (0, 50, 1):
                st = dataclasses.replace(base, recompute=rc)
                g = simulate(ts, "dpack", "dpsieve GDP", flt, setting=st, replay=False)
                m = rdp.simulate_rdp(ts, mechs, "dpack", "any", days=DAYS, setting=st)
                rows.setdefault((base.name, rc, "gaussian"), []).append(int(g["completed"]))
                rows.setdefault((base.name, rc, "mixed"), []).append(int(m["completed"]))
                print(seed, base.name, rc, g["completed"], m["completed"], flush=True)
    print(f"\nseeds 0-{seeds - 1}, load average {load0:.1f} at the start, "
          f"{time.perf_counter() - t0:.0f} s\n")
    print("| setting | dpack re-ranks | Gaussian trace, GDP | mixed trace, any-order RDP |")
    print("|---|---|---|---|")
    for (name, rc, tr), xs in rows.items():
        if tr != "gaussian":
            continue
        cells = []
        for ys in (xs, rows[(name, rc, "mixed")]):
            se = statistics.stdev(ys) / math.sqrt(len(ys)) if len(ys) > 1 else 0.0
            cells.append(f"{statistics.fmean(ys):.1f} +- {se:.1f}")
        when = {0: "once a pass", 1: "after every admission"}.get(rc, f"every {rc}")
        print(f"| {name} | {when} | {cells[0]} | {cells[1]} |")


def alibaba_main(seeds: int, out: Path, blocks: tuple[int, ...] | None = None,
                 first_seed: int = 0) -> None:
    """``--part alibaba``: DPack's Alibaba-DP parameters (``benchmarks._alibaba_dp``: the
    trace, its sources, the runs), B = 30, 90, 180 new blocks; one JSON line per (B,
    seed) appended to ``out`` as it finishes (resumable; ``blocks``: only those B; seeds
    ``first_seed`` .. ``seeds - 1``), tables from every line there at the end (seeds 0 ..
    ``seeds - 1``; a (B, seed) run twice counts once: runs are deterministic)."""
    import json

    from benchmarks import _alibaba_dp as ali

    t0, load0 = time.perf_counter(), os.getloadavg()[0]
    done = {(json.loads(x)["B"], json.loads(x)["seed"]) for x in out.read_text().splitlines()
            } if out.exists() else set()
    for b in blocks or ali.NEW_BLOCKS:
        for seed in range(first_seed, seeds):
            if (b, seed) in done:
                continue
            res = ali.run_seed(seed, b)
            with out.open("a") as fh:
                fh.write(json.dumps(res) + "\n")
            print(f"B {b} seed {seed} done at {time.perf_counter() - t0:.0f} s", flush=True)
    uniq = {(r["B"], r["seed"]): r for r in map(json.loads, out.read_text().splitlines())}
    results = [r for r in uniq.values() if int(r["seed"]) < seeds]
    print(f"Alibaba-DP parameters: seeds 0-{seeds - 1}, load average {load0:.1f} at the "
          f"start, {time.perf_counter() - t0:.0f} s.\n")
    print("\n".join(ali.tables(results)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--part", choices=("all", "settings", "times", "rerank", "alibaba",
                                       "alibaba-block"),
                    default="all",
                    help="settings: only the online settings' comparison (one JSON line a "
                    "seed in benchmarks/results/blocks_settings.jsonl, resumable); times: "
                    "only the decision times; rerank: dpack's re-ranking period; alibaba: DPack's "
                    "Alibaba-DP parameters (benchmarks/_alibaba_dp.py; one JSON line a run "
                    "in benchmarks/results/blocks_alibaba.jsonl, resumable)")
    ap.add_argument("--blocks", default="", help="alibaba: only these B (comma-separated), "
                    "written to blocks_alibaba_<B>.jsonl (to run beside the others)")
    ap.add_argument("--first-seed", type=int, default=0, help="alibaba: start at this seed")
    args = ap.parse_args()
    if args.part == "alibaba-block":
        from benchmarks import _alibaba_dp as ali

        load0 = os.getloadavg()[0]
        for b in (int(x) for x in (args.blocks or "30").split(",")):
            rs = [ali.block_diagnostic(seed, b) for seed in range(args.seeds)]
            xs = {p: [int(r["rows"][i]["completed"]) for r in rs]
                  for i, p in enumerate(("dpack", "dpf"))}
            ratios = [x / y for x, y in zip(xs["dpack"], xs["dpf"], strict=True)]
            refused = sum(int(x["replay_refusals"]) for r in rs for x in r["rows"])
            print(f"B {b}, seeds 0-{args.seeds - 1}, load {load0:.1f}: dpack {xs['dpack']}, "
                  f"dpf {xs['dpf']}, ratios {[round(x, 3) for x in ratios]}, mean "
                  f"{statistics.fmean(ratios):.3f} +- {statistics.stdev(ratios) / math.sqrt(len(ratios)):.3f}; "  # noqa: E501
                  f"replay refusals {refused}")
        return
    if args.part == "alibaba":
        blocks = tuple(int(b) for b in args.blocks.split(",")) if args.blocks else None
        out = HERE / "results" / ("blocks_alibaba.jsonl" if blocks is None else
                                  f"blocks_alibaba_{'_'.join(map(str, blocks))}.jsonl")
        alibaba_main(args.seeds, out, blocks, args.first_seed)
        return
    if args.part == "settings":
        settings_main(args.seeds, HERE / "results" / "blocks_settings.jsonl")
        return
    if args.part == "rerank":
        rerank_main(args.seeds)
        return
    if args.part == "times":
        for k, v in decision_times(2026).items():
            print(f"| {k} | {v:.2f} |")
        return
    load0 = os.getloadavg()[0]
    t_start = time.perf_counter()
    kinds = block_filters()
    rows: dict[tuple[str, str], list[int]] = {}
    checks = {"replay_refusals": 0}
    sizes = []
    for seed in range(args.seeds):
        ts = trace(seed)
        sizes.append(len(ts))
        for kind, flt in kinds.items():
            for policy in ("dpf", "dpack", "fcfs"):
                r = simulate(ts, policy, kind, flt)
                rows.setdefault((kind, policy), []).append(int(r["completed"]))
                checks["replay_refusals"] += int(r["replay_refusals"])
                print(seed, kind, policy, r, flush=True)
    from benchmarks import _blocks_rdp as rdp

    rrows: dict[tuple[str, str], list[int]] = {}
    for seed in range(args.seeds):
        ts = trace(seed)
        mechs = rdp.mechanisms(ts, seed)
        for rule in ("any", "every"):
            for policy, one in RDP_POLICIES:
                r = rdp.simulate_rdp(ts, mechs, policy, rule, one_currency=one, days=DAYS,
                                     setting=SETTINGS[0])
                rrows.setdefault((rule, rdp_label(policy, one)), []).append(
                    int(r["completed"]))
                checks["replay_refusals"] += int(r["replay_refusals"])
                print(seed, "rdp", rule, policy, one, r, flush=True)
    roff = {rule: [rdp.offline_rdp(seed, rule) for seed in range(args.seeds)]
            for rule in ("any", "every")}
    off = [offline(seed) for seed in range(args.seeds)]
    caps = capacity()
    times = decision_times(2026)
    elapsed = time.perf_counter() - t_start

    def mean_se(xs: list[int] | list[float]) -> tuple[float, float]:
        m = statistics.fmean(xs)
        se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else 0.0
        return m, se

    def ratio(a: tuple[str, str], b: tuple[str, str]) -> tuple[float, float, float]:
        rs = [x / y for x, y in zip(rows[a], rows[b], strict=True)]
        m, se = mean_se(rs)
        return m, se, min(rs)

    lines = [
        "## Blocks: tasks completed by the schedulers, and decision time "
        "(benchmarks/blocks_scheduler.py)", "",
        f"Command: `python -m benchmarks.blocks_scheduler --seeds {args.seeds}`. Synthetic "
        f"trace (module docstring): {DAYS} daily blocks of (10, 1e-7), DPF-T unlocking "
        f"1/{UNLOCK_N} a day, Alibaba-like bursty arrivals, 75 % mice / 25 % elephants "
        f"(Gaussian tasks), k most recent blocks (log-normal), {WAIT:g}-day timeout, a pass "
        f"every {STEP:g} day; seeds 0-{args.seeds - 1}, {statistics.fmean(sizes):.0f} tasks "
        f"per trace on average. Load average {load0:.1f} at the start; {elapsed:.0f} s.", "",
        "| accounting | policy | tasks completed (mean +- se over seeds) |", "|---|---|---|"]
    for (kind, policy), xs in rows.items():
        m, se = mean_se(xs)
        lines.append(f"| {kind} | {policy} | {m:.1f} +- {se:.1f} |")
    lines += ["", "| ratio | mean +- se | smallest over seeds | goal |", "|---|---|---|---|"]
    for label, a, b, goal in [
            ("dpack / dpf, dpsieve GDP", ("dpsieve GDP", "dpack"), ("dpsieve GDP", "dpf"),
             ">= 1.3"),
            ("dpack GDP / dpack zCDP (Bun-Steinke)", ("dpsieve GDP", "dpack"),
             ("zCDP (Bun-Steinke)", "dpack"), ">= 1.2"),
            ("dpack GDP / dpack zCDP (CKS)", ("dpsieve GDP", "dpack"),
             ("zCDP (CKS)", "dpack"), ">= 1.2"),
            ("dpack GDP / dpf zCDP (CKS)", ("dpsieve GDP", "dpack"),
             ("zCDP (CKS)", "dpf"), "")]:
        m, se, lo = ratio(a, b)
        lines.append(f"| {label} | {m:.3f} +- {se:.3f} | {lo:.3f} | {goal} |")
    off_r = [o["dpack"] / o["dpf"] for o in off]
    m, se = mean_se(off_r)
    lines += ["", "Offline packing (100 blocks unlocked, 3,000 tasks, random windows, one "
              "pass), tasks admitted, mean over seeds: " + ", ".join(
                  f"{p} {statistics.fmean(o[p] for o in off):.0f}"
                  for p in ("dpf", "dpack", "fcfs")) + f"; dpack / dpf {m:.3f} +- {se:.3f}."]
    lines += ["", "**Blocks kept at several Rényi orders** (module docstring; the same traces, "
              "each task a Laplace, Gaussian or DP-SGD curve), tasks completed online "
              "(mean +- se over seeds) and admitted offline (100 blocks, 3,000 tasks, one "
              "pass; mean over seeds):", "",
              "| block rule | policy | online | offline |", "|---|---|---|---|"]
    for (rule, label), xs in rrows.items():
        m, se = mean_se(xs)
        o_txt = f"{statistics.fmean(o[label] for o in roff[rule]):.0f}"
        lines.append(f"| {rule} order | {label} | {m:.1f} +- {se:.1f} | {o_txt} |")
    lines += ["", "| ratio (rule any: AnyOrderRDPFilter) | online, mean +- se | smallest "
              "| offline, mean +- se | goal |", "|---|---|---|---|---|"]
    for num, den in (("dpack", "dpf"), ("dpack", "dpf, one currency"),
                     ("dpack, one currency", "dpf, one currency")):
        rs = [x / y for x, y in zip(rrows[("any", num)], rrows[("any", den)], strict=True)]
        m, se = mean_se(rs)
        om, ose = mean_se([o[num] / o[den] for o in roff["any"]])
        lines.append(f"| {num} / {den} | {m:.3f} +- {se:.3f} | {min(rs):.3f} | "
                     f"{om:.3f} +- {ose:.3f} | >= 1.3 |")
    lines += ["", "Accounting capacity: tasks of one kind a fresh (10, 1e-7) block admits "
              "(real filters):", "",
              "| task | GDP residue | zCDP (CKS) | zCDP (Bun-Steinke) | GDP / CKS | "
              "GDP / B-S |", "|---|---|---|---|---|---|"]
    for name, g, c, bs in caps:
        lines.append(f"| {name} | {g} | {c} | {bs} | {g / c:.3f} | {g / bs:.3f} |")
    lines += ["", f"Replayed through fresh real filters, {checks['replay_refusals']} admitted "
              "charges were refused (0: no block overspent).", "",
              "Decision time at 1,000 blocks x 100 pending tasks (median CPU ms; goal <= 5 ms per "
              "scheduling decision):", "", "| step | ms |", "|---|---|"]
    lines += [f"| {k} | {v:.2f} |" for k, v in times.items()]
    set_res = [settings_seed(seed) for seed in range(args.seeds)]
    lines += ["", SETTINGS_INTRO, "", *settings_tables(set_res)]
    lines += ["", READING]
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_write:
        OUT.write_text(text)


if __name__ == "__main__":
    main()
