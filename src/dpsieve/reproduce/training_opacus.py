"""The training experiments with Opacus: a small CPU MLP under dpsieve's accounting and filters.

Data: digits (scikit-learn, offline), 0-4 vs 5-9, as in :mod:`dpsieve.reproduce.training`,
split 60 % private training / 20 % *public* validation / 20 % test. Model: a 64-32-2 MLP
(torch, CPU, float32). Target (3, 1e-5) for the whole run. Three settings, accuracy on the
test split against steps:

(a) **Uniform accounting**: Opacus' ``PrivacyEngine`` with dpsieve's accountant
    (``engine.accountant = DpsieveAccountant()``), Poisson sampling at rate q, noise
    multiplier 1.0 for the number of steps the accountant admits
    (:func:`dpsieve.training.dpsgd_steps_for`); ``engine.get_epsilon`` is reported.
(b) **Adaptive filter, loss-driven noise**: the same engine; sigma starts at 1.0 and every
    ``SEGMENT`` steps moves by 0.1 within [0.8, 1.2] -- down when the loss on the *public*
    validation split improved by less than 1 % over the segment, up otherwise (the schedule
    reads only released weights and public data). Before each step
    ``TrainingFilter.try_step(sigma, q)`` (reference sigma 0.8) must admit it; the run stops at
    the first refusal. ``optimizer.noise_multiplier`` is set per step.
(c) **Per-record GDP filter** (full batch): dpsieve's per-record filters hold for full-batch
    Gaussian steps only (docs/training.md, threat model), so (c) is full-batch DP-GD with
    Opacus' per-sample gradients (``GradSampleModule``, float32) and our own clip-and-noise:
    record i is clipped to min(C, its allowance) by :func:`dpsieve.training.clip_contributions`
    (the charged c_i dominates the exact norm of the float64 row added; the rows sum exactly,
    noise is added in float64, the update is rounded to float32) and pays (c_i / s)^2 from mu^2
    (:class:`~dpsieve.filters.PerRecordGDPFilter`, mu for per-record (3, 1e-5)). Uniform
    accounting (every record pays (C / s)^2) stops at T_u = (mu s / C)^2 steps; the per-record
    filter runs 2 T_u steps (records with small gradients keep contributing).

``run`` takes a handful of seeds and is small (about a minute on a 2-core CPU); the
command is ``dpsieve training-figures --out DIR --opacus``. Needs the ``train`` extra
(CPU torch, opacus) and scikit-learn.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from dpsieve.filters import PerRecordGDPFilter
from dpsieve.filters.training import TrainingFilter
from dpsieve.training import clip_contributions, dpsgd_steps_for

EPS, DELTA = 3.0, 1e-5
SEGMENT = 50
EVAL_EVERY = 25


def _split() -> tuple[np.ndarray, ...]:
    from sklearn.datasets import load_digits

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    y = (d.target >= 5).astype(np.int64)
    idx = np.random.default_rng(0).permutation(len(y))
    a, b = int(0.6 * len(y)), int(0.8 * len(y))
    return x[idx[:a]], y[idx[:a]], x[idx[a:b]], y[idx[a:b]], x[idx[b:]], y[idx[b:]]


def _mlp(seed: int) -> Any:
    import torch

    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))


def _batch(q: float, n: int) -> int:
    return max(1, round(q * n))


def effective_rate(q: float, n: int) -> float:
    """The rate Opacus' Poisson loader samples at for a nominal ``q`` on ``n`` records:
    1 / len(loader) = 1 / ceil(n / round(q n)) (0.0204 for q = 0.02 on 1,078 records: the
    steps and the filter must use it, not q)."""
    return 1.0 / math.ceil(n / _batch(q, n))


def _eval(model: Any, x: Any, y: Any) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) of ``model`` on tensors x, y."""
    import torch

    with torch.no_grad():
        out = model(x)
        return (float((out.argmax(1) == y).float().mean()),
                float(torch.nn.functional.cross_entropy(out, y)))


def _private_run(data: tuple[Any, ...], seed: int, q: float, steps: int, lr: float,
                 tfilter: TrainingFilter | None) -> dict[str, Any]:
    """DP-SGD with Opacus (Poisson sampling). ``tfilter`` None: uniform, sigma 1.0 throughout;
    else the loss-driven schedule, each step admitted by the filter first."""
    import torch
    from opacus import PrivacyEngine

    from dpsieve.training.opacus_adapter import DpsieveAccountant

    xtr, ytr, xva, yva, xte, yte = data
    ds = torch.utils.data.TensorDataset(xtr, ytr)
    gen = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(ds, batch_size=_batch(q, len(ds)), generator=gen)
    model = _mlp(seed)
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    engine = PrivacyEngine()
    engine.accountant = DpsieveAccountant()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model, opt, loader = engine.make_private(
            module=model, optimizer=opt, data_loader=loader, noise_multiplier=1.0,
            max_grad_norm=1.0, poisson_sampling=True, noise_generator=gen)
    if loader.sample_rate != q:  # Opacus samples at 1 / len(loader): account for that rate
        raise ValueError(f"Opacus samples at {loader.sample_rate}, accounted at {q}")
    sigma, taken = 1.0, 0
    curve: list[tuple[int, float]] = [(0, _eval(model, xte, yte)[0])]
    seg_start = _eval(model, xva, yva)[1]
    sched: list[float] = []
    while taken < steps:
        for xb, yb in loader:
            if taken >= steps:
                break
            if tfilter is not None and not tfilter.try_step(sigma, q).admitted:
                steps = taken  # the filter stops the run
                break
            opt.noise_multiplier = sigma
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xb), yb).backward()  # type: ignore[no-untyped-call]
            opt.step()
            sched.append(sigma)
            taken += 1
            if taken % EVAL_EVERY == 0:
                curve.append((taken, _eval(model, xte, yte)[0]))
            if tfilter is not None and taken % SEGMENT == 0:
                val = _eval(model, xva, yva)[1]  # public data, released weights
                improved = (seg_start - val) / max(seg_start, 1e-12)
                sigma = round(min(1.2, max(0.8, sigma - 0.1 if improved < 0.01 else sigma + 0.1)),
                              1)
                seg_start = val
    if not curve or curve[-1][0] != taken:
        curve.append((taken, _eval(model, xte, yte)[0]))
    return {"curve": curve, "steps": taken, "eps_recorded": engine.get_epsilon(DELTA),
            "schedule": sched}


def _per_record_run(data: tuple[Any, ...], seed: int, t_u: int, lr: float,
                    per_record: bool) -> dict[str, Any]:
    """Full-batch DP-GD with Opacus per-sample gradients: uniform (T_u steps, clip C) or the
    per-record GDP filter (2 T_u steps, clip min(C, allowance))."""
    import torch
    from opacus import GradSampleModule

    xtr, ytr, _, _, xte, yte = data
    n = len(ytr)
    c = 1.0
    mu = PerRecordGDPFilter.for_target(n, EPS, DELTA).mu
    s = c * math.sqrt(t_u) / mu * (1 + 1e-9)  # uniform: every record spent at T_u steps
    f = PerRecordGDPFilter(n, mu) if per_record else None
    model = GradSampleModule(_mlp(seed))
    params = [p for p in model.parameters() if p.requires_grad]
    gen = torch.Generator().manual_seed(seed)
    curve: list[tuple[int, float]] = [(0, _eval(model, xte, yte)[0])]
    total = 2 * t_u if per_record else t_u
    for t in range(1, total + 1):
        for p in params:
            p.grad_sample = None
        torch.nn.functional.cross_entropy(model(xtr), ytr, reduction="sum").backward()  # type: ignore[no-untyped-call]
        per = torch.cat([p.grad_sample.reshape(n, -1) for p in params], dim=1)
        cap = np.minimum(c, f.allowance(s)) if f is not None else np.full(n, c)
        rows, charged = clip_contributions(per.detach().numpy(), cap)
        mask = f.step(s, charged) if f is not None else np.ones(n, bool)
        g = torch.from_numpy((rows * mask[:, None]).sum(0))  # float64, the exact sum
        g = g + torch.normal(0.0, s, g.shape, generator=gen, dtype=torch.float64)
        with torch.no_grad():  # the noisy sum in the model's dtype: post-processing
            off = 0
            for p in params:
                k = p.numel()
                p -= (lr * g[off:off + k].reshape(p.shape) / n).to(p.dtype)
                off += k
        if t % EVAL_EVERY == 0 or t == total:
            curve.append((t, _eval(model, xte, yte)[0]))
    return {"curve": curve, "steps": total, "noise_std": s, "mu": mu}


def _all_runs(res: dict[str, list[dict[str, Any]]], data: tuple[Any, ...], seed: int,
              q: float, n_u: int, cap: int, t_u: int) -> None:
    res["uniform"].append(_private_run(data, seed, q, min(n_u, cap), 0.5, None))
    tf = TrainingFilter(EPS, DELTA, sigma=0.8, rate=q, reserve=0.003)
    res["filter"].append(_private_run(data, seed, q, cap, 0.5, tf))
    res["gd_uniform"].append(_per_record_run(data, seed, t_u, 2.0, False))
    res["gd_per_record"].append(_per_record_run(data, seed, t_u, 2.0, True))


def _require() -> None:
    import importlib.util

    missing = [m for m in ("torch", "opacus", "sklearn")
               if importlib.util.find_spec(m) is None]
    if missing:
        raise ModuleNotFoundError(
            f"training-figures --opacus needs {' and '.join(missing)} (not installed): "
            'pip install "dpsieve[train,data]"', name=missing[0])


def run(out: Path, *, seeds: int = 3, q: float = 0.02, t_u: int = 100,
        max_steps: int | None = None) -> Path:
    """Run (a), (b), (c) over ``seeds`` seeds; write ``opacus_training.png`` and
    ``opacus_summary.md`` into ``out``. ``max_steps`` caps every run (smoke tests)."""
    _require()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    torch.set_num_threads(1)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    data = tuple(torch.from_numpy(a) for a in _split())
    cap = max_steps if max_steps is not None else 1 << 30
    q = effective_rate(q, len(data[0]))
    n_u = dpsgd_steps_for(1.0, q, EPS, DELTA)
    t_small = min(t_u, max(1, cap // 2))
    res: dict[str, list[dict[str, Any]]] = {k: [] for k in
                                            ("uniform", "filter", "gd_uniform", "gd_per_record")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Opacus' secure-RNG and torch's backward-hook notes
        for seed in range(seeds):
            _all_runs(res, data, seed, q, n_u, cap, t_small)

    labels = {
        "uniform": "(a) Opacus DP-SGD, sigma 1, uniform accounting",
        "filter": "(b) Opacus DP-SGD, loss-driven sigma, TrainingFilter",
        "gd_uniform": "(c) full-batch DP-GD, uniform accounting",
        "gd_per_record": "(c) full-batch DP-GD, per-record GDP filter",
    }
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    rows = []
    for i, (k, runs) in enumerate(res.items()):
        panel = ax[0] if k in ("uniform", "filter") else ax[1]
        common = min(len(r["curve"]) for r in runs)
        xs = [p[0] for p in runs[0]["curve"][:common]]
        ys = np.array([[p[1] for p in r["curve"][:common]] for r in runs])
        panel.plot(xs, ys.mean(0), color=f"C{i}", label=labels[k])
        final = np.array([r["curve"][-1][1] for r in runs])
        se = float(np.std(final, ddof=1) / math.sqrt(len(final))) if len(final) > 1 else 0.0
        steps = [r["steps"] for r in runs]
        rows.append(f"| {labels[k]} | {min(steps)}-{max(steps)} | {final.mean():.4f} +- {se:.4f} |")
    ax[0].set(xlabel="step", ylabel="test accuracy", title=f"Poisson q = {q:.4g}, target (3, 1e-5)")
    ax[1].set(xlabel="step", ylabel="test accuracy", title="full batch, per-record (3, 1e-5)")
    for a in ax:
        a.legend(fontsize=7)
        a.set_ylim(0.4, 1.0)
    fig.suptitle(f"digits 0-4 vs 5-9, 64-32-2 MLP (torch CPU, Opacus), mean of {seeds} seeds")
    fig.tight_layout()
    fig.savefig(out / "opacus_training.png", dpi=120)
    plt.close(fig)

    eps_a = max(r["eps_recorded"] for r in res["uniform"])
    lines = [
        "# Training with Opacus under dpsieve (dpsieve training-figures --opacus)",
        "",
        f"digits 0-4 vs 5-9 (60/20/20 train/public validation/test), 64-32-2 MLP, CPU; "
        f"target ({EPS}, {DELTA}); {seeds} seeds (0..{seeds - 1}); mean +- s.e. of the final "
        "test accuracy.",
        "",
        "| setting | steps | final test accuracy |",
        "|---|---|---|",
        *rows,
        "",
        f"(a) engine.get_epsilon({DELTA}) with DpsieveAccountant: {eps_a:.4f} (max over seeds) "
        f"after {n_u if max_steps is None else min(n_u, cap)} steps at sigma 1, "
        f"q = {q:.4g} (Opacus: 1 / len(loader)). "
        "(b) the recorded eps of a loss-driven run is the non-adaptive number and is not a "
        "guarantee; the TrainingFilter's admission is.",
        f"(c) noise std {res['gd_uniform'][0]['noise_std']:.3f}, clip C = 1, "
        f"mu = {res['gd_uniform'][0]['mu']:.4f}; uniform T_u = {t_small}, per-record 2 T_u.",
    ]
    path = out / "opacus_summary.md"
    path.write_text("\n".join(lines) + "\n")
    return path
