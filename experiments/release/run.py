"""Query-release experiments: ``python experiments/release/run.py [OUT] [--full]``.

The code lives in :mod:`dpsieve.reproduce.release` (it ships with the package, so
``dpsieve release-experiments --out DIR`` works from an installed wheel); committed results
are in ``experiments/release/results`` (quick grid) and ``results_full``.
"""

from __future__ import annotations

import sys

from dpsieve.reproduce.release import cli

if __name__ == "__main__":
    cli(sys.argv)
