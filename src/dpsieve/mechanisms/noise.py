"""Noise samplers: the functional API used by release and robust statistics.

Every function takes ``rng: numpy.random.Generator | None = None``; ``None`` means the
operating system's cryptographically secure generator (``os.urandom``). Pass a seeded
Generator only for simulations.

Floating-point safety (Mironov 2012). No sampler here produces noise by transforming a
uniform float (``-b log(U)``, Box-Muller), whose output set has holes that depend on the
value being protected once the noise is added in floating point. Instead:

* :func:`discrete_laplace` and :func:`discrete_gaussian` are the exact integer samplers
  of Canonne, Kamath and Steinke (2020), run in integer arithmetic.
* :func:`laplace_noise` and :func:`gaussian_noise` return ``g * Z`` with ``Z`` exact
  discrete Laplace / Gaussian noise on the lattice ``g Z`` (``g`` a power of two). ``g*Z``
  is an exact float. A *release* must put the value on the same lattice first: use
  :func:`snap_to_lattice` (or a mechanism's ``release``), which rounds ``x / g`` to an
  integer, adds ``Z`` in integer arithmetic and only then scales by ``g`` (post-processing).
  The privacy of such a release is that of the integer mechanism with integer sensitivity
  ``ceil(Delta / g)`` (see :mod:`dpsieve.mechanisms.additive`).

Running time depends on the random words and on the sampled noise (rejection rounds),
never on the protected value, which the samplers do not see.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import overload

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, check_positive, fail, fail_private
from dpsieve.mechanisms import _exact, _scalar
from dpsieve.mechanisms._random import RNG, as_source

__all__ = [
    "GAUSSIAN_LATTICE_BITS",
    "LAPLACE_LATTICE_BITS",
    "MAX_DISCRETE_SCALE",
    "MAX_DISCRETE_SIGMA",
    "MIN_DISCRETE_SIGMA",
    "SIGMA2_BITS",
    "add_noise_exact",
    "default_granularity",
    "discrete_gaussian",
    "discrete_laplace",
    "gaussian_noise",
    "geometric",
    "laplace_noise",
    "lattice_to_float",
    "sampled_sigma2",
    "snap_exact",
    "snap_to_lattice",
]

#: Largest discrete Laplace scale accepted (keeps every draw well inside int64).
MAX_DISCRETE_SCALE = 2.0**50
#: Largest and smallest discrete Gaussian sigma accepted.
MAX_DISCRETE_SIGMA = 2.0**26
MIN_DISCRETE_SIGMA = 2.0**-16
#: Bits of precision of the sampled discrete Gaussian variance (rounded *up*, see below).
SIGMA2_BITS = 25
#: Bits between the noise scale and the default lattice step: Laplace, Gaussian.
LAPLACE_LATTICE_BITS = 40
GAUSSIAN_LATTICE_BITS = 20

#: Up to this many draws the scalar Python-int samplers are used (less numpy overhead);
#: both implement the same CKS algorithms exactly.
SMALL = 4

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def _size(size: int | None, owner: str) -> int:
    return 1 if size is None else check_int("size", size, owner, minimum=0)


def _scale_parts(scale: float, owner: str) -> tuple[int, int]:
    """scale = t / 2^j exactly (every finite float is a dyadic rational)."""
    scale = check_positive("scale", scale, owner)
    if not scale <= MAX_DISCRETE_SCALE:
        raise fail("scale", owner, f"a finite float in (0, {MAX_DISCRETE_SCALE}]", scale)
    fr = Fraction(scale)
    return fr.numerator, fr.denominator.bit_length() - 1


@overload
def discrete_laplace(scale: float, size: None = None, rng: RNG = None) -> int: ...
@overload
def discrete_laplace(scale: float, size: int, rng: RNG = None) -> I64: ...
def discrete_laplace(scale: float, size: int | None = None, rng: RNG = None) -> int | I64:
    """Exact draws of the discrete Laplace: P[Z = z] proportional to exp(-|z| / scale).

    CKS 2020, Algorithm 2, with the float ``scale`` converted exactly to a rational
    ``t / 2^j``. No approximation: the distribution is exactly the stated one.
    """
    owner = "discrete_laplace"
    n = _size(size, owner)
    t, j = _scale_parts(scale, owner)
    src = as_source(rng, owner)
    if n <= SMALL:
        out = np.array([_scalar.dlap(t, 1 << j, src) for _ in range(n)], dtype=np.int64)
    else:
        out = _exact.dlap(t, j, n, src)
    return int(out[0]) if size is None else out


@overload
def geometric(scale: float, size: None = None, rng: RNG = None) -> int: ...
@overload
def geometric(scale: float, size: int, rng: RNG = None) -> I64: ...
def geometric(scale: float, size: int | None = None, rng: RNG = None) -> int | I64:
    """Exact one-sided geometric draws: P[Y = y] = (1 - a) a^y, y >= 0, a = exp(-1/scale).

    The first half of CKS 2020 Algorithm 2 (no approximation). The two-sided geometric
    mechanism of Ghosh et al. (2009) is :func:`discrete_laplace`.
    """
    owner = "geometric"
    n = _size(size, owner)
    t, j = _scale_parts(scale, owner)
    src = as_source(rng, owner)
    if n <= SMALL:
        out = np.array([_scalar.geom(t, 1 << j, src) for _ in range(n)], dtype=np.int64)
    else:
        out = _exact.geom(t, j, n, src)
    return int(out[0]) if size is None else out


def sampled_sigma2(sigma: float, owner: str = "discrete_gaussian") -> Fraction:
    """The variance parameter the discrete Gaussian sampler really uses for ``sigma``.

    sigma^2 rounded *up* to ``N 2^k`` with ``N`` of ``SIGMA2_BITS`` bits (``SIGMA2_BITS +
    floor(log2 sigma)`` bits when sigma < 1), a relative increase below ``2^-(bits - 1)``
    (2^-24 for sigma >= 1), which keeps CKS Algorithm 3 in 64-bit integers. The sampled
    distribution is exactly N_Z(0, sampled_sigma2); mechanisms account for this value,
    not the requested one, so the rounding costs nothing in soundness.
    """
    sigma = check_positive("sigma", sigma, owner)
    if not MIN_DISCRETE_SIGMA <= sigma <= MAX_DISCRETE_SIGMA:
        raise fail(
            "sigma", owner, f"a float in [{MIN_DISCRETE_SIGMA}, {MAX_DISCRETE_SIGMA}]", sigma
        )
    bits = SIGMA2_BITS + min(0, math.frexp(sigma)[1] - 1)
    s2 = Fraction(sigma) ** 2
    k = s2.numerator.bit_length() - s2.denominator.bit_length() - bits
    num = math.ceil(s2 / Fraction(2) ** k)
    return Fraction(num) * Fraction(2) ** k


@overload
def discrete_gaussian(sigma: float, size: None = None, rng: RNG = None) -> int: ...
@overload
def discrete_gaussian(sigma: float, size: int, rng: RNG = None) -> I64: ...
def discrete_gaussian(sigma: float, size: int | None = None, rng: RNG = None) -> int | I64:
    """Exact draws of N_Z(0, s2): P[Z = z] proportional to exp(-z^2 / (2 s2)).

    CKS 2020, Algorithm 3, with ``s2 = sampled_sigma2(sigma) >= sigma^2`` (relative
    difference below 2^-24; it errs towards more noise).
    """
    owner = "discrete_gaussian"
    n = _size(size, owner)
    s2 = sampled_sigma2(sigma, owner)
    src = as_source(rng, owner)
    if n <= SMALL:
        num, den = s2.numerator, s2.denominator
        out = np.array([_scalar.dgauss(num, den, src) for _ in range(n)], dtype=np.int64)
    else:
        params = _exact.dgauss_params(s2.numerator, s2.denominator.bit_length() - 1)
        out = _exact.dgauss(params, n, src)
    return int(out[0]) if size is None else out


def default_granularity(scale: float, bits: int = LAPLACE_LATTICE_BITS) -> float:
    """The default lattice step: the power of two ``2^(floor(log2 scale) - bits)``
    (``bits`` is 40 for :func:`laplace_noise`, 20 for :func:`gaussian_noise`)."""
    scale = check_positive("scale", scale, "default_granularity")
    # never below the smallest positive float (a subnormal scale would give 0): a coarser
    # lattice is still exact, only the snapping error grows
    return max(math.ldexp(1.0, math.frexp(scale)[1] - 1 - bits), math.ulp(0.0))


def _granularity(g: float | None, scale: float, owner: str, bits: int) -> float:
    if g is None:
        return default_granularity(scale, bits)
    g = check_positive("granularity", g, owner)
    m, _ = math.frexp(g)
    if m != 0.5:
        raise fail("granularity", owner, "a power of two (e.g. 2.0**-20)", g)
    return g


@overload
def laplace_noise(
    scale: float, size: None = None, rng: RNG = None, *, granularity: float | None = None
) -> float: ...
@overload
def laplace_noise(
    scale: float, size: int, rng: RNG = None, *, granularity: float | None = None
) -> F64: ...
def laplace_noise(
    scale: float, size: int | None = None, rng: RNG = None, *, granularity: float | None = None
) -> float | F64:
    """Laplace noise on the lattice ``g Z``: ``g * DLap(scale / g)`` (exact; see module doc).

    ``g`` (``granularity``, a power of two) defaults to :func:`default_granularity`. As
    ``g -> 0`` this converges to Laplace(scale); for a release, add it with
    :func:`snap_to_lattice`, never to an unrounded float.
    """
    owner = "laplace_noise"
    scale = check_positive("scale", scale, owner)
    g = _granularity(granularity, scale, owner, LAPLACE_LATTICE_BITS)
    z = discrete_laplace(scale / g, size if size is not None else 1, rng)
    out: F64 = z.astype(np.float64) * g
    return float(out[0]) if size is None else out


@overload
def gaussian_noise(
    sigma: float, size: None = None, rng: RNG = None, *, granularity: float | None = None
) -> float: ...
@overload
def gaussian_noise(
    sigma: float, size: int, rng: RNG = None, *, granularity: float | None = None
) -> F64: ...
def gaussian_noise(
    sigma: float, size: int | None = None, rng: RNG = None, *, granularity: float | None = None
) -> float | F64:
    """Gaussian noise on the lattice ``g Z``: ``g * N_Z(0, (sigma/g)^2)`` (exact draws).

    The variance parameter is ``sampled_sigma2(sigma / g) g^2 >= sigma^2``.
    """
    owner = "gaussian_noise"
    sigma = check_positive("sigma", sigma, owner)
    g = _granularity(granularity, sigma, owner, GAUSSIAN_LATTICE_BITS)
    z = discrete_gaussian(sigma / g, size if size is not None else 1, rng)
    out: F64 = z.astype(np.float64) * g
    return float(out[0]) if size is None else out


def snap_to_lattice(value: npt.ArrayLike, granularity: float) -> npt.NDArray[np.int64]:
    """``floor(x / g + 1/2)`` for each x, as int64 (x / g is exact: g is a power of two).

    Computed as ``floor(a) + [a - floor(a) >= 1/2]`` (both steps exact in floating point),
    which is non-decreasing and commutes with integer shifts, so values at distance at most
    ``Delta`` snap to integers at distance at most ``ceil(Delta / g)``.

    Refuses ``|x / g| >= 2^62``: use it only where a **public** bound keeps every value
    inside that range (a failure must never depend on private data); otherwise use
    :func:`snap_exact`. The message never shows the values (they may be private).
    """
    g = _granularity(granularity, 1.0, "snap_to_lattice", 0)
    a = np.asarray(value, dtype=np.float64) / g
    if not np.all(np.isfinite(a)) or np.any(np.abs(a) >= 2.0**62):
        raise fail_private("value", "snap_to_lattice", f"finite with |value / {g}| < 2^62",
                           value)
    fl = np.floor(a)
    out: npt.NDArray[np.int64] = (fl + (a - fl >= 0.5)).astype(np.int64)
    return out


#: Below this magnitude (in lattice units) the vectorised int64 path is exact with room
#: for adding noise (|noise| < 2^62 is checked separately).
_FAST = 2.0**61


def snap_exact(value: npt.ArrayLike, granularity: float, owner: str = "snap_exact"
               ) -> npt.NDArray[np.object_]:
    """``floor(x / g + 1/2)`` for each finite float x, as exact Python integers (any size).

    The same map as :func:`snap_to_lattice` (monotone, commutes with integer shifts), with
    no range limit: a value's magnitude can never make a release fail or wrap, so no
    private value decides an error. Non-finite values are refused
    with a redacted message. Values with ``|x / g| < 2^61`` take a vectorised int64 path,
    the rest exact :class:`~fractions.Fraction` arithmetic; the result is the same, only
    the running time differs (a timing channel in the magnitude of huge values, stated).
    """
    g = _granularity(granularity, 1.0, owner, 0)
    x = np.asarray(value, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(x)):
        raise fail_private("value", owner, "finite floats (no NaN or infinity)", value)
    with np.errstate(over="ignore"):
        a = x / g
    small = np.abs(a) < _FAST
    fl = np.floor(np.where(small, a, 0.0))
    out = (fl + (np.where(small, a, 0.0) - fl >= 0.5)).astype(np.int64).astype(object)
    if not np.all(small):
        fg = Fraction(g)
        half = Fraction(1, 2)
        for i in np.flatnonzero(~small).tolist():
            out[i] = math.floor(Fraction(float(x[i])) / fg + half)
    return out


def lattice_to_float(z: npt.ArrayLike, granularity: float) -> F64:
    """``g z`` for integers z (Python ints of any size or int64), as the nearest floats,
    saturating at +-``sys.float_info.max`` (post-processing of the integer release:
    it depends on the noisy integer only, so it costs no privacy)."""
    gf = _granularity(granularity, 1.0, "lattice_to_float", 0)
    g = Fraction(gf)
    flat = np.asarray(z, dtype=object).reshape(-1)
    ints = [int(v) for v in flat.tolist()]
    if all(-(2**53) < v < 2**53 for v in ints):
        # exact integers times a power of two: IEEE rounds the product correctly, the same
        # float as the exact path below (which also handles overflow)
        with np.errstate(over="ignore"):
            fast = np.asarray(ints, dtype=np.float64) * gf
        if np.all(np.isfinite(fast)):
            return fast
    top = float(np.finfo(np.float64).max)
    out = np.empty(flat.size, dtype=np.float64)
    for i, v in enumerate(ints):
        q = Fraction(int(v)) * g
        try:
            out[i] = float(q)
        except OverflowError:
            out[i] = top if q > 0 else -top
    return out


def add_noise_exact(snapped: npt.NDArray[np.object_], noise: npt.ArrayLike
                    ) -> npt.NDArray[np.object_]:
    """``snapped + noise`` in exact Python integers (never wraps)."""
    n = np.asarray(noise).reshape(-1)
    return np.array([int(a) + int(b) for a, b in zip(snapped.tolist(), n.tolist(),
                                                     strict=True)], dtype=object)
