"""Composition of (eps, delta)-DP mechanisms: closed forms vs numerical accountants.

Usage: ``python -m benchmarks.accounting_families [--repeats 3]``.

Task: the privacy profile delta(eps') of R_{eps,delta}^{(+)k} (k-fold composition of an
(eps, delta)-DP mechanism, the Kairouz-Oh-Viswanath optimal composition) at 8 values of
eps', for (eps, delta) = (0.1, 1e-6) and k in {10, 100, 1000}. Peers in one run:

* dpsieve ``approx_dp_compose_delta`` (closed-form binomial sum, error ~1e-13 relative:
  used as the reference for the error column);
* dpsieve ``PiecewiseLinearTradeoff`` (exact rational composition; k <= 100);
* dpsieve ``PLD`` (discretized, pessimistic; default grid);
* dp_accounting 0.6 ``from_privacy_parameters(...).self_compose(k)`` (grid 1e-4);
* prv_accountant 0.2 ``PRVAccountant(ApproximateDPMechanism)`` (eps_error 1e-3, delta_error
  1e-10; k <= 100 only: k = 1000 did not finish within 10 minutes here).

Reports the median wall time of ``repeats`` runs, the ratio to dp_accounting, and the
largest |delta - reference| over the eps' grid.
Writes ``benchmarks/results/accounting-families.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from dpsieve.accounting import PLD, PiecewiseLinearTradeoff, approx_dp_compose_delta

OUT = Path(__file__).resolve().parent / "results" / "accounting-families.md"
EPS, DELTA = 0.1, 1e-6


def _median_time(fn: Callable[[], np.ndarray], repeats: int) -> tuple[float, np.ndarray]:
    out = fn()
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), np.asarray(out, dtype=np.float64)


def _peers(k: int, grid: np.ndarray) -> dict[str, Callable[[], np.ndarray]]:
    from dp_accounting import dp_event  # noqa: F401  (import cost outside the timing)
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib
    from prv_accountant import PRVAccountant
    from prv_accountant.privacy_random_variables import ApproximateDPMechanism

    def closed() -> np.ndarray:
        return approx_dp_compose_delta(EPS, DELTA, k, grid)

    def pwl() -> np.ndarray:
        return PiecewiseLinearTradeoff.from_approx_dp(EPS, DELTA).self_compose(k).delta(grid)

    def ours_pld() -> np.ndarray:
        return np.asarray(PLD.approx_dp(EPS, DELTA).self_compose(k).delta(grid))

    def dpa() -> np.ndarray:
        params = common.DifferentialPrivacyParameters(EPS, DELTA)
        p = pld_lib.from_privacy_parameters(params, value_discretization_interval=1e-4)
        p = p.self_compose(k)
        return np.array([p.get_delta_for_epsilon(float(e)) for e in grid])

    def prv() -> np.ndarray:
        acc = PRVAccountant(
            [ApproximateDPMechanism(EPS, DELTA)],
            eps_error=1e-3,
            delta_error=1e-10,
            max_self_compositions=[k],
        )
        return np.array([acc.compute_delta(float(e), [k])[1] for e in grid])

    peers = {"dpsieve closed form": closed, "dpsieve PLD": ours_pld}
    if k <= 100:
        peers["dpsieve PWL exact"] = pwl
    peers["dp_accounting"] = dpa
    if k <= 100:  # at k = 1000 it did not finish within 10 minutes on the 2-core machine
        peers["prv_accountant"] = prv
    return peers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    lines = [
        "## accounting: families (k-fold (eps, delta) composition)",
        "",
        f"delta(eps') of R_{{{EPS},{DELTA}}}^(+k) at 8 values of eps' in [0, 3]; median of "
        f"{args.repeats} runs; error = max |delta - closed form| over the grid.",
        "",
        "| k | method | time (s) | time / dp_accounting | max abs error |",
        "|---|---|---|---|---|",
    ]
    for k in (10, 100, 1000):
        grid = np.linspace(0.0, 3.0, 8)
        results = {}
        for name, fn in _peers(k, grid).items():
            try:
                results[name] = _median_time(fn, args.repeats)
            except Exception as exc:  # a peer failing is reported, not fatal
                print(f"{name} k={k}: failed: {exc!r}")
                lines.append(f"| {k} | {name} | failed | | {type(exc).__name__}: {exc} |")
        ref = results["dpsieve closed form"][1]
        base = results["dp_accounting"][0] if "dp_accounting" in results else float("nan")
        for name, (t, out) in results.items():
            err = float(np.max(np.abs(out - ref)))
            lines.append(f"| {k} | {name} | {t:.4f} | {t / base:.3g} | {err:.2e} |")
            print(lines[-1], flush=True)
    lines += [
        "",
        "The closed form is the reference: its error bound is ~1e-13 relative and the tests",
        "bracket it with 40-digit mpmath and exact enumeration. eps = 0.1 is a multiple of",
        "dp_accounting's grid (1e-4), so its discretization is exact here and it agrees to",
        "rounding; prv_accountant's column is its point estimate (its bounds are wider).",
        "The exact rational PWL composition grows linearly in k (rationals of ~k*53 bits).",
    ]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
