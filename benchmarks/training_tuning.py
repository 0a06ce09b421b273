"""Hyperparameter search by random stopping: eps of the search, per law of K and method.

Run: ``python -m benchmarks.training_tuning [--mean M]``. Writes
``benchmarks/results/training_tuning.md``. At sigma 1, q 0.01, 1,000 steps a run, delta
1e-5: one run, M runs composed, and ``TuningAccountant(run, law).epsilon(1e-5, method=...)``
for Poisson, geometric, logarithmic and truncated negative binomial laws of mean M, by
Papernot-Steinke's RDP theorems ("rdp") and by our profile bound ("profile",
docs/proofs/training.md §4), with the process (CPU) time of each.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from dpsieve.training import (
    DPSGDAccountant,
    NegativeBinomialRuns,
    PoissonRuns,
    RunCount,
    TuningAccountant,
)

HERE = Path(__file__).resolve().parent
SIGMA, Q, STEPS, DELTA = 1.0, 0.01, 1000, 1e-5


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mean", type=float, default=10.0)
    ap.add_argument("--out", type=Path, default=HERE / "results" / "training_tuning.md")
    args = ap.parse_args()
    m = args.mean
    run = DPSGDAccountant()
    run.step(SIGMA, Q, count=STEPS)
    composed = DPSGDAccountant()
    composed.step(SIGMA, Q, count=STEPS * round(m))
    laws: list[tuple[str, RunCount]] = [
        ("Poisson", PoissonRuns(m)),
        ("geometric (eta 1)", NegativeBinomialRuns.geometric(m)),
        ("logarithmic (eta 0)", NegativeBinomialRuns.with_mean(0.0, m)),
        ("eta -0.5", NegativeBinomialRuns.with_mean(-0.5, m)),
        ("eta 0.5", NegativeBinomialRuns.with_mean(0.5, m)),
        ("eta 2", NegativeBinomialRuns.with_mean(2.0, m)),
    ]
    lines = [
        "# Hyperparameter search by random stopping (benchmarks/training_tuning.py)",
        "",
        f"sigma {SIGMA}, q {Q}, {STEPS} steps a run, delta {DELTA}, mean {m:g} runs. "
        f"One run: eps {run.epsilon(DELTA):.4f}; {round(m)} runs composed: "
        f"{composed.epsilon(DELTA):.4f}.",
        "",
        "| law of K | RDP (Papernot-Steinke) | profile (Thm. 4.1) | reported | CPU s |",
        "|---|---|---|---|---|",
    ]
    for name, law in laws:
        t = time.process_time()
        ta = TuningAccountant(run, law)
        r, p = ta.epsilon(DELTA, method="rdp"), ta.epsilon(DELTA, method="profile")
        best = ta.epsilon(DELTA)
        cpu = time.process_time() - t
        lines.append(f"| {name} | {r:.4f} | {p:.4f} | {best:.4f} | {cpu:.2f} |")
        print(lines[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
