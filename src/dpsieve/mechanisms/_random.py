"""Sources of random bits for the samplers.

Convention used by every sampler in :mod:`dpsieve.mechanisms`::

    rng: numpy.random.Generator | None = None

``None`` (the default) means the operating system's cryptographically secure generator
(``os.urandom``, the source behind Python's :mod:`secrets`). A seeded
``numpy.random.Generator`` may be passed *explicitly* for simulations and tests; it is
never used implicitly. Both are read as raw 64-bit words, so the exact samplers run the
same integer algorithm whichever source feeds them.
"""

from __future__ import annotations

import os
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

from dpsieve._validation import fail

__all__ = ["RNG", "RandomSource", "as_source"]

#: The type of the ``rng`` parameter accepted by every sampler.
RNG: TypeAlias = np.random.Generator | None

U64 = npt.NDArray[np.uint64]
_TWO53 = float(2**53)


class RandomSource:
    """Uniform 64-bit words from ``os.urandom`` (``gen is None``) or a numpy Generator."""

    __slots__ = ("gen",)

    def __init__(self, gen: np.random.Generator | None = None) -> None:
        self.gen = gen

    def words(self, n: int) -> U64:
        """``n`` independent uniform words in ``[0, 2^64)``."""
        if n <= 0:
            return np.zeros(0, dtype=np.uint64)
        if self.gen is None:
            return np.frombuffer(os.urandom(8 * n), dtype=np.uint64).copy()
        out: U64 = self.gen.bit_generator.random_raw(n).astype(np.uint64, copy=False)
        return out

    def bits(self, n: int) -> npt.NDArray[np.bool_]:
        """``n`` independent fair bits."""
        if n <= 0:
            return np.zeros(0, dtype=bool)
        raw = self.words((n + 63) // 64).view(np.uint8)
        return np.unpackbits(raw)[:n].astype(bool)

    def below(self, m: U64) -> U64:
        """Exactly uniform integers in ``[0, m[i])`` for each ``m[i] >= 1`` (rejection).

        A word ``u`` is accepted iff ``u < 2^64 - (2^64 mod m)``, i.e. ``u <= ~r`` with
        ``r = (-m) mod m``; then ``u mod m`` is exactly uniform. Each round accepts with
        probability > 1/2, and the number of rounds depends only on ``m`` and the fresh
        words, not on any data.
        """
        m = np.asarray(m, dtype=np.uint64)
        out = np.empty(m.shape, dtype=np.uint64)
        pending = np.arange(m.size)
        mm = m.ravel()
        limit = ~((np.uint64(0) - mm) % mm)
        flat = out.ravel()
        while pending.size:
            u = self.words(pending.size)
            ok = u <= limit[pending]
            idx = pending[ok]
            flat[idx] = u[ok] % mm[idx]
            pending = pending[~ok]
        return flat.reshape(m.shape)

    def below_int(self, m: int) -> int:
        """One exactly uniform Python int in ``[0, m)`` for any ``m >= 1`` (arbitrary size)."""
        nbits = max(1, (m - 1).bit_length())
        nwords = (nbits + 63) // 64
        extra = 64 * nwords - nbits
        while True:
            w = self.words(nwords)
            v = 0
            for x in w.tolist():
                v = (v << 64) | int(x)
            v >>= extra
            if v < m:
                return v

    def uniform01(self, n: int) -> npt.NDArray[np.float64]:
        """``n`` floats uniform on the 2^-53 lattice in ``(0, 1)`` (never 0 or 1).

        Used only where a float caveat is documented (Gumbel / exponential noise).
        """
        k = (self.words(n) >> np.uint64(11)).astype(np.float64)
        return (k + 0.5) / _TWO53


def as_source(rng: object, owner: str) -> RandomSource:
    """Validate the ``rng`` parameter of ``owner`` and wrap it."""
    if rng is None or isinstance(rng, np.random.Generator):
        return RandomSource(rng)
    if isinstance(rng, RandomSource):
        return rng
    raise fail("rng", owner, "None (secure source) or a numpy.random.Generator", rng)
