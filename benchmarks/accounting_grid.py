"""The DP-SGD accountant's automatic grid against the tightest certified peers, in one run.

Usage: ``python -m benchmarks.accounting_grid [--full] [--timeout 300]``.

For every point of sigma x rate x steps (x delta 1e-5, 1e-10) it reports dpsieve's
``DPSGDAccountant()`` eps (the grid chosen from the per-step loss scale,
``dpsieve.mechanisms.subsampled.step_grid``), dp_accounting 0.6's PLD at
``value_discretization_interval=1e-5`` with ``pessimistic_estimate=True`` (connect the dots),
and prv_accountant 0.2's upper bound (``eps_error=1e-3``). All three are certified upper
bounds; the column ``ours / best`` divides ours by the smaller peer value (the tightest
certified bound): the target is <= 1.01. Each peer runs in a child process with a time limit
(a peer that does not finish is shown as "timeout"; PRV's failures are shown as such).

Default grid: sigma {0.6, 1, 2} x rate {0.001, 0.01, 0.1, 0.5} x steps {100, 1000, 10000};
``--full`` adds sigma {0.8, 1.5}. Writes ``benchmarks/results/accounting_grid.md``.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mproc
import os
import time
import warnings
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "results" / "accounting_grid.md"
DELTAS = (1e-5, 1e-10)
SIGMAS = (0.6, 1.0, 2.0)
SIGMAS_FULL = (0.6, 0.8, 1.0, 1.5, 2.0)
RATES = (0.001, 0.01, 0.1, 0.5)
STEPS = (100, 1000, 10000)


def _ours(s: float, q: float, k: int) -> tuple[list[float], float]:
    from dpsieve.training.accountant import DPSGDAccountant

    t0 = time.perf_counter()
    acc = DPSGDAccountant()
    acc.step(s, q, count=k)
    vals = [acc.epsilon(d) for d in DELTAS]
    return vals, time.perf_counter() - t0


def _dpa(s: float, q: float, k: int) -> tuple[list[float], float]:
    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from dp_accounting.pld import privacy_loss_distribution as pldm

    t0 = time.perf_counter()
    p = pldm.from_gaussian_mechanism(
        s, sampling_prob=q, value_discretization_interval=1e-5, pessimistic_estimate=True
    )
    c = p.self_compose(k)
    vals = [float(c.get_epsilon_for_delta(d)) for d in DELTAS]
    return vals, time.perf_counter() - t0


def _prv(s: float, q: float, k: int) -> tuple[list[float], float]:
    warnings.filterwarnings("ignore")
    from prv_accountant import Accountant

    t0 = time.perf_counter()
    vals = []
    for d in DELTAS:
        try:
            acc = Accountant(noise_multiplier=s, sampling_probability=q, delta=d,
                             eps_error=1e-3, max_compositions=k)
            vals.append(float(acc.compute_epsilon(num_compositions=k)[2]))
        except Exception:  # PRV fails at some (small delta, large eps) points
            vals.append(float("nan"))
    return vals, time.perf_counter() - t0


def _child(fn: Any, args: tuple[Any, ...], out: Any) -> None:
    try:
        out.put(fn(*args))
    except Exception as e:  # reported in the table
        out.put(repr(e))


def _limited(fn: Any, args: tuple[Any, ...], timeout: float) -> tuple[list[float], float] | str:
    ctx = mproc.get_context("fork")
    q: Any = ctx.Queue()
    proc = ctx.Process(target=_child, args=(fn, args, q))
    proc.start()
    proc.join(timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        return "timeout"
    got: tuple[list[float], float] | str = q.get() if not q.empty() else "failed"
    return got


def _fmt(v: float) -> str:
    return "nan" if v != v else f"{v:.6g}"


def _write(args: Any, load0: float, rows: list[str], worst: float, done: bool) -> None:
    load1 = os.getloadavg()[0]
    text = [
        "# DP-SGD accountant: automatic grid vs the tightest certified peers",
        "",
        f"`python -m benchmarks.accounting_grid{' --full' if args.full else ''} "
        f"--timeout {args.timeout:g}` (load {load0:.1f} -> {load1:.1f}; peers in child "
        "processes with that time limit). All values are certified upper bounds on eps; "
        "best = min(dp_accounting PLD at 1e-5 pessimistic, PRV upper at eps_error 1e-3)."
        + ("" if done else f" **Partial run: the first {len(rows)} rows.**"),
        "",
        f"Worst ours / best over the points where a peer answered: **{worst:.4f}** "
        "(target <= 1.01).",
        "",
        "| sigma | rate | steps | delta | our grid | dpsieve (time) | dp_accounting 1e-5 "
        "(time) | PRV upper (time) | ours / best |",
        "|---|---|---|---|---|---|---|---|---|",
        *rows,
        "",
    ]
    args.out.write_text("\n".join(text))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--full", action="store_true")
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--sigmas", type=float, nargs="*", default=None, help="only these sigmas")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    from dpsieve.mechanisms.subsampled import step_grid

    sigmas = args.sigmas or (SIGMAS_FULL if args.full else SIGMAS)
    load0 = os.getloadavg()[0]
    rows = []
    worst = 0.0
    for s in sigmas:
        for q in RATES:
            for k in STEPS:
                ours, t_ours = _ours(s, q, k)
                dpa = _limited(_dpa, (s, q, k), args.timeout)
                prv = _limited(_prv, (s, q, k), args.timeout)
                for i, d in enumerate(DELTAS):
                    peers = [r[0][i] for r in (dpa, prv) if not isinstance(r, str)]
                    peers = [v for v in peers if v == v]
                    best = min(peers) if peers else float("nan")
                    ratio = ours[i] / best if peers else float("nan")
                    if ratio == ratio:
                        worst = max(worst, ratio)
                    rows.append(
                        f"| {s} | {q} | {k} | {d:g} | {step_grid(s, q):g} | {_fmt(ours[i])} "
                        f"({t_ours:.2f} s) | "
                        + (dpa if isinstance(dpa, str) else f"{_fmt(dpa[0][i])} ({dpa[1]:.1f} s)")
                        + " | "
                        + (prv if isinstance(prv, str) else f"{_fmt(prv[0][i])} ({prv[1]:.1f} s)")
                        + f" | {_fmt(ratio)} |"
                    )
                    print(rows[-1], flush=True)
                _write(args, load0, rows, worst, done=False)  # a partial run leaves its rows
    _write(args, load0, rows, worst, done=True)
    print(f"worst ratio {worst:.4f}; wrote {args.out}")


if __name__ == "__main__":
    main()
