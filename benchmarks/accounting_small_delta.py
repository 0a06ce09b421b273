"""eps(delta) at small delta of dense compositions, side by side with dp_accounting, in one run.

Usage: ``python -m benchmarks.accounting_small_delta [--repeats 3]``.

Issue 18.7: the certified FFT bound was absolute, so tail masses ~1e-15 were lost in it. Tasks:

* Laplace (sensitivity = scale = 1) x 100 at delta = 1e-10 and 1e-15. Reference: the exact
  delta at each reported eps (mpmath closed form, the mixture of atoms and Irwin-Hall sums of
  tests/accounting/test_issue18_regressions.py) -- a reported eps is certified iff the exact
  delta there is <= the target.
* Poisson-subsampled Gaussian (sigma 1, q 0.01) x 100, each direction composed separately,
  at delta = 1e-10 and 1e-15. No closed form; the certified bracket comes from FFT-free
  compositions (direct convolution, grid 2e-3, optimistic and pessimistic; ~1 min, quoted
  from docs/proofs/accounting.md Lemma A4 rather than recomputed here).

Rows: dpsieve at grid 1e-4 (pessimistic, tilted FFTs); dp_accounting 0.6 at grid 1e-4,
pessimistic, with its default tail truncation and with ``tail_mass_truncation=0``.
Writes ``benchmarks/results/accounting_small_delta.md``.
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

import mpmath as mp

OUT = Path(__file__).resolve().parent / "results" / "accounting_small_delta.md"
DELTAS = (1e-10, 1e-15)
#: Certified brackets (direct, FFT-free compositions at grid 2e-3; Lemma A4).
SGM_BRACKET = {1e-10: (2.15318, 2.16310), 1e-15: (3.67941, 3.69014)}


def laplace_exact_delta(k: int, eps: float) -> mp.mpf:
    """Exact delta(eps) of k-fold Laplace with a = 1 (see the test module's docstring)."""
    mp.mp.dps = 60
    e = mp.mpf(eps)
    half, em = mp.mpf(1) / 2, mp.e**-1 / 2
    total = mp.mpf(0)
    n_low = 0
    while k - 2 * n_low > e:
        ts = (k - 2 * n_low - e) / 2
        for m in range(k - n_low + 1):
            j = k - n_low - m
            w = mp.factorial(k) / (mp.factorial(j) * mp.factorial(n_low) * mp.factorial(m))
            w *= half**j * em**n_low
            if m == 0:
                total += w * (1 - mp.e ** (e - (k - 2 * n_low)))
                continue
            acc = mp.mpf(0)
            i = 0
            while i < ts and i <= m:
                x = ts - i
                lo = x**m / m * mp.hyp1f1(m, m + 1, -x)
                hi = x**m / m * mp.hyp1f1(m, m + 1, x)
                acc += (-1) ** i * mp.binomial(m, i) * (mp.e**-i * lo - mp.e ** (i - 2 * ts) * hi)
                i += 1
            total += w * half**m * acc / mp.factorial(m - 1)
        n_low += 1
    return total


def _timed(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    val = fn()
    ts = []
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

    from dpsieve.accounting import PLD
    from dpsieve.mechanisms.subsampled import subsampled_gaussian_pld

    load0 = os.getloadavg()[0]

    def ours_lap() -> list[float]:
        c = PLD.laplace(1.0).self_compose(100)
        return [float(c.epsilon(d)) for d in DELTAS]

    def dpa_lap(trunc: bool) -> Callable[[], list[float]]:
        def run() -> list[float]:
            p = pldm.from_laplace_mechanism(1.0, value_discretization_interval=1e-4)
            c = p.self_compose(100) if trunc else p.self_compose(100, tail_mass_truncation=0.0)
            return [float(c.get_epsilon_for_delta(d)) for d in DELTAS]

        return run

    def ours_sgm() -> list[float]:
        c = subsampled_gaussian_pld(1.0, 0.01).self_compose(100)
        return [float(c.epsilon(d)) for d in DELTAS]

    def dpa_sgm(trunc: bool) -> Callable[[], list[float]]:
        def run() -> list[float]:
            p = pldm.from_gaussian_mechanism(1.0, sampling_prob=0.01,
                                             value_discretization_interval=1e-4)
            c = p.self_compose(100) if trunc else p.self_compose(100, tail_mass_truncation=0.0)
            return [float(c.get_epsilon_for_delta(d)) for d in DELTAS]

        return run

    methods = [
        ("dpsieve PLD, grid 1e-4 (certified, tilted FFTs)", ours_lap, ours_sgm),
        ("dp_accounting PLD, grid 1e-4 (default truncation)", dpa_lap(True), dpa_sgm(True)),
        ("dp_accounting PLD, grid 1e-4 (tail_mass_truncation=0)", dpa_lap(False),
         dpa_sgm(False)),
    ]
    lap_rows, sgm_rows = [], []
    for name, f_lap, f_sgm in methods:
        t, vals = _timed(f_lap, args.repeats)
        lap_rows.append((name, t, vals))
        t, vals = _timed(f_sgm, args.repeats)
        sgm_rows.append((name, t, vals))
    load1 = os.getloadavg()[0]
    t_dpa_lap, t_dpa_sgm = lap_rows[1][1], sgm_rows[1][1]
    lines = [
        "## Accounting core: eps(delta) at small delta (issue 18.7)",
        "",
        f"Median of {args.repeats} runs after a warm-up; load average {load0:.1f} -> "
        f"{load1:.1f} (2 cores, shared). `python -m benchmarks.accounting_small_delta`.",
        "",
        "### Laplace (a = 1) x 100",
        "",
        "exact delta at the reported eps: mpmath closed form; 'certified' iff <= the target.",
        "",
        "| method | time (s) | ratio to dp_accounting | eps(1e-10) | exact delta there | "
        "eps(1e-15) | exact delta there |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, t, vals in lap_rows:
        cells = []
        for d, v in zip(DELTAS, vals, strict=True):
            ex = laplace_exact_delta(100, v) if v < 100 else mp.mpf(0)
            ok = "ok" if ex <= d else "BELOW THE TRUTH"
            cells.append(f"{v:.6f} | {mp.nstr(ex, 6)} ({ok})")
        lines.append(f"| {name} | {t:.3g} | {t / t_dpa_lap:.3g} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "### Poisson-subsampled Gaussian (sigma 1, q 0.01) x 100, both directions",
        "",
        "certified bracket of the truth (FFT-free direct compositions at grid 2e-3, optimistic "
        "and pessimistic): "
        + ", ".join(f"eps({d:g}) in [{lo}, {hi}]" for d, (lo, hi) in SGM_BRACKET.items()),
        "",
        "| method | time (s) | ratio to dp_accounting | eps(1e-10) | eps(1e-15) |",
        "|---|---|---|---|---|",
    ]
    for name, t, vals in sgm_rows:
        cells = []
        for d, v in zip(DELTAS, vals, strict=True):
            lo, hi = SGM_BRACKET[d]
            tag = "below the bracket" if v < lo else ("in" if v <= hi else "above")
            cells.append(f"{v:.5f} ({tag})")
        lines.append(f"| {name} | {t:.3g} | {t / t_dpa_sgm:.3g} | " + " | ".join(cells) + " |")
    lines.append("")
    text = "\n".join(lines)
    print(text)
    OUT.write_text(text)


if __name__ == "__main__":
    main()
