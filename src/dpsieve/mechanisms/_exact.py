"""Exact samplers of Canonne, Kamath and Steinke (NeurIPS 2020), vectorized over draws.

All acceptance decisions are integer comparisons: ``Bernoulli(a / m)`` is decided by
``uniform integer in [0, m) < a``. Rationals ``gamma = a / b`` are carried as integer pairs.
No float enters any decision, so the output distributions are exactly the stated ones
(given uniform words from the source).

* :func:`bern_exp_le1` -- CKS Algorithm 1, ``Bernoulli(exp(-a/b))`` for ``0 <= a/b <= 1``.
* :func:`bern_exp` -- the same for any ``a/b >= 0`` (``floor`` trials of ``exp(-1)`` first).
* :func:`dlap` -- CKS Algorithm 2, discrete Laplace with scale ``t / 2^j``.
* :func:`dgauss` -- CKS Algorithm 3, discrete Gaussian with ``sigma^2 = S / 2^L``.

Vector code runs on ``uint64``. Where a value would leave that range (a loop counter
``K`` with ``b*K >= 2^63``, a geometric count ``V`` with ``t*V >= 2^63``, an acceptance
numerator ``x^2 >= 2^63``) that *element* continues in the scalar Python-int code of
:mod:`._scalar`, which runs the same algorithm from the same state. Such elements occur
with probability below ``1/256!`` (loop counters) or ``e^{-1000}`` (counts) or about
``e^{-11}`` (discrete Gaussian tails); they change speed, never the distribution.

Running time: the number of loop rounds depends on the random words and on the sampled
noise (rejections), never on the data being protected -- the samplers do not see it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpsieve.errors import NumericalError
from dpsieve.mechanisms import _scalar
from dpsieve.mechanisms._random import RandomSource

__all__ = [
    "DGParams",
    "bern_exp",
    "bern_exp_le1",
    "dgauss",
    "dgauss_params",
    "dlap",
    "geom",
    "geom_e1",
]

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
_TWO63 = 2**63
_SQRT_TWO63 = 3037000499  # floor(sqrt(2^63 - 1))


def bern_exp_le1(a: U64, b: U64, src: RandomSource) -> B:
    """``Bernoulli(exp(-a[i]/b[i]))`` for ``0 <= a[i] <= b[i]`` (CKS Algorithm 1).

    K = 1; repeat: draw A ~ Bernoulli(gamma/K); if A = 0 stop, else K += 1.
    Return [K odd]. P[K odd] = sum_k (-gamma)^k / k! = exp(-gamma) (CKS Prop. 5).
    """
    n = a.size
    res = np.empty(n, dtype=bool)
    k = np.ones(n, dtype=np.uint64)
    lim = np.uint64(_TWO63) // b
    pending = np.arange(n)
    while pending.size:
        over = k[pending] >= lim[pending]
        if over.any():
            for i in pending[over].tolist():
                res[i] = _scalar.bern_exp_le1(int(a[i]), int(b[i]), src, int(k[i]))
            pending = pending[~over]
            continue
        kp = k[pending]
        draw = src.below(b[pending] * kp) < a[pending]
        stop = pending[~draw]
        res[stop] = (k[stop] & np.uint64(1)) == 1
        pending = pending[draw]
        k[pending] += np.uint64(1)
    return res


def bern_exp(a: U64, b: U64, src: RandomSource) -> B:
    """``Bernoulli(exp(-a[i]/b[i]))`` for any ``a[i] >= 0, b[i] >= 1`` (CKS Algorithm 1).

    exp(-gamma) = exp(-1)^floor(gamma) * exp(-(gamma - floor(gamma))): floor(gamma)
    independent Bernoulli(exp(-1)) trials must all succeed, then one of the remainder.
    """
    n = a.size
    alive = np.ones(n, dtype=bool)
    whole = a // b
    pending = np.flatnonzero(whole > 0)
    ones = np.ones(n, dtype=np.uint64)
    while pending.size:
        ok = bern_exp_le1(ones[: pending.size], ones[: pending.size], src)
        alive[pending[~ok]] = False
        pending = pending[ok]
        whole[pending] -= np.uint64(1)
        pending = pending[whole[pending] > 0]
    idx = np.flatnonzero(alive)
    alive[idx] = bern_exp_le1(a[idx] % b[idx], b[idx], src)
    return alive


def geom_e1(n: int, src: RandomSource) -> U64:
    """Number of successes of Bernoulli(exp(-1)) before the first failure, ``n`` times.

    P[V >= v] = exp(-v): the geometric part of CKS Algorithm 2.
    """
    v = np.zeros(n, dtype=np.uint64)
    pending = np.arange(n)
    ones = np.ones(n, dtype=np.uint64)
    while pending.size:
        ok = bern_exp_le1(ones[: pending.size], ones[: pending.size], src)
        pending = pending[ok]
        v[pending] += np.uint64(1)
    return v


def geom(t: int, j: int, size: int, src: RandomSource) -> I64:
    """``size`` draws of the geometric law P[Y = y] proportional to exp(-y 2^j / t), y >= 0.

    The first half of CKS Algorithm 2: U ~ Unif{0..t-1}, accepted with probability
    exp(-U/t), V ~ geometric (P[V >= v] = e^-v); X = U + tV has P[X = x] proportional to
    e^{-x/t}, and Y = floor(X / 2^j). Requires ``1 <= t < 2^53`` and ``j >= 0``.
    """
    if not (1 <= t < 2**53) or j < 0:
        raise NumericalError(f"geometric sampling needs 1 <= t < 2^53, j >= 0; got t={t}, j={j}")
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    tt = np.uint64(t)
    shift = np.uint64(min(j, 63))
    vmax = np.uint64((_TWO63 - t) // t)
    while pending.size:
        m = pending.size
        u = src.below(np.full(m, tt, dtype=np.uint64))
        d = bern_exp_le1(u, np.full(m, tt, dtype=np.uint64), src)
        idx = pending[d]
        u = u[d]
        v = geom_e1(idx.size, src)
        big = v > vmax
        small = ~big
        y = np.empty(idx.size, dtype=np.int64)
        y[small] = ((u[small] + tt * v[small]) >> shift).astype(np.int64)
        for i in np.flatnonzero(big).tolist():
            y[i] = _scalar.to_int64((int(u[i]) + t * int(v[i])) >> j)
        out[idx] = y
        pending = pending[~d]
    return out


def dlap(t: int, j: int, size: int, src: RandomSource) -> I64:
    """``size`` draws of the discrete Laplace with scale ``t / 2^j`` (CKS Algorithm 2).

    P[Y = y] proportional to exp(-|y| 2^j / t): Y ~ :func:`geom`, B a fair bit; reject if
    B and Y = 0; return (1 - 2B) Y.
    """
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        y = geom(t, j, pending.size, src)
        sign = src.bits(pending.size)
        ok = ~(sign & (y == 0))
        out[pending[ok]] = np.where(sign[ok], -y[ok], y[ok])
        pending = pending[~ok]
    return out


class DGParams:
    """Integer form of CKS Algorithm 3 for ``sigma^2 = S / 2^L`` with proposal scale ``t``.

    Acceptance of a proposal Y is Bernoulli(exp(-gamma)) with
    gamma = (|Y| - sigma^2/t)^2 / (2 sigma^2) = (|Y| c1 - s)^2 / b  (integers, reduced by
    common powers of two). ``sigma2`` is the exact variance parameter as ``(S, L)``.
    """

    __slots__ = ("b", "c1", "s", "sigma2_den_log2", "sigma2_num", "t")

    def __init__(self, sigma2_num: int, sigma2_den_log2: int, t: int) -> None:
        big_s, big_l = sigma2_num, sigma2_den_log2
        c1 = t << big_l
        b = 2 * big_s * (t * t) << big_l
        v = min(_v2(c1), _v2(big_s), _v2(b) // 2)
        self.sigma2_num = big_s
        self.sigma2_den_log2 = big_l
        self.t = t
        self.c1 = c1 >> v
        self.s = big_s >> v
        self.b = b >> (2 * v)


def _v2(x: int) -> int:
    return (x & -x).bit_length() - 1 if x else 10**9


def dgauss_params(sigma2_num: int, sigma2_den_log2: int) -> DGParams:
    """Parameters for sigma^2 = num / 2^den_log2; the proposal scale t is a power of two
    >= sigma, so the integer form reduces to a denominator below 2^56 (checked)."""
    t = 1
    while t * t * (1 << sigma2_den_log2) < sigma2_num:
        t <<= 1
    p = DGParams(sigma2_num, sigma2_den_log2, t)
    if p.b >= 2**56:
        raise NumericalError(f"discrete Gaussian parameters too large for exact sampling: {p.b}")
    return p


def dgauss(p: DGParams, size: int, src: RandomSource) -> I64:
    """``size`` draws of the discrete Gaussian N_Z(0, sigma^2) (CKS Algorithm 3).

    Repeat: Y ~ DLap(t); accept with probability exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2)).
    """
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    c1, s, b = np.int64(p.c1), np.int64(p.s), np.uint64(p.b)
    while pending.size:
        y = dlap(p.t, 0, pending.size, src)
        ay = np.abs(y)
        # |Y| c1 - s without overflow: only when |Y| <= (2^62) // c1
        fits = ay <= (2**62) // p.c1
        x = np.zeros(y.size, dtype=np.int64)
        x[fits] = np.abs(ay[fits] * c1 - s)
        fits &= x <= _SQRT_TWO63
        acc = np.empty(y.size, dtype=bool)
        xf = x[fits].astype(np.uint64)
        acc[fits] = bern_exp(xf * xf, np.full(xf.size, b, dtype=np.uint64), src)
        for i in np.flatnonzero(~fits).tolist():
            xi = abs(int(ay[i]) * p.c1 - p.s)
            acc[i] = _scalar.bern_exp(xi * xi, p.b, src)
        out[pending[acc]] = y[acc]
        pending = pending[~acc]
    return out
