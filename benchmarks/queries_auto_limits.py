"""How far ``"auto"`` bounds can get on the benchmark's data at eps 0.1 (issue 24): a model.

Usage::

    python -m benchmarks.queries_auto_limits            # writes nothing, prints markdown

Same data and plans as :mod:`benchmarks.queries_auto` (causaldata's
``restaurant_inspections``, 1,618 businesses, 15 public years, pure eps, add/remove).
Nothing here is private: it asks what the auto stage *could* release, to tell a cell that
needs a better rule from one the privacy does not allow.

* **A. The mean's upper bound** (an undeclared BIGINT: the walk 0, 1, ..., 10, 12, ...,
  80, 100, ... up to 9e18). The exact law of its permute-and-flip choice (McKenna &
  Sheldon's formula, as tests/queries/test_auto_exact.py) on one sampled score per
  business, at the target ``s G / 2`` of eps 0.1 (``s = sqrt 2 / 0.09``), for several
  ``eps_q`` (the default split gives each of the mean's 4 choices 0.0025) and prior
  steps ``beta`` (:data:`dpsieve.queries.auto.PRIOR_STEP` is 3/2).
* **B. The count's contribution bounds**: the per-year count's RMSE at eps_main modelled
  from the data (each business keeps ``min(1, L0 / its years)`` of each year in
  expectation, each cell ``min(rows, Linf)``; Laplace noise ``sqrt 2 L0 Linf / eps``; no
  clamping at 0), the two choices drawn by report-noisy-max with exponential noise (the law
  of permute-and-flip) from the library's lattices and excess scores: **rule** = the
  library's targets (``s G`` for ``max_groups``, ``s G L0 / 2`` for ``max_rows``);
  **oracle** = ``max_rows``' target set to the units beyond the RMSE-best ``Linf`` for the
  released ``L0`` (a data-dependent target no public rule has: an upper limit on what any
  units-beyond target can do). Ratio = model RMSE over the model's best grid plan at the
  whole eps (the grid of :mod:`benchmarks.queries_auto`).
* **C. Key selection at eps 1** (no public keys, so ``G = 1``): every business has one
  ``NumberofLocations``, so every ``max_groups`` candidate is within target and the prior
  alone chooses (its exact law); and the real plan (pandas engine, ``--runs`` seeds) at
  the main stage's eps 0.9 with ``max_groups`` 1 or 2 and ``max_rows`` 32 (the grid's
  best) or 50 (auto's median).
"""

from __future__ import annotations

import argparse
import math
from functools import cache
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.queries_accuracy import load, truth
from benchmarks.queries_auto import GROUPS, ROWS
from dpsieve.mechanisms.pf_law import permute_and_flip_law

F64 = npt.NDArray[np.float64]


def part_a(d: Any) -> list[str]:
    from dpsieve.queries.auto import value_candidates
    from dpsieve.queries.schema import Schema

    v = d.sample(frac=1, random_state=1).drop_duplicates("unit")["score"].to_numpy(float)
    col = Schema.of([("unit", "string"), ("score", "integer")], "unit").column(
        "score", "column", "mean")
    cands = np.asarray([c for c in value_candidates(col, "upper", None) if c >= 0][:60])
    t = math.floor(math.sqrt(2) / 0.09 * 15 / 2)
    above = (v[None, :] > cands[:, None]).sum(axis=1)
    exc = np.maximum(0, above - t).astype(float)
    i100 = int(np.flatnonzero(cands == 100.0)[0])
    lines = [f"A. The mean's upper bound at eps 0.1: {v.size} values, target {t} units "
             f"beyond, 100 is step {i100} of the walk; excess at 80: {exc[i100 - 1]:.0f}.", "",
             "| beta | eps_q | n eps_q excess(80) nats | prior to 100 nats | P(< 100) | "
             "P(100) | P(120-200) | P(> 200) |", "|---|---|---|---|---|---|---|---|"]
    for beta in (1.5, 1.0, 0.5):
        for eq in (0.0025, 0.005, 0.01, 0.02, 0.03):
            p = permute_and_flip_law(-exc - beta / eq * np.arange(cands.size), eq)
            lines.append(f"| {beta:g} | {eq:g} | {eq * exc[i100 - 1]:.1f} | {beta * i100:.0f} "
                         f"| {p[:i100].sum():.3f} | {p[i100]:.3f} | "
                         f"{p[i100 + 1:i100 + 4].sum():.3f} | {p[i100 + 4:].sum():.3f} |")
    return lines


def part_b(d: Any, reps: int) -> list[str]:
    from dpsieve.queries.auto import count_candidates

    tr = truth(d)["count"]
    years = sorted(tr)
    cell = d.groupby(["unit", "year"]).size().rename("r").reset_index()
    ng_s = cell.groupby("unit").size()
    cell = cell.join(ng_s.rename("ng"), on="unit")
    ng = ng_s.to_numpy(float)
    mr = cell.groupby("unit")["r"].max().to_numpy(float)
    r_cells = cell["r"].to_numpy(float)
    ng_cells = cell["ng"].to_numpy(float)
    year_idx = np.searchsorted(years, cell["year"].to_numpy())
    true = np.asarray([tr[y] for y in years])

    @cache
    def rmse(g: int, r: int, eps: float) -> float:
        est = np.bincount(year_idx, np.minimum(1.0, g / ng_cells) * np.minimum(r_cells, r),
                          minlength=len(years))
        return math.sqrt(float(np.mean((est - true) ** 2)) + 2 * (g * r / eps) ** 2)

    gc = np.asarray(count_candidates(15), dtype=float)
    rc = np.asarray(count_candidates(), dtype=float)[:45]
    above_g = (ng[None, :] > gc[:, None]).sum(axis=1)
    above_r = (mr[None, :] > rc[:, None]).sum(axis=1)

    def pick(above: F64, t: float, eq: float, beta: float, rng: np.random.Generator
             ) -> int:
        q = -np.maximum(0, above - math.floor(t)) - beta / eq * np.arange(above.size)
        return int(np.argmax(eq * q + rng.exponential(size=q.size)))

    lines = ["", "B. The count per year: model RMSE of the auto plan over the model's best "
             f"grid plan, {reps} draws of the two choices.", "",
             "| eps | share | max_rows target | prior step | ratio | max_groups (10/50/90 %) "
             "| max_rows (10/50/90 %) |", "|---|---|---|---|---|---|---|"]
    for eps in (1.0, 0.1):
        best = min(rmse(g, r, eps) for g in GROUPS for r in ROWS)
        for share in (0.05, 0.1, 0.2):
            main, eq = eps * (1 - share), eps * share / 2
            s = math.sqrt(2) / main
            for oracle in (False, True):
                for beta in (1.5, 1.0):
                    rng = np.random.default_rng(3)
                    got = []
                    for _ in range(reps):
                        g = int(gc[pick(above_g, s * 15, eq, eq / 2, rng)])
                        if oracle:
                            star = min(range(1, 40), key=lambda r: rmse(g, r, main))
                            t = float((mr > star).sum())
                        else:
                            t = s * 15 * g / 2
                        got.append((g, int(rc[pick(above_r, t, eq, beta, rng)])))
                    ratio = math.sqrt(float(np.mean([rmse(g, r, main) ** 2 for g, r in got])))
                    a = np.asarray(got, dtype=float)
                    qg = np.quantile(a[:, 0], [0.1, 0.5, 0.9])
                    qr = np.quantile(a[:, 1], [0.1, 0.5, 0.9])
                    lines.append(f"| {eps:g} | {share:g} | {'oracle' if oracle else 'rule'} "
                                 f"| {beta:g} | {ratio / best:.3f} | "
                                 f"{'/'.join(f'{x:g}' for x in qg)} | "
                                 f"{'/'.join(f'{x:g}' for x in qr)} |")
    return lines


def part_c(d: Any, runs: int) -> list[str]:
    from benchmarks.queries_accuracy import score
    from benchmarks.queries_auto import _plan, runner
    from dpsieve.queries.auto import PRIOR_STEP, count_candidates

    cands = count_candidates()
    p = permute_and_flip_law(-float(PRIOR_STEP) * np.arange(len(cands), dtype=float), 1.0)
    lines = ["", f"C. Key selection at eps 1: the prior alone puts {p[0]:.3f} on max_groups 1, "
             f"{p[1]:.3f} on 2, {p[2:].sum():.3f} above; the plan at eps 0.9, {runs} runs:", "",
             "| max_groups | max_rows | RMSE (se) |", "|---|---|---|"]
    years = sorted(d["year"].unique().tolist())
    tr = truth(d)["select"]
    for g, r in ((1, 32), (1, 50), (2, 32), (2, 50)):
        run, _ = runner(d, _plan("select", 0.9, years, {"max_groups": g, "max_rows": r},
                                 (None, None)))
        rng = np.random.default_rng(20261208)
        s = score([run(rng) for _ in range(runs)], tr, True)
        lines.append(f"| {g} | {r} | {s['rmse']:.1f} ({s['se']:.1f}) |")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args(argv)
    d = load()
    print("\n".join([*part_a(d), *part_b(d, args.reps), *part_c(d, args.runs)]))


if __name__ == "__main__":
    main()
