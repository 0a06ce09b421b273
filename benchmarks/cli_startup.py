"""CLI start-up: wall time of ``dpsieve --help``, ``--version`` and each command's help.

Run: ``python -m benchmarks.cli_startup [--repeats N]``. Writes ``benchmarks/results/cli.md``.
The target (issue 15) is under 0.5 s for ``dpsieve --help``; commands are imported only when
they run (``dpsieve.cli.COMMANDS``), so ``--help`` loads typer and ``dpsieve.cli`` only.
Times are medians of N runs (a fresh process each) on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dpsieve.cli import COMMANDS

OUT = Path(__file__).resolve().parent / "results" / "cli.md"
DPSIEVE = str(Path(sys.executable).parent / "dpsieve")


def _median(args: list[str], repeats: int) -> tuple[float, float]:
    """Median wall time and median CPU time (user + system, of the child process) of a
    fresh run. CPU time hardly depends on what else the machine runs; wall time does."""
    ts, cpu = [], []
    for _ in range(repeats):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(args, capture_output=True, check=False)
        ts.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(ts), statistics.median(cpu)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    rows = [("python -c 'import dpsieve'", _median([sys.executable, "-c", "import dpsieve"],
                                                   args.repeats)),
            ("dpsieve --version", _median([DPSIEVE, "--version"], args.repeats)),
            ("dpsieve --help", _median([DPSIEVE, "--help"], args.repeats))]
    rows += [(f"dpsieve {name} --help", _median([DPSIEVE, name, "--help"], args.repeats))
             for name in COMMANDS]
    lines = ["## CLI start-up (issue 15: `dpsieve --help` under 0.5 s)", "",
             f"Command: `python -m benchmarks.cli_startup --repeats {args.repeats}`; medians "
             "over fresh processes of the wall time and of the CPU time (user + system; "
             "barely affected by other jobs). Load average when run: "
             f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores.", "",
             "| command | wall (s) | CPU (s) |", "|---|---|---|"]
    lines += [f"| `{name}` | {t:.3f} | {c:.3f} |" for name, (t, c) in rows]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
