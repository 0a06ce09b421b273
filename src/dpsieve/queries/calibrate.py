"""From a release's contribution bounds to its noise, through the mechanisms layer.

A *release* is one integer vector per group (a count, a lattice sum, a histogram, ...).
Its :class:`Contrib` states, in lattice units, what one privacy unit can change in one
group; :func:`sensitivity` turns that into the L1 and squared L2 sensitivity of the whole
vector over groups (docs/proofs/queries.md §3), and :func:`calibrate` builds the
:class:`~dpsieve.mechanisms.DiscreteLaplaceMechanism` (pure DP) or
:class:`~dpsieve.mechanisms.DiscreteGaussianMechanism` (zCDP) whose privacy is at most the
release's share, checked in exact rational arithmetic. Every rounding errs towards more
noise: scales and sigmas are rounded up, shares of the budget down.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_up
from dpsieve._validation import fail
from dpsieve.accounting.events import ZCDP, Neighbouring, PrivacyDescription, PureDP
from dpsieve.accounting.families import round_fraction
from dpsieve.accounting.pld import PLD
from dpsieve.errors import NumericalError
from dpsieve.mechanisms import DiscreteGaussianMechanism, DiscreteLaplaceMechanism
from dpsieve.mechanisms.noise import MAX_DISCRETE_SCALE, MAX_DISCRETE_SIGMA, MIN_DISCRETE_SIGMA
from dpsieve.queries.result import (
    Noise,
    dgauss_halfwidth,
    dgauss_noise,
    dlap_halfwidth,
    dlap_noise,
)

__all__ = [
    "Calibrated",
    "Contrib",
    "Release",
    "Sensitivity",
    "calibrate",
    "granularity_for",
    "pow2_below",
    "sensitivity",
]

#: Lattice bits below the noise scale (Laplace) or sigma (Gaussian): rounding is far below
#: the noise, and the integer noise parameter stays inside the exact samplers' range.
NOISE_BITS = {"laplace": 40, "gaussian": 16}
#: Lattice bits below a per-cell bound: per-row integers stay below 2^21 (exact int64 sums).
DATA_BITS = 20
#: The smallest positive double, 2^-1074 (subnormal): the finest lattice step there is.
MIN_STEP = math.ldexp(1.0, -1074)


def pow2_below(x: float, bits: int) -> float:
    """The power of two 2^(e - 1 - bits) for ``x`` in [2^(e-1), 2^e), at least 2^-1074: a
    subnormal ``x`` (e.g. a bound of 5e-324) would otherwise give a step of 0, and a
    division by it. Any power-of-two step is private (the sensitivity is counted in
    steps); a coarse one only rounds more (each value by at most half a step)."""
    return max(math.ldexp(1.0, math.frexp(x)[1] - 1 - bits), MIN_STEP)


@dataclass(frozen=True, slots=True)
class Contrib:
    """What one unit changes in one group's coordinates (integers, lattice units).

    Adding or removing the unit: L1 <= ``a1``, squared L2 <= ``a2sq``; replacing it by
    another unit in the same group: L1 <= ``r1``, squared L2 <= ``r2sq``. ``scalar``: one
    coordinate per group (then the exact PLD of the composition over groups is known)."""

    a1: int
    a2sq: int
    r1: int
    r2sq: int
    scalar: bool

    @classmethod
    def interval(cls, lo: int, hi: int) -> Contrib:
        """A scalar per-cell total in [lo, hi]; an absent unit contributes 0."""
        lo, hi = min(lo, 0), max(hi, 0)
        a, r = max(-lo, hi), hi - lo
        return cls(a, a * a, r, r * r, True)

    @classmethod
    def counts(cls, rows: int) -> Contrib:
        """A non-negative integer vector with total at most ``rows`` (a histogram)."""
        return cls(rows, rows * rows, 2 * rows, 2 * rows * rows, False)


@dataclass(frozen=True, slots=True)
class Sensitivity:
    """Of the whole release over groups: L1, squared L2 (integers), and for scalar
    add/remove releases the number ``k`` of groups one unit can change (PLD composition)."""

    l1: int
    l2sq: int
    k: int | None


def sensitivity(c: Contrib, max_groups: int, groups: int | None,
                neighbouring: Neighbouring) -> Sensitivity:
    """docs/proofs/queries.md §3. ``groups``: the number of public keys (None: observed)."""
    k = max_groups if groups is None else max(1, min(max_groups, groups))
    if neighbouring == Neighbouring.ADD_REMOVE:
        return Sensitivity(k * c.a1, k * c.a2sq, k if c.scalar else None)
    if groups == 1:  # one group: the replaced unit's and the new unit's cells coincide
        return Sensitivity(c.r1, c.r2sq, None)
    return Sensitivity(k * max(c.r1, 2 * c.a1), k * max(c.r2sq, 2 * c.a2sq), None)


@dataclass(frozen=True, slots=True)
class Release:
    """One released integer vector per group: ``dims`` coordinates, ``unit`` answer units
    per lattice unit, the per-group contribution bound ``contrib``."""

    name: str
    dims: int
    unit: float
    contrib: Contrib


def _share(total: PrivacyDescription, share: Fraction) -> Fraction:
    if isinstance(total, PureDP):
        return Fraction(total.eps) * share
    if isinstance(total, ZCDP):
        return Fraction(total.rho) * share
    raise fail("privacy", "query", "PureDP(eps) or ZCDP(rho)", total)


def noise_level(total: PrivacyDescription, share: Fraction, l1: float, l2: float) -> float:
    """The approximate noise scale (Laplace b or Gaussian sigma) for real sensitivities:
    only used to choose a lattice, never for the privacy claim."""
    s = float(_share(total, share))
    if not s > 0:  # a subnormal eps or rho whose share underflows: calibrate refuses it
        return math.inf
    if isinstance(total, PureDP):
        return l1 / s
    return l2 / math.sqrt(2.0 * s)


def granularity_for(bound: float, total: PrivacyDescription, share: Fraction, k: int) -> float:
    """The power-of-two lattice step for a per-cell bound ``bound`` (real units) released
    over ``k`` groups at ``share`` of ``total``: the larger of 2^-20 of the bound and 2^-40
    (Laplace) or 2^-20 (Gaussian) of the noise scale. Any step is private; this one keeps
    the rounding far below the noise and every integer within the exact samplers' range.
    """
    if not (bound > 0) or not math.isfinite(bound):
        raise fail("upper", "query", "bounds with a finite non-zero magnitude", bound)
    fam = "laplace" if isinstance(total, PureDP) else "gaussian"
    noise = noise_level(total, share, 2.0 * k * bound, 2.0 * math.sqrt(k) * bound)
    gd = pow2_below(bound, DATA_BITS)
    gn = pow2_below(noise, NOISE_BITS[fam]) if 0 < noise < math.inf else 0.0
    return max(gd, gn)


def _ceil_float(q: Fraction) -> float:
    return round_fraction(q, upper=True)


@dataclass(frozen=True, slots=True)
class Calibrated:
    """A release with its mechanism; ``charge`` is its share of the query's privacy (the
    mechanism's own statement is at most that, checked exactly)."""

    release: Release
    sens: Sensitivity
    mechanism: DiscreteLaplaceMechanism | DiscreteGaussianMechanism
    charge: PrivacyDescription

    @property
    def family(self) -> str:
        return "laplace" if isinstance(self.mechanism, DiscreteLaplaceMechanism) else "gaussian"

    def noise(self) -> Noise:
        m = self.mechanism
        if isinstance(m, DiscreteLaplaceMechanism):
            return dlap_noise(m.scale, self.release.unit)
        return dgauss_noise(float(m.sampled_sigma2), self.release.unit)

    def halfwidth(self, level: float) -> float:
        """Half-width of an interval holding one coordinate's noise with prob. >= level."""
        m = self.mechanism
        if isinstance(m, DiscreteLaplaceMechanism):
            return dlap_halfwidth(m.scale, level) * self.release.unit
        return dgauss_halfwidth(float(m.sampled_sigma2), level) * self.release.unit

    def draw(self, exact: npt.NDArray[Any], rng: np.random.Generator | None
             ) -> npt.NDArray[np.float64]:
        """``unit * (exact + Z)`` for an integer array of any shape (exact: int64 or
        Python ints); the sum is taken in Python integers when int64 could overflow."""
        flat = np.asarray(exact).reshape(-1)
        if flat.size == 0:
            return np.zeros(np.shape(exact), dtype=np.float64)
        z = np.asarray(self.mechanism.sample(flat.size, rng), dtype=np.int64).reshape(-1)
        tot = [int(a) + int(b) for a, b in zip(flat.tolist(), z.tolist(), strict=True)]
        out = np.asarray([float(t) * self.release.unit for t in tot], dtype=np.float64)
        return out.reshape(np.shape(exact))

    def details(self) -> dict[str, Any]:
        m = self.mechanism
        d: dict[str, Any] = {"mechanism": "discrete_" + self.family,
                             "granularity": self.release.unit,
                             "integer_sensitivity": self.sens.l1 if self.family == "laplace"
                             else math.isqrt(self.sens.l2sq - 1) + 1,
                             "l1_sensitivity": self.sens.l1,
                             "l2_sensitivity_squared": self.sens.l2sq}
        if isinstance(m, DiscreteLaplaceMechanism):
            d["lattice_scale"] = m.scale
        else:
            d["lattice_sigma"] = m.sigma
            d["lattice_sigma2"] = str(m.sampled_sigma2)
        d["privacy"] = self.charge.to_dict()
        return d

    def pld(self) -> PLD | None:
        """The exact PLD of this release (scalar add/remove releases: the composition of
        ``k`` one-group mechanisms; otherwise the mechanism's own, or None)."""
        m = self.mechanism
        if self.sens.k is not None:
            c = self.release.contrib
            one: PLD
            if isinstance(m, DiscreteLaplaceMechanism):
                one = DiscreteLaplaceMechanism(m.scale, c.a1).pld()
            else:
                one = DiscreteGaussianMechanism(m.sigma, float(c.a1)).pld()
            return one if self.sens.k == 1 else one.self_compose(self.sens.k)
        if isinstance(m, DiscreteLaplaceMechanism):
            return m.pld()
        return None


def calibrate(rel: Release, sens: Sensitivity, total: PrivacyDescription, share: Fraction,
              groups: int) -> Calibrated:
    """The mechanism for ``rel`` at ``share`` of ``total`` (docs/proofs/queries.md §4).

    Laplace: lattice scale t = L1 / eps_share rounded up, so L1 / t <= eps_share exactly.
    Gaussian: sigma rounded up until L2^2 / (2 s^2) <= rho_share exactly, s^2 the sampler's
    variance parameter (>= sigma^2). Refused (ValidationError naming 'privacy') when the
    noise would leave the exact samplers' range.
    """
    budget = _share(total, share)
    dim = max(1, groups * rel.dims)
    if sens.l1 == 0:  # nothing the data could change: released exactly at no cost
        sens = Sensitivity(1, 1, sens.k)
    if isinstance(total, PureDP):
        t = _ceil_float(Fraction(sens.l1) / budget)
        if not t <= MAX_DISCRETE_SCALE:
            raise fail("privacy", "query", "large enough for the query's sensitivity (the "
                       f"noise scale {t!r} exceeds the exact sampler's limit "
                       f"{MAX_DISCRETE_SCALE!r})", total)
        lap = DiscreteLaplaceMechanism(t, sens.l1, total.neighbouring, dim)
        if not Fraction(sens.l1) <= budget * Fraction(t):  # cannot happen: t rounded up
            raise NumericalError(f"Laplace scale {t!r} below L1 / eps for {rel.name!r}")
        return Calibrated(rel, sens, lap, PureDP(_ceil_float(budget), total.neighbouring))
    if not isinstance(total, ZCDP):
        raise fail("privacy", "query", "PureDP(eps) or ZCDP(rho)", total)
    from dpsieve.mechanisms.noise import sampled_sigma2

    # one coordinate: the mechanism's integer sensitivity k = ceil(sqrt(L2^2)) is charged
    k2 = (math.isqrt(sens.l2sq - 1) + 1) ** 2 if dim == 1 else sens.l2sq
    # refused before float(), which overflows at a subnormal rho (OverflowError: a 5xx)
    if Fraction(k2) / (2 * budget) > Fraction(MAX_DISCRETE_SIGMA) ** 2:
        raise fail("privacy", "query", "large enough for the query's sensitivity (sigma "
                   f"would exceed the exact sampler's limit {MAX_DISCRETE_SIGMA!r})", total)
    sigma = max(math.sqrt(float(Fraction(k2) / (2 * budget))), MIN_DISCRETE_SIGMA)
    while sigma <= MAX_DISCRETE_SIGMA and Fraction(k2) > 2 * budget * sampled_sigma2(
            sigma, "query"):
        sigma = next_up(sigma)
    if not sigma <= MAX_DISCRETE_SIGMA:
        raise fail("privacy", "query", "large enough for the query's sensitivity (sigma "
                   f"{sigma!r} exceeds the exact sampler's limit {MAX_DISCRETE_SIGMA!r})",
                   total)
    l2 = math.sqrt(float(k2))
    while Fraction(l2) ** 2 < k2:
        l2 = next_up(l2)
    gauss = DiscreteGaussianMechanism(sigma, l2, total.neighbouring, dim)
    return Calibrated(rel, sens, gauss, ZCDP(_ceil_float(budget), total.neighbouring))
