"""Training under filters: ``python experiments/training/run.py [OUT] [--quick]``.

The code lives in :mod:`dpsieve.reproduce.training` (it ships with the package, so
``dpsieve training-figures --out DIR`` works from an installed wheel); committed results
are in ``experiments/training/results``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dpsieve.reproduce.training import main

if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    print(main(Path(args[0]) if args else Path("experiments/training/results"),
               quick="--quick" in sys.argv))
