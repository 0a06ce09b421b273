"""Privacy loss distributions (PLDs) on a uniform grid, with an exact Gaussian component.

A :class:`PLD` is ``L = D (+) G_mu``: a discrete part D with masses ``probs[i]`` at the losses
``z_i = (offset + i) * grid`` and ``inf_mass`` at +inf, composed with the Gaussian PLD G_mu
kept in closed form (mu >= 0; G_0 is the identity). A distribution on R u {+inf} is a PLD iff
E[e^{-Z}] <= 1 (paper: "Privacy filters are captured by residues", Sec. 2); this is enforced
when a PLD is built. Composition of Gaussians is exact (G_a (+) G_b = G_sqrt(a^2+b^2)), so a
k-fold Gaussian costs O(1) and its curves are the closed forms of :mod:`dpsieve.accounting.gdp`.

Every PLD records the ``direction`` of its approximation of the mechanism it describes:
``"exact"``, ``"pessimistic"`` (dominates the truth in the Blackwell order: every reported
delta is >= the true one -- use for queries) or ``"optimistic"`` (dominated by the truth --
use for budgets). Composing a pessimistic with an optimistic PLD is refused.
``symmetric=True`` records that the *exact* PLD being approximated is symmetric (the pair
(P, Q) is Blackwell-equivalent to (Q, P)); order checks then only need x >= 1 (paper,
Lemma 8; docs/proofs/accounting.md, Lemma B1).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve._validation import (
    check_finite,
    check_in_closed,
    check_int,
    check_nonnegative,
    check_positive,
    fail,
)
from dpsieve.accounting import _curves, _ops
from dpsieve.accounting._constructors import DEFAULT_GRID, PLDConstructors
from dpsieve.accounting.events import RDP
from dpsieve.errors import ValidationError

__all__ = ["DEFAULT_GRID", "PLD"]

FloatArray = npt.NDArray[np.float64]
_DIRECTIONS = ("exact", "pessimistic", "optimistic")
_MASS_TOL = 1e-9
#: Pessimistic rounding may add mass (error bounds at +inf, inflated masses): allowed excess.
_EXCESS_TOL = 1e-6
_RDP_ORDERS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0)


@dataclass(frozen=True, slots=True, eq=False)
class PLD(PLDConstructors):
    """An immutable privacy loss distribution ``D (+) G_mu`` (see the module docstring).

    Build with the classmethod constructors; ``PLD(...)`` validates its fields.
    ``L <= B`` is the sound Blackwell-order check of :func:`dpsieve.accounting.order.leq`.
    """

    grid: float
    offset: int
    probs: FloatArray
    inf_mass: float = 0.0
    mu: float = 0.0
    direction: str = "exact"
    symmetric: bool = False
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_positive("grid", self.grid, "PLD")
        check_int("offset", self.offset, "PLD")
        check_in_closed("inf_mass", self.inf_mass, 0.0, 1.0 + _MASS_TOL, "PLD")
        check_nonnegative("mu", self.mu, "PLD")
        if self.direction not in _DIRECTIONS:
            raise fail("direction", "PLD", f"one of {_DIRECTIONS}", self.direction)
        p = np.array(self.probs, dtype=np.float64).reshape(-1)
        if p.size == 0 or not np.all(np.isfinite(p)) or np.any(p < 0):
            raise fail("probs", "PLD", "a non-empty vector of finite non-negative masses", p)
        total = float(np.sum(p)) + self.inf_mass  # pairwise summation, error << 1e-9
        if not (1.0 - _MASS_TOL <= total <= 1.0 + _EXCESS_TOL):
            raise fail("probs", "PLD", "masses that with inf_mass sum to 1", total)
        z = _curves.knots(self.offset, p.size, self.grid)
        with np.errstate(over="ignore"):
            m = float(np.sum(p * np.exp(-z)))
        if not m <= 1.0 + _EXCESS_TOL:
            raise ValidationError(
                f"The masses of PLD() violate the PLD condition E[e^-Z] <= 1: E[e^-Z] = {m!r}.",
                parameter="probs",
                constraint="E[e^-Z] <= 1",
                value=m,
            )
        p.setflags(write=False)
        object.__setattr__(self, "probs", p)
        object.__setattr__(self, "grid", float(self.grid))
        object.__setattr__(self, "offset", int(self.offset))
        object.__setattr__(self, "inf_mass", float(self.inf_mass))
        object.__setattr__(self, "mu", float(self.mu))

    # ------------------------------------------------------------------ basic data
    @property
    def losses(self) -> FloatArray:
        """The grid losses z_i of the discrete part (read-only copy)."""
        return _curves.knots(self.offset, self.probs.size, self.grid)

    def _tails(self) -> _curves.Tails:
        ad = self._cache.get("ad")
        if ad is None:
            ad = _curves.scaled_tail_sums(self.losses, self.probs)
            self._cache["ad"] = ad
        return ad

    def h_with_error(self, x: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """(h(x), bound on |floating-point error|) for x > 0, as arrays."""
        with np.errstate(divide="ignore"):
            return self.h_log_with_error(np.log(np.asarray(x, dtype=np.float64)))

    def h_log_with_error(self, t: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
        """(h(e^t), error bound) for real t; avoids the log/exp round trip at kinks."""
        ts = np.atleast_1d(np.asarray(t, dtype=np.float64))
        if self.mu == 0.0:
            return _curves.h_pl(self.losses, self.probs, self.inf_mass, ts, self._tails())
        return _curves.h_mixed(
            self.losses, self.probs, self.inf_mass, self.mu, ts, self.grid, self.offset
        )

    # ------------------------------------------------------------------ curves
    def hockey_stick(self, x: npt.ArrayLike) -> FloatArray:
        """h(x) = E[(1 - x e^{-Z})_+] at each x > 0, rounded in this PLD's direction.

        Pessimistic/exact: the float error bound is added (never below this PLD's value);
        optimistic: subtracted. Values are clipped to [0, 1].
        """
        xs = np.asarray(x, dtype=np.float64)
        if not (np.all(xs > 0) and not np.any(np.isnan(xs))):
            raise fail("x", "hockey_stick", "an array of floats > 0", x)
        h, err = self.h_with_error(xs.reshape(-1))
        h = h - err if self.direction == "optimistic" else h + err
        h = np.where(np.isposinf(xs.reshape(-1)), self.inf_mass, h)  # h(inf) = inf_mass
        out: FloatArray = np.clip(h, 0.0, 1.0).reshape(xs.shape)
        return out

    def delta(self, eps: npt.ArrayLike) -> FloatArray | float:
        """delta(eps) = h(e^eps) (the (eps, delta)-DP profile), rounded as :meth:`hockey_stick`.

        Scalar in, float out; array in, array out. eps may be any real (or +inf).
        """
        e = np.asarray(eps, dtype=np.float64)
        if np.any(np.isnan(e)):
            raise fail("eps", "delta", "an array of floats (not NaN)", eps)
        h, err = self.h_log_with_error(e.reshape(-1))
        h = h - err if self.direction == "optimistic" else h + err
        h = np.where(np.isposinf(e.reshape(-1)), self.inf_mass, h)
        out = np.clip(h, 0.0, 1.0).reshape(e.shape)
        return float(out) if e.ndim == 0 else out

    def epsilon(self, delta: npt.ArrayLike) -> FloatArray | float:
        """Smallest eps >= 0 with delta(eps) <= delta, for each delta (vectorized, no loop).

        For pessimistic/exact PLDs the result is an upper bound (certified: the float error of
        h is subtracted from delta first and eps is rounded up); inf when delta < inf_mass.
        (For optimistic PLDs and mu = 0 the same upper end is returned: an upper bound for
        this object, which only the rounding margin, ~1e-15 in h, separates from a lower one.)
        For mu = 0 the piecewise-linear curve is inverted exactly; for mu > 0 a vectorized
        bisection runs to relative width 1e-12 and returns the upper end.
        """
        d = np.asarray(delta, dtype=np.float64)
        if not np.all((d >= 0) & (d <= 1)):
            raise fail("delta", "epsilon", "an array of floats in [0, 1]", delta)
        flat = d.reshape(-1)
        if self.mu == 0.0:
            out = _curves.eps_pl(self.losses, self.probs, self.inf_mass, flat, self._tails())
        else:
            out = _ops.eps_bisect(self, flat)
        res = out.reshape(d.shape)
        return float(res) if d.ndim == 0 else res

    def tradeoff(self, alpha: npt.ArrayLike) -> FloatArray:
        """tau(alpha) = E[psi_alpha(Z) e^{-Z}] (Neyman-Pearson; paper, Prop. 8) on [0, 1].

        Exact (piecewise linear) for mu = 0. For mu > 0 the Gaussian part is first discretized
        in this PLD's direction, so the result is a lower bound (pessimistic: less tradeoff
        means more privacy loss) or an upper bound (optimistic).
        """
        a = np.asarray(alpha, dtype=np.float64)
        if not np.all((a >= 0) & (a <= 1)):
            raise fail("alpha", "tradeoff", "an array of floats in [0, 1]", alpha)
        base = self if self.mu == 0.0 else self.discretize()
        out: FloatArray = _ops.tradeoff_pl(base, a.reshape(-1)).reshape(a.shape)
        return out

    def rdp(self, alpha: npt.ArrayLike) -> FloatArray:
        """Renyi divergence of order alpha > 1: log E[e^{(alpha-1) Z}] / (alpha - 1).

        Sum of the discrete part's (log-sum-exp) and G_mu's alpha mu^2/2 (Mironov 2017);
        inf if inf_mass > 0. Pessimistic grids give upper bounds (losses were rounded up).
        """
        a = np.asarray(alpha, dtype=np.float64)
        if not np.all(a > 1):
            raise fail("alpha", "rdp", "an array of floats > 1", alpha)
        if self.inf_mass > 0:
            return np.full(a.shape, math.inf)
        z = self.losses
        keep = self.probs > 0
        lp = np.log(self.probs[keep])
        am1 = a.reshape(-1, 1) - 1.0
        lse = special.logsumexp(lp[None, :] + am1 * z[keep][None, :], axis=1)
        out: FloatArray = (lse / am1[:, 0] + a.reshape(-1) * self.mu**2 / 2.0).reshape(a.shape)
        # round-off: relative (n+4)u on the sum, i.e. absolute on the log, divided by alpha-1
        out = out + (self.probs.size + 4) * 2.0**-53 / (a - 1.0) * (
            1 if self.direction != "optimistic" else -1
        )
        return out

    def to_rdp(self, orders: Sequence[float] = _RDP_ORDERS) -> RDP:
        """The RDP description (orders, rdp(orders)) -- each value an upper bound for
        pessimistic PLDs; add/remove neighbouring is assumed (the PLD does not record it)."""
        orders = tuple(float(a) for a in orders)
        vals = self.rdp(np.array(orders))
        return RDP(orders, tuple(float(v) for v in vals))

    # ------------------------------------------------------------------ operations
    def compose(
        self, other: PLD, *, tail_mass: float = 0.0, max_points: int = _ops.MAX_POINTS
    ) -> PLD:
        """L (+) S: the PLD of running both (paper, Sec. 2). Exact in mu; the discrete parts
        are convolved (direct, with relative error only, or FFT). Pessimistic FFT results are
        raised by a certified bound so they never fall below the exact composition: the
        absolute FFT bound in the bulk, and in the upper tail the bounds of exponentially
        tilted FFTs, relative to the tail mass there, with tail masses certified <= 1e-30
        (Chernoff) moved to +inf (docs/proofs/accounting.md, Lemmas A3-A4): eps(delta) stays
        tight down to delta ~1e-15 (Laplace(1) x 100: within 1e-6 of exact).
        ``tail_mass > 0`` cuts tails of at most that mass (pessimistic: the upper tail goes to
        +inf, the lower tail up to the first kept loss).

        Memory is bounded: when the convolution would hold more than ``max_points`` grid
        points (default 2^21, 16 MiB per array), both sides are first coarsened onto a grid
        that is an integer multiple of the current one by the hat split (connect the dots on
        the coarse knots: the curve becomes its chord between coarse knots). This errs on the
        safe side: each coarsened PLD dominates its input in the Blackwell order, so the
        result dominates the exact composition (every delta(eps) is >= the true one,
        eps(delta) is an upper bound; docs/proofs/accounting.md, Lemma A5); the price is a
        second-order looseness in the coarse step. The
        result's ``grid`` is then the coarser one. An optimistic PLD is never coarsened (that
        would mix directions): such a composition is refused with a ValidationError before
        anything is allocated.
        """
        if not isinstance(other, PLD):
            raise fail("other", "compose", "a PLD", other)
        tail_mass = check_in_closed("tail_mass", tail_mass, 0.0, 1.0, "compose")
        max_points = check_int("max_points", max_points, "compose", minimum=16)
        return _ops.compose(self, other, tail_mass, max_points)

    def self_compose(
        self, k: int, *, tail_mass: float = 0.0, max_points: int = _ops.MAX_POINTS
    ) -> PLD:
        """L^{(+)k} by repeated squaring (log2 k convolutions); mu becomes sqrt(k) mu.

        Works for any k (10^6 and beyond) in bounded memory: every convolution holds at most
        ``max_points`` grid points, the grid being coarsened pessimistically (hat split, so
        the result still dominates the exact k-fold composition) when it would exceed
        that; see :meth:`compose`. Optimistic PLDs whose composition would exceed it are
        refused (ValidationError naming ``k``) before the large allocation.
        """
        k = check_int("k", k, "self_compose", minimum=0)
        tail_mass = check_in_closed("tail_mass", tail_mass, 0.0, 1.0, "self_compose")
        max_points = check_int("max_points", max_points, "self_compose", minimum=16)
        return _ops.self_compose(self, k, tail_mass, max_points)

    def discretize(self, grid: float | None = None) -> PLD:
        """Move the Gaussian part onto the grid (in this PLD's direction; exact -> pessimistic).

        Pessimistic: hat split of G_mu over mean +- 40 sd, lower tail up to the first knot,
        upper tail (< 1e-300) to +inf. Also regrids the discrete part if ``grid`` is given.
        """
        g = self.grid if grid is None else check_positive("grid", grid, "discretize")
        return _ops.discretize(self, g)

    def truncate(self, tail_mass: float) -> PLD:
        """Cut tails of total mass <= tail_mass (pessimistic: upper to +inf, lower moved up)."""
        tail_mass = check_in_closed("tail_mass", tail_mass, 0.0, 1.0, "truncate")
        return _ops.truncate(self, tail_mass)

    def dual(self) -> PLD:
        """PLD(Q || P): atoms -z with masses p e^{-z}, +inf mass 1 - E[e^{-Z}] (exact map)."""
        return _ops.dual(self)

    def is_symmetric(self, tol: float = 1e-12) -> bool:
        """Whether this object equals its dual up to ``tol`` in every mass (numerical check)."""
        return _ops.is_symmetric(self, check_nonnegative("tol", tol, "is_symmetric"))

    def leq(self, other: PLD) -> bool:
        """Sound Blackwell order self <= other (see :func:`dpsieve.accounting.order.leq`)."""
        from dpsieve.accounting.order import leq

        return leq(self, other)

    def __le__(self, other: object) -> bool:
        if not isinstance(other, PLD):
            return NotImplemented
        return self.leq(other)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PLD):
            return NotImplemented
        return (
            self.grid == other.grid
            and self.offset == other.offset
            and self.inf_mass == other.inf_mass
            and self.mu == other.mu
            and self.direction == other.direction
            and self.symmetric == other.symmetric
            and np.array_equal(self.probs, other.probs)
        )

    def __hash__(self) -> int:
        return hash(
            (self.grid, self.offset, self.inf_mass, self.mu, self.direction, self.probs.tobytes())
        )

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``probs`` as base64 of little-endian float64 (exact round trip)."""
        return {
            "type": "pld",
            "grid": self.grid,
            "offset": self.offset,
            "probs": base64.b64encode(self.probs.astype("<f8").tobytes()).decode("ascii"),
            "inf_mass": self.inf_mass,
            "mu": self.mu,
            "direction": self.direction,
            "symmetric": self.symmetric,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PLD:
        """Inverse of :meth:`to_dict` (validates like the constructor)."""
        if not isinstance(d, dict) or d.get("type") != "pld":
            raise fail("d", "PLD.from_dict", "a dict with type 'pld'", d)
        try:
            raw = base64.b64decode(d["probs"], validate=True)
            probs = np.frombuffer(raw, dtype="<f8").astype(np.float64)
            return cls(
                check_finite("grid", d["grid"], "PLD.from_dict"),
                int(d["offset"]),
                probs,
                float(d["inf_mass"]),
                float(d["mu"]),
                str(d["direction"]),
                bool(d["symmetric"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            if isinstance(e, ValidationError):
                raise
            raise fail("d", "PLD.from_dict", "a dict produced by PLD.to_dict", d) from e

    def __repr__(self) -> str:
        return (
            f"PLD(grid={self.grid!r}, support=[{self.offset * self.grid:.4g}, "
            f"{(self.offset + self.probs.size - 1) * self.grid:.4g}] ({self.probs.size} points), "
            f"inf_mass={self.inf_mass!r}, mu={self.mu!r}, direction={self.direction!r}, "
            f"symmetric={self.symmetric})"
        )
