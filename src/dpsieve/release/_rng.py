"""Randomness for the release samplers.

Every sampler takes ``rng: numpy.random.Generator | None = None``; ``None`` means the
operating system's CSPRNG, through :mod:`dpsieve.mechanisms`' random source (``os.urandom``).
A seeded Generator is for simulations only and is never used implicitly.

Gumbel draws are ``-log(-log U)`` with ``U`` on the ``2^-53`` lattice (never 0 or 1), the
same convention and float caveat as :func:`dpsieve.mechanisms.exponential_mechanism`: the
Gumbel-max selection probabilities equal the ideal ones up to floating-point rounding of
the noise; the output is an index (a transcript), so there is no Mironov-style hole in a
released real. The privacy proofs are for the ideal real-arithmetic law
(docs/proofs/release.md, "Floating point").
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpsieve.mechanisms import RandomSource, as_source

__all__ = ["RandomSource", "gumbel", "source"]


def source(rng: object, owner: str) -> RandomSource:
    """Validate ``rng`` (None = secure) and wrap it as a source of uniform words."""
    return as_source(rng, owner)


def gumbel(src: RandomSource, size: int) -> npt.NDArray[np.float64]:
    """``size`` standard Gumbel draws."""
    out: npt.NDArray[np.float64] = -np.log(-np.log(src.uniform01(size)))
    return out
