"""Randomness for the release samplers.

``rng=None`` means "secure": a fresh :class:`numpy.random.Generator` is seeded, per call,
with 128 bits from the operating system's CSPRNG (:mod:`secrets`). The generator that
expands that seed (PCG64) is not itself a cryptographic generator; the seed is fresh per
release and never leaves the process, which is the documented compromise for Gumbel and
uniform draws until :mod:`dpsieve.mechanisms` exposes a CSPRNG-backed Generator. Simulations
pass a seeded Generator explicitly.

The Gumbel-max draws are exact up to the 53-bit resolution of floating-point uniforms;
the privacy proofs are for the exact law (see docs/proofs/release.md, "floating point").
"""

from __future__ import annotations

import secrets

import numpy as np
import numpy.typing as npt

__all__ = ["gumbel", "resolve_rng"]


def resolve_rng(rng: np.random.Generator | None) -> np.random.Generator:
    """``rng`` itself, or a Generator freshly seeded from :mod:`secrets` when ``None``."""
    if rng is not None:
        return rng
    return np.random.Generator(np.random.PCG64(secrets.randbits(128)))


def gumbel(rng: np.random.Generator, size: int | tuple[int, ...]) -> npt.NDArray[np.float64]:
    """Standard Gumbel draws -log(-log U) with U uniform on (0, 1) (0 excluded)."""
    u = rng.random(size)
    u = np.where(u > 0.0, u, np.nextafter(0.0, 1.0))
    out: npt.NDArray[np.float64] = -np.log(-np.log(u))
    return out
