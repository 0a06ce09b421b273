"""The PLD kernels other layers build their own PLD arithmetic on (the filters' training
step powers, the mechanisms' subsampled Gaussian): grid construction, convolution and its
pessimistic tail handling, knots, re-gridding and the certified PLD-vs-PLD order. Each is
defined (and its rounding direction stated) in a private module of this package; this is
their public name outside it.

* :func:`atoms` / :func:`optimistic` / :func:`trim` and :data:`Z_LOW` -- a loss
  distribution onto the grid (pessimistic or optimistic), its support trimmed;
* :func:`convolve` / :func:`shed_excess` -- one composition and its noise-dominated tail;
* :func:`knots` -- the loss grid's knots; :func:`regrid` -- a PLD on another grid;
* :func:`pl_vs_pl` -- the sound check ``L <= B`` of two grid PLDs.
"""

from __future__ import annotations

from dpsieve.accounting._construct import Z_LOW, atoms, optimistic
from dpsieve.accounting._construct import _trim as trim
from dpsieve.accounting._convolve import convolve, shed_excess
from dpsieve.accounting._curves import knots
from dpsieve.accounting._ops import regrid
from dpsieve.accounting.order import _pl_vs_pl as pl_vs_pl

__all__ = ["Z_LOW", "atoms", "convolve", "knots", "optimistic", "pl_vs_pl", "regrid",
           "shed_excess", "trim"]
