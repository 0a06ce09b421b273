"""Query-release experiments (issue 5). Run: ``dpsieve release-experiments --out DIR``
(``--no-quick`` for the full grid) or ``python experiments/release/run.py DIR``.

Every error reported is the EXACT expected max error E||M(x) - F(x)||_inf at the given
(synthetic, public) database, except MWEM (Monte Carlo mean of ``mc`` runs, with standard
error). Databases: multinomial samples from Dirichlet(1/2) weights with a fixed seed.
Writes PNG plots and ``README.md`` (markdown tables) into the output directory.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

from dpsieve.release import (
    Dataset,
    Domain,
    Workload,
    blr_release,
    collapse,
    enumerate_envelope,
    enumeration_cost,
    group_histograms,
    laplace_release,
    marginals,
    mwem_release,
    pmw_parameters,
    practical_parameters,
    random_counting,
    range_1d,
    smallest_nontrivial_n,
    theorem_parameters,
)
from dpsieve.release.mechanism import center_only_groups

MECHS = ("envelope", "pmw", "mwem", "laplace", "blr")


def databases(T: int, n: int, count: int, seed: int = 7) -> list[Dataset]:
    rng = np.random.default_rng(seed)
    return [Dataset.from_histogram(rng.multinomial(n, rng.dirichlet(np.full(T, 0.5))))
            for _ in range(count)]


def envelope_error(wl: Workload, x: Dataset, eps: float, cost: float) -> tuple[float, int]:
    """Exact expected error at J = largest rounds with enumeration cost <= cost."""
    cw = collapse(wl)
    g = group_histograms(cw, cw.counts(x))
    J = 2
    while J < 40 and enumeration_cost(cw.signed_classes, J, g.size) <= cost:
        J += 1
    p = practical_parameters(wl.universe_size, x.n, eps, J)
    r = enumerate_envelope(cw, g, p, eps, selections=J - 1, f_x=wl.answers(x), sample=False,
                           prune=True, max_cost=float("inf"))
    assert r.expected_error is not None
    return r.expected_error, J


def pmw_error(wl: Workload, x: Dataset, eps: float) -> float:
    """Pure PMW, exact, best J in 2..5 (J chosen per setting; same for every database)."""
    cw = collapse(wl)
    best = math.inf
    for J in range(2, 6):
        p = pmw_parameters(wl.universe_size, x.n, eps, wl.query_range, J)
        if enumeration_cost(cw.signed_classes, J - 1, 1) > 5e7:
            break
        e = enumerate_envelope(cw, center_only_groups(cw, x), p, eps, selections=J - 1,
                               f_x=wl.answers(x), sample=False).expected_error
        assert e is not None
        best = min(best, e)
    return best


def mwem_error(wl: Workload, x: Dataset, eps: float, mc: int) -> float:
    rng = np.random.default_rng(3)
    f = wl.answers(x)
    best = math.inf
    for R in (1, 2, 3, 5):
        errs = [float(np.abs(mwem_release(wl, x, eps, rounds=R, rng=rng).answers - f).max())
                for _ in range(mc)]
        best = min(best, float(np.mean(errs)))
    return best


def all_errors(wl: Workload, x: Dataset, eps: float, cost: float, mc: int) -> dict[str, float]:
    env, J = envelope_error(wl, x, eps, cost)
    out = {"envelope": env, "pmw": pmw_error(wl, x, eps), "mwem": mwem_error(wl, x, eps, mc)}
    lap = laplace_release(wl, x, eps, rng=np.random.default_rng(0)).expected_error
    blr = blr_release(wl, x, eps, rng=np.random.default_rng(0)).expected_error
    assert lap is not None
    assert blr is not None
    out["laplace"], out["blr"], out["J"] = lap, blr, float(J)
    return out


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)] + \
        ["| " + " | ".join(r) + " |" for r in rows]


def _plot(path: Path, xs: list[float], series: dict[str, list[float]], xlabel: str,
          title: str, log: bool = True) -> None:
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    for name, ys in series.items():
        ax.plot(xs, ys, marker="o", label=name)
    if log:
        ax.set_xscale("log")
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("expected max error")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(out: Path, *, quick: bool = True, log: Callable[[str], None] = print) -> None:
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cost = 3e6 if quick else 3e7
    mc = 60 if quick else 300
    ndb = 2 if quick else 4
    workloads: list[tuple[str, Workload, int]] = [
        ("1-way marginals {0,1}^2", marginals(Domain.from_sizes([2, 2]), 1), 10),
        ("2-way marginals {0,1}^2", marginals(Domain.from_sizes([2, 2]), 2), 8),
        ("random counting k=3, T=8", random_counting(8, 3, seed=1), 8),
        ("1-D ranges T=4", range_1d(4), 8),
    ]
    md = ["# Query-release experiments", "",
          f"Mode: {'quick' if quick else 'full'}. Exact expected max error at synthetic "
          f"Dirichlet(1/2) databases ({ndb} per point, mean); MWEM by Monte Carlo ({mc} runs, "
          "best of R in {1,2,3,5}); pure PMW best of J in 2..5; envelope: practical rule "
          f"(c = 2), J the largest with enumeration cost <= {cost:.0e} units. "
          "These per-setting choices of J/R use the synthetic data: they are tuning, "
          "identical across databases, not private selections.", ""]
    eps_grid = [0.5, 1.0, 2.0, 4.0] if not quick else [0.5, 1.0, 2.0]
    for idx, (name, wl, n) in enumerate(workloads):
        dbs = databases(wl.universe_size, n, ndb)
        series: dict[str, list[float]] = {m: [] for m in MECHS}
        rows = []
        for eps in eps_grid:
            errs = [all_errors(wl, x, eps, cost, mc) for x in dbs]
            mean = {m: float(np.mean([e[m] for e in errs])) for m in (*MECHS, "J")}
            for m in MECHS:
                series[m].append(mean[m])
            rows.append([f"{eps}", *(f"{mean[m]:.3f}" for m in MECHS), f"{mean['J']:.0f}"])
            log(f"{name} eps={eps}: " + ", ".join(f"{m}={mean[m]:.3f}" for m in MECHS))
        slug = f"w{idx}"
        _plot(out / f"eps_{slug}.png", eps_grid, series, "eps",
              f"{name}, k={wl.k}, T={wl.universe_size}, n={n}")
        md += [f"## Error vs eps: {name} (k = {wl.k}, T = {wl.universe_size}, n = {n})", "",
               *_table(["eps", *MECHS, "envelope J"], rows), "",
               f"![](eps_{slug}.png)", ""]
    # error vs n
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    ns = [5, 10, 20, 40] if quick else [5, 10, 20, 40, 80]
    series = {m: [] for m in MECHS}
    rows = []
    for n in ns:
        dbs = databases(4, n, ndb)
        errs = [all_errors(wl, x, 1.0, cost, mc) for x in dbs]
        mean = {m: float(np.mean([e[m] for e in errs])) for m in (*MECHS, "J")}
        for m in MECHS:
            series[m].append(mean[m])
        rows.append([str(n), *(f"{mean[m]:.3f}" for m in MECHS), f"{mean['J']:.0f}"])
        log(f"n={n}: " + ", ".join(f"{m}={mean[m]:.3f}" for m in MECHS))
    slopes = {m: float(np.polyfit(np.log(ns), np.log(series[m]), 1)[0]) for m in MECHS}
    _plot(out / "n_marginals.png", [float(v) for v in ns], series, "n",
          "1-way marginals {0,1}^2, eps = 1")
    md += ["## Error vs n: 1-way marginals over {0,1}^2, eps = 1", "",
           *_table(["n", *MECHS, "envelope J"], rows), "",
           "Fitted log-log slopes (error ~ n^slope): " +
           ", ".join(f"{m} {s:+.2f}" for m, s in slopes.items()) + ".", "",
           "![](n_marginals.png)", ""]
    # theory
    trows = []
    for T, k in [(2, 1), (4, 4), (1024, 100), (2**20, 1000)]:
        n0 = smallest_nontrivial_n(T, k, 1.0)
        tp = theorem_parameters(T, k, n0, 1.0)
        n_inf = math.ceil((2**20 * math.e) ** 2 * math.log(2 * T) * math.log(2 * k))
        trows.append([str(T), str(k), f"{n0:.3g}", str(tp.rounds), f"{tp.eta:.3g}",
                      f"{tp.bound:.3g}", f"{n_inf:.3g}"])
    md += ["## Theorem parameters (section 8), eps = 1", "",
           *_table(["T", "k", "least n for the envelope branch", "J there", "eta there",
                    "bound C tau there", "least n with C tau < 1"], trows), ""]
    nn = np.logspace(1, 14, 60)
    fig, ax = plt.subplots(figsize=(5.5, 3.8))
    LD, LQ = math.log(2 * 1024), math.log(2 * 100)
    ax.plot(nn, np.minimum(1, np.sqrt(LD * LQ / nn)), label="sqrt rate tau (no constant)")
    ax.plot(nn, np.minimum(1, (LD * LQ / nn) ** (1 / 3)), label="cube-root rate (no constant)")
    ax.plot(nn, np.minimum(1, 2**20 * math.e * np.sqrt(LD * LQ / nn)), label="C min{1, tau}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_title("T = 1024, k = 100, eps = 1", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "theory_rates.png", dpi=110)
    plt.close(fig)
    md += ["![](theory_rates.png)", "",
           f"Total time: {time.perf_counter() - t0:.0f} s.", ""]
    (out / "README.md").write_text("\n".join(md))
    log(f"wrote {out / 'README.md'}")


def _cli(argv: list[str]) -> Any:
    main(Path(argv[1]) if len(argv) > 1 else Path("experiments/release/results"),
         quick="--full" not in argv)


if __name__ == "__main__":
    _cli(sys.argv)
