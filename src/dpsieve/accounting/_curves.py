"""Hockey-stick and tradeoff curves of grid PLDs, with floating-point error bounds (private).

A grid PLD with Gaussian part is L = D (+) G_mu, D = sum_i p_i delta_{z_i} + inf_mass
delta_{+inf}. By the composition formula (paper, Sec. 2: h_{L (+) S}(x) = E_{Z~L}[h_S(x e^{-Z})])

    h_L(x) = inf_mass + sum_i p_i h_{G_mu}(x e^{-z_i}),       h_{G_0}(y) = (1 - y)_+.

Each function returns values together with an absolute error bound, so callers can round
in the safe direction.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import numpy.typing as npt
from scipy import special

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Relative error of scipy's ndtr / log_ndtr / exp per evaluation (generous).
G_TERM_REL = 1e-14
#: Atoms whose Gaussian term has alpha < -SKIP_SD are skipped; Phi(-10) < PHI_SKIP.
SKIP_SD = 10.0
PHI_SKIP = 7.7e-24
#: -log(2^-1074): a product p_i e^{-z_i} in the subnormal range is off by <= e^{-this}.
_LOG_SUBNORMAL = 744.44
#: Gaussian terms below this are flushed to 0 (added to the error bound).
TINY = 1e-280
_CHUNK = 2_000_000


def _dot(m: FloatArray, v: FloatArray) -> FloatArray:
    """Row sums of m * v without BLAS (threaded BLAS thrashes on a shared, loaded machine)."""
    out: FloatArray = np.sum(m * v[None, :], axis=1)
    return out


def knots(offset: int, n: int, grid: float) -> FloatArray:
    z: FloatArray = (offset + np.arange(n, dtype=np.float64)) * grid
    return z


def _rev_cumsum(v: FloatArray) -> FloatArray:
    """Reverse cumulative sums out[k] = sum_{i>=k} v_i of v >= 0, blocked: rows of
    b = ceil(sqrt(n)) entries are summed within the row, then the row totals across rows,
    so each output has relative error <= (2 b + 4) u (:func:`sum_rel_err`) instead of n u."""
    n = v.size
    if n <= 64:
        out: FloatArray = np.cumsum(v[::-1])[::-1]
        return out
    b = math.isqrt(n - 1) + 1
    rows = -(-n // b)
    m = np.zeros(rows * b)
    m[:n] = v
    within = np.cumsum(m.reshape(rows, b)[:, ::-1], axis=1)[:, ::-1]
    after = np.zeros(rows)
    after[:-1] = np.cumsum(within[::-1, 0])[::-1][1:]
    full: FloatArray = (within + after[:, None]).reshape(-1)[:n]
    return full


def sum_rel_err(n: int) -> float:
    """Relative error bound (in units of u) of :func:`_rev_cumsum` on n non-negative terms,
    plus 4 for the terms' own rounding (a product and an exp)."""
    return float(n + 4) if n <= 64 else float(2 * (math.isqrt(n - 1) + 1) + 8)


def tail_sums(z: FloatArray, p: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A[k] = sum_{i>=k} p_i, B[k] = sum_{i>=k} p_i e^{-z_i}; A[n] = B[n] = 0.

    Relative error of each entry <= sum_rel_err(n) u (blocked sums, :func:`_rev_cumsum`).
    """
    with np.errstate(over="ignore", under="ignore"):
        pe = p * np.exp(-z)
    a = np.zeros(p.size + 1)
    b = np.zeros(p.size + 1)
    a[:-1] = _rev_cumsum(p)
    b[:-1] = _rev_cumsum(pe)
    return a, b


def h_pl(
    z: FloatArray, p: FloatArray, inf_mass: float, t: FloatArray, ab: tuple[FloatArray, FloatArray]
) -> tuple[FloatArray, FloatArray]:
    """h of a purely discrete PLD (mu = 0) at x = e^t: piecewise linear, exact up to round-off.

    h(x) = A_k - x B_k + inf_mass, k = first index with z_k > t. Error bound:
    s u (A_k + x B_k + inf_mass), s = :func:`sum_rel_err` (blocked sums of non-negative
    terms, one product, one subtraction), plus x n 2^-1074 for products p_i e^{-z_i} that fall
    into the subnormal range. x B_k is formed as exp(t + log B_k), so x = e^t never overflows.
    """
    a, b = ab
    k = np.searchsorted(z, t, side="right")
    ak, bk = a[k], b[k]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # x B_k <= A_k (every active atom has z_i > t): no overflow once formed in logs
        xb = np.where(bk > 0, np.minimum(np.exp(t + np.log(bk)), ak * (1.0 + 4 * U)), 0.0)
        sub = np.where(ak > 0, p.size * np.exp(np.minimum(t, 800.0) - _LOG_SUBNORMAL), 0.0)
    h = np.clip(ak - xb, 0.0, None) + inf_mass
    # no active atom (A_k = 0): h = inf_mass exactly; else one more rounding of the sum
    err = sum_rel_err(p.size) * U * (ak + xb) + np.where(ak > 0, 4 * U * inf_mass, 0.0) + sub
    return np.minimum(h, 1.0 + err), err


def h_mixed(
    z: FloatArray,
    p: FloatArray,
    inf_mass: float,
    mu: float,
    t: FloatArray,
    grid: float | None = None,
    offset: int | None = None,
) -> tuple[FloatArray, FloatArray]:
    """h of D (+) G_mu at x = e^t (mu > 0), summing the closed form of G_mu over the atoms.

    Atoms with alpha_i = -(t - z_i)/mu + mu/2 < -SKIP_SD for every t of a chunk contribute
    h_G <= Phi(alpha_i) <= Phi(-SKIP_SD) each; they are skipped and that bound is added to the
    error. Per-term error: (a + b)(1e-14 + 8u(1 + alpha^2 + s^2)), a = Phi(alpha),
    b = e^s Phi(alpha - mu), s = t - z_i (relative error of ndtr/exp and of the arguments,
    amplified by the slope of log Phi; |alpha| capped at 40 where ndtr saturates).
    """
    t_all = np.atleast_1d(np.asarray(t, dtype=np.float64))
    if t_all.size == 1 and grid is not None and offset is not None:
        return _h_mixed_cached(offset, p, grid, inf_mass, mu, float(t_all[0]))
    nz = p > 0
    z, p = z[nz], p[nz]
    out = np.empty(t_all.shape)
    err = np.empty(t_all.shape)
    rows = max(1, _CHUNK // max(1, z.size))
    cum = np.concatenate([[0.0], np.cumsum(p)])
    for s in range(0, t_all.size, rows):
        tr = t_all[s : s + rows]
        start = int(np.searchsorted(z, float(tr.min()) - mu * mu / 2.0 - SKIP_SD * mu))
        zz, pp = z[start:], p[start:]
        tt = tr[:, None] - zz[None, :]  # log of x e^{-z_i}
        with np.errstate(over="ignore"):  # tiny mu: alpha = +-inf gives the right limits
            alpha = -tt / mu + mu / 2.0
        a = special.ndtr(alpha)
        with np.errstate(over="ignore", invalid="ignore"):
            if tt.size and float(tt.max()) <= 700.0:
                b = np.exp(tt) * special.ndtr(alpha - mu)
            else:  # y Phi(alpha - mu) <= Phi(alpha) <= 1: cap the exponent at 0
                b = np.exp(np.minimum(tt + special.log_ndtr(alpha - mu), 0.0))
        b = np.minimum(b, 1.0)
        out[s : s + rows] = _dot(np.clip(a - b, 0.0, 1.0), pp)
        rel = G_TERM_REL + 8 * U * (1.0 + np.minimum(np.abs(alpha), 40.0) ** 2 + tt * tt)
        err[s : s + rows] = _dot((a + b) * rel, pp) + PHI_SKIP * cum[start]
    h = out + inf_mass
    err = err + (np.count_nonzero(p) + 4) * U * h
    return h, err


_TERMS: OrderedDict[tuple[float, float, float], tuple[int, FloatArray, FloatArray, float]] = (
    OrderedDict()
)


def _gauss_terms(
    grid: float, mu: float, t: float, lo: int, hi: int
) -> tuple[FloatArray, FloatArray, float]:
    """(h_G terms, error weights, error factor) at knots lo..hi-1 for one t, cached.

    The same (grid, mu, t) recurs when a filter checks delta(eps) after every query: only the
    discrete part changes, so the Gaussian terms per knot are reused (same formula, same
    values and error bounds as the uncached path).
    """
    key = (grid, mu, t)
    hit = _TERMS.get(key)
    if hit is not None and hit[0] <= lo and hi <= hit[0] + hit[1].size:
        _TERMS.move_to_end(key)
        i0, hg, w, rel = hit
        return hg[lo - i0 : hi - i0], w[lo - i0 : hi - i0], rel
    pad = max(64, (hi - lo) // 4)
    if hit is not None:
        lo2, hi2 = min(lo, hit[0]) - pad, max(hi, hit[0] + hit[1].size) + pad
    else:
        lo2, hi2 = lo - pad, hi + pad
    tt = t - np.arange(lo2, hi2, dtype=np.float64) * grid
    with np.errstate(over="ignore"):
        alpha = -tt / mu + mu / 2.0
    a = special.ndtr(alpha)
    with np.errstate(over="ignore", invalid="ignore"):
        if float(tt.max()) <= 700.0:
            b = np.exp(tt) * special.ndtr(alpha - mu)
        else:
            b = np.exp(np.minimum(tt + special.log_ndtr(alpha - mu), 0.0))
    b = np.minimum(b, 1.0)
    hg = np.clip(a - b, 0.0, 1.0)
    # flush values below TINY to 0 (subnormals make dot products slow); err adds TINY
    hg[hg < TINY] = 0.0
    rel_i = G_TERM_REL + 8 * U * (1.0 + np.minimum(np.abs(alpha), 40.0) ** 2 + tt * tt)
    w = (a + b) * rel_i  # per-term error weights, as in h_mixed
    w[w < TINY] = 0.0
    rel = 1.0
    _TERMS[key] = (lo2, hg, w, rel)
    while len(_TERMS) > 8:
        _TERMS.popitem(last=False)
    return hg[lo - lo2 : hi - lo2], w[lo - lo2 : hi - lo2], rel


def _h_mixed_cached(
    offset: int, p: FloatArray, grid: float, inf_mass: float, mu: float, t: float
) -> tuple[FloatArray, FloatArray]:
    hg, w, rel = _gauss_terms(grid, mu, t, offset, offset + p.size)
    h = float(np.sum(hg * p)) + inf_mass
    err = rel * float(np.sum(w * p)) + 4 * TINY + (np.count_nonzero(p) + 4) * U * h
    return np.array([h]), np.array([err])


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
            out[s : s + rows] = -_dot(special.ndtr(-t / mu - mu / 2.0), pe)
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
    with np.errstate(divide="ignore"):
        # y_k B_{k+1} <= A_{k+1}; capping it there (or at e^709) only raises h
        yb = np.where(
            b[1:] > 0, np.minimum(np.exp(np.minimum(z + np.log(b[1:]), 709.0)), a[1:]), 0.0
        )
    hk = np.clip(a[1:] - yb, 0.0, None) + inf_mass
    sub = p.size * np.exp(np.minimum(z, 800.0) - _LOG_SUBNORMAL)  # subnormal products
    errk = sum_rel_err(p.size) * U * (a[1:] + yb + inf_mass) + 8 * U * hk + sub
    hk_up = hk + errk  # certified upper values at the knots (still decreasing up to round-off)
    hk_up = np.where(np.isfinite(hk_up), hk_up, np.inf)  # never certify from a NaN
    hk_up = np.maximum.accumulate(hk_up[::-1])[::-1]  # force monotone (only raises)
    m = sum_rel_err(p.size)
    d = np.asarray(deltas, dtype=np.float64)
    k1 = int(np.searchsorted(z, 0.0, side="right"))
    h1 = float(a[k1] - b[k1]) + inf_mass  # h(1)
    err1 = m * U * (2.0 * float(a[k1]) + inf_mass) + 8 * U * h1
    j = np.searchsorted(-hk_up, -d, side="left")
    jc = np.minimum(j, n - 1)
    aj, bj = a[jc], b[jc]
    # on the segment (y_{j-1}, y_j] the active atoms are i >= j, h = A_j - x B_j + inf, and
    # x B_j <= A_j there, so the round-off of the line is at most m u (2 A_j + inf) (relative
    # to the tail sums, not to 1: small deltas keep their precision)
    target = d - m * U * (2.0 * aj + inf_mass) - 8 * U * d - sub[jc]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        xs = (aj + inf_mass - target) / bj * (1.0 + 4 * U)
    lower = y[np.maximum(jc - 1, 0)]
    xs = np.where((jc == 0) | ~(bj > 0), y[jc], np.clip(xs, lower, y[jc]))
    with np.errstate(divide="ignore"):
        e = np.maximum(np.log(xs), 0.0)
    e = np.where(e > 0, np.nextafter(e, math.inf), 0.0)
    e = np.where(h1 + err1 <= d, 0.0, e)
    e = np.where(np.isfinite(e), e, math.inf)
    out: FloatArray = np.where(((target > inf_mass) | (jc == 0)) & (j < n), e, math.inf)
    # beyond the largest loss h = inf_mass exactly (no atom is active), so any delta >=
    # inf_mass is met there even when the error margin above cannot be afforded
    pos = np.flatnonzero(p)
    z_top = max(0.0, float(z[pos[-1]])) if pos.size else 0.0
    out = np.where(np.isinf(out) & (d >= inf_mass), np.minimum(out, z_top), out)
    return out
