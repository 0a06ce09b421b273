"""Reproductions of the papers' claims, shipped with the package so they run from a wheel.

* :mod:`dpsieve.reproduce.filters` — the privacy-filters paper: Figures 1-3 and its tables
  (``dpsieve figures --out DIR`` or ``dpsieve reproduce filters``);
* :mod:`dpsieve.reproduce.robust` — Propose-Filter-Release against its baselines
  (``dpsieve reproduce robust``; the offline data sets need the ``data`` extra);
* :mod:`dpsieve.reproduce.release` — the query-release experiments
  (``dpsieve release-experiments``);
* :mod:`dpsieve.reproduce.training` — training under filters (``dpsieve training-figures``;
  needs the ``data`` extra and dp-accounting).

Each ``main`` writes PNG figures and a markdown summary into an output directory and
returns the summary's path. Simulations use seeded numpy generators: their outputs are
reproductions, not private releases. ``experiments/<area>/run.py`` in a source checkout call
the same code and keep the committed results next to it.
"""

from __future__ import annotations

__all__: list[str] = []
