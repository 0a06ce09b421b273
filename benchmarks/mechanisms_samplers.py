"""Samples per second of dpsieve's exact discrete Laplace / Gaussian samplers, side by side.

Usage: ``python -m benchmarks.mechanisms_samplers [--n 100000] [--repeats 5]``.

Peers, in one run, on vectors of ``n`` draws:

* dpsieve, secure source (``rng=None``: os.urandom) -- the default for releases;
* dpsieve fed by a seeded ``numpy.random.Generator`` (simulations);
* OpenDP's exact samplers (Rust): ``make_laplace`` / ``make_gaussian`` on an integer
  vector domain, i.e. the discrete Laplace / discrete Gaussian, called on a list of zeros;
* plain numpy floats (``Generator.laplace`` / ``Generator.normal``): not exact, not
  secure, shown as the speed ceiling.

Reports the median time of ``repeats`` runs and the ratio dpsieve-secure / OpenDP (target:
at most 2). Writes ``benchmarks/results/mechanisms.md``.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from dpsieve.mechanisms import discrete_gaussian, discrete_laplace

OUT = Path(__file__).resolve().parent / "results" / "mechanisms.md"
SCALES = (1.0, 10.0, 1000.0)


def _median_time(fn: Callable[[], object], repeats: int) -> float:
    fn()  # warm-up (imports, caches)
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def _opendp(kind: str, scale: float, n: int) -> Callable[[], object] | None:
    try:
        import opendp.prelude as dp
    except ImportError:
        return None
    dp.enable_features("contrib")
    dom = dp.vector_domain(dp.atom_domain(T=int))
    if kind == "laplace":
        m = dp.m.make_laplace(dom, dp.l1_distance(T=int), scale=scale)
    else:
        m = dp.m.make_gaussian(dom, dp.l2_distance(T=int), scale=scale)
    zeros = [0] * n
    return lambda: m(zeros)


def run(n: int, repeats: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for kind in ("laplace", "gaussian"):
        ours = discrete_laplace if kind == "laplace" else discrete_gaussian
        for scale in SCALES:
            gen = np.random.default_rng(0)
            npgen = np.random.default_rng(1)
            t_sec = _median_time(partial(ours, scale, n), repeats)
            t_gen = _median_time(partial(ours, scale, n, gen), repeats)
            od = _opendp(kind, scale, n)
            t_od = _median_time(od, repeats) if od is not None else float("nan")
            flt = npgen.laplace if kind == "laplace" else npgen.normal
            t_np = _median_time(partial(flt, 0.0, scale, n), repeats)
            rows.append(
                {
                    "sampler": f"discrete {kind}",
                    "scale": scale,
                    "secure": n / t_sec,
                    "seeded": n / t_gen,
                    "opendp": n / t_od,
                    "numpy": n / t_np,
                    "ratio": t_sec / t_od,
                }
            )
            print(rows[-1], flush=True)
    return rows


def write(rows: list[dict[str, object]], n: int, repeats: int) -> None:
    lines = [
        "## Mechanisms: exact samplers (samples per second)",
        "",
        f"Vectors of {n:,} draws, median of {repeats} runs, one process, same machine. "
        "`secure` = dpsieve with the OS CSPRNG (default); `seeded` = dpsieve fed by a numpy "
        "Generator; `opendp` = OpenDP 0.16 exact discrete samplers (Rust, via `make_laplace` "
        "/ `make_gaussian` on an integer vector domain, including its list conversion); "
        "`numpy` = float `Generator.laplace` / `normal` (inexact, not secure; the ceiling). "
        "`time ratio` = dpsieve-secure time / OpenDP time (target <= 2).",
        "",
        "| sampler | scale | dpsieve secure | dpsieve seeded | OpenDP | numpy float | time ratio |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['sampler']} | {r['scale']:g} | {r['secure']:,.0f} | {r['seeded']:,.0f} | "
            f"{r['opendp']:,.0f} | {r['numpy']:,.0f} | {r['ratio']:.2f} |"
        )
    lines.append("")
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {OUT}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    write(run(a.n, a.repeats), a.n, a.repeats)


if __name__ == "__main__":
    main()
