"""Reproductions for the privacy-filters paper: ``python experiments/filters/run.py [OUT]``.

The code lives in :mod:`dpsieve.reproduce.filters` (it ships with the package, so
``dpsieve figures --out DIR`` works from an installed wheel); committed results are in
``experiments/filters/results``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dpsieve.reproduce.filters import main

if __name__ == "__main__":
    print(main(Path(sys.argv[1] if len(sys.argv) > 1 else "experiments/filters/output")))
