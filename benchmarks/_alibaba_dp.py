"""A synthetic trace with DPack's published Alibaba-DP workload parameters.

Used by ``benchmarks.blocks_scheduler --part alibaba``. Every parameter below was fixed,
with its source, **before any comparison was run** (the commit that added this
docstring holds no measurement). Sources, read (never copied) through the project's
search tool:

* [paper] Tholoniat, Kostopoulou, Chowdhury, Cidon, Geambasu, Lécuyer, Yang, "Packing
  Privacy Budget Efficiently" (EuroSys 2025; arXiv 2212.13228): its Alibaba-DP
  methodology, quoted in the workload artifact's README;
* [gen] github.com/columbia/alibaba-dp-workload (the generator):
  ``alibaba_privacy_workload/config/_default.yaml``, ``privacy_workload.py``
  (``compute_budget``, ``compute_num_blocks``, ``post_process_task``), ``utils.py``;
* [sim] github.com/columbia/dpack (the simulator and the runs of its Alibaba figure):
  ``experiments/plot_alibaba.py``, ``experiments/ray_runner.py`` (``grid_online``),
  ``privacypacking/config/default.yaml``, ``privacypacking/config.py``,
  ``privacypacking/simulator/tasks.py``, ``privacypacking/schedulers/budget_unlocking.py``.

**Blocks.** 100 blocks present at time 0, then one block per period for ``B`` periods
([sim] ``plot_alibaba.py``: ``initial_blocks=[100]``, ``max_blocks = 100 + {30, 60, 90,
120, 180}``; ``config.py``: ``block_arrival_interval = 1``); we run B = 30, 90 and 180
(both ends of its range and the middle). Each block an (eps, delta) = (10, 1e-7) budget
([sim] ``default.yaml``) at the Rényi orders of [gen]/[sim] (1.5, 1.75, 2, 2.5, 3, 4, 5,
6, 8, 16, 32, 64) **with a positive budget** at (10, 1e-7): (3, 4, 5, 6, 8, 16, 32, 64)
-- at 1.5-2.5 DPack's block capacity ``eps + log(delta) / (a - 1)`` is negative, so no
task with a positive demand can use them (keeping them would change nothing).

**Tasks: how many and when.** 100 tasks at time 0 ([sim] ``default.yaml``
``tasks.initial_num: 100``), then a Poisson process of 100 tasks per block period
([sim] ``default.yaml`` ``tasks.avg_num_tasks_per_block: 100``, ``sampling: poisson``;
``grid_online``'s ``avg_num_tasks_per_block=[100]``) while blocks arrive, none after the
last block ([sim] ``tasks.py``). *Open*: the Alibaba-DP run replays the submit-time gaps
of its CSV (one month of Alibaba's 2020 GPU trace, which is not here) stretched over the
B periods, so its tasks per period fall as B grows; neither the CSV nor its task count is
available here, so we take the simulator's own rate for sampled workloads, the same at
every B. Burstiness within a period is not modelled (the scheduler runs a batch every 10
periods: arrival order within a batch only breaks ties).

**Blocks a task asks for.** Its ``k`` most recent blocks at arrival ([paper]: "all tasks
request the most recent blocks"; [gen] ``LatestBlocksFirst``), k in 1..100 ([gen]
``n_blocks_cutoff: 100``, k an affine function of bytes read, ``int`` then at least 1).
*Open*: the distribution of bytes read in the GPU trace; [paper] expects "a power law
with many tasks having small requests and a long tail", so k = floor(X), X log-uniform
on [1, 101) (density 1/x: equal mass per decade, the scale-free power law), weight 1
([paper]; [gen] ``compute_profit``).

**Demand.** A task asks the same RDP curve of every block it names ([sim]
``UniformTask``). Its **normalised demand at the best order**, ``d* = min_a rdp(a) /
(10 + log(1e-7) / (a - 1))`` ([gen] ``post_process_task``: ``normalizing_epsilon: 10``,
``normalizing_delta: 1e-7``), lies in [0.001, 1] ([gen] ``rdp_epsilon_min: 1e-3`` and the
cut at 1; [paper]: "whose smallest normalized RDP eps is not in [0.001, 1]" are cut).
*Open*: the distribution within (in [gen] eps is an affine map of memory x runtime of
the GPU trace, then truncated); by the same reading of [paper], d* is log-uniform on
[0.001, 1], drawn independently of k ([gen] derives the two from different columns).

**Mechanisms and their curves** ([gen] ``compute_budget``). A task is CPU-based or
GPU-based; CPU-based tasks are Laplace, Gaussian or subsampled Laplace, 1:1:1
(``cpu_mechanisms_frequencies``); GPU-based ones DP-FTRL or subsampled Gaussian, 1:1
(``gpu_mechanisms_frequencies``). *Open*: the CPU/GPU split (a threshold on the GPU
trace's planned GPU); we take 1:1. The curves, at the block orders, each calibrated on
its noise (Brent's method on log noise, then the noisier side: d at most d*, within
4e-6 relative for the subsampled Gaussian, whose charge is ``sgm_rdp_up``'s widened
bound) so that its normalised demand at the best order is the task's d*:

* **Laplace**: one release, Mironov's Laplace RDP (Mironov 2017, Prop. 6), scale b;
* **Gaussian** (``epochs`` compositions) and **DP-FTRL** (ceil(log(dataset size))
  Gaussian compositions, [gen]): RDP ``c a``; steps and sigma only set c = steps / (2
  sigma^2), so both are the curve ``c a`` with c calibrated;
* **subsampled Gaussian** (DP-SGD): Poisson rate q = batch / dataset size, steps =
  epochs x dataset size // batch ([gen] ``compute_noise_and_rdp_from_target_epsilon``);
  RDP of one step by Mironov, Talwar & Zhang 2019 at integer orders
  (``dpsieve.training.tuning.sgm_rdp_up``; [gen] uses opacus' ``compute_rdp``, the same
  bound), times steps; noise multiplier calibrated;
* **subsampled Laplace**: the same q and steps; one step's RDP the least of three
  upper bounds at integer orders: Zhu & Wang 2019 ("Poisson Subsampled Rényi
  Differential Privacy", Thm. 6, their general bound, from the Laplace's RDP at orders
  2..a), a eps1^2 / 2 (eps1 below: a pure eps1-DP step is (eps1^2 / 2)-zCDP) and the
  Laplace's own RDP (subsampling never raises a Rényi divergence); [gen] uses autodp's
  improved bound for Poisson sampling instead; scale b calibrated. *Fixed after the
  first version, before any comparison*: Thm. 6 alone does not vanish as the noise
  grows (its factor 3), so small demands could not be reached (a task asked up to 270
  times its d*); the other two bounds vanish.

The dataset size is ``1000 k`` ([gen] ``avg_block_size: 1000``); epochs in 1..200 ([gen]
``epochs_min/max``, affine in runtime) and batch in 64..min(4096, dataset size // 10)
([gen] ``batch_size_min/max``, affine in planned GPU). *Open*: their distributions;
each floor of a log-uniform over its range, as k.

**Charges under zCDP** (the same tasks on ``ZCDPFilter`` blocks): Gaussian and DP-FTRL
rho = c (exact: RDP c a at every order); Laplace 1 / (2 b^2) (its pure eps0 = 1/b as
eps0^2 / 2, Bun & Steinke 2016 Prop. 1.4, as ``_blocks_rdp.zcdp_rho``); subsampled
Gaussian steps / (2 sigma^2) (zCDP bounds every order, and the subsampled Gaussian's RDP
tends to the full Gaussian's at large orders: subsampling buys nothing under zCDP);
subsampled Laplace steps x eps1^2 / 2, eps1 = log(1 + q (e^{1/b} - 1)) the pure DP of one
subsampled step (amplification by Poisson sampling, Balle, Barthe & Gaboardi 2018).

**Scheduling** (DPack's online Alibaba runs, [sim] ``plot_alibaba.py`` and
``grid_online``): a batch pass every T = 10 block periods (``scheduling_wait_time``),
each block unlocked in N = 1,000 equal steps over a 30-period lifetime (``n``,
``data_lifetime``: DPF-T, [sim] ``budget_unlocking.py``), DPack's metric recomputed every
50 admissions (``metric_recomputation_period``), no timeout (tasks wait until the run
ends, a lifetime after the last block, when every block is unlocked). Policies: ``dpack``
(DPack: each block measured at the order where most waiting tasks fit), ``dpf`` (DPack's
DPF: largest share over blocks and orders), ``dpf, one currency`` (one fraction per
block: the stronger DPF on the mixed traces of ``blocks_scheduler``), ``fcfs``.

**Accountings** (dpsieve's filters, the same tasks and policies side by side): blocks as
``AnyOrderRDPFilter.for_target(10, 1e-7, ORDERS)`` (a task fits while one order holds,
DPack's block rule; delta split over the orders, plain conversion) and as
``ZCDPFilter(zcdp_rho_for(10, 1e-7))``; and, on the trace's Gaussian and DP-FTRL tasks
alone (the tasks that are Gaussian), ``GDPResidueFilter`` blocks (mu_B of (10, 1e-7),
each task GDP(sqrt(2 c))) against the same zCDP blocks. After each run every block's
admitted charges are replayed through a fresh real filter: all must be admitted.

**Seeds** 0-4 (each seed one trace), means +- standard errors over seeds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import special

ORDERS: tuple[int, ...] = (3, 4, 5, 6, 8, 16, 32, 64)
BLOCK_EPS, BLOCK_DELTA = 10.0, 1e-7
INITIAL_BLOCKS = INITIAL_TASKS = 100
RATE = 100.0  # tasks per block period
NEW_BLOCKS = (30, 90, 180)  # B
K_MAX = 100
D_MIN, D_MAX = 1e-3, 1.0
EPOCHS, BATCH, BLOCK_SIZE = (1, 200), (64, 4096), 1000
CPU = ("laplace", "gaussian", "subsampled_laplace")
GPU = ("dp_ftrl", "subsampled_gaussian")
P_CPU = 0.5
PERIOD, UNLOCK_N, LIFETIME, RECOMPUTE = 10.0, 1000, 30.0, 50
SEEDS = 5
GAUSSIAN_KINDS = ("gaussian", "dp_ftrl")

_A = np.array(ORDERS, dtype=np.float64)
#: DPack's normalising block at ORDERS: eps + log(delta) / (a - 1) ([gen])
CAP = BLOCK_EPS + math.log(BLOCK_DELTA) / (_A - 1)
_ALL = np.arange(2, max(ORDERS) + 1, dtype=np.float64)  # Laplace RDP at 2..64


@dataclass(frozen=True, slots=True)
class AliTask:
    """One task: arrival (block periods), k most recent blocks, mechanism, the target
    normalised demand at the best order, the RDP curve at ORDERS, its zCDP charge
    (module docstring) and the mechanism's parameters (q, steps, noise)."""

    arrival: float
    k: int
    mechanism: str
    d_star: float
    rdp: tuple[float, ...]
    rho: float
    q: float = 1.0
    steps: int = 1
    noise: float = 0.0

    def normalised(self) -> float:
        """Demand at the best order, normalised by DPack's block ([gen])."""
        return float(np.min(np.array(self.rdp) / CAP))


def _log_uniform_int(rng: np.random.Generator, lo: int, hi: int) -> int:
    """floor(X), X log-uniform on [lo, hi + 1): an integer in lo..hi."""
    x = math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))
    return min(hi, max(lo, math.floor(x)))


def laplace_rdp(b: float, orders: np.ndarray = _A) -> np.ndarray:
    """RDP of the Laplace mechanism of scale b (sensitivity 1) at ``orders`` (Mironov
    2017, Prop. 6), in log-sum-exp form."""
    lam = 1.0 / b
    a = orders
    x = np.logaddexp(np.log(a / (2 * a - 1)) + (a - 1) * lam,
                     np.log((a - 1) / (2 * a - 1)) - a * lam)
    return np.asarray(x / (a - 1))


_L = np.arange(max(ORDERS) + 1, dtype=np.float64)  # l = 0..64
_LOGC = np.where(_L[None, :] <= _A[:, None],
                 special.gammaln(_A[:, None] + 1) - special.gammaln(_L[None, :] + 1)
                 - special.gammaln(np.maximum(_A[:, None] - _L[None, :], 0) + 1), -np.inf)


def _lse(t: np.ndarray) -> np.ndarray:
    """log-sum-exp along the last axis (each row has a finite entry)."""
    m = np.max(t, axis=1)
    return np.asarray(np.log(np.sum(np.exp(t - m[:, None]), axis=1)) + m)


def subsampled_laplace_rdp(b: float, q: float) -> np.ndarray:
    """One Poisson-subsampled Laplace step's RDP at ORDERS (module docstring): the
    least of Zhu & Wang 2019, Thm. 6 (in log space), a eps1^2 / 2 (eps1 the subsampled
    step's pure DP) and the Laplace's own RDP."""
    eps = np.concatenate(([0.0, 0.0], laplace_rdp(b, _ALL)))  # eps[l]: Laplace RDP at l
    lq, l1q = math.log(q), math.log1p(-q)
    t = _LOGC + _L[None, :] * lq + (_A[:, None] - _L[None, :]) * l1q \
        + (_L[None, :] - 1) * eps[None, :]
    t[:, 3:] += math.log(3.0)
    t[:, 1] = -np.inf
    t[:, 0] = (_A - 1) * l1q + np.log(_A * q - q + 1)
    zw = _lse(t) / (_A - 1)
    eps1 = float(np.logaddexp(math.log1p(-q), math.log(q) + 1 / b))
    return np.asarray(np.minimum(np.minimum(zw, _A * eps1 * eps1 / 2), eps[list(ORDERS)]))


def _sgm_rdp_fast(sigma: float, q: float) -> np.ndarray:
    """Mironov, Talwar & Zhang's sum (as ``sgm_rdp_up``, without its widening), all
    orders at once: for the bisection only."""
    t = _LOGC + (_A[:, None] - _L[None, :]) * math.log1p(-q) + _L[None, :] * math.log(q) \
        + (_L[None, :] ** 2 - _L[None, :]) / (2 * sigma * sigma)
    return np.asarray(_lse(t) / (_A - 1))


def subsampled_gaussian_rdp(sigma: float, q: float) -> np.ndarray:
    from dpsieve.training.tuning import sgm_rdp_up

    return np.asarray(sgm_rdp_up(sigma, q, ORDERS), dtype=np.float64)


def _calibrate(curve: Any, d_star: float, final: Any = None) -> tuple[float, np.ndarray]:
    """The noise whose curve's normalised demand at the best order is ``d_star`` (Brent's
    method on log noise in [1e-3, 1e7], then the noise raised by 1e-9 relative steps
    until the demand is at most ``d_star``); the charge is ``final(noise)`` (default
    ``curve``)."""
    from scipy.optimize import brentq

    def f(x: float) -> float:
        d = float(np.min(curve(math.exp(x)) / CAP))
        return math.log(d) - math.log(d_star) if d > 0 else -math.inf

    x = float(brentq(f, math.log(1e-3), math.log(1e7), xtol=1e-12, rtol=1e-12))
    while f(x) > 0:
        x += 1e-9
    return math.exp(x), np.asarray((final or curve)(math.exp(x)))


def make_task(rng: np.random.Generator, arrival: float) -> AliTask:
    """One task (module docstring), from ``rng``."""
    k = _log_uniform_int(rng, 1, K_MAX)
    d_star = math.exp(rng.uniform(math.log(D_MIN), math.log(D_MAX)))
    kinds = CPU if rng.random() < P_CPU else GPU
    mech = kinds[int(rng.integers(len(kinds)))]
    size = BLOCK_SIZE * k
    epochs = _log_uniform_int(rng, *EPOCHS)
    batch = _log_uniform_int(rng, BATCH[0], min(BATCH[1], size // 10))
    q, steps = batch / size, epochs * size // batch
    if mech in GAUSSIAN_KINDS:
        c = d_star / float(np.min(_A / CAP))
        return AliTask(arrival, k, mech, d_star, tuple((c * _A).tolist()), c)
    if mech == "laplace":
        b, rdp = _calibrate(laplace_rdp, d_star)
        return AliTask(arrival, k, mech, d_star, tuple(rdp.tolist()), 1 / (2 * b * b),
                       noise=b)
    if mech == "subsampled_gaussian":
        s, rdp = _calibrate(lambda x: steps * _sgm_rdp_fast(x, q), d_star,
                            lambda x: steps * subsampled_gaussian_rdp(x, q))
        return AliTask(arrival, k, mech, d_star, tuple(rdp.tolist()), steps / (2 * s * s),
                       q, steps, s)
    b, rdp = _calibrate(lambda x: steps * subsampled_laplace_rdp(x, q), d_star)
    eps1 = float(np.logaddexp(math.log1p(-q), math.log(q) + 1 / b))
    return AliTask(arrival, k, mech, d_star, tuple(rdp.tolist()), steps * eps1 * eps1 / 2,
                   q, steps, b)


def trace(seed: int, new_blocks: int) -> list[AliTask]:
    """The trace for ``new_blocks`` (B) arriving blocks, seeded: INITIAL_TASKS at time 0,
    then Poisson arrivals at RATE per period on [0, B)."""
    rng = np.random.default_rng([seed, new_blocks])
    times = [0.0] * INITIAL_TASKS
    t = 0.0
    while True:
        t += float(rng.exponential(1.0 / RATE))
        if t >= new_blocks:
            break
        times.append(t)
    return [make_task(rng, at) for at in times]


def block_filter(accounting: str) -> Any:
    """A fresh (10, 1e-7) block under ``accounting`` (module docstring): ``"any"``
    (AnyOrderRDPFilter at ORDERS), ``"zcdp"`` or ``"gdp"`` (GDP residue); ``"any-dpack"``
    (a diagnostic, not a (10, 1e-7) block): DPack's capacities at ORDERS."""
    from dpsieve.filters import AnyOrderRDPFilter, GDPResidueFilter, ZCDPFilter, zcdp_rho_for

    if accounting in ("any", "any-dpack"):
        # "any-dpack": DPack's own block capacities eps + log(delta) / (a - 1), which
        # are this filter's at delta x len(ORDERS) (the any-order rule's union bound)
        k = len(ORDERS) if accounting == "any-dpack" else 1
        return AnyOrderRDPFilter.for_target(BLOCK_EPS, BLOCK_DELTA * k,
                                            tuple(float(a) for a in ORDERS))
    if accounting == "zcdp":
        return ZCDPFilter(zcdp_rho_for(BLOCK_EPS, BLOCK_DELTA))
    from dpsieve.accounting.gdp import gdp_mu_for

    return GDPResidueFilter(float(gdp_mu_for(BLOCK_EPS, BLOCK_DELTA)))


def _charges(tasks: list[AliTask], accounting: str, flt: Any
             ) -> list[tuple[Any, np.ndarray] | None]:
    """Each task's charge and its demand row (fractions of the fresh block; None: it can
    never run on such a block)."""
    from dpsieve.accounting.events import GDP, RDP, ZCDP
    from dpsieve.blocks import demand

    out: list[tuple[Any, np.ndarray] | None] = []
    if accounting.startswith("any"):
        budgets = np.array(flt.remaining()["rdp"], dtype=np.float64)
        orders = tuple(float(a) for a in flt.remaining()["orders"])
        assert orders == tuple(float(a) for a in ORDERS)
        for t in tasks:
            frac = np.array(t.rdp) / budgets
            out.append((RDP(orders, t.rdp), frac) if bool(np.any(frac <= 1)) else None)
    elif accounting == "zcdp":
        rho_b = float(flt.remaining()["rho"])
        for t in tasks:
            out.append((ZCDP(t.rho), np.array(t.rho / rho_b)) if t.rho <= rho_b else None)
    else:
        for t in tasks:
            mu = math.sqrt(2 * t.rho)
            ch = GDP(mu)
            d = demand(ch, flt, key=f"gdp:{mu!r}")
            out.append(None if d is None else (ch, np.array(float(d))))
    return out


def pass_times(new_blocks: int) -> list[float]:
    """A pass every PERIOD from 0, and one when the last block is fully unlocked."""
    horizon = new_blocks - 1 + LIFETIME
    n = math.floor(horizon / PERIOD + 1e-9)
    out = [s * PERIOD for s in range(n + 1)]
    return out if out[-1] >= horizon - 1e-9 else [*out, horizon]


def unlocked(now: float, new_blocks: int) -> np.ndarray:
    """Fraction unlocked of every block at ``now``: DPF-T, 1/UNLOCK_N after each
    LIFETIME/UNLOCK_N periods of age (none at arrival; [sim] ``TimeUnlockingBlock``)."""
    arrival = np.concatenate((np.zeros(INITIAL_BLOCKS),
                              np.arange(new_blocks, dtype=np.float64)))
    age = now - arrival
    steps = np.floor(np.maximum(age, 0.0) / (LIFETIME / UNLOCK_N) + 1e-9)
    return np.where(age >= 0, np.minimum(1.0, steps / UNLOCK_N), 0.0)


def simulate(tasks: list[AliTask], new_blocks: int, policy: str, accounting: str, *,
             one_currency: bool = False) -> dict[str, Any]:
    """The online run (module docstring) of ``policy`` on ``accounting`` blocks: tasks
    completed (by mechanism), never fit, replay refusals."""
    from benchmarks._blocks_rdp import _one_currency_pass
    from dpsieve.blocks import Pending, schedule

    flt = block_filter(accounting)
    nb = INITIAL_BLOCKS + new_blocks
    charges = _charges(tasks, accounting, flt)
    multi = accounting.startswith("any")
    used = np.zeros((nb, len(ORDERS))) if multi else np.zeros(nb)
    spent: list[list[Any]] = [[] for _ in range(nb)]
    waiting: list[tuple[int, Pending]] = []
    by_mech: dict[str, int] = {}
    never = nxt = 0
    recompute = RECOMPUTE if policy == "dpack" else 0
    for now in pass_times(new_blocks):
        while nxt < len(tasks) and tasks[nxt].arrival <= now:
            t, c = tasks[nxt], charges[nxt]
            if c is None:
                never += 1
            else:
                top = INITIAL_BLOCKS + min(new_blocks - 1, math.floor(t.arrival)) + 1
                dims = np.arange(top - t.k, top, dtype=np.int64)
                dem = np.tile(c[1], (t.k, 1)) if multi else np.full(t.k, float(c[1]))
                waiting.append((nxt, Pending(dims, dem, t.arrival)))
            nxt += 1
        if not waiting:
            continue
        unl = unlocked(now, new_blocks)
        pend = [w[1] for w in waiting]
        if multi:
            avail = unl[:, None] - used
            if one_currency:
                admitted = _one_currency_pass(policy, pend, avail, "any", recompute=recompute)
            else:
                admitted = schedule(policy, pend, avail, rule="any",
                                    recompute=recompute).admitted
        else:
            admitted = schedule(policy, pend, np.maximum(unl - used, 0.0),
                                recompute=recompute).admitted
        for i in admitted:
            j, p = waiting[i]
            used[p.dims] += p.demand
            ch = charges[j]
            assert ch is not None
            for b in p.dims:
                spent[int(b)].append(ch[0])
            by_mech[tasks[j].mechanism] = by_mech.get(tasks[j].mechanism, 0) + 1
        gone = set(admitted)
        waiting = [w for i, w in enumerate(waiting) if i not in gone]
    refusals = 0
    for b in range(nb):  # every admitted charge through a fresh real filter
        f = block_filter(accounting)
        refusals += sum(not f.try_spend(ch).admitted for ch in spent[b])
    return {"completed": sum(by_mech.values()), "by_mechanism": by_mech, "never": never,
            "waiting_at_end": len(waiting), "replay_refusals": refusals}


#: (label, accounting, policy, one currency, Gaussian tasks only)
RUNS: tuple[tuple[str, str, str, bool, bool], ...] = (
    ("any-order RDP", "any", "dpack", False, False),
    ("any-order RDP", "any", "dpf", False, False),
    ("any-order RDP", "any", "dpf, one currency", True, False),
    ("any-order RDP", "any", "fcfs", False, False),
    ("zCDP", "zcdp", "dpack", False, False),
    ("zCDP", "zcdp", "dpf", False, False),
    ("GDP residue (Gaussian tasks)", "gdp", "dpack", False, True),
    ("GDP residue (Gaussian tasks)", "gdp", "dpf", False, True),
    ("zCDP (Gaussian tasks)", "zcdp", "dpack", False, True),
)


def run_seed(seed: int, new_blocks: int) -> dict[str, Any]:
    """Every run of RUNS on the trace of ``seed`` and ``new_blocks``."""
    ts = trace(seed, new_blocks)
    gauss = [t for t in ts if t.mechanism in GAUSSIAN_KINDS]
    rows = []
    for label, acc, policy, one, only_g in RUNS:
        r = simulate(gauss if only_g else ts, new_blocks, policy.split(",")[0], acc,
                     one_currency=one)
        rows.append({"accounting": label, "policy": policy, **r})
    return {"seed": seed, "B": new_blocks, "tasks": len(ts), "gaussian_tasks": len(gauss),
            "rows": rows}


def _ms(xs: list[float]) -> tuple[float, float]:
    m = float(np.mean(xs))
    se = float(np.std(xs, ddof=1) / math.sqrt(len(xs))) if len(xs) > 1 else 0.0
    return m, se


def tables(results: list[dict[str, Any]]) -> list[str]:
    """Tasks completed (mean +- se over seeds) and the goal ratios, per B."""
    def cell(b: int, acc: str, pol: str, key: str = "completed") -> list[float]:
        return [float(r[key]) for res in results if res["B"] == b for r in res["rows"]
                if r["accounting"] == acc and r["policy"] == pol]

    bs = sorted({int(r["B"]) for r in results})
    lines = ["| B (new blocks) | accounting | policy | completed | Laplace / subs. Laplace / "
             "Gaussian / DP-FTRL / subs. Gaussian | never fit |", "|---|---|---|---|---|---|"]
    kinds = ("laplace", "subsampled_laplace", "gaussian", "dp_ftrl", "subsampled_gaussian")
    for b in bs:
        res0 = next(r for r in results if r["B"] == b)
        for r0 in res0["rows"]:
            acc, pol = r0["accounting"], r0["policy"]
            m, se = _ms(cell(b, acc, pol))
            mix = " / ".join(f"{np.mean([r['by_mechanism'].get(k, 0) for res in results if res['B'] == b for r in res['rows'] if r['accounting'] == acc and r['policy'] == pol]):.0f}"  # noqa: E501
                             for k in kinds)
            lines.append(f"| {b} | {acc} | {pol} | {m:.1f} +- {se:.1f} | {mix} | "
                         f"{np.mean(cell(b, acc, pol, 'never')):.0f} |")
    pairs = [("dpack / dpf, any-order RDP (goal >= 1.3)", ("any-order RDP", "dpack"),
              ("any-order RDP", "dpf")),
             ("dpack / dpf one currency, any-order RDP", ("any-order RDP", "dpack"),
              ("any-order RDP", "dpf, one currency")),
             ("dpack any-order RDP / dpack zCDP (goal >= 1.2)", ("any-order RDP", "dpack"),
              ("zCDP", "dpack")),
             ("dpack / dpf, GDP residue, Gaussian tasks",
              ("GDP residue (Gaussian tasks)", "dpack"), ("GDP residue (Gaussian tasks)", "dpf")),
             ("dpack GDP residue / dpack zCDP, Gaussian tasks",
              ("GDP residue (Gaussian tasks)", "dpack"), ("zCDP (Gaussian tasks)", "dpack"))]
    lines += ["", "| ratio | " + " | ".join(f"B = {b}" for b in bs) + " |",
              "|---|" + "---|" * len(bs)]
    for label, a, d in pairs:
        cells = []
        for b in bs:
            rs = [x / y for x, y in zip(cell(b, *a), cell(b, *d), strict=True)]
            m, se = _ms(rs)
            cells.append(f"{m:.3f} +- {se:.3f} (min {min(rs):.3f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    n = {b: np.mean([r["tasks"] for r in results if r["B"] == b]) for b in bs}
    seeds = {b: sorted(int(r["seed"]) for r in results if r["B"] == b) for b in bs}
    refusals = sum(int(r["replay_refusals"]) for res in results for r in res["rows"])
    lines += ["", "Tasks per trace (mean) and seeds: " + "; ".join(
        f"B = {b}: {n[b]:.0f}, seeds {seeds[b]}" for b in bs) + ". Replayed through fresh "
        f"real filters, {refusals} admitted charges were refused (0: no block overspent)."]
    return lines


def block_diagnostic(seed: int, new_blocks: int) -> dict[str, Any]:
    """dpack and dpf on DPack's own block capacities (``"any-dpack"``), the same trace:
    does the ratio depend on dpsieve's sound any-order block (delta split over the
    orders) rather than on the trace? A diagnostic beside the table, added after it."""
    ts = trace(seed, new_blocks)
    rows = [{"accounting": "any-order RDP, DPack's capacities", "policy": p,
             **simulate(ts, new_blocks, p, "any-dpack")} for p in ("dpack", "dpf")]
    return {"seed": seed, "B": new_blocks, "tasks": len(ts), "rows": rows}
