"""Reading a :class:`~dpsieve.accounting.pld.PLD` query as atoms for the GDP residue check.

A PLD is D (+) G_q with D on a grid. It can be charged by the GDP residue filter when
its exact PLD is symmetric (``symmetric=True``; the order is then decided on x >= 1,
paper Lemma 8) and it does not under-state the query (``direction`` exact or
pessimistic). A D with more than ``MAX_ATOMS`` atoms is regridded onto a coarser grid by
the PLD's own pessimistic connect-the-dots split (``PLD.discretize``; its hockey-stick
curve is the chord interpolation of the original one, so it dominates it), which costs far
less utility than rounding losses up.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from dpsieve.accounting.conversions import discrete_part
from dpsieve.filters._gdp_core import Atoms, coarsen_up

__all__ = ["MAX_ATOMS", "pld_symmetric_atoms", "without_gauss"]

#: Atoms kept for the residue check (the knots of the coarser grid).
MAX_ATOMS = 7


def pld_symmetric_atoms(pld: Any) -> tuple[Atoms, float] | None:
    """(atoms of D, q) for a symmetric, non-optimistic PLD D (+) G_q; ``None`` otherwise.

    A pure function of the (immutable) PLD, memoised on its value.
    """
    try:
        return _cached(pld)
    except TypeError:  # unhashable stand-in
        return _atoms_of(pld)


def without_gauss(pld: Any, direction: str | None = None) -> Any:
    """The discrete part D of D (+) G_mu (:func:`dpsieve.accounting.conversions.discrete_part`)."""
    return discrete_part(pld, direction)


@functools.lru_cache(maxsize=64)
def _cached(pld: Any) -> tuple[Atoms, float] | None:
    return _atoms_of(pld)


def _atoms_of(pld: Any) -> tuple[Atoms, float] | None:
    if not bool(getattr(pld, "symmetric", False)):
        return None
    if getattr(pld, "direction", "optimistic") == "optimistic":
        return None
    q = float(pld.mu)
    d = pld
    nz = np.nonzero(np.asarray(pld.probs) > 0)[0]
    if nz.size > MAX_ATOMS:
        z = np.asarray(pld.losses)
        span = float(z[nz[-1]] - z[nz[0]])
        d = without_gauss(pld, "pessimistic").discretize(span / (MAX_ATOMS - 3))
    z = np.asarray(d.losses, dtype=np.float64)
    p = np.asarray(d.probs, dtype=np.float64)
    keep = p > 0
    atoms = Atoms(z[keep], p[keep], float(d.inf_mass))
    return coarsen_up(atoms), q
