"""PFR experiments: ``python experiments/robust/run.py [--reps 20] [--out DIR]``.

The code lives in :mod:`dpsieve.reproduce.robust` (it ships with the package, so
``dpsieve reproduce robust`` works from an installed wheel); committed results are in
``experiments/robust/output``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dpsieve.reproduce.robust import main

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "output")
    args = ap.parse_args()
    print(main(args.out, reps=args.reps).read_text())
