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

from dpsieve._rounding import next_up_array

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


def sum_rel_err(n: int, nnz: int | None = None) -> float:
    """Relative error bound (in units of u) of :func:`_rev_cumsum` on n non-negative terms of
    which ``nnz`` are non-zero (adding an exact 0 rounds nothing), plus 4 for the terms' own
    rounding (a product and an exp): nnz + 4 for plain sums (n <= 64), else 2 min(b, nnz) + 8
    with b = ceil(sqrt(n)) (at most nnz non-zero terms per row and across rows)."""
    k = n if nnz is None else min(n, nnz)
    return float(k + 4) if n <= 64 else float(2 * min(math.isqrt(n - 1) + 1, k) + 8)


def tail_sums(z: FloatArray, p: FloatArray) -> tuple[FloatArray, FloatArray]:
    """A[k] = sum_{i>=k} p_i, B[k] = sum_{i>=k} p_i e^{-z_i}; A[n] = B[n] = 0.

    Relative error of each entry <= sum_rel_err(n) u (blocked sums, :func:`_rev_cumsum`).
    B underflows for losses above ~745 (use :func:`scaled_tail_sums` there).
    """
    with np.errstate(over="ignore", under="ignore"):
        pe = p * np.exp(-z)
    a = np.zeros(p.size + 1)
    b = np.zeros(p.size + 1)
    a[:-1] = _rev_cumsum(p)
    b[:-1] = _rev_cumsum(pe)
    return a, b


#: Largest exponent spread kept inside one row of :func:`_discounted` (e^64 never overflows
#: and products p e^{-64} underflow only for p below ~1e-280).
_ROW_SPREAD = 64.0
#: Absolute error per term of the scaled sums from underflow (2^-1074 e^{_ROW_SPREAD}, padded).
_UNDER = 1e-295


def _discounted(v: FloatArray, z: FloatArray) -> tuple[FloatArray, float]:
    """D_k = sum_{i>=k} v_i e^{z_k - z_i} for v >= 0 and increasing z, and a relative error
    bound (in units of u) such that |D_float - D| <= rel u D + n _UNDER.

    Blocked like :func:`_rev_cumsum`: rows of b entries (exponent spread <= _ROW_SPREAD) are
    summed relative to their first knot (positive terms), the rows' totals are combined by the
    same function one level up (on the rows' first knots), so every D_k is a sum of positive
    terms with a few positive products: no cancellation, no overflow (every factor e^{z_k - z_i}
    with i >= k is <= 1 and every row-relative factor <= e^{_ROW_SPREAD}) at any loss.
    The exponents z_k - z_i are formed from the float knots (error <= u (|z_k| + |z_i|)), which
    the bound covers through 4 max|z| + 16 per level.
    """
    n = v.size
    zmax = float(np.max(np.abs(z))) if n else 0.0
    if n <= 64:
        with np.errstate(under="ignore"):
            f = np.exp(np.minimum(z[:, None] - z[None, :], 0.0))
        m = np.where(np.arange(n)[None, :] >= np.arange(n)[:, None], f, 0.0)
        out: FloatArray = np.sum(m * v[None, :], axis=1)
        return out, float(n + 8) + 4.0 * zmax
    span = float(z[-1] - z[0]) / (n - 1)  # the grid step
    b = max(2, min(math.isqrt(n - 1) + 1, int(_ROW_SPREAD / max(span, 1e-300))))
    rows = -(-n // b)
    pad = rows * b - n
    vv = np.concatenate([v, np.zeros(pad)]).reshape(rows, b)
    # knots of the padding continue the grid (their masses are 0)
    zz = np.concatenate([z, z[-1] + span * np.arange(1, pad + 1)]).reshape(rows, b)
    rel_z = zz - zz[:, :1]  # in [0, ~_ROW_SPREAD]
    with np.errstate(under="ignore"):
        w = vv * np.exp(-rel_z)  # relative to each row's first knot
    within = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]  # sum_{i>=k in row} v_i e^{z_s - z_i}
    starts = zz[:, 0]
    if rows > 1:  # E_r = D at row r's start from rows > r, one level up
        up, rel_up = _discounted(within[:, 0], starts)
        with np.errstate(under="ignore"):
            nxt = np.concatenate([up[1:] * np.exp(starts[:-1] - starts[1:]), [0.0]])
    else:
        nxt, rel_up = np.zeros(1), 0.0
    with np.errstate(under="ignore", over="ignore"):
        full = (within + nxt[:, None]) * np.exp(rel_z)
    res: FloatArray = full.reshape(-1)[:n]
    return res, float(b + 16) + 8.0 * zmax + rel_up


#: (A, D, rel_D, m) of :func:`scaled_tail_sums`.
Tails = tuple[FloatArray, FloatArray, float, float]


def scaled_tail_sums(z: FloatArray, p: FloatArray) -> Tails:
    """(A, D, rel_D, m): A[k] = sum_{i>=k} p_i, D[k] = e^{z_k} B[k] = sum_{i>=k} p_i e^{z_k - z_i}
    (A[n] = D[n] = 0), with |D_float - D| <= rel_D D + n _UNDER and |A_float - A| <= m u A
    (m = :func:`sum_rel_err` over the non-zero masses; cached with the sums).

    D <= A, so h(e^t) = A_k - e^{t - z_k} D_k (k the first knot above t) is formed without
    overflow or underflow at any loss: the curves stay certified past e^{709} (where B_k =
    e^{-z_k} D_k is below the float range).
    """
    a = np.zeros(p.size + 1)
    d = np.zeros(p.size + 1)
    a[:-1] = _rev_cumsum(p)
    if p.size:
        dd, rel = _discounted(p, z)
        d[:-1] = dd
    else:
        rel = 0.0
    return a, d, rel * U, sum_rel_err(p.size, int(np.count_nonzero(p)))


def h_pl(
    z: FloatArray,
    p: FloatArray,
    inf_mass: float,
    t: FloatArray,
    ad: Tails,
) -> tuple[FloatArray, FloatArray]:
    """h of a purely discrete PLD (mu = 0) at x = e^t: piecewise linear, exact up to round-off.

    h(x) = A_k - e^{t - z_k} D_k + inf_mass, k = first index with z_k > t (so the factor is
    <= 1 at every t: no overflow past e^709; :func:`scaled_tail_sums`). Error bound:
    s u A_k + (rel_D + (|t| + |z_k| + 8) 2u) e^{t - z_k} D_k + 4u inf_mass + n _UNDER, with
    s = :func:`sum_rel_err` (blocked sums of non-negative terms), rel_D the bound of the
    scaled sums, and the factor's own error (its argument rounds by u (|t| + |z_k|)).
    """
    a, d, rel_d, m = ad
    n = p.size
    k = np.searchsorted(z, t, side="right")
    ak, dk = a[k], d[k]
    zk = np.where(k < n, z[np.minimum(k, n - 1)], 0.0)
    with np.errstate(under="ignore", invalid="ignore"):
        f = np.where(k < n, np.exp(np.minimum(t - zk, 0.0)), 0.0)
    xd = np.minimum(f * dk, ak * (1.0 + 4 * U))
    h = np.clip(ak - xd, 0.0, None) + inf_mass
    with np.errstate(invalid="ignore"):
        rel_x = rel_d + (np.abs(t) + np.abs(zk) + 8.0) * 2 * U  # inf at t = +-inf (xd = 0)
    err = (
        m * U * ak
        + np.where(np.isfinite(rel_x), rel_x, 0.0) * xd
        + np.where(ak > 0, 4 * U * inf_mass + n * _UNDER, 0.0)
    )
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
    ad: Tails,
) -> FloatArray:
    """Smallest eps >= 0 with h(e^eps) + err <= delta, exactly on the piecewise-linear curve.

    Vectorized. Certified upper values of h at the knots (h at knot k counts the atoms above
    it: A_{k+1} - e^{z_k - z_{k+1}} D_{k+1}) are made non-increasing by a running MINIMUM from
    the left: h is decreasing, so min_{j <= k} of upper bounds at y_j is an upper bound at
    y_k (a running maximum from the right would let one uncertifiable knot at the top -- a
    loss past the float range -- spoil every knot below it). The first knot j certified
    <= delta is found by ``searchsorted``; on the segment (y_{j-1}, y_j] the line
    h = A_j - x e^{-z_j} D_j + inf is solved in logs (eps = z_j + log((A_j + inf - target)
    / D_j), no overflow at any loss) and clipped to [z_{j-1}, z_j] (z_j itself is certified).
    The result is rounded up (``nextafter``): never below the exact value for this PLD.
    inf where delta < inf_mass (+ error).
    """
    a, d, rel_d, m = ad
    n = z.size
    gaps = np.concatenate([z[1:] - z[:-1], [0.0]])
    with np.errstate(under="ignore"):
        f = np.exp(-gaps)  # e^{z_k - z_{k+1}}
    xd = np.minimum(f * d[1:], a[1:])
    hk = np.clip(a[1:] - xd, 0.0, None) + inf_mass
    rel_x = rel_d + (np.abs(z) + np.abs(np.concatenate([z[1:], [0.0]])) + 8.0) * 2 * U
    errk = m * U * a[1:] + rel_x * xd + 8 * U * hk + n * _UNDER
    hk_up = hk + errk  # certified upper values at the knots
    hk_up = np.where(np.isfinite(hk_up), hk_up, np.inf)  # never certify from a NaN
    hk_up = np.minimum.accumulate(hk_up)  # non-increasing, still upper bounds (docstring)
    dl = np.asarray(deltas, dtype=np.float64)
    k1 = int(np.searchsorted(z, 0.0, side="right"))
    if k1 < n:
        x1d = min(math.exp(-float(z[k1])) * float(d[k1]), float(a[k1]))
        rel1 = rel_d + (abs(float(z[k1])) + 8.0) * 2 * U
    else:
        x1d, rel1 = 0.0, 0.0
    h1 = max(float(a[k1]) - x1d, 0.0) + inf_mass  # h(1)
    err1 = m * U * float(a[k1]) + rel1 * x1d + 8 * U * h1 + n * _UNDER
    j = np.searchsorted(-hk_up, -dl, side="left")
    jc = np.minimum(j, n - 1)
    aj, dj = a[jc], d[jc]
    zj = z[jc]
    zprev = z[np.maximum(jc - 1, 0)]
    # on (y_{j-1}, y_j] the active atoms are i >= j; the line's round-off is at most
    # m u A_j + rel u e^{t - z_j} D_j <= (m u + rel) A_j (+ inf's rounding)
    rel_line = rel_d + (np.abs(zj) + np.abs(zprev) + 8.0) * 2 * U
    target = dl - (m * U + rel_line) * aj - 4 * U * inf_mass - 8 * U * dl - n * _UNDER
    with np.errstate(divide="ignore", invalid="ignore"):
        e = zj + np.log((aj + inf_mass - target) / dj) + 4 * U * (np.abs(zj) + 4.0)
    ok = (jc > 0) & (dj > 0) & (target > inf_mass) & np.isfinite(e)
    e = np.where(ok, np.clip(e, zprev, zj), zj)
    e = np.maximum(e, 0.0)
    e = np.where(e > 0, next_up_array(e), 0.0)
    e = np.where(h1 + err1 <= dl, 0.0, e)
    out: FloatArray = np.where(j < n, e, math.inf)
    # beyond the largest loss h = inf_mass exactly (no atom is active), so any delta >=
    # inf_mass is met there even when the error margin above cannot be afforded
    pos = np.flatnonzero(p)
    z_top = max(0.0, float(z[pos[-1]])) if pos.size else 0.0
    out = np.where(np.isinf(out) & (dl >= inf_mass), np.minimum(out, z_top), out)
    return out
