"""Convolution of grid PLDs with a stated floating-point bound (private).

Direct convolution (``numpy.convolve``) of non-negative vectors: every output entry is a sum of
at most m = min(len(a), len(b)) non-negative products, so its relative error is at most
(m + 1) u (u = 2^-53). FFT convolution (``scipy.signal.fftconvolve``) can put absolute noise on
every entry; we use the entrywise bound (Higham, *Accuracy and Stability of Numerical
Algorithms*, Sec. 24.1, with a generous constant)

    max_i |fft_conv(a, b)_i - conv(a, b)_i| <= 16 log2(N) u ||a||_1 ||b||_2,

N the transform length, and add it to the entries (:func:`add_entry_bound`). Negative FFT
entries are clipped to 0 and nothing is renormalised. Optimistic compositions never use it.
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
#: A side with at most this many non-zero masses is convolved as a sum of shifted copies.
SPARSE_NNZ = 64


def convolve(a: FloatArray, b: FloatArray) -> tuple[FloatArray, float, float]:
    """Return (conv, rel_err, abs_err): conv >= 0 and for the exact convolution c, entrywise

    |conv_i - c_i| <= rel_err * conv_i + abs_err.

    Direct (dense, or sparse when one side has at most SPARSE_NNZ non-zeros): abs_err = 0.
    FFT: abs_err = 16 log2(N) u min(||a||_1 ||b||_2, ||a||_2 ||b||_1), a bound on the largest
    entry error (Higham, Sec. 24.1, generous constant; the l2 error of the transform-multiply-
    invert chain is bounded by that product, both orders being valid).
    """
    na, nb = int(np.count_nonzero(a)), int(np.count_nonzero(b))
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
    err = 16.0 * max(1.0, math.log2(n)) * U * min(l1a * l2b, l2a * l1b)
    return out, 0.0, err


def add_entry_bound(offset: int, probs: FloatArray, grid: float, e: float) -> None:
    """Make every entry dominate the exact one when each may be short by at most e (in place).

    Entries at losses z >= 0 get + e each. The deficit of the entries at z < 0 enters h(x) only
    through (1 - x e^{-z})_+ <= (1 - x e^{-z*})_+ with z* the largest such loss, so their total
    e * count goes onto that knot (docs/proofs/accounting.md, Lemma A3). No +inf mass is needed,
    so compositions of bounded PLDs stay comparable with Gaussian budgets.
    """
    if not e > 0:
        return
    z0 = -offset  # index of the knot z = 0
    n = probs.size
    if z0 < n:
        probs[max(z0, 0) :] += e
    neg = min(max(z0, 0), n)  # entries with z < 0 are [0, neg)
    if neg > 0:
        probs[neg - 1] += e * neg


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
