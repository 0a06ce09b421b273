"""Hockey-stick and tradeoff curves of grid PLDs, with floating-point error bounds (private).

A grid PLD with Gaussian part is L = D (+) G_mu, D = sum_i p_i delta_{z_i} + inf_mass
delta_{+inf}. By the composition formula (paper, Sec. 2: h_{L (+) S}(x) = E_{Z~L}[h_S(x e^{-Z})])

    h_L(x) = inf_mass + sum_i p_i h_{G_mu}(x e^{-z_i}),       h_{G_0}(y) = (1 - y)_+.

Each function returns values together with an absolute error bound, so callers can round
in the safe direction.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Relative error of scipy's ndtr / log_ndtr / exp per evaluation (generous).
G_TERM_REL = 1e-14
_CHUNK = 2_000_000


def knots(offset: int, n: int, grid: float) -> FloatArray:
    z: FloatArray = (offset + np.arange(n, dtype=np.float64)) * grid
    return z


def tail_sums(z: FloatArray, p: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A[k] = sum_{i>=k} p_i, B[k] = sum_{i>=k} p_i e^{-z_i}; A[n] = B[n] = 0."""
    with np.errstate(over="ignore"):
        pe = p * np.exp(-z)
    a = np.zeros(p.size + 1)
    b = np.zeros(p.size + 1)
    a[:-1] = np.cumsum(p[::-1])[::-1]
    b[:-1] = np.cumsum(pe[::-1])[::-1]
    return a, b


def h_pl(
    z: FloatArray, p: FloatArray, inf_mass: float, t: FloatArray, ab: tuple[FloatArray, FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """h of a purely discrete PLD (mu = 0) at x = e^t: piecewise linear, exact up to round-off.

    h(x) = A_k - x B_k + inf_mass, k = first index with z_k > t. Error bound:
    (m + 4) u (A_k + x B_k + inf_mass), m the number of non-zero masses (cumulative sums of
    non-negative terms, one product, one subtraction).
    """
    a, b = ab
    with np.errstate(over="ignore"):
        x = np.exp(t)
    k = np.searchsorted(z, t, side="right")
    ak, bk = a[k], b[k]
    with np.errstate(invalid="ignore", over="ignore"):
        xb = np.where(bk > 0, x * bk, 0.0)
    h = np.clip(ak - xb, 0.0, None) + inf_mass
    err = (np.count_nonzero(p) + 4) * U * (ak + xb + inf_mass)
    return np.minimum(h, 1.0 + err), err


def h_mixed(
    z: FloatArray, p: FloatArray, inf_mass: float, mu: float, t: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """h of D (+) G_mu at x = e^t (mu > 0), summing the closed form of G_mu over the atoms."""
    nz = p > 0
    z, p = z[nz], p[nz]
    t_all = np.atleast_1d(np.asarray(t, dtype=np.float64))
    out = np.empty(t_all.shape)
    err = np.empty(t_all.shape)
    rows = max(1, _CHUNK // max(1, z.size))
    for s in range(0, t_all.size, rows):
        tt = t_all[s : s + rows, None] - z[None, :]  # log of x e^{-z_i}
        with np.errstate(over="ignore"):  # tiny mu: alpha = +-inf gives the right limits
            alpha = -tt / mu + mu / 2.0
        a = special.ndtr(alpha)
        with np.errstate(over="ignore"):
            # y Phi(alpha - mu) <= Phi(alpha) <= 1 mathematically; cap the exponent at 0
            b = np.exp(np.minimum(tt + special.log_ndtr(alpha - mu), 0.0))
        hg = np.clip(a - b, 0.0, 1.0)
        out[s : s + rows] = hg @ p
        # relative error of ndtr/exp (1e-14) plus the rounding of the arguments, amplified
        # by the slope of log Phi (about |alpha|): per term (a + b)(1e-14 + 8u(1 + alpha^2))
        # (|alpha| > 40 saturates ndtr to 0 or 1 exactly, so the factor is capped there)
        a2 = np.minimum(np.abs(alpha), 40.0) ** 2
        rel = G_TERM_REL + 8 * U * (1.0 + a2 + tt * tt)
        err[s : s + rows] = ((a + b) * rel) @ p
    h = out + inf_mass
    err = err + (np.count_nonzero(p) + 4) * U * h
    return h, err


def dh_mixed(z: FloatArray, p: FloatArray, mu: float, t: FloatArray) -> FloatArray:
    """h'(x) at x = e^t of D (+) G_mu: -sum_i p_i e^{-z_i} Phi(-(t - z_i)/mu - mu/2)."""
    nz = p > 0
    z, p = z[nz], p[nz]
    t_all = np.atleast_1d(np.asarray(t, dtype=np.float64))
    out = np.empty(t_all.shape)
    xs = t_all
    with np.errstate(over="ignore"):
        pe = p * np.exp(-z)
    rows = max(1, _CHUNK // max(1, z.size))
    for s in range(0, xs.size, rows):
        t = t_all[s : s + rows, None] - z[None, :]
        with np.errstate(over="ignore"):
            out[s : s + rows] = -(special.ndtr(-t / mu - mu / 2.0) @ pe)
    return out


def eps_pl(
    z: FloatArray,
    p: FloatArray,
    inf_mass: float,
    deltas: FloatArray,
    ab: tuple[FloatArray, FloatArray],
) -> FloatArray:
    """Smallest eps >= 0 with h(e^eps) + err <= delta, exactly on the piecewise-linear curve.

    Vectorized: h at the knots is decreasing; searchsorted finds the segment, then the line is
    solved. The returned eps is rounded up (``nextafter``), so it is never below the exact
    value for this PLD. inf where delta <= inf_mass (+ error).
    """
    a, b = ab
    n = z.size
    with np.errstate(over="ignore"):
        y = np.exp(z)
    # h at knot k: only atoms above it count
    hk = np.clip(a[1:] - y * b[1:], 0.0, None) + inf_mass
    errk = (n + 4) * U * (a[1:] + y * b[1:] + inf_mass)
    hk_up = hk + errk  # certified upper values at the knots (still decreasing up to round-off)
    hk_up = np.maximum.accumulate(hk_up[::-1])[::-1]  # force monotone (only raises)
    err_max = (n + 4) * U * 3.0 + 8 * U
    d = np.asarray(deltas, dtype=np.float64)
    target = d - err_max
    k1 = int(np.searchsorted(z, 0.0, side="right"))
    h1 = float(a[k1] - b[k1]) + inf_mass  # h(1)
    j = np.searchsorted(-hk_up, -d, side="left")
    jc = np.minimum(j, n - 1)
    bj = b[jc]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        xs = (a[jc] + inf_mass - target) / bj
    lower = y[np.maximum(jc - 1, 0)]
    xs = np.where((jc == 0) | ~(bj > 0), y[jc], np.clip(xs, lower, y[jc]))
    with np.errstate(divide="ignore"):
        e = np.maximum(np.log(xs), 0.0)
    e = np.where(e > 0, np.nextafter(e, math.inf), 0.0)
    e = np.where(h1 + err_max <= d, 0.0, e)
    out: FloatArray = np.where((target > inf_mass) & (j < n), e, math.inf)
    return out
