"""Grid representations of the closed-form PLDs (private; see pld.PLD for the public API).

Every function returns ``(offset, probs, inf_mass)``. Pessimistic results dominate the exact
PLD (hat split, :mod:`._grid`; float error bounds added to ``inf_mass``); optimistic results
are dominated by it (rounded down, then :func:`._grid.restore_optimistic`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve.accounting import _grid

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Finite losses are kept in [-Z_LOW, Z_MAX]. Pessimistic: losses above Z_MAX move to +inf and
#: losses below -Z_LOW move up to -Z_LOW (both only raise h, and mass is never dropped);
#: optimistic: losses above Z_MAX move down to Z_MAX, losses below -Z_LOW are dropped (both only
#: lower h; :func:`optimistic` restores the PLD condition). Moving the lower tail changes h only
#: at x < e^{-Z_LOW}... for symmetric PLDs not at all (checks use x >= 1). Z_MAX = 700 keeps
#: e^{-z} a normal float for every kept loss, so the tail sums B_k = sum p_i e^{-z_i} are
#: certified (an eps = 50 mechanism is kept exactly; a window of [-40, 40] would cap
#: Laplace a = 50 at 40, below the truth).
Z_LOW = 40.0
Z_MAX = 700.0
#: Rows of cells integrated at once by the hat split of a density (bounds the memory).
_CELL_CHUNK = 1 << 18
#: Standard deviations kept on each side when a Gaussian part is put on the grid.
GAUSS_SD = 11.5

Parts = tuple[int, FloatArray, float]


def _trim(i0: int, probs: FloatArray, inf_mass: float) -> Parts:
    nz = np.flatnonzero(probs)
    if nz.size == 0:
        return 0, np.zeros(1), inf_mass
    return i0 + int(nz[0]), np.array(probs[nz[0] : nz[-1] + 1]), inf_mass


def optimistic(i0: int, probs: FloatArray, inf_mass: float, grid: float) -> Parts:
    off, out, inf = _grid.restore_optimistic(i0, probs, inf_mass, grid)
    return _trim(off, out, inf)


def atoms(z: FloatArray, p: FloatArray, inf_mass: float, grid: float, pessimistic: bool) -> Parts:
    """Atoms at arbitrary real losses z (masses p) onto the grid."""
    z = np.asarray(z, dtype=np.float64)
    p = np.asarray(p, dtype=np.float64)
    keep = p > 0
    z, p = z[keep], p[keep]
    if z.size == 0:
        return 0, np.zeros(1), inf_mass
    if pessimistic:
        big = z > Z_MAX
        inf_mass += float(np.sum(p[big])) * (1.0 + z.size * U)
        z, p = np.maximum(z[~big], -Z_LOW), p[~big]
        if z.size == 0:
            return 0, np.zeros(1), inf_mass
        i0, i1 = _grid.knot_index_range(float(z.min()), float(z.max()), grid)
        probs = _grid.hat_split_atoms(z, p, grid, i0, i1 - i0 + 1)
        # each output entry is a sum of products with relative error <= (size + 6) u:
        # scaling up by that factor gives masses >= the exact split (only raises h)
        probs *= 1.0 + (z.size + 6) * U
        return _trim(i0, probs, inf_mass)
    small = z < -Z_LOW
    z, p = np.minimum(z[~small], Z_MAX), p[~small]
    if z.size == 0:
        return optimistic(0, np.zeros(1), inf_mass, grid)
    i0, i1 = _grid.knot_index_range(float(z.min()), float(z.max()), grid)
    probs = _grid.round_down_atoms(z, p, grid, i0, i1 - i0 + 1)
    return optimistic(i0, probs, inf_mass, grid)


def laplace(a: float, grid: float, pessimistic: bool) -> Parts:
    """Laplace with a = sensitivity/scale (exact PLD in pld.PLD.laplace's docstring).

    The window [-Z_LOW, Z_MAX] applies as in :func:`atoms`: for a > Z_MAX the atom at +a and
    the density above Z_MAX, mass 1 - e^{(Z_MAX - a)/2}/2, go to +inf (pessimistic) or down
    to Z_MAX (optimistic); below -Z_LOW the atom at -a and the density, mass
    e^{(-Z_LOW - a)/2}/2 together, go up to -Z_LOW (pessimistic) or are dropped (optimistic).
    """
    lo, hi = max(-a, -Z_LOW), min(a, Z_MAX)
    i0, i1 = _grid.knot_index_range(lo, hi, grid)
    n = i1 - i0 + 1
    # masses beyond the window, in closed form (expm1: no cancellation)
    above = 0.5 - 0.5 * math.expm1((hi - a) / 2.0) if a > hi else 0.0  # atom + density
    below = 0.5 * math.exp((lo - a) / 2.0) if -a < lo else 0.0
    z_at = np.array([a, -a] if a <= hi else [-a])
    p_at = np.array([0.5, 0.5 * math.exp(-a)] if a <= hi else [0.5 * math.exp(-a)])
    if -a < lo:  # the atom at -a is part of ``below``
        z_at, p_at = z_at[z_at >= lo], p_at[z_at >= lo]

    def pdf(zz: FloatArray) -> FloatArray:
        out: FloatArray = np.exp((zz - a) / 2.0) / 4.0
        return out

    if pessimistic:
        probs = _grid.hat_split_atoms(z_at, p_at, grid, i0, n) if z_at.size else np.zeros(n)
        probs += _grid.hat_split_density(pdf, lo, hi, grid, i0, n, chunk=_CELL_CHUNK)
        probs[0] += below
        # relative error of positive sums + 8-point Gauss-Legendre on e^{z/2}-type integrands
        probs *= 1.0 + 64 * U
        return _trim(i0, probs, above * (1.0 + 64 * U))
    probs = _grid.round_down_atoms(z_at, p_at, grid, i0, n) if z_at.size else np.zeros(n)
    knots = (i0 + np.arange(n)) * grid
    c_lo = np.clip(knots, lo, hi)
    c_hi = np.clip(knots + grid, lo, hi)
    cell = np.exp((c_lo - a) / 2.0) * np.expm1((c_hi - c_lo) / 2.0) / 2.0
    probs += np.where(c_hi > c_lo, cell, 0.0) * (1.0 - 64 * U)
    probs[-1] += above * (1.0 - 64 * U)  # down to the top knot (<= Z_MAX <= a)
    return optimistic(i0, probs, 0.0, grid)


def gaussian(mu: float, grid: float, pessimistic: bool) -> Parts:
    """G_mu on the grid: P-loss ~ N(mu^2/2, mu^2), kept on mean +- GAUSS_SD sd within the
    window [-Z_LOW, Z_MAX] (pessimistic: the upper tail to +inf, the lower tail up to the
    first knot; optimistic: the upper tail down to the last knot, the lower tail dropped)."""
    c = mu * mu / 2.0
    hi = min(c + GAUSS_SD * mu, Z_MAX)
    lo = min(max(c - GAUSS_SD * mu, -Z_LOW), hi)
    if pessimistic and c - GAUSS_SD * mu >= Z_MAX:  # all but < 1e-30 of the mass above Z_MAX
        return 0, np.zeros(1), 1.0
    i0, i1 = _grid.knot_index_range(lo, hi, grid)
    n = i1 - i0 + 1
    z0, zn = i0 * grid, i1 * grid
    if pessimistic:
        probs = _grid.hat_split_gaussian(c, mu, z0, zn, grid, i0, n)
        probs[0] += float(special.ndtr((z0 - c) / mu))
        probs *= 1.0 + 64 * U
        # the upper tail is > 0 even where ndtr underflows: at least the least subnormal
        inf_mass = max(float(special.ndtr(-(zn - c) / mu)) * (1.0 + 64 * U), 5e-324)
        return _trim(i0, probs, inf_mass)
    knots = (i0 + np.arange(n)) * grid
    s_lo = (knots - c) / mu
    s_hi = (knots + grid - c) / mu
    # cell masses via the tail on the side where they are small (no cancellation)
    cell = np.where(
        s_lo >= 0,
        special.ndtr(-s_lo) - special.ndtr(-s_hi),
        special.ndtr(s_hi) - special.ndtr(s_lo),
    )
    cell[-1] = float(special.ndtr(-s_lo[-1]))  # the upper tail rounds down to the last knot
    probs = np.clip(cell, 0.0, None) * (1.0 - 64 * U)
    return optimistic(i0, probs, 0.0, grid)


def discrete_laplace_atoms(t: float, sens: int) -> tuple[FloatArray, FloatArray]:
    """Atoms of PLD(DLap(0,t) || DLap(D,t)) with P(y) proportional to e^{-|y|/t}."""
    r = math.exp(-1.0 / t)
    c = -math.expm1(-1.0 / t) / (1.0 + r)
    ys = np.arange(1, sens)
    z = np.concatenate([[sens / t], (sens - 2.0 * ys) / t, [-sens / t]])
    p = np.concatenate([[1.0 / (1.0 + r)], c * r ** ys.astype(np.float64), [r**sens / (1.0 + r)]])
    return z, p


def discrete_gaussian_atoms(sigma: float, sens: int) -> tuple[FloatArray, FloatArray, float]:
    """Atoms of PLD(DG(0,s) || DG(D,s)); the P-mass outside |y| <= T is bounded by the tail."""
    T = math.ceil(sigma * math.sqrt(2.0 * math.log(1e32))) + 1
    ys = np.arange(-T, T + 1, dtype=np.float64)
    w = np.exp(-(ys * ys) / (2.0 * sigma * sigma))
    s = float(np.sum(w))  # <= the full normaliser, so w/s over-states every kept mass
    # sum_{|y|>T} e^{-y^2/2s^2} <= 2 e^{-(T+1)^2/2s^2} / (1 - e^{-(T+1)/s^2})
    q = math.exp(-(T + 1) / sigma**2)
    tail = 2.0 * math.exp(-((T + 1) ** 2) / (2 * sigma**2)) / (1.0 - q) / s
    z = (sens * sens - 2.0 * ys * sens) / (2.0 * sigma * sigma)
    return z, w / s, tail + 8 * U
