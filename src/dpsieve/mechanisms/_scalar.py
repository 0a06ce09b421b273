"""Scalar, arbitrary-precision versions of the CKS samplers (Python ints only).

They serve two purposes: the vectorized code in :mod:`._exact` hands them the rare
elements whose integers would leave ``uint64`` (continuing from the same loop state), and
the tests use them as a readable reference implementation of CKS Algorithms 1-3.
"""

from __future__ import annotations

import math

from dpsieve.errors import NumericalError
from dpsieve.mechanisms._random import RandomSource

__all__ = ["bern_exp", "bern_exp_le1", "dgauss", "dlap", "geom", "to_int64"]


def to_int64(y: int) -> int:
    """``y`` if it fits in int64, else :class:`NumericalError` (a draw beyond 2^63)."""
    if not (-(2**63) <= y < 2**63):
        raise NumericalError(f"a sampled value ({y}) does not fit in int64")
    return y


def bern_exp_le1(a: int, b: int, src: RandomSource, k: int = 1) -> bool:
    """Bernoulli(exp(-a/b)) for 0 <= a <= b, continuing CKS Algorithm 1 at counter ``k``."""
    while True:
        if not src.below_int(b * k) < a:
            return k % 2 == 1
        k += 1


def bern_exp(a: int, b: int, src: RandomSource) -> bool:
    """Bernoulli(exp(-a/b)) for any a >= 0, b >= 1."""
    for _ in range(a // b):
        if not bern_exp_le1(1, 1, src):
            return False
    return bern_exp_le1(a % b, b, src)


def geom(t: int, s: int, src: RandomSource) -> int:
    """One draw of P[Y = y] proportional to exp(-y s / t), y >= 0 (first half of CKS Alg. 2)."""
    while True:
        u = src.below_int(t)
        if not bern_exp_le1(u, t, src):
            continue
        v = 0
        while bern_exp_le1(1, 1, src):
            v += 1
        return (u + t * v) // s


def dlap(t: int, s: int, src: RandomSource) -> int:
    """One draw of the discrete Laplace with scale t/s (CKS Algorithm 2)."""
    while True:
        y = geom(t, s, src)
        neg = src.below_int(2) == 1
        if neg and y == 0:
            continue
        return -y if neg else y


def dgauss(sigma2_num: int, sigma2_den: int, src: RandomSource) -> int:
    """One draw of N_Z(0, sigma^2), sigma^2 = num/den (CKS Algorithm 3, t = floor(sigma)+1)."""
    t = math.isqrt(sigma2_num // sigma2_den) + 1  # floor(sigma) + 1
    while t * t * sigma2_den <= sigma2_num:
        t += 1
    while t > 1 and (t - 1) * (t - 1) * sigma2_den > sigma2_num:
        t -= 1
    while True:
        y = dlap(t, 1, src)
        # gamma = (|y| - sigma^2/t)^2 / (2 sigma^2) = (|y| t den - num)^2 / (2 num den t^2)
        x = abs(y) * t * sigma2_den - sigma2_num
        if bern_exp(x * x, 2 * sigma2_num * sigma2_den * t * t, src):
            return y
