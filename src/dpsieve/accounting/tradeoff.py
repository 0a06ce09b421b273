"""Piecewise-linear tradeoff curves with exact composition (rational arithmetic).

A tradeoff curve f (Dong, Roth, Su 2022; Regehr et al. 2026, Prop. 7) is convex,
non-increasing on [0, 1] with f(alpha) <= 1 - alpha. A piecewise-linear one is the same
object as a finite PLD: a segment of width w and slope -m is an atom of P-mass w at
privacy loss z = -log m (m = 0: the +inf atom); f(0) = E[e^-Z] = 1 - (Q's singular mass).
Neyman-Pearson orders the atoms by loss ascending, i.e. steepest segment first.

* composition (Regehr et al. 2026, Prop. 6 / section 6): pair every segment of f1 with
  every segment of f2; widths multiply, slopes multiply (-m1 m2), segments are ordered
  by m1 m2 descending and f(0) = f1(0) f2(0), i.e. 1 - f(0) = d1 + d2 - d1 d2;
* hockey-stick curve (Prop. 9, h(x) = 1 + (f^-1)^*(-x)): h(x) = max_i (1 - a_i - x b_i)
  over the breakpoints (a_i, b_i), because h(x) = sup_E P(E) - x Q(E).

Breakpoints are ``fractions.Fraction``: validation, composition, order and exact
evaluation are exact for the curve as stored. Floats enter only at the edges, each with
a stated direction: constructors from e^eps or e^-z bracket the exponential outward
(``pessimistic=True``: the stored curve lies on or below the true one), and the float
evaluations add a margin of 2^-48 (a bound on their few-ulp rounding error) on the side
requested by ``upper``.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_closed, check_int, check_nonnegative, fail
from dpsieve.accounting.families import exp_bracket, exp_bracket_fraction, round_fraction
from dpsieve.errors import NumericalError

__all__ = ["PiecewiseLinearTradeoff"]

FloatArray = npt.NDArray[np.float64]
_OWNER = "PiecewiseLinearTradeoff"
_MARGIN = 2.0**-48
_SUM_TOL = Fraction(1, 10**9)


def _frac(name: str, owner: str, v: Any) -> Fraction:
    if isinstance(v, Fraction):
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
        raise fail(name, owner, "finite real numbers (int, float or Fraction)", v)
    if not math.isfinite(float(v)):
        raise fail(name, owner, "finite real numbers (int, float or Fraction)", v)
    return Fraction(int(v)) if isinstance(v, (int, np.integer)) else Fraction(float(v))


def _fracs(name: str, owner: str, vs: Iterable[Any]) -> list[Fraction]:
    try:
        items = list(vs)
    except TypeError:
        raise fail(name, owner, "a sequence of finite real numbers", vs) from None
    return [_frac(name, owner, v) for v in items]


def _exp_neg(z: float, upper: bool) -> Fraction:
    """A rational at or above (``upper``) / at or below e^-z (two ulps outward)."""
    if z == math.inf:
        return Fraction(0)
    lo, hi = exp_bracket_fraction(-z)
    return hi if upper else lo


@dataclass(frozen=True, slots=True)
class PiecewiseLinearTradeoff:
    """A convex, non-increasing, piecewise-linear tradeoff curve on [0, 1] (immutable).

    Given by breakpoints ``alphas`` (strictly increasing from 0 to 1) and ``betas``
    (values in [0, 1], last one 0), with slopes non-decreasing. These conditions imply
    f(alpha) <= (1 - alpha) f(0) <= 1 - alpha. Stored canonically (collinear breakpoints
    removed) as Fractions, so ``==`` is equality of curves. Order: ``a.leq(b)`` (also
    ``a <= b``) is the Blackwell order of the PLDs, i.e. f_a >= f_b pointwise.
    """

    alphas: tuple[Fraction, ...]
    betas: tuple[Fraction, ...]

    def __post_init__(self) -> None:
        a = _fracs("alphas", _OWNER, self.alphas)
        b = _fracs("betas", _OWNER, self.betas)
        if len(a) < 2 or len(a) != len(b):
            raise fail(
                "alphas", _OWNER, "at least two breakpoints, as many as 'betas'", self.alphas
            )
        if a[0] != 0 or a[-1] != 1 or any(x >= y for x, y in itertools.pairwise(a)):
            raise fail("alphas", _OWNER, "strictly increasing from 0 to 1", self.alphas)
        if any(not (0 <= v <= 1) for v in b) or b[-1] != 0:
            raise fail("betas", _OWNER, "values in [0, 1] ending at 0", self.betas)
        slopes = [(b[i + 1] - b[i]) / (a[i + 1] - a[i]) for i in range(len(a) - 1)]
        if any(s > 0 for s in slopes):
            raise fail("betas", _OWNER, "non-increasing values", self.betas)
        if any(s > t for s, t in itertools.pairwise(slopes)):
            raise fail("betas", _OWNER, "a convex curve (non-decreasing slopes)", self.betas)
        keep = [0] + [i + 1 for i in range(len(slopes) - 1) if slopes[i] != slopes[i + 1]]
        keep.append(len(a) - 1)
        object.__setattr__(self, "alphas", tuple(a[i] for i in keep))
        object.__setattr__(self, "betas", tuple(b[i] for i in keep))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def identity(cls) -> PiecewiseLinearTradeoff:
        """f(alpha) = 1 - alpha: the PLD Id (no privacy loss); the unit of composition."""
        return cls((Fraction(0), Fraction(1)), (Fraction(1), Fraction(0)))

    @classmethod
    def infinity(cls) -> PiecewiseLinearTradeoff:
        """f = 0: perfectly distinguishable (the PLD with all mass at +inf); absorbing."""
        return cls((Fraction(0), Fraction(1)), (Fraction(0), Fraction(0)))

    @classmethod
    def from_segments(
        cls, widths: Sequence[Any], magnitudes: Sequence[Any]
    ) -> PiecewiseLinearTradeoff:
        """The curve with segments of the given widths (> 0, summing to exactly 1) and
        slopes -magnitudes (>= 0, any order; sorted steepest first, equal ones merged);
        f(0) = sum w m must be <= 1 (E[e^-Z] <= 1)."""
        ws = _fracs("widths", "from_segments", widths)
        ms = _fracs("magnitudes", "from_segments", magnitudes)
        if len(ws) != len(ms) or not ws:
            raise fail(
                "magnitudes",
                "from_segments",
                "a non-empty sequence as long as 'widths'",
                magnitudes,
            )
        if any(not (w > 0) for w in ws) or sum(ws) != 1:
            raise fail("widths", "from_segments", "positive numbers summing to exactly 1", widths)
        if any(m < 0 for m in ms):
            raise fail("magnitudes", "from_segments", "numbers >= 0", magnitudes)
        return cls._build(_merge(zip(ms, ws, strict=True)))

    @classmethod
    def _build(cls, merged: dict[Fraction, Fraction]) -> PiecewiseLinearTradeoff:
        segs = sorted(((m, w) for m, w in merged.items() if w > 0), reverse=True)
        f0 = sum((w * m for m, w in segs), Fraction(0))
        if f0 > 1:
            raise fail("magnitudes", "from_segments", "slopes with f(0) = sum w m <= 1", f0)
        alphas, betas = [Fraction(0)], [f0]
        for m, w in segs:
            alphas.append(alphas[-1] + w)
            betas.append(betas[-1] - w * m)
        return cls(tuple(alphas), tuple(betas))

    @classmethod
    def from_approx_dp(
        cls, eps: float, delta: float, *, pessimistic: bool = True
    ) -> PiecewiseLinearTradeoff:
        """The tradeoff curve of R_{eps,delta}: breakpoints (0, 1-d), (c, c), (1-d, 0),
        (1, 0) with c = (1-d)/(1+E), i.e. slopes -E and -1/E. E = e^eps is replaced by a
        float bracket: ``pessimistic=True`` uses E >= e^eps, giving R_{log E, delta}, which
        dominates R_{eps,delta} (curve on or below); ``False`` uses E <= e^eps."""
        owner = "from_approx_dp"
        eps = check_nonnegative("eps", eps, owner, allow_inf=True)
        d = Fraction(check_in_closed("delta", delta, 0.0, 1.0, owner))
        if eps == math.inf or d == 1:
            return cls.infinity()
        lo, hi = exp_bracket_fraction(eps)
        big = hi if pessimistic else lo
        c = (1 - d) / (1 + big)
        merged = _merge([(big, c), (1 / big, c * big), (Fraction(0), d)])
        return cls._build(merged)

    @classmethod
    def from_distributions(cls, p: Sequence[float], q: Sequence[float]) -> PiecewiseLinearTradeoff:
        """The exact Neyman-Pearson tradeoff curve of T(P, Q) for finite P, Q (same length,
        non-negative, each summing to 1 within 1e-9; both are normalised exactly in
        Fraction). Outcome i with p_i > 0 is a segment of width p_i, slope -q_i/p_i."""
        owner = "from_distributions"
        ps, qs = _fracs("p", owner, p), _fracs("q", owner, q)
        if len(ps) != len(qs) or not ps:
            raise fail("q", owner, "a non-empty sequence as long as 'p'", q)
        for name, v, raw in (("p", ps, p), ("q", qs, q)):
            if any(x < 0 for x in v) or abs(sum(v, Fraction(0)) - 1) > _SUM_TOL:
                raise fail(name, owner, "non-negative probabilities summing to 1", raw)
        sp, sq = sum(ps, Fraction(0)), sum(qs, Fraction(0))
        merged = _merge(
            (qi / sq / (pi / sp), pi / sp) for pi, qi in zip(ps, qs, strict=True) if pi > 0
        )
        return cls._build(merged)

    @classmethod
    def from_pld_atoms(
        cls, losses: Sequence[float], probs: Sequence[float], *, pessimistic: bool = True
    ) -> PiecewiseLinearTradeoff:
        """The tradeoff curve of a finite PLD (atoms at ``losses``, finite or +inf, with
        P-masses ``probs``); mass missing from 1 is put at +inf (dp_accounting's convention).

        Each e^-z is bracketed outward: ``pessimistic=True`` rounds it down (loss up), so
        the result dominates the input PLD. Masses summing to S in (1, 1 + 1e-9] lose the
        excess from the lowest losses (pessimistic; the result dominates p/S) or the highest
        (optimistic). If rounding in the input pushes f(0) = E[e^-Z] above 1 (by <= 1e-9,
        more is refused with NumericalError) every e^-z is divided by f(0): each loss moves
        up by log f(0) <= 1e-9, pessimistic; an optimistic curve is then optimistic only up
        to that shift (the input was not a PLD to that precision).
        """
        owner = "from_pld_atoms"
        zs = np.asarray(losses, dtype=np.float64)
        ps = _fracs("probs", owner, probs)
        if zs.ndim != 1 or zs.size != len(ps) or np.any(np.isnan(zs)) or np.any(zs == -np.inf):
            raise fail("losses", owner, "a 1-D array of floats or +inf, as long as 'probs'", losses)
        if any(x < 0 for x in ps) or sum(ps, Fraction(0)) > 1 + _SUM_TOL:
            raise fail("probs", owner, "non-negative masses summing to at most 1", probs)
        order = sorted(range(len(ps)), key=lambda i: float(zs[i]), reverse=not pessimistic)
        excess = sum(ps, Fraction(0)) - 1
        for i in order:
            if excess <= 0:
                break
            take = min(excess, ps[i])
            ps[i] -= take
            excess -= take
        pairs = [
            (_exp_neg(float(z), not pessimistic), w) for z, w in zip(zs, ps, strict=True) if w > 0
        ]
        missing = 1 - sum((w for _, w in pairs), Fraction(0))
        if missing > 0:
            pairs.append((Fraction(0), missing))
        f0 = sum((m * w for m, w in pairs), Fraction(0))
        if f0 > 1:
            if f0 > 1 + _SUM_TOL:
                raise NumericalError(f"from_pld_atoms(): E[e^-Z] = {float(f0)!r} > 1; not a PLD.")
            pairs = [(m / f0, w) for m, w in pairs]
        return cls._build(_merge(pairs))

    @classmethod
    def supremum(cls, curves: Iterable[PiecewiseLinearTradeoff]) -> PiecewiseLinearTradeoff:
        """The Blackwell supremum (Regehr et al. 2026, Prop. 11), exactly: its tradeoff
        curve is the lower convex envelope of the curves (the lower hull of all their
        breakpoints), its hockey-stick curve the pointwise maximum."""
        cs = list(curves)
        if not cs or not all(isinstance(c, PiecewiseLinearTradeoff) for c in cs):
            raise fail("curves", "supremum", "a non-empty iterable of PiecewiseLinearTradeoff", cs)
        best: dict[Fraction, Fraction] = {}
        for c in cs:
            for a, b in zip(c.alphas, c.betas, strict=True):
                best[a] = min(b, best.get(a, b))
        hull: list[tuple[Fraction, Fraction]] = []
        for a, b in sorted(best.items()):  # Andrew's monotone chain, lower hull
            while len(hull) >= 2:
                (a0, b0), (a1, b1) = hull[-2], hull[-1]
                if (a1 - a0) * (b - b0) - (b1 - b0) * (a - a0) > 0:
                    break
                hull.pop()
            hull.append((a, b))
        return cls(tuple(a for a, _ in hull), tuple(b for _, b in hull))

    # ------------------------------------------------------------------ structure
    @property
    def segments(self) -> tuple[tuple[Fraction, Fraction], ...]:
        """((width, slope magnitude m), ...) steepest first; slope is -m."""
        a, b = self.alphas, self.betas
        return tuple(
            (a[i + 1] - a[i], (b[i] - b[i + 1]) / (a[i + 1] - a[i])) for i in range(len(a) - 1)
        )

    def value(self, alpha: Fraction | int | float) -> Fraction:
        """f(alpha), exactly."""
        x = _frac("alpha", "value", alpha)
        if not (0 <= x <= 1):
            raise fail("alpha", "value", "a number in [0, 1]", alpha)
        i = min(bisect.bisect_right(self.alphas, x), len(self.alphas) - 1)
        a0, a1, b0, b1 = self.alphas[i - 1], self.alphas[i], self.betas[i - 1], self.betas[i]
        return b0 + (b1 - b0) * (x - a0) / (a1 - a0)

    def __call__(self, alpha: npt.ArrayLike, *, upper: bool = False) -> FloatArray:
        """f on an array of alpha in [0, 1], in floats; default below the exact value
        (pessimistic), margin 2^-48 (|slope_i| * alpha_{i+1} <= 1 bounds the error)."""
        a = np.array(alpha, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(a < 0) or np.any(a > 1):
            raise fail(
                "alpha", "PiecewiseLinearTradeoff.__call__", "an array of floats in [0, 1]", alpha
            )
        fa = np.array([float(x) for x in self.alphas])
        fb = np.array([float(x) for x in self.betas])
        fs = np.array([-float(m) for _, m in self.segments])
        i = np.clip(np.searchsorted(fa, a, side="right") - 1, 0, len(fs) - 1)
        v = fb[i] + fs[i] * (a - fa[i])
        out: FloatArray = np.clip(v + _MARGIN if upper else v - _MARGIN, 0.0, 1.0)
        return out

    # ------------------------------------------------------------------ composition
    def compose(self, other: PiecewiseLinearTradeoff) -> PiecewiseLinearTradeoff:
        """The tradeoff curve of L1 (+) L2, exactly (section 6 / Prop. 6): segment products."""
        if not isinstance(other, PiecewiseLinearTradeoff):
            raise fail("other", "compose", "a PiecewiseLinearTradeoff", other)
        return _from_ints(_compose_ints(_to_ints(self), _to_ints(other)))

    def self_compose(self, k: int) -> PiecewiseLinearTradeoff:
        """The k-fold composition (k >= 0; k = 0 gives the identity), by repeated squaring.
        Equal slope products merge, so R_{eps,delta}^k has at most k + 2 segments."""
        k = check_int("k", k, "self_compose", minimum=0)
        result: _Ints = (1, 1, {1: 1})
        base = _to_ints(self)
        while k:
            if k & 1:
                result = _compose_ints(result, base)
            k >>= 1
            if k:
                base = _compose_ints(base, base)
        return _from_ints(result)

    # ------------------------------------------------------------------ conversions
    def hockey_stick_exact(self, x: Fraction | int | float) -> Fraction:
        """h(x) = max_i (1 - a_i - x b_i) for x >= 0 (Prop. 9), exactly."""
        xf = _frac("x", "hockey_stick_exact", x)
        if xf < 0:
            raise fail("x", "hockey_stick_exact", "a number >= 0", x)
        return max(1 - a - xf * b for a, b in zip(self.alphas, self.betas, strict=True))

    def hockey_stick(self, x: npt.ArrayLike, *, upper: bool = True) -> FloatArray:
        """h(x) = max_i (1 - a_i - x b_i) on an array of x >= 0 (+inf gives the +inf mass),
        in floats; default at or above the exact value (pessimistic), margin 2^-48."""
        xs = np.array(x, dtype=np.float64)
        if np.any(np.isnan(xs)) or np.any(xs < 0):
            raise fail("x", "PiecewiseLinearTradeoff.hockey_stick", "an array of floats >= 0", x)
        one_minus_a = np.array([float(1 - a) for a in self.alphas])
        fb = np.array([float(b) for b in self.betas])
        flat = xs.reshape(-1, 1)
        with np.errstate(invalid="ignore"):
            cand = np.where(fb[None, :] == 0.0, one_minus_a[None, :], one_minus_a - flat * fb)
        h = cand.max(axis=1).reshape(xs.shape)
        out: FloatArray = np.clip(h + _MARGIN if upper else h - _MARGIN, 0.0, 1.0)
        return out

    def delta(self, eps: npt.ArrayLike, *, upper: bool = True) -> FloatArray:
        """delta(eps) = h(e^eps); e^eps bracketed on the side that moves h toward ``upper``."""
        es = np.array(eps, dtype=np.float64)
        if np.any(np.isnan(es)):
            raise fail("eps", "PiecewiseLinearTradeoff.delta", "an array of floats (no NaN)", eps)
        xs = np.array([exp_bracket(float(e))[0 if upper else 1] for e in es.reshape(-1)])
        return self.hockey_stick(xs, upper=upper).reshape(es.shape)

    def rdp(self, order: npt.ArrayLike, *, upper: bool = True) -> FloatArray:
        """Renyi divergence at each order > 1: log(sum_j w_j m_j^-(order-1)) / (order - 1)
        (E[e^{(order-1)Z}] over the atoms; inf if there is a +inf atom). Logs of the exact
        rationals via their integer parts; margin 2^-48 (1 + sum of |log terms|) on the
        log-sum, in the direction of ``upper``."""
        a = np.array(order, dtype=np.float64)
        if np.any(np.isnan(a)) or np.any(a <= 1) or not np.all(np.isfinite(a)):
            raise fail(
                "order", "PiecewiseLinearTradeoff.rdp", "an array of finite floats > 1", order
            )
        segs = self.segments
        if any(m == 0 for _, m in segs):
            return np.full_like(a, math.inf)
        lw = np.array([math.log(w.numerator) - math.log(w.denominator) for w, _ in segs])
        lm = np.array([math.log(m.numerator) - math.log(m.denominator) for _, m in segs])
        scale = np.array(
            [abs(math.log(w.numerator)) + abs(math.log(w.denominator)) for w, _ in segs]
        ) + np.array([abs(math.log(m.numerator)) + abs(math.log(m.denominator)) for _, m in segs])
        t = (a - 1.0).reshape(-1, 1)
        terms = lw[None, :] - t * lm[None, :]
        log_sum = np.logaddexp.reduce(terms, axis=1)
        err = 2.0**-48 * (1.0 + np.max(scale[None, :] * np.maximum(1.0, t), axis=1) + len(segs))
        log_sum = log_sum + err if upper else log_sum - err
        out: FloatArray = np.maximum(log_sum / t[:, 0], 0.0).reshape(a.shape)
        return out

    def to_dict(self) -> dict[str, Any]:
        """Exact JSON-ready form: breakpoints as "numerator/denominator" strings."""
        return {
            "type": "pwl_tradeoff",
            "alphas": [f"{x.numerator}/{x.denominator}" for x in self.alphas],
            "betas": [f"{x.numerator}/{x.denominator}" for x in self.betas],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PiecewiseLinearTradeoff:
        """Inverse of :meth:`to_dict` (exact)."""
        if not isinstance(d, dict) or d.get("type") != "pwl_tradeoff":
            raise fail("d", "from_dict", "a dict with type 'pwl_tradeoff'", d)
        try:
            alphas = tuple(Fraction(str(x)) for x in d["alphas"])
            betas = tuple(Fraction(str(x)) for x in d["betas"])
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            raise fail("d", "from_dict", "'alphas' and 'betas' lists of 'n/d' strings", d) from None
        return cls(alphas, betas)

    def to_pld_atoms(self) -> tuple[FloatArray, FloatArray]:
        """The finite PLD (losses ascending, +inf last; P-masses) of this curve, rounded
        pessimistically: each loss -log m rounded up (margin 2^-50 (1 + |log num| +
        |log den|)), each mass rounded down, the shortfall added to the +inf atom."""
        losses: list[float] = []
        masses: list[float] = []
        inf_mass = Fraction(1)
        for w, m in self.segments:
            if m == 0:
                continue
            z = math.log(m.denominator) - math.log(m.numerator)
            z += 2.0**-50 * (1.0 + abs(math.log(m.numerator)) + abs(math.log(m.denominator)))
            wf = round_fraction(w, upper=False)
            if wf > 0:
                losses.append(z)
                masses.append(wf)
                inf_mass -= Fraction(wf)
        if inf_mass > 0:
            losses.append(math.inf)
            masses.append(round_fraction(inf_mass, upper=True))
        return np.array(losses), np.array(masses)

    # ------------------------------------------------------------------ order
    def leq(self, other: PiecewiseLinearTradeoff) -> bool:
        """Blackwell order L_self <= L_other, i.e. f_self >= f_other everywhere; exact
        (both are linear between the union of their breakpoints)."""
        if not isinstance(other, PiecewiseLinearTradeoff):
            raise fail("other", "leq", "a PiecewiseLinearTradeoff", other)
        pts = set(self.alphas) | set(other.alphas)
        return all(self.value(a) >= other.value(a) for a in pts)

    def __le__(self, other: PiecewiseLinearTradeoff) -> bool:
        return self.leq(other)

    def __ge__(self, other: PiecewiseLinearTradeoff) -> bool:
        return other.leq(self)


# Integer form used while composing: (Dw, Dm, {M: W}) stands for segments of width W/Dw
# and slope magnitude M/Dm. Products need no gcd, so composition stays cheap even when the
# rationals grow to thousands of bits (R_eps^k); the Fractions are built once at the end.
_Ints = tuple[int, int, dict[int, int]]


def _to_ints(c: PiecewiseLinearTradeoff) -> _Ints:
    segs = c.segments
    dw = math.lcm(*(w.denominator for w, _ in segs))
    dm = math.lcm(*(m.denominator for _, m in segs))
    out: dict[int, int] = {}
    for w, m in segs:
        key = m.numerator * (dm // m.denominator)
        out[key] = out.get(key, 0) + w.numerator * (dw // w.denominator)
    return dw, dm, out


def _compose_ints(a: _Ints, b: _Ints) -> _Ints:
    out: dict[int, int] = {}
    for m1, w1 in a[2].items():
        for m2, w2 in b[2].items():
            key = m1 * m2
            out[key] = out.get(key, 0) + w1 * w2
    return a[0] * b[0], a[1] * b[1], out


def _from_ints(t: _Ints) -> PiecewiseLinearTradeoff:
    dw, dm, segs = t
    items = sorted(segs.items(), reverse=True)
    f0 = sum(m * w for m, w in items)
    den = dw * dm
    alphas, betas = [Fraction(0)], [Fraction(f0, den)]
    cw, cwm = 0, 0
    for m, w in items:
        cw += w
        cwm += w * m
        alphas.append(Fraction(cw, dw))
        betas.append(Fraction(f0 - cwm, den))
    return PiecewiseLinearTradeoff(tuple(alphas), tuple(betas))


def _merge(pairs: Iterable[tuple[Fraction, Fraction]]) -> dict[Fraction, Fraction]:
    """Sum the widths of segments with equal slope magnitude."""
    out: dict[Fraction, Fraction] = {}
    for m, w in pairs:
        out[m] = out.get(m, Fraction(0)) + w
    return out
