"""Real-valued additive noise mechanisms: Laplace and Gaussian, realised on a lattice.

Real-valued releases (:class:`LaplaceMechanism`, :class:`GaussianMechanism`) run on the
lattice ``g Z`` with ``g`` a power of two (default ``2^(floor(log2 Delta) - 10)``, so a
sensitivity that is a power of two costs nothing; for the Gaussian at least
``2^(floor(log2 sigma) - 24)``, which only binds when sigma > 2^14 Delta): the value is
snapped to ``g Z`` (:func:`~dpsieve.mechanisms.noise.snap_to_lattice`), exact integer
noise is added, and the integer is scaled by ``g`` (post-processing). This defeats the
floating-point attack of Mironov (2012) and makes the privacy *exactly* that of an integer
mechanism:

* lattice sensitivity ``k = ceil(Delta / g) + d - 1`` in L1 (snapping moves each of ``d``
  coordinates by less than one step; for d = 1, ``k = ceil(Delta / g)``), and
  ``k_2 = Delta / g + sqrt(d)`` in L2 (triangle inequality);
* Laplace: discrete Laplace with scale ``t = scale / g``: pure ``eps = k / t`` (Ghosh,
  Roughgarden, Sundararajan 2009; CKS 2020 Sec. 4); its PLD is the discrete Laplace PLD
  for d = 1 and ``R_eps`` (which dominates every eps-DP mechanism, Kairouz et al. 2015)
  for d > 1;
* Gaussian: discrete Gaussian with ``sigma_Z^2 = sampled_sigma2(sigma / g)``: ``rho =
  k_2^2 / (2 sigma_Z^2)``-zCDP (CKS 2020, Thm. 4 for d = 1 and Thm. 14 for d > 1); its PLD
  is the discrete Gaussian PLD for d = 1. No GDP parameter is claimed: the discrete
  Gaussian is not shown to be dominated by G_{k/sigma}.

All derived privacy parameters are rounded up (:func:`round_fraction`), noise scales are
used exactly as stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, ClassVar, cast

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import sqrt_up
from dpsieve._validation import check_int, check_positive, fail, fail_private
from dpsieve.accounting.events import Neighbouring
from dpsieve.accounting.families import round_fraction
from dpsieve.mechanisms._families import DiscreteGaussianAccounting, DiscreteLaplaceAccounting
from dpsieve.mechanisms._random import RNG, as_source
from dpsieve.mechanisms.base import as_relation, convert_sensitivity
from dpsieve.mechanisms.noise import (
    MAX_DISCRETE_SCALE,
    add_noise_exact,
    discrete_gaussian,
    discrete_laplace,
    lattice_to_float,
    sampled_sigma2,
    snap_exact,
)

__all__ = [
    "SENSITIVITY_LATTICE_BITS",
    "GaussianMechanism",
    "LaplaceMechanism",
]

#: Default lattice: g = 2^(floor(log2 sensitivity) - SENSITIVITY_LATTICE_BITS).
SENSITIVITY_LATTICE_BITS = 10

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]


def _lattice(g: float | None, sensitivity: float, owner: str) -> float:
    if g is None:
        return math.ldexp(1.0, math.frexp(sensitivity)[1] - 1 - SENSITIVITY_LATTICE_BITS)
    g = check_positive("granularity", g, owner)
    if math.frexp(g)[0] != 0.5:
        raise fail("granularity", owner, "a power of two (e.g. 2.0**-20)", g)
    return g


def _values(value: npt.ArrayLike, d: int, owner: str) -> tuple[npt.NDArray[np.float64], bool]:
    """The value to release as floats; errors never show it (it is private data)."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise fail_private("value", owner, f"a number or {d} numbers", value) from None
    scalar = arr.ndim == 0
    flat = arr.reshape(-1)
    if flat.size != d:
        raise fail_private("value", owner, f"a scalar or array of {d} values (dimension)",
                           value)
    return flat, scalar


def _release(flat: npt.NDArray[np.float64], g: float, noise: I64, scalar: bool,
             owner: str) -> float | F64:
    """``g (snap(value) + Z)`` in exact integers, whatever the value's magnitude (no
    error, no wrap-around), then the nearest floats (saturating)."""
    out = lattice_to_float(add_noise_exact(snap_exact(flat, g, owner), noise), g)
    return float(out[0]) if scalar else out


def _on_lattice(z: I64, g: float, scalar: bool) -> float | F64:
    """``g z`` as floats (post-processing of the integer release); a float if ``scalar``."""
    out = z.astype(np.float64) * g
    return float(out[0]) if scalar else out


def _check_lattice_mechanism(m: LaplaceMechanism | GaussianMechanism, owner: str) -> float:
    """Validate ``m``'s sensitivity, dimension and relation (stored as the enum); return the
    lattice step g requested or defaulted (:func:`_lattice`, before any class-specific
    adjustment)."""
    check_positive("sensitivity", m.sensitivity, owner)
    check_int("dimension", m.dimension, owner, minimum=1)
    object.__setattr__(m, "neighbouring", as_relation(m.neighbouring, owner))
    return _lattice(m.granularity, m.sensitivity, owner)


@dataclass(frozen=True, slots=True)
class LaplaceMechanism(DiscreteLaplaceAccounting):
    """Real values + Laplace noise of ``scale``, realised exactly on the lattice ``g Z``.

    eps = k g / scale (module docstring), not ``sensitivity / scale``: the lattice adds at
    most ``(d - 1 + [Delta/g not an integer]) g`` to the sensitivity.
    """

    scale: float
    sensitivity: float = 1.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    dimension: int = 1
    granularity: float | None = None

    def __post_init__(self) -> None:
        o = "LaplaceMechanism"
        check_positive("scale", self.scale, o)
        g = _check_lattice_mechanism(self, o)
        object.__setattr__(self, "granularity", g)
        if not self.scale / g <= MAX_DISCRETE_SCALE:
            raise fail("scale", o, f"at most {MAX_DISCRETE_SCALE} * granularity", self.scale)

    @classmethod
    def for_epsilon(cls, eps: float, sensitivity: float = 1.0, **kw: Any) -> LaplaceMechanism:
        """The mechanism with the smallest lattice scale whose exact eps is at most ``eps``."""
        probe = cls(1.0, sensitivity, **kw)
        g = Fraction(probe.step)
        t = Fraction(probe.lattice_sensitivity) / Fraction(
            check_positive("eps", eps, "for_epsilon")
        )
        return replace(probe, scale=round_fraction(t * g, upper=True))

    @property
    def step(self) -> float:
        """The lattice step g."""
        return cast(float, self.granularity)  # resolved in __post_init__

    @property
    def lattice_sensitivity(self) -> int:
        """k = ceil(Delta / g) + d - 1 (L1, integer lattice units)."""
        return math.ceil(Fraction(self.sensitivity) / Fraction(self.step)) + self.dimension - 1

    @property
    def lattice_scale(self) -> float:
        """t = scale / g (exact: g is a power of two)."""
        return self.scale / self.step

    def _dlap_parameters(self) -> tuple[float, int]:
        """(t, k) = (lattice_scale, lattice_sensitivity): eps = k / t (module docstring)."""
        return self.lattice_scale, self.lattice_sensitivity

    def under(self, neighbouring: Neighbouring) -> LaplaceMechanism:
        nb = as_relation(neighbouring, "under")
        s = convert_sensitivity(self.sensitivity, self.neighbouring, nb, "LaplaceMechanism")
        return replace(self, sensitivity=s, neighbouring=nb)

    def sample(self, size: int | None = None, rng: RNG = None) -> float | F64:
        """Noise only: ``g * DLap(scale / g)`` (a float if ``size`` is None)."""
        z = discrete_laplace(self.lattice_scale, 1 if size is None else size, rng)
        return _on_lattice(z, self.step, size is None)

    def release(self, value: npt.ArrayLike, rng: RNG = None) -> float | F64:
        """``g (snap(value) + Z)``: the private release (``value`` has ``dimension`` entries)."""
        o = "LaplaceMechanism.release"
        flat, scalar = _values(value, self.dimension, o)
        z = discrete_laplace(self.lattice_scale, self.dimension, as_source(rng, "release").gen)
        return _release(flat, self.step, z, scalar, o)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": "laplace",
            "scale": self.scale,
            "sensitivity": self.sensitivity,
            "neighbouring": self.neighbouring.value,
            "dimension": self.dimension,
            "granularity": self.step,
        }


@dataclass(frozen=True, slots=True)
class GaussianMechanism(DiscreteGaussianAccounting):
    """Real values + Gaussian noise ``sigma``, realised exactly as a discrete Gaussian on
    ``g Z`` (L2 ``sensitivity``). zCDP and, for d = 1, the exact discrete-Gaussian PLD."""

    sigma: float
    sensitivity: float = 1.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    dimension: int = 1
    granularity: float | None = None

    _NO_MULTIVARIATE_PLD: ClassVar[str] = (
        "GaussianMechanism.pld(): no exact PLD of the multivariate discrete Gaussian "
        "is implemented; use privacy() (zCDP) for dimension > 1."
    )

    def __post_init__(self) -> None:
        o = "GaussianMechanism"
        check_positive("sigma", self.sigma, o)
        g = _check_lattice_mechanism(self, o)
        if self.granularity is None:  # keep sigma / g <= 2^25 (the exact sampler's range)
            g = max(g, math.ldexp(1.0, math.frexp(self.sigma)[1] - 1 - 24))
        object.__setattr__(self, "granularity", g)
        sampled_sigma2(self.sigma / self.step, o)  # validates the lattice sigma's range

    @property
    def step(self) -> float:
        """The lattice step g."""
        return cast(float, self.granularity)  # resolved in __post_init__

    @property
    def lattice_sigma2(self) -> Fraction:
        """The exact variance parameter of the integer noise (>= (sigma / g)^2)."""
        return sampled_sigma2(self.sigma / self.step, "GaussianMechanism")

    @property
    def lattice_sensitivity(self) -> Fraction:
        """An upper bound on the L2 lattice sensitivity (exact integer for d = 1)."""
        k = Fraction(self.sensitivity) / Fraction(self.step)
        if self.dimension == 1:
            return Fraction(math.ceil(k))
        return k + Fraction(sqrt_up(self.dimension))

    def _dgauss_parameters(self) -> tuple[Fraction, Fraction]:
        """(k_2, s^2) = (lattice_sensitivity, lattice_sigma2) (module docstring)."""
        return self.lattice_sensitivity, self.lattice_sigma2

    def under(self, neighbouring: Neighbouring) -> GaussianMechanism:
        nb = as_relation(neighbouring, "under")
        s = convert_sensitivity(self.sensitivity, self.neighbouring, nb, "GaussianMechanism")
        return replace(self, sensitivity=s, neighbouring=nb)

    def sample(self, size: int | None = None, rng: RNG = None) -> float | F64:
        """Noise only: ``g * N_Z(0, lattice_sigma2)``."""
        z = discrete_gaussian(self.sigma / self.step, 1 if size is None else size, rng)
        return _on_lattice(z, self.step, size is None)

    def release(self, value: npt.ArrayLike, rng: RNG = None) -> float | F64:
        """``g (snap(value) + Z)``: the private release (``value`` has ``dimension`` entries)."""
        o = "GaussianMechanism.release"
        flat, scalar = _values(value, self.dimension, o)
        z = discrete_gaussian(self.sigma / self.step, self.dimension,
                              as_source(rng, "release").gen)
        return _release(flat, self.step, z, scalar, o)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": "gaussian",
            "sigma": self.sigma,
            "sensitivity": self.sensitivity,
            "neighbouring": self.neighbouring.value,
            "dimension": self.dimension,
            "granularity": self.step,
        }
