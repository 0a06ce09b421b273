"""compose_plds of repeated mechanisms against self_compose and dp_accounting, in one run.

Usage: ``python -m benchmarks.accounting_compose [--repeats 3]``.

``compose_plds([m] * k)`` groups equal mechanisms and composes each group by squaring, so it
should cost what ``self_compose`` costs (it used to compose one at a time: 11 s against
0.8 s). Rows: the Poisson-subsampled Gaussian (sigma 1, rate 0.01, both directions, grid
1e-4) and the Laplace mechanism (scale 10, grid 1e-4), k = 1,000; dp_accounting 0.6's
``self_compose`` of the same PLD at the same grid for reference. eps(1e-6) is shown for each.
Writes ``benchmarks/results/accounting_compose.md``.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results" / "accounting_compose.md"
K = 1000


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    ts, val = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        val = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), val


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from dp_accounting.pld import privacy_loss_distribution as pldm

    from dpsieve.accounting.order import supremum
    from dpsieve.mechanisms import LaplaceMechanism, PoissonSubsampledGaussian, compose_plds

    load0 = os.getloadavg()[0]
    sgm, lap = PoissonSubsampledGaussian(1.0, 0.01), LaplaceMechanism(10.0)
    cases: list[tuple[str, Callable[[], float]]] = [
        ("SGM: compose_plds([m] * k)", lambda: float(compose_plds([sgm] * K).epsilon(1e-6))),
        ("SGM: self_compose of each direction + supremum", lambda: float(supremum(
            [sgm.plds().remove.self_compose(K), sgm.plds().add.self_compose(K)]
        ).epsilon(1e-6))),
        ("SGM: dp_accounting self_compose (grid 1e-4)", lambda: float(
            pldm.from_gaussian_mechanism(1.0, sampling_prob=0.01,
                                         value_discretization_interval=1e-4)
            .self_compose(K).get_epsilon_for_delta(1e-6))),
        ("Laplace: compose_plds([m] * k)", lambda: float(compose_plds([lap] * K).epsilon(1e-6))),
        ("Laplace: m.pld().self_compose(k)", lambda: float(
            lap.pld().self_compose(K).epsilon(1e-6))),
        ("Laplace: dp_accounting self_compose (grid 1e-4)", lambda: float(
            pldm.from_laplace_mechanism(10.0, value_discretization_interval=1e-4)
            .self_compose(K).get_epsilon_for_delta(1e-6))),
    ]
    rows = []
    for name, fn in cases:
        t, v = _timed(fn, args.repeats)
        rows.append((name, t, v))
        print(f"{name}: {t:.2f} s, eps(1e-6) {v:.6f}", flush=True)
    base = {
        r[0].split(":")[0]: r[1] for r in rows if "self_compose" in r[0] and "dp_acc" not in r[0]
    }
    load1 = os.getloadavg()[0]
    text = [
        "# compose_plds of repeated mechanisms",
        "",
        f"`python -m benchmarks.accounting_compose --repeats {args.repeats}` (k = {K}; median "
        f"of {args.repeats}; load {load0:.1f} -> {load1:.1f}). Ratio: time / our self_compose "
        "of the same mechanism.",
        "",
        "| task | time (s) | ratio | eps(1e-6) |",
        "|---|---|---|---|",
        *[f"| {n} | {t:.2f} | {t / base[n.split(':')[0]]:.2f} | {v:.6f} |" for n, t, v in rows],
        "",
    ]
    OUT.write_text("\n".join(text))


if __name__ == "__main__":
    main()
