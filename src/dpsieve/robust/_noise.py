"""Noisy counts and Laplace releases on a lattice, built on :mod:`dpsieve.mechanisms.noise`.

Floating-point safety follows the mechanisms layer (Mironov 2012): a value is snapped to
the lattice ``g Z`` (``g`` a power of two), exact integer discrete Laplace noise is added
(Canonne, Kamath, Steinke 2020), and only then is the result scaled by ``g``. Snapping maps
values at L1 distance ``Delta`` in ``R^d`` to integer vectors at L1 distance at most
``ceil(Delta / g) + d``, the integer sensitivity the noise is calibrated to, so the
release is ``eps``-DP for L1 sensitivity ``Delta`` exactly (no rounding in the claim).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import round_up
from dpsieve._validation import check_in_open, check_positive
from dpsieve.mechanisms.noise import (
    add_noise_exact,
    default_granularity,
    discrete_laplace,
    lattice_to_float,
    snap_exact,
)

__all__ = [
    "count_margin",
    "count_scale",
    "exact_column_means",
    "laplace_release",
    "noisy_count",
]


def count_scale(eps: float) -> float:
    """The smallest float ``>= 1/eps``: discrete Laplace count noise of that scale is eps-DP."""
    eps = check_positive("eps", eps, "count_scale")
    return round_up(Fraction(1) / Fraction(eps), finite=True)


def count_margin(eps: float, delta: float) -> int:
    """Smallest integer ``m >= 0`` (up to a 1e-9 relative safety margin, which only raises
    it) with ``P[Z > m] = a^{m+1}/(1+a) <= delta`` for ``Z ~ DLap(count_scale(eps))``,
    ``a = exp(-1/scale)``."""
    delta = check_in_open("delta", delta, 0.0, 1.0, "count_margin")
    t = count_scale(eps)
    a = math.exp(-1.0 / t)
    need = t * math.log(1.0 / (delta * (1.0 + a))) * (1.0 + 1e-9) + 1e-9
    return max(0, math.ceil(need) - 1)


def noisy_count(size: int, eps: float, delta: float, rng: np.random.Generator | None) -> int:
    """``size + Z - m``, ``Z ~ DLap(1/eps)``, ``m = count_margin``: ``P[out > size] <= delta``."""
    z = discrete_laplace(count_scale(eps), None, rng)
    return int(size) + int(z) - count_margin(eps, delta)


def exact_column_means(rows: npt.NDArray[np.float64]) -> list[Fraction]:
    """The exact (rational) mean of each column: no floating-point rounding at all, so the
    sensitivity bound of the real-arithmetic proof applies to the value that is snapped."""
    a = np.asarray(rows, dtype=np.float64).reshape(len(rows), -1)
    n = len(a)
    return [sum((Fraction(v) for v in a[:, j].tolist()), Fraction(0)) / n
            for j in range(a.shape[1])]


def _snap_exact(v: Fraction, g: float) -> int:
    a = v / Fraction(g)
    fl = math.floor(a)
    return fl + (1 if a - fl >= Fraction(1, 2) else 0)


def laplace_release(
    value: list[Fraction] | npt.ArrayLike, l1_sensitivity: float, eps: float,
    rng: np.random.Generator | None,
) -> npt.NDArray[np.float64]:
    """``eps``-DP Laplace release of a vector whose L1 sensitivity is ``l1_sensitivity``.

    Exact rationals (e.g. from :func:`exact_column_means`) and floats are snapped exactly
    to Python integers of any size, the noise added in exact integers and the result
    converted to the nearest floats (saturating): no value's magnitude can make the release
    fail or wrap around (an int64 snap of a core mean could crash or wrap to about -mean
    depending on the private data). The lattice scale
    ``k / eps`` is rounded up (:func:`dpsieve._rounding.round_up`: more noise).
    """
    delta_1 = check_positive("l1_sensitivity", l1_sensitivity, "laplace_release")
    eps = check_positive("eps", eps, "laplace_release")
    g = default_granularity(delta_1 / eps)
    if isinstance(value, list) and value and isinstance(value[0], Fraction):
        snapped = np.array([_snap_exact(v, g) for v in value], dtype=object)
    else:
        snapped = snap_exact(np.atleast_1d(np.asarray(value, dtype=np.float64)), g,
                             "laplace_release")
    k = math.ceil(Fraction(delta_1) / Fraction(g)) + snapped.size
    t = round_up(Fraction(k) / Fraction(eps))
    noisy = add_noise_exact(snapped, discrete_laplace(t, snapped.size, rng))
    return lattice_to_float(noisy, g)
