"""Run every benchmark side by side with the peers and merge the results.

Usage: ``python -m benchmarks.run_all [--only NAME ...]``. Each ``benchmarks/<area>_*.py``
module is run as ``python -m benchmarks.<module>`` in its own process (so one peer's
import cost or memory does not leak into another's numbers); each writes a markdown section
to ``benchmarks/results/<area>.md``. This script then writes ``benchmarks/RESULTS.md``:
a header naming the machine and the peers' versions, then every section (a long one, listed
in ``SUMMARISED``, by the summary that links to it). ``--merge-only`` rebuilds RESULTS.md
from the result files alone: a reading added by hand goes into the result file.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Result files too long for RESULTS.md: a summary section links to each instead
#: (results/queries-engines.md summarises results/queries.md).
SUMMARISED = frozenset({"queries.md"})
PEERS = ("dp-accounting", "prv-accountant", "opendp", "autodp", "diffprivlib", "numpy", "scipy")


def _version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return "not installed"


def _modules() -> list[str]:
    names = sorted(p.stem for p in HERE.glob("*_*.py") if p.stem != "run_all")
    return [n for n in names if not n.startswith("_")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--only", nargs="*", default=None, help="module names to run")
    ap.add_argument("--merge-only", action="store_true", help="only rebuild RESULTS.md")
    args = ap.parse_args()
    if args.merge_only:
        merge()
        return
    mods = [m for m in _modules() if args.only is None or m in args.only]
    failures: list[str] = []
    for m in mods:
        t0 = time.perf_counter()
        print(f"== benchmarks.{m}", flush=True)
        rc = subprocess.call([sys.executable, "-m", f"benchmarks.{m}"], cwd=HERE.parent)
        print(f"   rc={rc} in {time.perf_counter() - t0:.1f} s", flush=True)
        if rc != 0:
            failures.append(m)
    merge()
    if failures:
        print("failed:", ", ".join(failures))
        sys.exit(1)


def merge() -> None:
    """Write benchmarks/RESULTS.md from benchmarks/results/*.md."""
    lines = [
        "# Benchmark results",
        "",
        "Written by `python -m benchmarks.run_all` (`make bench`); each section below is",
        "produced by one benchmark module and says how it was measured. Ratios matter",
        "more than absolute times on this noisy 2-core machine.",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}",
        "- versions: " + ", ".join(f"{p} {_version(p)}" for p in PEERS),
        "",
    ]
    for sec in sorted((HERE / "results").glob("*.md")):
        if sec.name in SUMMARISED:
            continue
        lines.append(sec.read_text().rstrip())
        lines.append("")
    (HERE / "RESULTS.md").write_text("\n".join(lines))


if __name__ == "__main__":
    main()
