"""Certified numerics of the GDP residue update: is G_m (+) L <= G_mu, and the largest m.

L is a discrete, *symmetric* PLD given by its finite atoms ``z`` with masses ``p`` and a
mass ``p_inf`` at +inf. For symmetric PLDs the Blackwell order is decided on x >= 1
(paper, Lemma 8), G_m (+) L is symmetric, and with t = log x (paper, Prop. 2:
h_{A (+) B}(x) = E_{Z~A}[h_B(x e^{-Z})])::

    f_m(t) = p_inf + sum_j p_j H_m(t - z_j)        H_m(s) = h_{G_m}(e^s)
    g(t)   = H_mu(t)

and G_m (+) L <= G_mu iff f_m(t) <= g(t) for all t >= 0. Everything is computed in log
space (``log_ndtr``), so nothing underflows however far in the tail.

Soundness of :func:`gdp_leq_mixture` (it may refuse a true inequality, never accept a false
one). Proofs: docs/proofs/filters.md, "GDP residue check".

* **log-concavity.** s -> H_m(s) is log-concave (Prekopa: it is the marginal of the
  log-concave (1 - e^{s-y})_+ times a Gaussian density in y). On a cell [t_a, t_b], each
  log H_m(t - z_j) lies below its tangent at the midpoint c, and log g above its chord. So
  f(t) <= sum_j F_j e^{k_j (t - c)} and g(t) >= G_a e^{l (t - t_a)}; dividing, the
  difference is a convex sum of exponentials, checked at both cell ends.
  Slopes: d/ds log H_m(s) = -e^s Phi(-s/m - m/2) / H_m(s).
* **Quadratic cell bound (checked first).** H_m is a Gaussian convolution, so
  log H_m(s) + s^2/(2 m^2) is convex (a log-Laplace transform), and likewise for g with mu.
  Chord of the first, tangent of the second at the midpoint c, tangent of the concave
  leftover quadratic: at a cell end e the bound is log f_j(e) - [log g(c) + k_g (e - c)]
  + (e - c)^2/(2 m^2), and the sum over j is again convex in t. Its slack is
  (1/m^2 - kappa_g) w^2/8 against kappa_f w^2/8 above; in the Gaussian-like tail kappa
  tends to 1/mu^2, so it is far tighter where the curves are close (m near mu). Cells it
  leaves after the last refinement get the tangent/chord bound. Either bound is sound on
  its own, so any cell-wise choice is.
* **Refinement.** A failing cell is cut into k equal parts, k from its estimated slack and
  gap (slack ~ width^2); a midpoint where f >= g to working precision, or a k above
  REFINE_MAX_SPLIT, stops the cutting. Only the choice of cuts is heuristic; every final
  cell is certified.
* **Tail t >= T*.** h(e^t) = int_0^inf e^{-s} S(t+s) ds with S the survival function of the
  privacy loss; atom j of G_m (+) L has loss z_j + N(m^2/2, m^2), G_mu has N(mu^2/2, mu^2).
  For m < mu and y >= Y_j = (c_j mu - m mu^2/2)/(mu - m), c_j = z_j + m^2/2, the standardised
  arguments satisfy (y - c_j)/m >= (y - mu^2/2)/mu, so S_f(y) <= sum_j p_j S_mu(y) <= S_mu(y)
  and f <= g for t >= T* = max_j Y_j (no rounding beyond a relative widening of T*).
  With m = 0, f(t) = 0 for t >= max_j z_j.
* **Floating point.** Every computed log H carries an error allowance
  ``_log_err`` (relative error of log_ndtr ~ 1e-16 times the exponent size, amplified by
  the cancellation in Phi(a) - e^s Phi(b), at most ~ |s|/m^2); margins are added on the
  refusing side, and to the tangent slopes (times the cell width); the quadratic bound
  adds twice the error allowance to g's slope, the rounding of c and e - c, and 1e-14
  relative on (e - c)^2/(2 m^2).

The search for the largest m (:func:`dpsieve.filters._gdp_search.residue_mu`) only ever
returns values this check certified.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from scipy import special

__all__ = [
    "Atoms",
    "coarsen_up",
    "gdp_leq_mixture",
    "log_h",
]

FloatArray = npt.NDArray[np.float64]

#: Largest number of atoms kept; more are merged upwards (pessimistically) by coarsen_up.
MAX_ATOMS = 16
#: Cell width of the certified grid: max(DT_MIN, DT_REL * t).
DT_MIN = 0.004
DT_REL = 0.02
#: Failing cells are split (into as many parts as their estimated slack asks for, at most
#: REFINE_MAX_SPLIT) at most REFINE_DEPTH times.
REFINE_DEPTH = 2
REFINE_MAX_SPLIT = 64
#: Cells are cut so the estimated slack is 1/SPLIT_SAFETY of the estimated gap.
SPLIT_SAFETY = 1.2


@dataclass(frozen=True, slots=True)
class Atoms:
    """A discrete PLD: finite loss values ``z``, masses ``p``, mass ``p_inf`` at +inf."""

    z: FloatArray
    p: FloatArray
    p_inf: float

    @property
    def is_identity(self) -> bool:
        return self.p_inf == 0.0 and bool(np.all(self.z[self.p > 0] == 0.0))


_F = TypeVar("_F", bound=Callable[..., Any])


def _quiet(fn: _F) -> _F:
    """Run ``fn`` with numpy floating-point warnings off (infinities are meaningful here:
    log 0 = -inf marks a vanished term, and every comparison handles it explicitly)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def coarsen_up(atoms: Atoms, max_atoms: int = MAX_ATOMS) -> Atoms:
    """Merge atoms into at most ``max_atoms`` by moving each one *up* to its bucket's largest.

    Raising a privacy-loss value raises (1 - x e^{-z})_+ for every x, so the result
    dominates the input on x >= 1 (pessimistic, hence safe for a query).
    """
    keep = atoms.p > 0
    z, p = atoms.z[keep], atoms.p[keep]
    order = np.argsort(z)
    z, p = z[order], p[order]
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


@_quiet
def log_h(m: float, s: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(log H_m(s), d/ds log H_m(s)) with H_m(s) = h_{G_m}(e^s); -inf / -inf where H = 0."""
    if m == 0.0:
        es = np.exp(np.minimum(s, 0.0))
        lh = np.where(s < 0.0, np.log(-np.expm1(np.minimum(s, -1e-300))), -np.inf)
        slope = np.where(s < 0.0, -es / (-np.expm1(np.minimum(s, -1e-300))), -np.inf)
        return lh, slope
    lh, lb = _log_h_parts(m, s)
    return lh, -np.exp(s + lb - lh)


def _log_h_parts(m: float, s: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(log H_m(s), log Phi(-s/m - m/2)) for m > 0, as :func:`log_h` computes them."""
    a = -s / m + m / 2.0
    la = special.log_ndtr(a)
    lb = special.log_ndtr(a - m)
    r = s + lb - la  # log of e^s Phi(b) / Phi(a) < 0
    lh: FloatArray = la + np.log(-np.expm1(np.minimum(r, -1e-300)))
    return lh, lb


def _log_err(m: float, s: FloatArray) -> FloatArray:
    """A bound on |error| of the computed log H_m(s) (see module docstring)."""
    mm = max(m, 1e-3)
    a = np.abs(s) / mm + mm
    res: FloatArray = 1e-13 * (1.0 + a * a) * (2.0 + np.abs(s) / (mm * mm) + 1.0 / mm) + 1e-12
    return res


def _tail_start(atoms: Atoms, m: float, mu: float) -> float:
    """T* of the tail argument (module docstring).

    If the float masses sum to 1 + e > 1, stochastic dominance must hold with a factor
    1/(1 + e): beyond y >= mu^2/2 + mu the standardised argument u is >= 1, the hazard rate of
    the normal law is >= u, so Phi-bar(u + d) <= e^{-d} Phi-bar(u) for d >= 0, and the extra
    gap d = 2e (>= log(1 + e)) is reached 2e / (1/m - 1/mu) further out.
    """
    zmax = float(atoms.z.max()) if atoms.z.size else 0.0
    if m == 0.0:
        return max(0.0, zmax) * (1 + 1e-12) + 1e-12
    c = zmax + m * m / 2.0
    y = (c * mu - m * mu * mu / 2.0) / (mu - m)
    excess = math.fsum(atoms.p.tolist()) - 1.0
    if excess > 0.0:
        y = max(y, mu * mu / 2.0 + mu) + 2.0 * excess / (1.0 / m - 1.0 / mu)
    return max(0.0, y) * (1 + 1e-9) + 1e-9


def _grid(t_end: float, dt_min: float, dt_rel: float) -> FloatArray:
    """Nodes 0 = t_0 < ... < t_N = t_end with widths max(dt_min, dt_rel t)."""
    if t_end <= 0:
        return np.array([0.0, 0.0])
    t_switch = dt_min / dt_rel
    lin = np.arange(0.0, min(t_end, t_switch), dt_min)
    if t_end > t_switch:
        n_geo = math.ceil(math.log(t_end / t_switch) / math.log1p(dt_rel))
        geo = t_switch * (1.0 + dt_rel) ** np.arange(n_geo + 1)
        nodes = np.concatenate([lin, geo])
    else:
        nodes = lin
    nodes = nodes[nodes < t_end]
    return np.append(nodes, t_end)


@_quiet
def _logsumexp_rows(x: FloatArray) -> FloatArray:
    """log sum_j exp(x[:, j]) (a column loop: few columns, many rows)."""
    res: FloatArray = x[:, 0].copy()
    for j in range(1, x.shape[1]):
        res = np.logaddexp(res, x[:, j])
    return res


@_quiet
def _log_g_low(mu: float, t: FloatArray) -> FloatArray:
    """log g(t) minus its error allowance: a certified lower bound on log H_mu(t)."""
    lg, _ = log_h(mu, t)
    res: FloatArray = lg - _log_err(mu, t)
    return res


@_quiet
def _cells_ok(
    atoms: Atoms,
    m: float,
    mu: float,
    ta: FloatArray,
    tb: FloatArray,
    lga: FloatArray,
    lgb: FloatArray,
) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
    """Per cell [ta, tb]: the certified tangent/chord comparison (module docstring).

    ``lga``, ``lgb`` are certified lower bounds on log g at the cell ends (:func:`_log_g_low`).
    The tangents of log H_m(t - z_j) are taken at the cell's midpoint c (any point of the
    cell gives an upper bound; the midpoint gives a 4x smaller slack), so with
    l the chord slope of log g, f(t)/g(t) <= sum_j F_j(c) e^{k_j (t - c)} / (G_a e^{l (t-ta)}),
    a convex function of t, checked at both ends.

    Returns (ok, excess, log f(c)): the verdict per cell, by how much the larger end
    comparison failed (<= 0 where it held), and the uncertified log f at the midpoint
    (both only steer the refinement).
    """
    half = 0.5 * (tb - ta)
    s = (ta + half)[:, None] - atoms.z[None, :]
    lf, kf = log_h(m, s)
    ef = _log_err(m, s) * (1.0 + np.abs(np.where(np.isfinite(kf), kf, 0.0)) * half[:, None])
    logp = np.log(atoms.p)[None, :]
    live = np.isfinite(lf)
    central = np.where(live, logp + lf, -np.inf)
    base = central + ef
    shift = kf * half[:, None]
    at_a = _logsumexp_rows(np.where(live, base - shift, -np.inf))
    at_b = _logsumexp_rows(np.where(live, base + shift, -np.inf))
    ok: npt.NDArray[np.bool_] = (at_a <= lga) & (at_b <= lgb) & np.isfinite(lgb)
    excess: FloatArray = np.maximum(at_a - lga, at_b - lgb)
    return ok, excess, _logsumexp_rows(central)


@_quiet
def _log_f_up(atoms: Atoms, m: float, t: FloatArray) -> FloatArray:
    """A certified upper bound on log f_m(t) = log sum_j p_j H_m(t - z_j) at the nodes t."""
    s = t[:, None] - atoms.z[None, :]
    lf, _ = _log_h_parts(m, s)
    live = np.isfinite(lf)
    terms = np.where(live, np.log(atoms.p)[None, :] + lf + _log_err(m, s), -np.inf)
    return _logsumexp_rows(terms)


@_quiet
def _log_f_mid(atoms: Atoms, m: float, t: FloatArray) -> FloatArray:
    """log f_m(t), uncertified (it only steers the refinement)."""
    lf, _ = _log_h_parts(m, t[:, None] - atoms.z[None, :])
    return _logsumexp_rows(np.log(atoms.p)[None, :] + lf)


@_quiet
def _cells_ok_quadratic(
    m: float, mu: float, ta: FloatArray, tb: FloatArray, lfa: FloatArray, lfb: FloatArray
) -> tuple[npt.NDArray[np.bool_], FloatArray, FloatArray]:
    """Per cell [ta, tb]: the certified comparison with the Gaussian factors split off.

    log H_m(s) + s^2/(2 m^2) is convex (a log-Laplace transform; docs/proofs/filters.md,
    Sec. 1, "Quadratic cell bound"), and so is log g(t) + t^2/(2 mu^2). With the chord of
    the first, the tangent of the second at the midpoint c and the tangent of the concave
    quadratic left over, log f_j / g on the cell is below a linear function whose value at
    an end e is log H_m(e - z_j) - [log g(c) + k_g (e - c)] + (e - c)^2 / (2 m^2); the sum
    over j of exponentials of linear functions is convex, so the two ends decide.
    ``lfa``, ``lfb`` are certified upper bounds on log f at the ends (:func:`_log_f_up`).

    Returns (ok, excess, log g(c)) as :func:`_cells_ok` does (the last uncertified).
    """
    c = ta + 0.5 * (tb - ta)
    lg, kg = log_h(mu, c)
    eg = _log_err(mu, c)
    kabs = np.abs(kg)
    inv2m2 = 0.5 / (m * m)

    def rhs(e: FloatArray) -> FloatArray:
        d = e - c
        # slope error (relative 2 eg) and the rounding of c and of e - c, times |k_g|
        slack = kabs * (2.0 * eg * np.abs(d) + 1e-15 * (np.abs(c) + np.abs(d)))
        res: FloatArray = lg - eg + kg * d - slack - d * d * inv2m2 * (1.0 + 1e-14) - 1e-15
        return res

    ra, rb = rhs(ta), rhs(tb)
    ok: npt.NDArray[np.bool_] = (lfa <= ra) & (lfb <= rb) & np.isfinite(ra) & np.isfinite(rb)
    excess: FloatArray = np.maximum(lfa - ra, lfb - rb)
    return ok, excess, lg


def _split_counts(
    excess: FloatArray, lgc: FloatArray, lfc: FloatArray
) -> npt.NDArray[np.int64] | None:
    """How many equal parts each failing cell is cut into (uncertified; ``None``: stop cutting).

    The estimated gap D = log g(c) - log f(c) at the midpoint is what the bound must fit
    under; the bound's slack at the ends (~ excess + D) shrinks like the square of the
    width (both cell bounds err to second order), so k parts leave ~ slack / k^2.
    D <= 0 means f >= g at c to working precision: no refinement can certify the cell.
    """
    gap = lgc - lfc
    if not bool(np.all(gap > 0.0)):
        return None
    ratio = (np.where(np.isnan(excess), np.inf, excess) + gap) / gap
    ratio = np.where(np.isnan(ratio), 1.0, ratio)  # inf / inf: f(c) = 0, cut minimally
    need = np.ceil(np.sqrt(SPLIT_SAFETY * np.minimum(ratio, 1e12)))
    if bool(np.any(need > REFINE_MAX_SPLIT)):
        return None
    return np.maximum(need, 2.0).astype(np.int64)


@_quiet
def _leq_m0(atoms: Atoms, mu: float) -> bool:
    """Certified L <= G_mu (the case m = 0), in linear space on x in [1, e^{z_max}].

    h_L is piecewise linear in x with kinks at e^{z_j} and 0 beyond e^{z_max}; the cells are
    cut at the kinks, so on each cell h_L is exactly linear and only g's tangent lower
    bounds err (second order). Margin: 1e-12 relative plus 1e-15 absolute on every term.
    """
    z = atoms.z
    zmax = float(z.max())
    if zmax <= 0.0:
        return True  # h_L(x) = 0 for x >= 1
    kinks = np.unique(z[z > 0.0])
    t = np.unique(np.concatenate([np.linspace(0.0, zmax, max(2, math.ceil(zmax / 0.002))), kinks]))
    x = np.exp(t)
    # h_L at the nodes (exact linear pieces in x between consecutive nodes)
    w = atoms.p[None, :] * np.clip(1.0 - x[:, None] * np.exp(-z)[None, :], 0.0, None)
    hf = w.sum(axis=1)
    hf_mag = (atoms.p[None, :] * (1.0 + x[:, None] * np.exp(-z)[None, :])).sum(axis=1)
    a = -t / mu + mu / 2.0
    pa, pb = special.ndtr(a), special.ndtr(a - mu)
    g = pa - x * pb
    gmag = pa + x * pb
    xa, xb = x[:-1], x[1:]
    fa, fb, ga, gb, da, db = hf[:-1], hf[1:], g[:-1], g[1:], pb[:-1], pb[1:]
    c = np.clip((ga - gb + da * xa - db * xb) / np.where(da != db, da - db, 1.0), xa, xb)
    c = np.where(da != db, c, 0.5 * (xa + xb))
    fc = fa + (fb - fa) * (c - xa) / (xb - xa)
    marg = 1e-12 * (hf_mag[:-1] + hf_mag[1:] + gmag[:-1] + gmag[1:] + (da + db) * (xb - xa))
    marg = marg + 1e-15
    tan_a = ga - da * (c - xa)
    tan_b = gb + db * (xb - c)
    return bool(
        np.all(fa + marg <= ga)
        and np.all(fb + marg <= gb)
        and np.all(fc + marg <= tan_a)
        and np.all(fc + marg <= tan_b)
    )


@_quiet
def gdp_leq_mixture(atoms: Atoms, m: float, mu: float) -> bool:
    """Certified check of G_m (+) L <= G_mu for a symmetric discrete L (see module doc).

    Returns True only if the inequality holds; may return False when it holds by a
    margin below the numerical resolution. Cells that fail are split (up to
    ``REFINE_DEPTH`` times, each into as many parts as :func:`_split_counts` estimates)
    before giving up; every final cell passes the same certified comparison.
    """
    if not (m >= 0.0) or not (mu >= 0.0) or not math.isfinite(mu):
        return False
    if atoms.p_inf > 0.0:
        return False
    if atoms.is_identity:
        return m <= mu
    if m >= mu or mu == 0.0:
        return False
    if m == 0.0:
        return _leq_m0(atoms, mu)
    t_star = _tail_start(atoms, m, mu)
    if not math.isfinite(t_star) or t_star > 1e12:
        return False
    t = _grid(t_star, DT_MIN, DT_REL)
    lf = _log_f_up(atoms, m, t)
    ta, tb, lfa, lfb = t[:-1], t[1:], lf[:-1], lf[1:]
    for depth in range(REFINE_DEPTH + 1):
        ok, excess, lgc = _cells_ok_quadratic(m, mu, ta, tb, lfa, lfb)
        if np.all(ok):
            return True
        bad = ~ok
        ta, tb, lfa, lfb, excess, lgc = (x[bad] for x in (ta, tb, lfa, lfb, excess, lgc))
        k = _split_counts(excess, lgc, _log_f_mid(atoms, m, ta + 0.5 * (tb - ta)))
        if depth == REFINE_DEPTH or k is None:
            # last resort on what is left: the tangent/chord bound (tighter near t = 0)
            lga, lgb = _log_g_low(mu, ta), _log_g_low(mu, tb)
            return bool(np.all(_cells_ok(atoms, m, mu, ta, tb, lga, lgb)[0]))
        # cut cell i at ta_i + (tb_i - ta_i) j / k_i, j = 0..k_i (its last node is tb_i itself)
        group = np.repeat(np.arange(k.size), k + 1)
        first = np.concatenate([[0], np.cumsum(k + 1)[:-1]])
        j = np.arange(group.size) - first[group]
        nodes = ta[group] + (tb - ta)[group] * (j / k[group])
        last = j == k[group]
        inner = (j > 0) & ~last
        nodes[last] = tb
        lf_nodes = np.empty_like(nodes)
        lf_nodes[j == 0], lf_nodes[last] = lfa, lfb
        lf_nodes[inner] = _log_f_up(atoms, m, nodes[inner])
        ta, tb = nodes[~last], nodes[j > 0]
        lfa, lfb = lf_nodes[~last], lf_nodes[j > 0]
    return False
