"""CLI start-up: wall time of ``dpsieve --help``, ``--version`` and each command's help.

Run: ``python -m benchmarks.cli_startup [--repeats N]``. Writes ``benchmarks/results/cli.md``.
The target (issue 15) is under 0.5 s for ``dpsieve --help``; commands are imported only when
they run (``dpsieve.cli.COMMANDS``), so ``--help`` loads typer and ``dpsieve.cli`` only.
Times are medians of N runs (a fresh process each) on the shared 2-core machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

from dpsieve.cli import COMMANDS

OUT = Path(__file__).resolve().parent / "results" / "cli.md"
DPSIEVE = str(Path(sys.executable).parent / "dpsieve")


def _median(args: list[str], repeats: int) -> float:
    ts = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        subprocess.run(args, capture_output=True, check=False)
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


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
             f"Command: `python -m benchmarks.cli_startup --repeats {args.repeats}`; median "
             "wall time of a fresh process.", "", "| command | median (s) |", "|---|---|"]
    lines += [f"| `{name}` | {t:.3f} |" for name, t in rows]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
