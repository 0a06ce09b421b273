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
trace's planned GPU); we take 1:1. The curves, at the block orders, each calibrated by
bisection on its noise (log scale, the noisier end kept: d at most d*) so that its
normalised demand at the best order is the task's d*:

* **Laplace**: one release, Mironov's Laplace RDP (Mironov 2017, Prop. 6), scale b;
* **Gaussian** (``epochs`` compositions) and **DP-FTRL** (ceil(log(dataset size))
  Gaussian compositions, [gen]): RDP ``c a``; steps and sigma only set c = steps / (2
  sigma^2), so both are the curve ``c a`` with c calibrated;
* **subsampled Gaussian** (DP-SGD): Poisson rate q = batch / dataset size, steps =
  epochs x dataset size // batch ([gen] ``compute_noise_and_rdp_from_target_epsilon``);
  RDP of one step by Mironov, Talwar & Zhang 2019 at integer orders
  (``dpsieve.training.tuning.sgm_rdp_up``; [gen] uses opacus' ``compute_rdp``, the same
  bound), times steps; noise multiplier calibrated;
* **subsampled Laplace**: the same q and steps; one step's RDP by Zhu & Wang 2019
  ("Poisson Subsampled Rényi Differential Privacy", Thm. 6, their general upper bound
  at integer orders, of the Laplace's RDP at orders 2..a); [gen] uses autodp's improved
  bound for Poisson sampling, which is at most this one: our task asks at least as much
  as [gen]'s (errs on the costly side, never below the mechanism's loss); scale b
  calibrated.

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
