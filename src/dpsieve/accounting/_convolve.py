"""Convolution of grid PLDs with a stated floating-point bound (private).

Direct convolution (``numpy.convolve``) of non-negative vectors: every output entry is a sum of
at most m = min(len(a), len(b)) non-negative products, so its relative error is at most
(m + 1) u (u = 2^-53). FFT convolution (``scipy.signal.fftconvolve``) can put absolute noise on
every entry; we use the entrywise bound (Higham, *Accuracy and Stability of Numerical
Algorithms*, Sec. 24.1, with a generous constant)

    max_i |fft_conv(a, b)_i - conv(a, b)_i| <= 16 log2(N) u (||a||_1 ||b||_2 + ||a||_2 ||b||_1),

N the transform length (each factor's transform error meets the other's transform, bounded
entrywise by its l1 norm: the two products add; docs/proofs/accounting.md, Lemma A3), and
add it to the entries (:func:`add_entry_bound`). Negative FFT
entries are clipped to 0 and nothing is renormalised. Optimistic compositions never use it.
That bound is absolute (relative to the total mass), so far in the upper tail, where
eps(delta) at small delta is decided, :func:`tilted_bands` replaces the entries by upper
bounds from exponentially tilted FFTs, whose error is relative to a Chernoff bound of the
tail there (docs/proofs/accounting.md, Lemma A4).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Above this many multiply-adds the FFT is used.
DIRECT_LIMIT = 8_000_000
#: The noise region at the top is cut (to +inf) only when it is at least this share of the
#: result: kept in place it counts only below its own losses, at +inf at every eps.
NOISE_CUT_SHARE = 0.5
#: A side with at most this many non-zero masses is convolved as a sum of shifted copies.
SPARSE_NNZ = 64


def convolve(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float, float]:
    """Return (conv, rel_err, abs_err): conv >= 0 and for the exact convolution c, entrywise

    |conv_i - c_i| <= rel_err * conv_i + abs_err.

    Supports on a common lattice (every non-zero index of both sides in start + step N,
    step > 1) are compressed first and convolved as dense vectors (same bound).
    Direct (dense, or sparse when one side has at most SPARSE_NNZ non-zeros): abs_err = 0.
    FFT: abs_err = 16 log2(N) u (||a||_1 ||b||_2 + ||a||_2 ||b||_1), a bound on the l2 norm
    of the error vector, hence on every entry (Higham, Sec. 24.1, generous constant: the
    error of a's transform times b's transform, bounded entrywise by ||b||_1, plus the same
    with the roles swapped, plus the inverse transform's, <= ||a||_1 ||b||_2).
    """
    ia, ib = np.flatnonzero(a), np.flatnonzero(b)
    if ia.size == 0 or ib.size == 0:
        return np.zeros(a.size + b.size - 1), 0.0, 0.0
    step = int(np.gcd.reduce(np.concatenate([np.diff(ia), np.diff(ib), [0]])))
    if step > 1:  # both supports on one lattice (compositions of RR / pure DP): compress
        ca, cb = a[ia[0] :: step], b[ib[0] :: step]
        small, rel_c, abs_c = convolve(ca, cb)
        out_s = np.zeros(a.size + b.size - 1)
        start = int(ia[0] + ib[0])
        out_s[start : start + step * small.size : step] = small
        return out_s, rel_c, abs_c
    na, nb = ia.size, ib.size
    if min(na, nb) <= SPARSE_NNZ:
        dense, sparse = (a, b) if nb <= na else (b, a)
        out = np.zeros(a.size + b.size - 1)
        for j in np.flatnonzero(sparse):
            out[j : j + dense.size] += sparse[j] * dense
        rel = (min(na, nb) + 2) * U
        return out, rel / (1.0 - rel), 0.0
    if min(a.size, b.size) * max(a.size, b.size) <= DIRECT_LIMIT:
        out = np.convolve(a, b)
        rel = (min(a.size, b.size) + 2) * U
        return out, rel / (1.0 - rel), 0.0
    from scipy import signal  # imported lazily: scipy.signal costs ~1 s to import

    n = a.size + b.size - 1
    out = signal.fftconvolve(a, b)
    np.clip(out, 0.0, None, out=out)
    l1a, l1b = float(np.sum(a)), float(np.sum(b))
    l2a, l2b = float(np.sqrt(np.sum(a * a))), float(np.sqrt(np.sum(b * b)))
    err = 16.0 * max(1.0, math.log2(n)) * U * (l1a * l2b + l2a * l1b) * (1.0 + 4 * U)
    return out, 0.0, err


def add_entry_bound(
    offset: int, probs: FloatArray, grid: float, e: float, stop: int | None = None
) -> None:
    """Raise the entries (in place) so that the result tail-dominates the exact convolution
    when the error vector has l2 norm <= e (the FFT bound of :func:`convolve` is one).

    For every threshold, the errors of the k entries above it sum to <= sqrt(k) e
    (Cauchy-Schwarz). The entry of rank k from the top (k = 1 at the top) among those at
    z >= 0 gets e (sqrt(k) - sqrt(k - 1)), so the added mass above any threshold in z >= 0 is
    exactly sqrt(k) e; the knot z* just below 0 gets e (sqrt(n) - sqrt(n_pos)), so every
    threshold below 0 has sqrt(n) e >= what it needs (entries further down are not raised:
    raising them would raise E[e^{-Z}] by up to e^{-z}). Tail dominance at every threshold
    gives h >= the exact h at every x (first-order dominance, as in :func:`shed_excess`;
    docs/proofs/accounting.md, Lemma A3). Total added: sqrt(n) e, not n e.
    Only entries below ``stop`` are counted and raised (those above already hold entrywise
    upper bounds, :func:`tilted_bands`).
    """
    if not e > 0:
        return
    n = probs.size if stop is None else min(stop, probs.size)
    z0 = -offset  # index of the knot z = 0
    first_pos = min(max(z0, 0), n)
    n_pos = n - first_pos
    if n_pos > 0:
        ranks = np.arange(n_pos, 0, -1, dtype=np.float64)  # rank from the top
        probs[first_pos:n] += e * (np.sqrt(ranks) - np.sqrt(ranks - 1.0)) * (1.0 + 4 * U)
    if first_pos > 0:
        probs[first_pos - 1] += e * (math.sqrt(n) - math.sqrt(n_pos)) * (1.0 + 4 * U)


def trim(offset: int, probs: FloatArray, tail_mass: float) -> tuple[int, FloatArray, float, float]:
    """Cut tails: returns (offset, probs, upper_cut, lower_cut).

    Exact zeros at both ends are always removed. With ``tail_mass > 0`` the largest upper tail
    of mass <= tail_mass / 2 and lower tail of mass <= tail_mass / 2 are cut; the caller decides
    where the cut mass goes (pessimistic: upper to +inf, lower up to the first kept knot).
    """
    nz = np.flatnonzero(probs)
    if nz.size == 0:
        return offset, np.zeros(1), 0.0, 0.0
    lo, hi = int(nz[0]), int(nz[-1])
    up_cut = low_cut = 0.0
    if tail_mass > 0:
        half = tail_mass / 2.0
        c_up = np.cumsum(probs[hi::-1])
        k = int(np.searchsorted(c_up, half, side="right"))  # entries hi, hi-1, ... hi-k+1 cut
        k = min(k, hi - lo)
        if k > 0:
            up_cut = float(c_up[k - 1])
            hi -= k
        c_lo = np.cumsum(probs[lo : hi + 1])
        k = int(np.searchsorted(c_lo, half, side="right"))
        k = min(k, hi - lo)
        if k > 0:
            low_cut = float(c_lo[k - 1])
            lo += k
    out = np.array(probs[lo : hi + 1], dtype=np.float64)
    return offset + lo, out, up_cut, low_cut


def lift_negative_noise(offset: int, probs: FloatArray, grid: float, e: float) -> None:
    """Lift FFT noise far in the lower tail so that E[e^{-Z}] stays within 1e-9 of exact.

    Noise of size <= e at a loss z adds <= e e^{-z} to E[e^{-Z}]. Entries below
    z_cut = log(N e / 1e-9) that are within 1e6 e of zero (noise-dominated) move up to z_cut:
    moving mass up is pessimistic (only raises h) and lowers E[e^{-Z}]; entries kept there
    have relative noise <= 1e-6, and entries at z >= z_cut add at most 1e-9 in total.
    """
    if not e > 0:
        return
    z_cut = min(0.0, math.log(max(probs.size, 1) * e / 1e-9))
    cut = min(max(math.ceil(z_cut / grid) - offset, 0), probs.size - 1)
    if cut <= 0:
        return
    part = probs[:cut]
    small = part < 1e6 * e
    moved = float(np.sum(part[small]))
    part[small] = 0.0
    probs[cut] += moved


def shed_excess(probs: FloatArray, inf_mass: float) -> None:
    """Remove mass from the bottom of ``probs`` (in place) so that the total with
    ``inf_mass`` is 1 + O(sqrt(n) u) again, never below 1 in exact arithmetic.

    Pessimistic error bounds add mass (inflated entries, FFT bounds); over thousands of
    compositions it would exceed any tolerance. The result still dominates the
    exact PLD: its tail masses P(Z > z) (the +inf atom included) are >= the exact ones for
    every z -- above the removed region nothing changed, below it the tail is the whole mass,
    >= 1 = the exact total -- and h(x) = E[(1 - x e^{-Z})_+] integrates a non-decreasing
    function of z, so it is >= the exact h at every x (first-order dominance; the same holds
    through later convolutions). E[e^{-Z}] only decreases (mass is taken off the lowest
    losses, where e^{-z} is largest, and the added bounds sat higher).
    """
    n = probs.size
    total = float(np.sum(probs)) + inf_mass
    # pairwise-sum error <= (log2 n + 32) u total; keep 4x that above 1, plus 1e-15
    keep = 4.0 * (math.log2(max(n, 2)) + 32.0) * U * total + 1e-15
    excess = total - 1.0 - keep
    if not excess > 0:
        return
    # upper bounds of the exact partial sums (cumsum of non-negative terms: (k+1) u relative)
    cu = np.cumsum(probs) * (1.0 + (np.arange(n) + 3.0) * U)
    k = int(np.searchsorted(cu, excess, side="right"))  # entries [0, k) sum to <= excess
    if k >= n:  # cannot happen for an excess below the finite mass; keep the bound
        return
    before = float(cu[k - 1]) if k > 0 else 0.0
    probs[:k] = 0.0
    probs[k] = max(0.0, probs[k] - max(0.0, excess - before) * (1.0 - 4 * U))


def cut_noise_top(probs: FloatArray, e: float, factor: float = 64.0) -> tuple[int, float]:
    """The FFT noise region at the top: (new length, mass bound moved to +inf).

    Entries above the last one exceeding ``factor * e`` are noise-dominated; their computed
    sum plus sqrt(count) e bounds the true upper tail (e bounds the l2 norm of the errors)
    and goes to +inf (only raises h). Without this, the support of a k-fold composition grows
    by the full width of each step although almost all of it carries noise only (1,000
    subsampled-Gaussian steps would reach losses of 7,900 and eps = 7,910).
    """
    if not e > 0:
        return probs.size, 0.0
    # the errors of the m entries cut sum to <= sqrt(m) e (l2 bound, Cauchy-Schwarz)
    big = np.flatnonzero(probs > factor * e)
    top = int(big[-1]) + 1 if big.size else 1
    if top >= probs.size or probs.size - top < NOISE_CUT_SHARE * probs.size:
        return probs.size, 0.0
    rest = probs[top:]
    moved = float(np.sum(rest)) * (1.0 + (math.log2(rest.size + 1) + 32) * U) + e * math.sqrt(
        rest.size
    ) * (1.0 + 4 * U)
    return top, moved


#: Tail levels whose saddle points place the tilted FFTs of :func:`tilted_bands`.
TILT_LEVELS = (1e-12,)
#: The upper tail beyond the index where a Chernoff bound certifies mass <= TILT_CUT goes
#: to +inf (a bound on the exact tail; only raises h, by at most that at every eps).
TILT_CUT = 1e-30
#: Bins of the coarse cumulant generating function used to choose the tilts.
_CGF_BINS = 1024


def _dyadic(t: float) -> tuple[int, int]:
    """t rounded to m 2^q with a 16-bit integer m: m * index is exact for |index| < 2^37."""
    q = math.frexp(t)[1] - 16
    return max(1, round(math.ldexp(t, -q))), q


def _tilt(a: FloatArray, m: int, q: int) -> tuple[FloatArray, int]:
    """(a_i e^{t i - s}, s') with t = m 2^q and s = s' 2^q ~ max_i (log a_i + t i): the exponent
    (m i - s') 2^q is exact, so every entry has relative error <= 5u (exp and the product)
    plus an absolute 2^-1074 where it underflows; the largest entry is about 1."""
    i = np.arange(a.size, dtype=np.float64)
    pos = a > 0
    with np.errstate(divide="ignore"):
        top = float(np.max(np.log(a[pos]) + math.ldexp(m, q) * i[pos]))
    s_int = round(math.ldexp(top, -q))
    with np.errstate(under="ignore", over="ignore"):
        out: FloatArray = a * np.exp(np.ldexp(m * i - s_int, q))
    return out, s_int


def _tilt_choices(a: FloatArray, b: FloatArray) -> list[float]:
    """Tilts t (per index step) at the saddle points of the coarse CGF of a * b for the
    TILT_LEVELS and TILT_CUT (heuristic: soundness does not depend on the choice)."""
    def coarse(x: FloatArray) -> tuple[FloatArray, FloatArray]:
        w = max(1, -(-x.size // _CGF_BINS))
        pad = np.zeros(w * -(-x.size // w))
        pad[: x.size] = x
        mass = pad.reshape(-1, w).sum(axis=1)
        pos = (np.arange(mass.size) * w).astype(np.float64)
        keep = mass > 0
        return np.log(mass[keep]), pos[keep]

    (la, pa), (lb, pb) = coarse(a), coarse(b)

    def rate(t: float) -> float:  # t K'(t) - K(t): -log of the Chernoff bound at the saddle
        out = 0.0
        for lw, p in ((la, pa), (lb, pb)):
            g = lw + t * p
            mx = float(np.max(g))
            e = np.exp(g - mx)
            tot = float(np.sum(e))
            out += t * float(np.sum(e * p)) / tot - (mx + math.log(tot))
        return out

    span = float(pa[-1] - pa[0] + pb[-1] - pb[0]) + 1.0
    t_hi = 1.0 / span
    while rate(t_hi) < -math.log(TILT_CUT) and t_hi < 1e3:
        t_hi *= 2.0
    out: list[float] = []
    for level in (*TILT_LEVELS, TILT_CUT):
        target = -math.log(level)
        lo, hi = 0.0, t_hi
        if rate(hi) < target:
            continue
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if rate(mid) < target else (lo, mid)
        if not out or hi > 1.3 * out[-1]:
            out.append(hi)
    return out


def tilted_bands(a: FloatArray, b: FloatArray, conv: FloatArray, e0: float,
                 first: int) -> tuple[int, int, float]:
    """Exponentially tilted FFTs for the upper tail: returns (stop, top, to_inf).

    The FFT bound e0 is absolute (relative to the total mass), so tail masses ~1e-15 drown
    in it. Tilting commutes with convolution: with a'_i = a_i e^{t i - s_a} (likewise b'),
    (a' * b')_k = c_k e^{t k - s_a - s_b} for the exact c = a * b, so the FFT of the tilted
    arrays, with its own l2 error bound e_t (the same bound as e0, for a', b'), gives
    c_k <= (1 + 32 u) (max(y_k, 0) + e_t) F_k with F_k = e^{s_a + s_b - t k}: an error that
    falls like e^{-t k}, relative ~1e-13 times a Chernoff bound near the tilt's saddle point.
    Entries ``[stop, top)`` of ``conv`` (stop >= first, the index of z = 0) are replaced by
    these upper bounds, each from the tilt with the smallest error there; below ``stop`` the
    untilted bound e0 is the best and the caller raises those entries as before. Entries from
    ``top`` on are cut: their exact mass is <= e^{K(t) - t top} (Chernoff, K(t) the log of
    sum_k c_k e^{t k}), which is returned for +inf; this happens only when that region is at
    least NOISE_CUT_SHARE of the array (else top = len(conv): no +inf mass, so compositions
    of bounded PLDs stay comparable with Gaussian budgets; the stored bounds there decay
    like e^{-t k} and underflow to 0, so the support still stops growing). Every stored entry
    in the band is >= the exact one (up to underflow below 2^-1074), so every tail sum there
    dominates (docs/proofs/accounting.md, Lemma A4).
    """
    n = conv.size
    if not e0 > 0 or first >= n or a.size < 2 or b.size < 2:
        return n, n, 0.0
    from scipy import signal

    k = np.arange(n, dtype=np.float64)
    log_n = 16.0 * max(1.0, math.log2(n)) * U
    cap = float(np.sum(a)) * float(np.sum(b)) * (1.0 + (a.size + b.size + 8) * U)
    tilts, lines = [], []
    chern = np.full(n, math.inf)  # log Chernoff bound of the exact tail mass at k and above
    for t0 in _tilt_choices(a, b):
        m, q = _dyadic(t0)
        ta, sa = _tilt(a, m, q)
        tb, sb = _tilt(b, m, q)
        if max(abs(sa), abs(sb)) + m * n >= 2**51:  # the exponents would not be exact: skip
            continue
        l1a, l1b = float(np.sum(ta)), float(np.sum(tb))
        l2a, l2b = float(np.sqrt(np.sum(ta * ta))), float(np.sqrt(np.sum(tb * tb)))
        # log K: sums of non-negative terms (relative (n + 5) u each), padded generously
        log_k = math.ldexp(sa + sb, q) + math.log(l1a) + math.log(l1b)
        log_k += 4.0 * (a.size + b.size + 16) * U + 1e-9
        log_k += 4.0 * U * (abs(log_k) + math.ldexp(m * n, q))  # the subtraction below
        chern = np.minimum(chern, log_k - math.ldexp(m, q) * k)
        e_t = (log_n * (l1a * l2b + l2a * l1b) + 1e-300) * (1.0 + 16 * U)
        tilts.append((ta, tb, sa, sb, m, q, e_t))
        lines.append(math.log(e_t) + np.ldexp(sa + sb - m * k, q))
    cut = np.flatnonzero(chern <= math.log(TILT_CUT))
    top = int(cut[0]) if cut.size and cut[0] > first else n  # cut only above z = 0
    if n - top < NOISE_CUT_SHARE * n:  # a small region is kept (no +inf mass, Lemma A4)
        top = n
    to_inf = math.exp(float(chern[top])) * (1.0 + 1e-9) if top < n else 0.0
    if not tilts:
        return n, n, 0.0
    all_lines = np.vstack(lines)
    wins = np.flatnonzero(all_lines.min(axis=0)[first:top] < math.log(e0)) + first
    stop = int(wins[0]) if wins.size else top
    pick = all_lines[:, stop:top].argmin(axis=0)
    for j, (ta, tb, sa, sb, m, q, e_t) in enumerate(tilts):
        idx = np.flatnonzero(pick == j) + stop
        if idx.size == 0:
            continue
        y = signal.fftconvolve(ta, tb)[idx]
        with np.errstate(over="ignore", under="ignore"):
            f = np.exp(np.ldexp(sa + sb - m * k[idx], q))
            vals = (np.maximum(y, 0.0) + e_t) * f * (1.0 + 32 * U)
        # every c_k <= the total mass (sum a)(sum b): a bound wherever F_k overflows
        conv[idx] = np.minimum(np.where(np.isnan(vals), cap, vals), cap)
    return stop, top, to_inf
