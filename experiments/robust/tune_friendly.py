"""How the friendly PFR's defaults were chosen (issue 16): a grid over its public parameters,
on public tuning seeds disjoint from the benchmark's (benchmarks/robust_utility.py).

``python experiments/robust/tune_friendly.py`` prints one line per setting: RMSE against the
data's own mean, refusal rate and the share of released runs off by more than 10 SDs, on clean
N(5,1) (n = 1000, 150 runs), N(5,1) + 10 % at 5e3 (n = 2000, 80 runs, vs the inlier mean) and
clean N(5,1) at n = 500 (300 runs). eps = 1, delta = 1e-6, Lambda = 1e4.
"""

from __future__ import annotations

import itertools

import numpy as np

from dpsieve.robust import FilterParams, Refusal, pfr_mean
from dpsieve.robust.mean import default_radii


def run(kw: dict[str, float], n: int, reps: int, seed: int, contam: float = 0.0) -> str:
    g = np.random.default_rng(seed)
    errs, ref = [], 0
    for _ in range(reps):
        x = g.normal(5, 1, n)
        m = int(contam * n)
        x[:m] = 5e3
        t0, w = (n + 1) // 2, max(1, min(int(kw["W"] * n), n - (n + 1) // 2))
        out = pfr_mean(x, 1.0, 1e-6, radii=default_radii(1e4, int(kw["grid"])),
                       method="friendly", beta=kw["beta"], propose_fraction=kw["propose"],
                       count_fraction=kw["count"], params=FilterParams(n, t0, w),
                       n_min=max(2, int(kw["n_min"] * n)), rng=g)
        if isinstance(out, Refusal):
            ref += 1
            continue
        errs.append(float(out.value) - float(x[m:].mean()))
    e = np.abs(np.array(errs))
    if e.size == 0:
        return "all refused"
    return (f"rmse {np.sqrt(np.mean(e**2)):8.4f} refused {ref / reps:.2f} "
            f">10sd {np.mean(e > 10):.3f}")


def main() -> None:
    grid = itertools.product([0.25, 0.4, 0.5], [0.2, 0.3], [0.2, 0.3], [0.3, 0.5], [0.0, 0.1],
                             [48, 96])
    for W, beta, prop, count, n_min, radii in grid:
        kw = {"W": W, "beta": beta, "propose": prop, "count": count, "n_min": n_min,
              "grid": radii}
        print(kw, "| clean 1000:", run(kw, 1000, 150, 8001),
              "| 10% at 5e3, 2000:", run(kw, 2000, 80, 8002, 0.1),
              "| n 500:", run(kw, 500, 300, 8003), flush=True)


if __name__ == "__main__":
    main()
