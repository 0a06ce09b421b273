"""Certified numerics of the GDP residue update: is G_m (+) L <= G_mu, and the largest m.

L is a discrete, *symmetric* PLD given by its finite atoms ``z`` with masses ``p`` and a
mass ``p_inf`` at +inf. For symmetric PLDs the Blackwell order is decided on x >= 1
(paper, Lemma 8), G_m (+) L is symmetric, and with t = log x (Prop. 2 of the paper,
h_{A (+) B}(x) = E_{Z~A}[h_B(x e^{-Z})])::

    f_m(t) = p_inf + sum_j p_j H_m(t - z_j)        H_m(s) = h_{G_m}(e^s)
    g(t)   = H_mu(t)

and G_m (+) L <= G_mu iff f_m(t) <= g(t) for all t >= 0.

Soundness of :func:`gdp_leq_mixture` (it may refuse a true inequality, never accept a false
one):

* **Cells.** [0, T*] is cut into cells [x_a, x_b] (x = e^t). Both curves are convex and
  decreasing in x; on a cell f <= its chord, and g >= max(tangent at x_a, tangent at x_b)
  (h'_mu(x) = -Phi(-log x/mu - mu/2)). For any split point c the two linear comparisons
  chord <= tangent_a on [x_a, c] and chord <= tangent_b on [c, x_b] are checked at their
  end points. Every comparison carries a margin REL * (sum of magnitudes) + ABS that covers
  the floating-point error of ``ndtr`` (relative ~1e-15 in the tails, amplified at most
  ~1e3 by the cancellation in Phi(a) - x Phi(b); checked against mpmath in the tests).
* **Tail t >= T*.** h(e^t) = int_0^inf e^{-s} S(t+s) ds with S the survival function of the
  privacy loss. The loss of G_m (+) L is z_j + N(m^2/2, m^2) on atom j, that of G_mu is
  N(mu^2/2, mu^2). For m < mu and y >= Y_j = (c_j mu - m mu^2/2)/(mu - m), c_j = z_j +
  m^2/2, the standardised arguments satisfy (y - c_j)/m >= (y - mu^2/2)/mu, hence
  S_{f}(y) <= sum_j p_j S_mu(y) <= S_mu(y), hence f <= g for t >= T* = max_j Y_j. With
  m = 0, f(t) = 0 for t >= max_j z_j. This step involves no rounding beyond a relative
  widening of T*.

:func:`residue_mu` first locates the largest m approximately (float evaluation on a
grid, not certified), then certifies m (1 - eta) for growing eta, so the returned value
is at or below the true largest m (the GDP residue filter, Def. 7 of the paper).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import special

__all__ = [
    "Atoms",
    "coarsen_up",
    "gdp_leq_mixture",
    "residue_mu",
    "smallest_gdp_mu_atoms",
]

FloatArray = npt.NDArray[np.float64]

#: Relative error allowance on every computed hockey-stick value (see module docstring).
REL = 1e-9
#: Absolute error allowance.
ABS = 1e-280
#: Cells of the certified grid per unit of t (and at least MIN_CELLS).
CELLS_PER_UNIT = 60
MIN_CELLS = 200
#: Largest number of atoms kept; more are merged upwards (pessimistically) by coarsen_up.
MAX_ATOMS = 64
#: Points of the (uncertified) grid used to locate the largest m before certifying it.
APPROX_POINTS = 160


@dataclass(frozen=True, slots=True)
class Atoms:
    """A discrete PLD: finite loss values ``z`` (sorted), masses ``p``, mass ``p_inf`` at +inf."""

    z: FloatArray
    p: FloatArray
    p_inf: float

    @property
    def is_identity(self) -> bool:
        return self.p_inf == 0.0 and bool(np.all(self.z[self.p > 0] == 0.0))


def coarsen_up(atoms: Atoms, max_atoms: int = MAX_ATOMS) -> Atoms:
    """Merge atoms into at most ``max_atoms`` by moving each one *up* to its bucket's largest.

    Raising a privacy-loss value raises (1 - x e^{-z})_+ for every x, so the result
    dominates the input on x >= 1 (pessimistic, hence safe for a query).
    """
    keep = atoms.p > 0
    z, p = atoms.z[keep], atoms.p[keep]
    if z.size <= max_atoms:
        return Atoms(z, p, atoms.p_inf)
    edges = np.linspace(z[0], z[-1], max_atoms + 1)
    idx = np.clip(np.searchsorted(edges, z, side="left"), 0, max_atoms)
    # each bucket's mass moves to the bucket's largest member (no value is invented)
    new_z = np.full(max_atoms + 1, -np.inf)
    new_p = np.zeros(max_atoms + 1)
    np.maximum.at(new_z, idx, z)
    np.add.at(new_p, idx, p)
    used = new_p > 0
    return Atoms(new_z[used], new_p[used], atoms.p_inf)


def _hs(mu: float, s: FloatArray) -> FloatArray:
    """H_mu(s) = h_{G_mu}(e^s), computed in log space (no overflow of e^s)."""
    if mu == 0.0:
        return np.clip(-np.expm1(s), 0.0, None)
    a = -s / mu + mu / 2.0
    b = a - mu
    # x Phi(b) = exp(s + log Phi(b)); log_ndtr keeps relative accuracy in the tails.
    val = special.ndtr(a) - np.exp(s + special.log_ndtr(b))
    res: FloatArray = np.clip(val, 0.0, 1.0)
    return res


def _dhs(mu: float, s: FloatArray) -> FloatArray:
    """|h'_mu(x)| at x = e^s, i.e. Phi(-s/mu - mu/2)."""
    res: FloatArray = special.ndtr(-s / mu - mu / 2.0)
    return res


def _f(atoms: Atoms, m: float, t: FloatArray) -> FloatArray:
    s = t[:, None] - atoms.z[None, :]
    res: FloatArray = _hs(m, s) @ atoms.p + atoms.p_inf
    return res


def _tail_start(atoms: Atoms, m: float, mu: float) -> float:
    zmax = float(atoms.z.max()) if atoms.z.size else 0.0
    if m == 0.0:
        return max(0.0, zmax) * (1 + 1e-12) + 1e-12
    c = zmax + m * m / 2.0
    y = (c * mu - m * mu * mu / 2.0) / (mu - m)
    return max(0.0, y) * (1 + 1e-9) + 1e-9


def gdp_leq_mixture(atoms: Atoms, m: float, mu: float) -> bool:
    """Certified check of G_m (+) L <= G_mu for a symmetric discrete L (see module doc).

    Returns True only if the inequality holds; may return False when it holds by a
    margin below the numerical resolution.
    """
    if not (m >= 0.0) or not (mu >= 0.0) or not math.isfinite(mu):
        return False
    if atoms.p_inf > 0.0:
        return False
    if atoms.is_identity:
        return m <= mu
    if m >= mu:
        return False
    t_star = _tail_start(atoms, m, mu)
    if not math.isfinite(t_star):
        return False
    n = max(MIN_CELLS, math.ceil(t_star * CELLS_PER_UNIT))
    t = np.linspace(0.0, t_star, n + 1)
    t[-1] = t_star
    x = np.exp(t)
    F = _f(atoms, m, t)
    G = _hs(mu, t)
    D = _dhs(mu, t)
    Fa, Fb, Ga, Gb, Da, Db = F[:-1], F[1:], G[:-1], G[1:], D[:-1], D[1:]
    xa, xb = x[:-1], x[1:]
    # split point: intersection of the two tangents (any point of the cell is sound)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (Ga - Gb + Db * xb - Da * xa) / (Db - Da)
    c = np.where(np.isfinite(c), c, 0.5 * (xa + xb))
    c = np.clip(c, xa, xb)
    w = (c - xa) / (xb - xa)
    chord_c = Fa + (Fb - Fa) * w
    tan_a = Ga - Da * (c - xa)
    tan_b = Gb + Db * (xb - c)
    mag = Fa + Fb + Ga + Gb + Da * (c - xa) + Db * (xb - c)
    # the relative error of exp(s + log_ndtr(b)) grows like |b|^3 (see module docstring)
    scale = min(m, mu) if m > 0.0 else mu
    span = float(np.max(np.abs(atoms.z))) if atoms.z.size else 0.0
    rel = REL + 1e-14 * (2.0 + (t[1:] + span) / scale + mu) ** 3
    marg = rel * mag + ABS
    ok = (
        np.all(Fa + marg <= Ga)
        and np.all(Fb + marg <= Gb)
        and np.all(chord_c + marg <= tan_a)
        and np.all(chord_c + marg <= tan_b)
    )
    return bool(ok)


def _approx_ok(atoms: Atoms, m: float, mu: float, t: FloatArray, g: FloatArray) -> bool:
    return bool(np.all(_f(atoms, m, t) <= g))


def residue_mu(atoms: Atoms, mu: float, *, lower: float = 0.0) -> float:
    """Largest certified m in [0, mu] with G_m (+) L <= G_mu; -1.0 if even m = 0 fails.

    ``lower`` is a value already known to be certified (e.g. the naive update); the search
    never returns less than it. The result is at or below the true largest m.
    """
    if atoms.is_identity:
        return mu
    if atoms.p_inf > 0.0:
        return -1.0
    lo, hi = max(lower, 0.0), mu
    for _ in range(40):
        if hi - lo <= 1e-9 * max(mu, 1e-300):
            break
        mid = 0.5 * (lo + hi)
        t = np.linspace(0.0, _tail_start(atoms, mid, mu), APPROX_POINTS)
        if _approx_ok(atoms, mid, mu, t, _hs(mu, t)):
            lo = mid
        else:
            hi = mid
    m_hat = lo
    for eta in (1e-8, 1e-6, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1):
        cand = m_hat * (1.0 - eta)
        if cand <= lower:
            break
        if gdp_leq_mixture(atoms, cand, mu):
            return cand
    if lower > 0.0:
        return lower
    return 0.0 if gdp_leq_mixture(atoms, 0.0, mu) else -1.0


def smallest_gdp_mu_atoms(atoms: Atoms, *, mu_max: float = 1e3) -> float:
    """A certified upper bound on the smallest nu with L <= G_nu (``inf`` if none found)."""
    if atoms.is_identity:
        return 0.0
    if atoms.p_inf > 0.0:
        return math.inf
    hi = 1.0
    while not gdp_leq_mixture(atoms, 0.0, hi):
        hi *= 2.0
        if hi > mu_max:
            return math.inf
    lo = 0.0
    for _ in range(60):
        if hi - lo <= 1e-10 * hi:
            break
        mid = 0.5 * (lo + hi)
        if gdp_leq_mixture(atoms, 0.0, mid):
            hi = mid
        else:
            lo = mid
    return hi
