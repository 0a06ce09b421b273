"""Constructors of :class:`dpsieve.accounting.pld.PLD` (private mixin; see pld.py).

Every constructor takes ``grid`` (the loss-axis step) and ``pessimistic`` (default True: the
result dominates the mechanism; False: it is dominated by it). The grid versions are built by
:mod:`._construct` (hat split / round down, docs/proofs/accounting.md, Lemmas A1-A2).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Self

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import div_up
from dpsieve._validation import (
    check_in_closed,
    check_int,
    check_nonnegative,
    check_positive,
    check_probability_vector,
    fail,
)
from dpsieve.accounting import _construct
from dpsieve.accounting.events import GDP, ApproxDP, PrivacyDescription, PureDP
from dpsieve.errors import UnsupportedError

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
#: Default grid step of the privacy-loss axis (dp_accounting's default as well).
DEFAULT_GRID = 1e-4
_MASS_TOL = 1e-9


class PLDConstructors:
    """Classmethod constructors shared by :class:`~dpsieve.accounting.pld.PLD`."""

    __slots__ = ()

    if TYPE_CHECKING:

        def __init__(
            self,
            grid: float,
            offset: int,
            probs: FloatArray,
            inf_mass: float = 0.0,
            mu: float = 0.0,
            direction: str = "exact",
            symmetric: bool = False,
        ) -> None: ...

    @classmethod
    def identity(cls, *, grid: float = DEFAULT_GRID, pessimistic: bool = True) -> Self:
        """Id: the loss is 0 surely (no privacy loss). Exact (``pessimistic`` is ignored)."""
        return cls(grid, 0, np.ones(1), 0.0, 0.0, "exact", True)

    @classmethod
    def gdp(cls, mu: float, *, grid: float = DEFAULT_GRID, pessimistic: bool = True) -> Self:
        """G_mu = PLD(N(0,1) || N(mu,1)), kept in closed form. Exact (``pessimistic`` is
        ignored; :meth:`discretize` puts it on the grid in the chosen direction)."""
        mu = check_nonnegative("mu", mu, "gdp")
        check_positive("grid", grid, "gdp")
        return cls(grid, 0, np.ones(1), 0.0, mu, "exact", True)

    @classmethod
    def gaussian(
        cls,
        sigma: float,
        sensitivity: float = 1.0,
        *,
        grid: float = DEFAULT_GRID,
        pessimistic: bool = True,
    ) -> Self:
        """Gaussian mechanism N(0, sigma^2) with l2 sensitivity D: exactly G_{D/sigma}.

        Exact (closed form); mu = D/sigma is rounded *up* (:func:`dpsieve._rounding.div_up`),
        so the PLD dominates the mechanism whatever ``pessimistic`` says.
        """
        sigma = check_positive("sigma", sigma, "gaussian")
        sensitivity = check_positive("sensitivity", sensitivity, "gaussian")
        return cls.gdp(div_up(sensitivity, sigma), grid=grid)

    @classmethod
    def laplace(
        cls,
        scale: float,
        sensitivity: float = 1.0,
        *,
        grid: float = DEFAULT_GRID,
        pessimistic: bool = True,
    ) -> Self:
        """Laplace mechanism Lap(scale) with l1 sensitivity D; a = D/scale.

        Exact PLD: atom +a w.p. 1/2, atom -a w.p. e^{-a}/2, density e^{(z-a)/2}/4 on (-a, a).
        Pessimistic (default): connect-the-dots hat split (dominates, errs towards more loss).
        Optimistic: losses rounded down, then the PLD condition restored (dominated).
        """
        scale = check_positive("scale", scale, "laplace")
        sensitivity = check_positive("sensitivity", sensitivity, "laplace")
        check_positive("grid", grid, "laplace")
        parts = _construct.laplace(sensitivity / scale, grid, pessimistic)
        return cls._build(parts, grid, pessimistic)

    @classmethod
    def randomized_response(
        cls, eps: float, k: int = 2, *, grid: float = DEFAULT_GRID, pessimistic: bool = True
    ) -> Self:
        """k-ary randomized response: the true value w.p. e^eps/(e^eps + k - 1).

        Losses +eps, 0, -eps. Pessimistic: hat split onto the grid (dominates); optimistic:
        rounded down and restored (dominated). Exact if eps is a grid multiple.
        """
        eps = check_nonnegative("eps", eps, "randomized_response")
        k = check_int("k", k, "randomized_response", minimum=2)
        check_positive("grid", grid, "randomized_response")
        z = np.array([eps, 0.0, -eps])
        if eps <= 700.0:
            den = math.exp(eps) + k - 1
            p = np.array([math.exp(eps) / den, (k - 2) / den, 1.0 / den])
        else:  # e^eps overflows: the same masses over e^eps (losses above 700 go to +inf)
            r = math.exp(-eps)
            den = 1.0 + (k - 1) * r
            p = np.array([1.0 / den, (k - 2) * r / den, r / den])
        return cls._from_atoms(z, p, 0.0, grid, pessimistic, True)

    @classmethod
    def approx_dp(
        cls, eps: float, delta: float, *, grid: float = DEFAULT_GRID, pessimistic: bool = True
    ) -> Self:
        """R_{eps,delta}: +inf w.p. delta, +eps w.p. (1-delta)/(1+e^-eps), -eps otherwise.

        The tightest PLD with (eps, delta)-DP. Pessimistic: hat split of +-eps (dominates);
        optimistic: rounded down and restored (dominated); exact if eps is a grid multiple.
        eps = inf gives the PLD that is +inf surely.
        """
        eps = check_nonnegative("eps", eps, "approx_dp", allow_inf=True)
        delta = check_in_closed("delta", delta, 0.0, 1.0, "approx_dp")
        check_positive("grid", grid, "approx_dp")
        if math.isinf(eps):
            return cls(grid, 0, np.zeros(1), 1.0, 0.0, "exact", True)
        z = np.array([eps, -eps])
        p = (1.0 - delta) * np.array(
            [1.0 / (1.0 + math.exp(-eps)), math.exp(-eps) / (1.0 + math.exp(-eps))]
            if eps > 700.0
            else [1.0 / (1.0 + math.exp(-eps)), 1.0 / (1.0 + math.exp(eps))]
        )
        return cls._from_atoms(z, p, delta, grid, pessimistic, True)

    @classmethod
    def pure_dp(cls, eps: float, *, grid: float = DEFAULT_GRID, pessimistic: bool = True) -> Self:
        """R_{eps,0} (binary randomized response); see :meth:`approx_dp` for the rounding."""
        return cls.approx_dp(eps, 0.0, grid=grid, pessimistic=pessimistic)

    @classmethod
    def zero_delta(
        cls, delta: float, *, grid: float = DEFAULT_GRID, pessimistic: bool = True
    ) -> Self:
        """R_{0,delta}: +inf w.p. delta, 0 otherwise. Exact (``pessimistic`` is ignored)."""
        delta = check_in_closed("delta", delta, 0.0, 1.0, "zero_delta")
        return cls(grid, 0, np.array([1.0 - delta]), delta, 0.0, "exact", True)

    @classmethod
    def discrete_laplace(
        cls,
        scale: float,
        sensitivity: int = 1,
        *,
        grid: float = DEFAULT_GRID,
        pessimistic: bool = True,
    ) -> Self:
        """Discrete Laplace on Z, P(y) proportional to e^{-|y|/scale}, integer sensitivity.

        Losses (|y - D| - |y|)/scale; hat split (pessimistic) or rounded down (optimistic).
        """
        scale = check_positive("scale", scale, "discrete_laplace")
        sensitivity = check_int("sensitivity", sensitivity, "discrete_laplace", minimum=1)
        z, p = _construct.discrete_laplace_atoms(scale, sensitivity)
        return cls._from_atoms(z, p, 0.0, grid, pessimistic, True)

    @classmethod
    def discrete_gaussian(
        cls,
        sigma: float,
        sensitivity: int = 1,
        *,
        grid: float = DEFAULT_GRID,
        pessimistic: bool = True,
    ) -> Self:
        """Discrete Gaussian on Z, P(y) proportional to e^{-y^2/(2 sigma^2)}, integer sensitivity.

        Support truncated where the remaining mass is below 1e-30; pessimistic puts that
        bound at +inf, optimistic drops it. Losses (D^2 - 2 y D)/(2 sigma^2).
        """
        sigma = check_positive("sigma", sigma, "discrete_gaussian")
        sensitivity = check_int("sensitivity", sensitivity, "discrete_gaussian", minimum=1)
        z, p, tail = _construct.discrete_gaussian_atoms(sigma, sensitivity)
        return cls._from_atoms(z, p, tail if pessimistic else 0.0, grid, pessimistic, True)

    @classmethod
    def from_distributions(
        cls,
        p: npt.ArrayLike,
        q: npt.ArrayLike,
        *,
        grid: float = DEFAULT_GRID,
        pessimistic: bool = True,
    ) -> Self:
        """PLD(P || Q) of two finite distributions given as probability vectors.

        Atoms log(p_i/q_i) with P-mass p_i; p_i > 0 = q_i goes to +inf. Hat split
        (pessimistic) or rounded down (optimistic). Not assumed symmetric.
        """
        pv = check_probability_vector("p", p, "from_distributions")
        qv = check_probability_vector("q", q, "from_distributions")
        if pv.size != qv.size:
            raise fail(
                "q", "from_distributions", f"a vector of the same length as 'p' ({pv.size})", q
            )
        check_positive("grid", grid, "from_distributions")
        pos = pv > 0
        sing = pos & (qv == 0)
        fin = pos & (qv > 0)
        z = np.log(pv[fin]) - np.log(qv[fin])
        return cls._from_atoms(z, pv[fin], float(np.sum(pv[sing])), grid, pessimistic, False)

    @classmethod
    def from_tradeoff(
        cls,
        alpha: npt.ArrayLike,
        tau: npt.ArrayLike,
        *,
        grid: float = DEFAULT_GRID,
        pessimistic: bool = True,
    ) -> Self:
        """The PLD of the piecewise-linear tradeoff curve through (alpha_j, tau_j).

        Prop. 9 of the paper (h(x) = 1 + (tau^{-1})*(-x)) for a piecewise-linear tau gives
        h(x) = max_j (1 - alpha_j - x tau_j): a segment of alpha-width w and slope -s is an
        atom at loss -log s with P-mass w (s = 0: loss +inf), and 1 - tau(0) is the mass that
        Q puts where P has none. Exact for the interpolated curve; the atoms are then put on
        the grid (hat split: pessimistic; rounded down: optimistic). The points must start at
        alpha = 0, end at alpha = 1, and be convex and decreasing with tau <= 1 - alpha.
        """
        a = np.asarray(alpha, dtype=np.float64)
        t = np.asarray(tau, dtype=np.float64)
        ok = (
            a.ndim == 1
            and a.size >= 2
            and a.shape == t.shape
            and bool(np.all(np.isfinite(a)))
            and bool(np.all(np.isfinite(t)))
            and a[0] == 0.0
            and a[-1] == 1.0
            and bool(np.all(np.diff(a) > 0))
        )
        if not ok:
            raise fail(
                "alpha",
                "from_tradeoff",
                "increasing finite points from 0 to 1, as many as 'tau'",
                alpha,
            )
        slopes = -np.diff(t) / np.diff(a)
        tol = 1e-12
        if (
            np.any(slopes < -tol)
            or np.any(np.diff(slopes) > tol * (1 + slopes[1:]))
            or np.any(t > 1 - a + tol)
            or np.any(t < -tol)
        ):
            raise fail(
                "tau",
                "from_tradeoff",
                "a convex, decreasing tradeoff curve with 0 <= tau <= 1 - alpha",
                tau,
            )
        check_positive("grid", grid, "from_tradeoff")
        w = np.diff(a)
        fin = slopes > 0
        z = -np.log(slopes[fin])
        inf_mass = float(np.sum(w[~fin]))
        return cls._from_atoms(z, w[fin], inf_mass, grid, pessimistic, False)

    @classmethod
    def from_hockey_stick(
        cls, x: npt.ArrayLike, h: npt.ArrayLike, *, grid: float = DEFAULT_GRID
    ) -> Self:
        """A pessimistic PLD from samples of a hockey-stick curve at 0 < x_1 < ... < x_n.

        The curve is convex, so its chords lie above it; the PLD whose curve is the chord
        interpolation through (0, 1) and the samples, constant h(x_n) beyond, dominates the
        one sampled (paper, Props. 4 and 10). Atom at log x_j with mass x_j times the slope
        change there, +inf mass h(x_n); then the hat split onto the grid.
        """
        xs = np.asarray(x, dtype=np.float64)
        hs = np.asarray(h, dtype=np.float64)
        ok = (
            xs.ndim == 1
            and xs.size >= 1
            and xs.shape == hs.shape
            and bool(np.all(xs > 0))
            and bool(np.all(np.isfinite(xs)))
            and bool(np.all(np.diff(xs) > 0))
        )
        if not ok:
            raise fail("x", "from_hockey_stick", "increasing finite floats > 0, as many as 'h'", x)
        px = np.concatenate([[0.0], xs])
        ph = np.concatenate([[1.0], hs])
        sl = np.concatenate([np.diff(ph) / np.diff(px), [0.0]])
        tol = 1e-12
        if (
            not np.all(np.isfinite(hs))
            or np.any(hs < -tol)
            or np.any(hs > 1 + tol)
            or np.any(hs < 1 - xs - tol)
            or np.any(np.diff(sl) < -tol)
        ):
            raise fail(
                "h",
                "from_hockey_stick",
                "samples of a convex, decreasing curve with max(0, 1 - x) <= h <= 1",
                h,
            )
        check_positive("grid", grid, "from_hockey_stick")
        masses = np.clip(xs * np.diff(sl), 0.0, None)
        inf_mass = float(max(hs[-1], 0.0))
        # masses from slope differences: rounding is absorbed by the +inf atom (raises h)
        total = float(np.sum(masses)) + inf_mass
        inf_mass += max(0.0, 1.0 - total) + 8 * (xs.size + 4) * 2.0**-53
        return cls._from_atoms(np.log(xs), masses, inf_mass, grid, True, False)

    @classmethod
    def from_description(cls, desc: PrivacyDescription, *, grid: float = DEFAULT_GRID) -> Self:
        """The exact family PLD of a description: PureDP -> R_{eps,0}, ApproxDP -> R_{eps,delta},
        GDP -> G_mu. The +-eps atoms are put on the grid pessimistically; use the analytic
        order checks (:mod:`dpsieve.accounting.order`) when a budget must stay exact.
        zCDP/RDP descriptions have no single PLD: :class:`UnsupportedError`.
        """
        if isinstance(desc, GDP):
            return cls.gdp(desc.mu, grid=grid)
        if isinstance(desc, ApproxDP):
            return cls.approx_dp(desc.eps, desc.delta, grid=grid)
        if isinstance(desc, PureDP):
            return cls.pure_dp(desc.eps, grid=grid)
        raise UnsupportedError(
            f"No exact PLD for a {type(desc).__name__} description; convert it explicitly."
        )

    @classmethod
    def _from_atoms(
        cls,
        z: FloatArray,
        p: FloatArray,
        inf_mass: float,
        grid: float,
        pessimistic: bool,
        symmetric: bool,
    ) -> Self:
        parts = _construct.atoms(z, p, inf_mass, grid, pessimistic)
        return cls._build(parts, grid, pessimistic, symmetric)

    @classmethod
    def _build(
        cls,
        parts: tuple[int, FloatArray, float],
        grid: float,
        pessimistic: bool,
        symmetric: bool = True,
    ) -> Self:
        off, probs, inf = parts
        d = "pessimistic" if pessimistic else "optimistic"
        return cls(grid, off, probs, min(inf, 1.0 + _MASS_TOL), 0.0, d, symmetric)
