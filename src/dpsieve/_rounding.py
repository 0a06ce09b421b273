"""Directed rounding: the one home of every "round up" / "round down" on a privacy parameter.

Soundness asks each privacy parameter to be rounded in a stated direction: a query's cost
(eps, delta, mu, rho, a loss) *up*, a budget *down*. Round-to-nearest is wrong half of the
time (``1.0 / 3.0`` is below 1/3, so ``PLD.gaussian(3.0)`` would get a mu below the truth).
Every function here returns a float on the requested side of the exact real result:

* exact rationals (``Fraction``): :func:`round_up` / :func:`round_down` (also accept ints
  and floats), and the exact operations :func:`div_up`, :func:`div_down`, :func:`mul_up`,
  :func:`mul_down`, :func:`add_up`, :func:`add_down`, :func:`sub_up`, :func:`sub_down`,
  :func:`sqrt_up`, :func:`sqrt_down`, :func:`hypot_up`, :func:`hypot_down` -- computed in
  exact rational arithmetic, then rounded once (tight: the result is the adjacent float);
* transcendental functions: :func:`exp_up`, :func:`exp_down`, :func:`log_up`,
  :func:`log_down`, :func:`expm1_up`, :func:`log1p_up`, ... -- libm (glibc) is accurate to
  < 1 ulp, so two ulps of margin are taken (an assumption, stated once, here);
  :func:`exp_bracket` / :func:`exp_bracket_fraction` bracket e^x as floats / rationals;
* one ulp: :func:`next_up` / :func:`next_down` (``math.nextafter``), :func:`toward_zero`
  (a magnitude rounded down by one ulp), their array forms :func:`next_up_array` /
  :func:`next_down_array`, and :func:`ulps_up` / :func:`ulps_down` for n ulps;
  :func:`rel_up` / :func:`rel_down` move a value by a relative margin (and one more ulp)
  -- for results with a known error bound.

Conventions: ``up(x) >= x`` and ``down(x) <= x`` for every input, including 0, subnormals and
infinities (inf stays inf, -inf stays -inf; NaN is refused with ``ValueError``). Nothing here
imports the rest of dpsieve, so every layer may use it.
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from numbers import Rational
from typing import Any

__all__ = [
    "add_down",
    "add_up",
    "div_down",
    "div_up",
    "exp_bracket",
    "exp_bracket_fraction",
    "exp_down",
    "exp_up",
    "expm1_down",
    "expm1_up",
    "hypot_down",
    "hypot_up",
    "log1p_down",
    "log1p_up",
    "log_down",
    "log_up",
    "mul_down",
    "mul_up",
    "next_down",
    "next_down_array",
    "next_up",
    "next_up_array",
    "rel_down",
    "rel_up",
    "round_down",
    "round_up",
    "sqrt_down",
    "sqrt_up",
    "sub_down",
    "sub_up",
    "toward_zero",
    "ulps_down",
    "ulps_up",
]

Number = Fraction | int | float
#: Ulps of margin taken around a libm result (glibc: < 1 ulp for exp, log, expm1, log1p).
LIBM_ULPS = 2


def _exact(x: Number) -> Fraction:
    if isinstance(x, float):
        if math.isnan(x) or math.isinf(x):
            raise ValueError(f"directed rounding needs a finite number, got {x!r}")
        return Fraction(x)
    if isinstance(x, (Fraction, int, Rational)):
        return Fraction(x)
    raise TypeError(f"directed rounding needs a Fraction, int or float, got {x!r}")


def _check(x: float) -> float:
    x = float(x)
    if math.isnan(x):
        raise ValueError("directed rounding of NaN")
    return x


def _in_range(e: Fraction, finite: bool) -> None:
    if finite:
        float(e)  # OverflowError past the largest float


# ----------------------------------------------------------------------------- ulps
def next_up(x: float) -> float:
    """The least float > x (inf stays inf)."""
    return math.nextafter(_check(x), math.inf)


def next_down(x: float) -> float:
    """The greatest float < x (-inf stays -inf)."""
    return math.nextafter(_check(x), -math.inf)


def toward_zero(x: float) -> float:
    """The float next to x towards 0: a magnitude rounded down (0 stays 0)."""
    return math.nextafter(_check(x), 0.0)


def next_up_array(x: Any) -> Any:
    """Each entry's least float above it, elementwise (inf stays inf, NaN stays NaN: an
    array may hold entries its caller masks)."""
    import numpy as np

    return np.nextafter(x, np.inf)


def next_down_array(x: Any) -> Any:
    """Each entry's greatest float below it, elementwise (-inf stays -inf, NaN stays NaN)."""
    import numpy as np

    return np.nextafter(x, -np.inf)


def ulps_up(x: float, n: int) -> float:
    """x moved up by n ulps."""
    x = _check(x)
    for _ in range(n):
        x = math.nextafter(x, math.inf)
    return x


def ulps_down(x: float, n: int) -> float:
    """x moved down by n ulps."""
    x = _check(x)
    for _ in range(n):
        x = math.nextafter(x, -math.inf)
    return x


def rel_up(x: float, rel: float, abs_: float = 0.0) -> float:
    """A float >= x + rel |x| + abs_ (for a value whose error is at most that)."""
    x = _check(x)
    if math.isinf(x):
        return x
    return math.nextafter(x + rel * abs(x) + abs_, math.inf)


def rel_down(x: float, rel: float, abs_: float = 0.0) -> float:
    """A float <= x - rel |x| - abs_."""
    x = _check(x)
    if math.isinf(x):
        return x
    return math.nextafter(x - rel * abs(x) - abs_, -math.inf)


# ----------------------------------------------------------------------------- exact rationals
def round_up(q: Number, *, finite: bool = False) -> float:
    """The least float >= q (q exact: Fraction, int or float). Overflow gives inf (with
    ``finite``: raises OverflowError, for callers that refuse such a parameter)."""
    if isinstance(q, float):
        return _check(q)
    e = _exact(q)
    _in_range(e, finite)
    try:
        f = float(e)
    except OverflowError:
        return math.inf if e > 0 else -sys.float_info.max
    if Fraction(f) < e:
        f = math.nextafter(f, math.inf)
    return f


def round_down(q: Number) -> float:
    """The greatest float <= q (q exact). Overflow gives -inf / max float."""
    if isinstance(q, float):
        return _check(q)
    e = _exact(q)
    try:
        f = float(e)
    except OverflowError:
        return sys.float_info.max if e > 0 else -math.inf
    if Fraction(f) > e:
        f = math.nextafter(f, -math.inf)
    return f


def div_up(a: Number, b: Number) -> float:
    """a / b rounded up (exact rational division; b != 0)."""
    return round_up(_exact(a) / _exact(b))


def div_down(a: Number, b: Number) -> float:
    """a / b rounded down."""
    return round_down(_exact(a) / _exact(b))


def mul_up(a: Number, b: Number) -> float:
    """a * b rounded up."""
    return round_up(_exact(a) * _exact(b))


def mul_down(a: Number, b: Number) -> float:
    """a * b rounded down."""
    return round_down(_exact(a) * _exact(b))


def add_up(*xs: Number) -> float:
    """The sum rounded up (exact)."""
    return round_up(sum((_exact(x) for x in xs), Fraction(0)))


def add_down(*xs: Number) -> float:
    """The sum rounded down (exact)."""
    return round_down(sum((_exact(x) for x in xs), Fraction(0)))


def sub_up(a: Number, b: Number) -> float:
    """a - b rounded up."""
    return round_up(_exact(a) - _exact(b))


def sub_down(a: Number, b: Number) -> float:
    """a - b rounded down."""
    return round_down(_exact(a) - _exact(b))


def _ratio(q: Number) -> tuple[int, int]:
    """``q`` as integers ``(n, d)``, ``d > 0`` (the value of :func:`_exact` without building
    a normalised Fraction)."""
    if isinstance(q, float):
        if math.isnan(q) or math.isinf(q):
            raise ValueError(f"directed rounding needs a finite number, got {q!r}")
        return q.as_integer_ratio()
    if not isinstance(q, (Fraction, int, Rational)):
        raise TypeError(f"directed rounding needs a Fraction, int or float, got {q!r}")
    return int(q.numerator), int(q.denominator)


def _pow2_float(f: int, k: int, up: bool) -> float:
    """The greatest (``up``: least) float <= (>=) ``f / 2^k``, ``f >= 0``: one correctly
    rounded integer division, checked in integers and moved one ulp if it went the wrong
    way. Past the largest float: the largest float (``up``: inf), as :func:`round_down`."""
    try:
        t = f / (1 << k) if k >= 0 else float(f << -k)
    except OverflowError:
        return math.inf if up else sys.float_info.max
    if math.isinf(t):
        return math.inf if up else sys.float_info.max
    a, b = t.as_integer_ratio()
    num, den = (f * b, 1 << k) if k >= 0 else ((f << -k) * b, 1)
    if up and a * den < num:
        t = math.nextafter(t, math.inf)
    elif not up and a * den > num:
        t = math.nextafter(t, -math.inf)
    return t


def _isqrt_bracket(n: int, d: int) -> tuple[int, int]:
    """``(f, k)`` with ``f / 2^k <= sqrt(n/d) <= (f + 1) / 2^k`` (``f = isqrt`` of the
    scaled value, within 2^-80 of it)."""
    k = 82 - (n.bit_length() - d.bit_length()) // 2
    if k >= 0:
        return math.isqrt((n << (2 * k)) // d), k
    return math.isqrt(n // (d << (-2 * k))), k


def _square_at_most(s: float, n: int, d: int) -> bool:
    """``s^2 <= n/d`` exactly, in integers (``s`` a float >= 0, ``d > 0``): no rational
    normalisation, the same answer as comparing ``Fraction(s) ** 2``; False for inf."""
    if not math.isfinite(s):
        return False
    a, b = s.as_integer_ratio()
    return a * a * d <= n * b * b


def _square_below(s: float, n: int, d: int) -> bool:
    """``s^2 < n/d`` exactly, in integers (as :func:`_square_at_most`)."""
    a, b = s.as_integer_ratio()
    return a * a * d < n * b * b


def sqrt_up(q: Number, *, finite: bool = False) -> float:
    """The least float s with s^2 >= q (q >= 0, exact). ``finite``: a q past the largest
    float raises OverflowError (for callers that refuse such a parameter) instead of
    giving a result near or at inf. Integer arithmetic throughout (the result is that of
    the rational definition)."""
    n, d = _ratio(q)
    if n < 0:
        raise ValueError(f"sqrt_up of a negative number: {q!r}")
    if finite:
        _ = n / d  # OverflowError past the largest float
    if n == 0:
        return 0.0
    f, k = _isqrt_bracket(n, d)
    s = _pow2_float(f + 1, k, up=True)
    while s > 0 and not _square_below(math.nextafter(s, 0.0), n, d):
        s = math.nextafter(s, 0.0)
    return s


def sqrt_down(q: Number, *, finite: bool = False) -> float:
    """The greatest float s with s^2 <= q (q >= 0, exact); ``finite`` as in
    :func:`sqrt_up`. Integer arithmetic throughout."""
    n, d = _ratio(q)
    if n < 0:
        raise ValueError(f"sqrt_down of a negative number: {q!r}")
    if finite:
        _ = n / d  # OverflowError past the largest float
    if n == 0:
        return 0.0
    f, k = _isqrt_bracket(n, d)
    s = _pow2_float(f, k, up=False)
    while math.isfinite(s) and _square_at_most(math.nextafter(s, math.inf), n, d):
        s = math.nextafter(s, math.inf)
    return s


def hypot_up(*xs: Number) -> float:
    """sqrt(sum x_i^2) rounded up (e.g. composing Gaussian mus: G_a (+) G_b = G_hypot)."""
    return sqrt_up(sum((_exact(x) ** 2 for x in xs), Fraction(0)))


def hypot_down(*xs: Number) -> float:
    """sqrt(sum x_i^2) rounded down."""
    return sqrt_down(sum((_exact(x) ** 2 for x in xs), Fraction(0)))


# ----------------------------------------------------------------------------- libm with margin
def exp_bracket(x: float) -> tuple[float, float]:
    """(lo, hi) floats with lo <= e^x <= hi: two ulps either side, exact for x = 0;
    (max float, inf) beyond the float range, (0, least subnormal) below it."""
    x = _check(x)
    if x == 0.0:
        return 1.0, 1.0
    if x == math.inf:
        return sys.float_info.max, math.inf
    if x == -math.inf:
        return 0.0, 0.0
    if x > 709.0:
        e = math.exp(x) if x < 709.78 else math.inf
        if math.isinf(e):
            return sys.float_info.max, math.inf
    else:
        e = math.exp(x)
    lo, hi = e, e
    for _ in range(LIBM_ULPS):
        lo, hi = math.nextafter(lo, 0.0), math.nextafter(hi, math.inf)
    # e^x >= 1 exactly when x >= 0 (a bracket crossing 1 would flip the sign of x)
    return (max(lo, 1.0), hi) if x > 0 else (max(lo, 0.0), min(hi, 1.0))


def exp_bracket_fraction(x: float) -> tuple[Fraction, Fraction]:
    """Rationals (lo, hi) with lo <= e^x <= hi for any finite x: the float bracket where it
    is finite and positive, else powers of two 2^(floor(x/ln 2) - 2) and 2^(ceil(x/ln 2) + 2)
    (the +-2 covers the rounding of x/ln 2)."""
    x = _check(x)
    if abs(x) <= 700.0:
        lo, hi = exp_bracket(x)
        return Fraction(lo), Fraction(hi)
    k = x / math.log(2.0)
    return Fraction(2) ** (math.floor(k) - 2), Fraction(2) ** (math.ceil(k) + 2)


def exp_up(x: float) -> float:
    """A float >= e^x (inf beyond the float range)."""
    return exp_bracket(x)[1]


def exp_down(x: float) -> float:
    """A float <= e^x (max float beyond the range, 0 below it)."""
    return exp_bracket(x)[0]


def log_up(x: float) -> float:
    """A float >= log(x) for x > 0 (exact 0 at x = 1; inf at inf)."""
    x = _check(x)
    if not x > 0:
        raise ValueError(f"log_up needs x > 0, got {x!r}")
    if x == 1.0 or math.isinf(x):
        return 0.0 if x == 1.0 else math.inf
    v = ulps_up(math.log(x), LIBM_ULPS)
    return min(v, 0.0) if x < 1.0 else v


def log_down(x: float) -> float:
    """A float <= log(x) for x > 0 (exact 0 at x = 1)."""
    x = _check(x)
    if not x > 0:
        raise ValueError(f"log_down needs x > 0, got {x!r}")
    if x == 1.0 or math.isinf(x):
        return 0.0 if x == 1.0 else math.inf
    v = ulps_down(math.log(x), LIBM_ULPS)
    return max(v, 0.0) if x > 1.0 else v


def expm1_up(x: float) -> float:
    """A float >= e^x - 1."""
    x = _check(x)
    if x == 0.0:
        return 0.0
    try:
        v = math.expm1(x)
    except OverflowError:
        return math.inf
    return ulps_up(v, LIBM_ULPS)


def expm1_down(x: float) -> float:
    """A float <= e^x - 1 (>= -1)."""
    x = _check(x)
    if x == 0.0:
        return 0.0
    try:
        v = math.expm1(x)
    except OverflowError:
        return sys.float_info.max
    return max(ulps_down(v, LIBM_ULPS), -1.0)


def log1p_up(x: float) -> float:
    """A float >= log(1 + x) for x > -1."""
    x = _check(x)
    if not x > -1.0:
        raise ValueError(f"log1p_up needs x > -1, got {x!r}")
    if x == 0.0 or math.isinf(x):
        return x
    return ulps_up(math.log1p(x), LIBM_ULPS)


def log1p_down(x: float) -> float:
    """A float <= log(1 + x) for x > -1."""
    x = _check(x)
    if not x > -1.0:
        raise ValueError(f"log1p_down needs x > -1, got {x!r}")
    if x == 0.0 or math.isinf(x):
        return x
    return ulps_down(math.log1p(x), LIBM_ULPS)
