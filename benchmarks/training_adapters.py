"""Training adapters: the cost of one step and one eps, as a training loop pays it.

Run: ``python -m benchmarks.training_adapters [--steps N]``. Writes
``benchmarks/results/training_adapters.md``. A loop that reports eps after every step
(Opacus' progress bars, dp_accounting callers) pays ``step`` + ``get_epsilon`` each time;
this measures exactly that, side by side in one process, at sigma 1, q 0.01, delta 1e-5:

* dpsieve's ``DpsievePrivacyAccountant`` (dp_accounting interface): ``compose(event, 1)`` +
  ``get_epsilon``; dpsieve's ``DpsieveAccountant`` (Opacus interface): ``step`` +
  ``get_epsilon``; both compose each new step onto the last composition;
* dp_accounting's ``PLDAccountant`` (its default grid 1e-4, pessimistic) and Opacus' RDP and
  PRV accountants, the same calls.

Reported per window of steps (1-30, 31-300, 301-N): median wall and process (CPU) time per
step in ms, and the final eps with the eps of the same history composed at once (the
incremental bound against the one-shot bound). The machine is shared: CPU time is the
steadier figure.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
SIGMA, Q, DELTA = 1.0, 0.01, 1e-5


def _runners() -> dict[str, Callable[[], Callable[[], float]]]:
    """name -> factory of a fresh 'one step, then eps' callable."""
    from dp_accounting import dp_event
    from dp_accounting.pld import pld_privacy_accountant
    from opacus.accountants import PRVAccountant, RDPAccountant

    from dpsieve.training.dp_accounting_adapter import DpsievePrivacyAccountant
    from dpsieve.training.opacus_adapter import DpsieveAccountant

    ev = dp_event.PoissonSampledDpEvent(Q, dp_event.GaussianDpEvent(SIGMA))

    def dpa(acc: object) -> Callable[[], float]:
        def one() -> float:
            acc.compose(ev, 1)  # type: ignore[attr-defined]
            return float(acc.get_epsilon(DELTA))  # type: ignore[attr-defined]
        return one

    def opa(acc: object) -> Callable[[], float]:
        def one() -> float:
            acc.step(noise_multiplier=SIGMA, sample_rate=Q)  # type: ignore[attr-defined]
            return float(acc.get_epsilon(DELTA))  # type: ignore[attr-defined]
        return one

    return {
        "dpsieve DpsievePrivacyAccountant (dp_accounting API)": lambda: dpa(
            DpsievePrivacyAccountant()),
        "dpsieve DpsieveAccountant (Opacus API)": lambda: opa(DpsieveAccountant()),
        "dp_accounting PLDAccountant (grid 1e-4)": lambda: dpa(
            pld_privacy_accountant.PLDAccountant()),
        "Opacus RDPAccountant": lambda: opa(RDPAccountant()),
        "Opacus PRVAccountant": lambda: opa(PRVAccountant()),
    }


def _windows(n: int) -> list[tuple[int, int]]:
    return [w for w in ((0, 30), (30, 300), (300, n)) if w[0] < n]


def run(steps: int) -> list[str]:
    from dpsieve.training import DPSGDAccountant

    rows = ["| accountant | " + " | ".join(f"steps {a + 1}-{b}: wall / CPU ms" for a, b in
                                         _windows(steps)) + " | eps |",
            "|---" * (len(_windows(steps)) + 2) + "|"]
    for name, make in _runners().items():
        one = make()
        wall: list[float] = []
        cpu: list[float] = []
        eps = 0.0
        # the peers that recompose at every call (0.1-0.4 s a step) stop at 300 steps
        cap = steps if name.startswith(("dpsieve", "Opacus RDP")) else min(steps, 300)
        for _ in range(cap):
            t, c = time.perf_counter(), time.process_time()
            eps = one()
            wall.append(1e3 * (time.perf_counter() - t))
            cpu.append(1e3 * (time.process_time() - c))
        cells = [f"{statistics.median(wall[a:b]):.2f} / {statistics.median(cpu[a:b]):.2f}"
                 if a < cap else "not run" for a, b in _windows(steps)]
        rows.append(f"| {name} | " + " | ".join(cells) + f" | {eps:.6f} after {cap} |")
    once = DPSGDAccountant()
    once.step(SIGMA, Q, count=steps)
    rows.append(f"\nThe same {steps} steps composed at once by DPSGDAccountant: eps "
                f"{once.epsilon(DELTA):.6f} (the adapters' incremental compositions above are "
                "upper bounds too).")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args()
    import os

    load = os.getloadavg()[0]
    lines = ["# Training adapters: one step and one eps per call", "",
             f"`python -m benchmarks.training_adapters --steps {args.steps}` (sigma {SIGMA}, "
             f"q {Q}, delta {DELTA}; load average {load:.1f} at the start; medians).", "",
             *run(args.steps)]
    out = HERE / "results" / "training_adapters.md"
    out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
