"""Every figure quoted for query release and robust statistics, tied to its command.

A :class:`Claim` is one figure as it is printed in the docs (``text``), the files that quote
it, the machine-readable result it was copied from (the full run's JSON) and the command that
produces that JSON. ``tests/system/test_claims.py`` checks that (1) every claim's text is
exactly the figure in the JSON, formatted, and appears in every file listed, and (2) the
quick version of the command reproduces it within the stated uncertainty (a few claims in the
default suite, all of them in the slow suite).

Commands (full runs; the quick versions are the functions at the bottom):

* robust: ``python -m benchmarks.robust_utility`` -> ``benchmarks/results/robust.json``
  (``--quick --reps R`` prints the first R runs of every cell's seed stream as JSON);
* release: ``dpsieve release-experiments --out experiments/release/results_full --no-quick``
  -> ``experiments/release/results_full/results.json``.

Timings (seconds per run, CPU seconds in the reach tables) are quoted with their command but
not checked: they depend on the machine's load (the lead re-measures them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
ROBUST_JSON = ROOT / "benchmarks" / "results" / "robust.json"
RELEASE_JSON = ROOT / "experiments" / "release" / "results_full" / "results.json"
ROBUST_CMD = "python -m benchmarks.robust_utility"
RELEASE_CMD = "dpsieve release-experiments --out experiments/release/results_full --no-quick"
ROBUST_DOCS = ("docs/robust.md", "benchmarks/RESULTS.md", "benchmarks/results/robust.md")
RELEASE_DOCS = ("docs/release.md", "experiments/release/results_full/README.md")


@dataclass(frozen=True)
class Claim:
    id: str
    text: str
    value: float
    se: float  # 0 for an exact figure (then the text's rounding is the uncertainty)
    files: tuple[str, ...]
    command: str
    locator: tuple[Any, ...]  # how the quick checks find it again

    @property
    def exact(self) -> bool:
        return self.se == 0.0


def fmt_mc(v: float, se: float) -> str:
    """How the robust benchmark prints a Monte Carlo figure (3 significant digits)."""
    return f"{v:.3g} ± {se:.1g}"


def _robust() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(ROBUST_JSON.read_text())
    return out


def _release() -> dict[str, Any]:
    out: dict[str, Any] = json.loads(RELEASE_JSON.read_text())
    return out


#: (scenario, estimator) cells that docs/robust.md quotes (its "which estimator" table);
#: every cell is also in benchmarks/RESULTS.md and benchmarks/results/robust.md.
ROBUST_QUOTED = [
    (sc, est)
    for sc in ("clean_1000", "contam_1000", "contam_2000", "small_500", "small_100",
               "lognormal_1000", "bimodal_1000")
    for est in ("PFR (default: row-wise)", "PFR friendly (new defaults)",
                "median/MAD clip + Laplace (baseline)", "adaptive clipping (private 0.9-quantile)",
                "worst-case clipping [-Lambda, Lambda]")
] + [("small_100_lam10", e) for e in ("PFR (default: row-wise)",
                                      "median/MAD clip + Laplace (baseline)",
                                      "adaptive clipping (private 0.9-quantile)",
                                      "worst-case clipping [-Lambda, Lambda]")] + [
    (sc, "PFR friendly, issue-16 defaults before (W=n/4, beta=0.2, count 0.3, n_min=2)")
    for sc in ("clean_1000", "contam_1000", "contam_2000", "small_500")]


#: rows of the median / PCA / KL / policy table that docs/robust.md quotes.
OTHERS_QUOTED = ("PFR median", "EM median, 2^24-point grid on [-Lambda, Lambda]",
                 "EM median, 1000 candidates on [-Lambda, Lambda]",
                 "PFR PCA (blocks of 20, Laplace)", "Analyze Gauss, row bound 100 (public)",
                 "Analyze Gauss, row bound 30 (tuned)")


def robust_claims() -> list[Claim]:
    data = _robust()
    out = []
    for sc, cells in data["means"].items():
        for est, r in cells.items():
            if "rmse" not in r:
                continue
            files = ROBUST_DOCS if (sc, est) in ROBUST_QUOTED else ROBUST_DOCS[1:]
            out.append(Claim(f"robust/{sc}/{est}", fmt_mc(r["rmse"], r["rmse_se"]), r["rmse"],
                             r["rmse_se"], files, ROBUST_CMD, ("means", sc, est)))
    for label, est, r in data["others"]:
        if "rmse" not in r:
            continue
        files = ROBUST_DOCS if est in OTHERS_QUOTED else ROBUST_DOCS[1:]
        out.append(Claim(f"robust/others/{label}/{est}", fmt_mc(r["rmse"], r["rmse_se"]),
                         r["rmse"], r["rmse_se"], files, ROBUST_CMD, ("others", label, est)))
    for key in ("clean_ratio", "contam_1000_ratio", "contam_2000_ratio"):
        g = data["goals"][key]
        out.append(Claim(f"robust/goal/{key}", fmt_mc(g["value"], g["se"]), g["value"], g["se"],
                         ROBUST_DOCS, ROBUST_CMD, ("goal", key)))
    return out


#: (workload index, eps, mechanism) cells that docs/release.md quotes.
RELEASE_QUOTED = [(w, 1.0, m) for w in range(4)
                  for m in ("envelope", "pmw", "mwem", "laplace", "identity", "blr")] + [
    (2, 0.5, "envelope"), (2, 0.5, "identity"), (1, 0.5, "envelope"), (1, 0.5, "identity_ls"),
    (0, 4.0, "envelope"), (0, 4.0, "identity"), (0, 2.0, "mwem"), (0, 2.0, "mwem_oracle"),
]


def release_cell(data: dict[str, Any], w: int, eps: float) -> dict[str, Any]:
    table = data["eps_tables"][w]
    cell: dict[str, Any] = table["cells"][table["eps"].index(eps)]
    return cell


def fmt_release(v: float, se: float) -> str:
    return f"{v:.3f}" if se == 0 else f"{v:.3f} ± {se:.3f}"


def release_claims() -> list[Claim]:
    data = _release()
    out = []
    for w, eps, m in RELEASE_QUOTED:
        v, se = release_cell(data, w, eps)[m]
        out.append(Claim(f"release/w{w}/eps{eps}/{m}", fmt_release(v, se), v, se, RELEASE_DOCS,
                         RELEASE_CMD, ("eps", w, eps, m)))
    return out


#: the error-vs-n table (1-way marginals over {0,1}^2, eps = 1): cells quoted in
#: docs/release.md, and the mechanisms whose fitted slope it quotes.
RELEASE_N_QUOTED = [(80, "envelope"), (80, "identity")]
SLOPE_MECHS = ("envelope", "pmw", "mwem", "identity", "blr")
SLOPE_LABELS = {"envelope": "envelope", "pmw": "pure PMW", "mwem": "MWEM",
                "identity": "identity (simplex)", "blr": "BLR"}


def n_cell(data: dict[str, Any], n: int) -> dict[str, Any]:
    t = data["n_table"]
    cell: dict[str, Any] = t["cells"][t["ns"].index(n)]
    return cell


def fitted_slope(ns: list[int], stats: list[tuple[float, float]]) -> tuple[float, float]:
    """Least-squares slope of log(error) on log(n), with its standard error propagated from
    the errors' standard errors (delta method: var log e ~ (se / e)^2; 0 for exact errors)."""
    x = [math.log(n) for n in ns]
    xb = sum(x) / len(x)
    sxx = sum((v - xb) ** 2 for v in x)
    w = [(v - xb) / sxx for v in x]
    slope = sum(wi * math.log(e) for wi, (e, _) in zip(w, stats, strict=True))
    se = math.sqrt(sum((wi * s / e) ** 2 for wi, (e, s) in zip(w, stats, strict=True)))
    return slope, se


def release_n_claims() -> list[Claim]:
    data = _release()
    ns = data["n_table"]["ns"]
    out = []
    for n in ns:
        for m in SLOPE_MECHS:
            v, se = n_cell(data, n)[m]
            files = RELEASE_DOCS if (n, m) in RELEASE_N_QUOTED else RELEASE_DOCS[1:]
            out.append(Claim(f"release/n{n}/{m}", fmt_release(v, se), v, se, files,
                             RELEASE_CMD, ("n", n, m)))
    for m in SLOPE_MECHS:
        slope, se = fitted_slope(ns, [tuple(n_cell(data, n)[m]) for n in ns])
        assert abs(slope - data["slopes"][m]) < 1e-9, (m, slope, data["slopes"][m])
        out.append(Claim(f"release/slope/{m}", f"{SLOPE_LABELS[m]} {slope:+.2f}", slope, se,
                         RELEASE_DOCS, RELEASE_CMD, ("slope", m)))
    return out


def all_claims() -> list[Claim]:
    return robust_claims() + release_claims() + release_n_claims()


def within(claim: Claim, value: float, se: float, z: float = 4.0) -> bool:
    """Is a re-measured ``value`` (standard error ``se``) consistent with the claim? Exact
    figures must agree to the printed rounding (plus 1e-9); Monte Carlo ones within ``z``
    combined standard errors (the quick run reuses the start of the same seed stream, so
    the two are positively correlated and the test is conservative)."""
    if claim.exact and se == 0.0:
        return abs(value - claim.value) <= 1e-9 + 1e-12 * abs(claim.value)
    return abs(value - claim.value) <= z * math.hypot(claim.se, se) + 1e-12


def _ordinal(k: int) -> str:
    return f"{k}{'th' if 10 <= k % 100 <= 20 else {1: 'st', 2: 'nd', 3: 'rd'}.get(k % 10, 'th')}"


def release_derived() -> dict[str, str]:
    """Figures derived from the release tables, as the docs word them: the envelope's
    wins / losses / ties against the best simple baseline (run.verdict on every cell) and
    how much the per-database oracle choice of rounds flatters PMW and MWEM at most."""
    run = release_run()
    data = _release()
    cells = [c for t in data["eps_tables"] for c in t["cells"]]
    v = [run.verdict(c) for c in cells]
    wins = sum(x.startswith("envelope wins") for x in v)
    loses = sum(x.startswith("envelope loses") for x in v)
    pmw = max(c["pmw"][0] - c["pmw_oracle"][0] for c in cells)
    mwem = max(c["mwem"][0] - c["mwem_oracle"][0] for c in cells)
    by_identity = sum(x.startswith("envelope loses") and "vs identity" in x for x in v)
    ahead = sum(c["identity"][0] < c["blr"][0] - 2 * c["identity"][1] for c in cells)
    tied = sum(abs(c["identity"][0] - c["blr"][0]) <= 2 * c["identity"][1] for c in cells)
    return {"verdicts": f"wins {wins}, loses {loses}, ties {len(v) - wins - loses}",
            "readme": f"identity mechanism beats the envelope in {by_identity} of {len(v)}",
            "blr": f"BLR mechanism in {ahead} of the {len(v)} cells"
                   + (f" and ties the {_ordinal(len(v))}" if tied == 1 else f", ties {tied}"),
            "oracle": f"at most {pmw:.3f} better for PMW and {mwem:.3f} for MWEM"}


# ------------------------------------------------------------------ quick re-measurements
def quick_robust(scenario: str, estimators: list[str], reps: int) -> dict[str, dict[str, float]]:
    """The first ``reps`` runs of each named estimator's seed stream in ``scenario``."""
    from benchmarks import robust_utility as ru

    sc = next(s for s in ru.SCENARIOS if s.key == scenario)
    import numpy as np

    n = len(sc.draw(np.random.default_rng(0))[0])
    ests = ru.estimators(n, sc.lam)
    missing = [e for e in estimators if e not in ests]
    if missing:
        raise RuntimeError(f"cannot re-measure {missing} in {scenario}: the peer is not "
                           "importable (install dpsieve[test], which pins opendp==0.16.0)")
    return {e: ru.measure(ests[e], sc, e, min(reps, sc.reps)) for e in estimators}


def quick_others(label: str, estimators: list[str], reps: int) -> dict[str, dict[str, float]]:
    """The first ``reps`` runs of named rows of the median / PCA / KL / policy table."""
    from benchmarks import robust_utility as ru

    sc, ests = next((sc, e) for sc, e in ru.other_cells(reps) if sc.label == label)
    return {e: ru.measure(ests[e], sc, e, min(reps, sc.reps)) for e in estimators}


def release_run() -> Any:
    """The release experiments' module (``dpsieve.reproduce.release``, what
    ``dpsieve release-experiments`` runs)."""
    import importlib

    return importlib.import_module("dpsieve.reproduce.release")


def tuned_pmw_rounds(w: int | None, n: int, eps: float) -> int:
    """PMW's J re-chosen exactly as the full run does, from the public tuning databases only
    (seed ``TUNE_SEED``; ``w=None``: the error-vs-n workload)."""
    import numpy as np

    run = release_run()
    wl = run.workloads()[w][1] if w is not None else n_workload()
    tune = run.databases(wl.universe_size, n, _release()["settings"]["ndb"], seed=run.TUNE_SEED)
    errs = [run.pmw_errors(wl, x, eps) for x in tune]
    return int(min(errs[0], key=lambda J: float(np.mean([t[J] for t in errs]))))


def n_workload() -> Any:
    from dpsieve.release import Domain, marginals

    return marginals(Domain.from_sizes([2, 2]), 1)


def quick_release(w: int, eps: float, mechanisms: list[str], runs: int,
                  mc: int) -> dict[str, tuple[float, float]]:
    """Re-measure one table cell of the release experiments: exact mechanisms exactly (same
    public choices as the full run: the envelope's cost budget, PMW's J and MWEM's R from the
    full run's JSON), Monte Carlo ones from the start of the same seed streams."""
    run = release_run()
    _name, wl, n = run.workloads()[w]
    return _quick_cell(run, wl, n, eps, release_cell(_release(), w, eps), mechanisms, runs, mc)


def quick_release_n(n: int, mechanisms: list[str], runs: int,
                    mc: int) -> dict[str, tuple[float, float]]:
    """Re-measure one row of the error-vs-n table (1-way marginals over {0,1}^2, eps = 1)."""
    data = _release()
    return _quick_cell(release_run(), n_workload(), n, float(data["n_table"]["eps"]),
                       n_cell(data, n), mechanisms, runs, mc)


def _quick_cell(run: Any, wl: Any, n: int, eps: float, cell: dict[str, Any],
                mechanisms: list[str], runs: int, mc: int) -> dict[str, tuple[float, float]]:
    import numpy as np

    st = _release()["settings"]
    dbs = run.databases(wl.universe_size, n, st["ndb"])
    per: dict[str, list[tuple[float, float]]] = {m: [] for m in mechanisms}
    from dpsieve.release import blr_release, identity_release, laplace_release, mwem_release

    for i, x in enumerate(dbs):
        f = wl.answers(x)
        for m in mechanisms:
            if m == "envelope":
                per[m].append((run.envelope_error(wl, x, eps, st["cost"])[0], 0.0))
            elif m == "pmw":
                per[m].append((run.pmw_errors(wl, x, eps)[int(cell["J_pmw"])], 0.0))
            elif m == "laplace":
                e = laplace_release(wl, x, eps, rng=np.random.default_rng(0)).expected_error
                assert e is not None
                per[m].append((float(e), 0.0))
            elif m == "blr":
                e = blr_release(wl, x, eps, rng=np.random.default_rng(0)).expected_error
                assert e is not None
                per[m].append((float(e), 0.0))
            elif m == "mwem":
                R = int(cell["R_mwem"])
                per[m].append(run.mc_error(
                    lambda g, R=R, x=x: mwem_release(wl, x, eps, rounds=R, rng=g).answers,
                    f, mc, 3 + R))
            elif m == "identity":
                per[m].append(run.mc_error(
                    lambda g, x=x: identity_release(wl, x, eps, rng=g).answers, f, runs, 100 + i))
            elif m == "identity_ls":
                per[m].append(run.mc_error(
                    lambda g, x=x: identity_release(wl, x, eps, projection="workload",
                                                    rng=g).answers, f, runs, 100 + i))
            else:
                raise ValueError(m)
    mean: Callable[[list[tuple[float, float]]], tuple[float, float]] = run._mean
    return {m: mean(v) for m, v in per.items()}
