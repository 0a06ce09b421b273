"""Shared helpers of the filter tests: an independent high-precision oracle for G_m (+) L."""

from __future__ import annotations

import math

import mpmath
import numpy as np

mpmath.mp.dps = 40


def h_gauss_mp(mu: float, x: mpmath.mpf) -> mpmath.mpf:
    """h_{G_mu}(x) in mpmath (closed form of Dong, Roth, Su)."""
    if mu == 0:
        return max(mpmath.mpf(0), 1 - x)
    lx = mpmath.log(x)
    return mpmath.ncdf(-lx / mu + mu / 2) - x * mpmath.ncdf(-lx / mu - mu / 2)


def mixture_gap(z, p, m: float, mu: float, ts) -> float:
    """max over t of h_{G_m (+) L}(e^t) - h_{G_mu}(e^t), in mpmath (L = atoms z, p)."""
    worst = -math.inf
    for t in ts:
        x = mpmath.e ** mpmath.mpf(float(t))
        lhs = mpmath.fsum(
            mpmath.mpf(float(pj)) * h_gauss_mp(m, x * mpmath.e ** (-mpmath.mpf(float(zj))))
            for zj, pj in zip(z, p, strict=True)
        )
        worst = max(worst, float(lhs - h_gauss_mp(mu, x)))
    return worst


def dense_ts(t_end: float = 12.0, n: int = 400) -> np.ndarray:
    return np.concatenate([np.linspace(0.0, 3.0, n // 2), np.linspace(3.0, t_end, n // 2)])
