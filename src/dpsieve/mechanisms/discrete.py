"""Integer-valued mechanisms: discrete Laplace (geometric) and discrete Gaussian noise, and
k-ary randomized response.

* :class:`DiscreteLaplaceMechanism`: pure eps = Delta / scale (Ghosh, Roughgarden,
  Sundararajan 2009, the two-sided geometric mechanism; CKS 2020). PLD: the discrete
  Laplace PLD (d = 1), R_eps for d > 1.
* :class:`DiscreteGaussianMechanism`: rho = Delta^2 / (2 sigma^2)-zCDP (CKS 2020, Thm. 4
  and Thm. 14); ``sigma^2`` is the exact sampled variance parameter (rounded up from the
  request, see :func:`~dpsieve.mechanisms.noise.sampled_sigma2`). PLD: the discrete
  Gaussian PLD (d = 1).
* :class:`RandomizedResponse`: k-ary randomized response (Warner 1965; Kairouz, Oh,
  Viswanath 2016): report the true value with probability e^eps / (e^eps + k - 1), else a
  uniformly chosen other value. eps-DP between any two inputs, i.e. under replace-one.
  Sampled exactly by rejection: propose a uniform value, accept the true one always and
  any other with an exact Bernoulli(e^-eps) (CKS Algorithm 1 on the rational eps). Each
  round accepts with probability 1/k + (k-1) e^-eps / k whatever the input, so the running
  time does not depend on the input.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, check_nonnegative, check_positive, fail, fail_private
from dpsieve.accounting.events import Neighbouring
from dpsieve.accounting.families import round_fraction
from dpsieve.errors import UnsupportedError
from dpsieve.mechanisms import _scalar
from dpsieve.mechanisms._families import (
    DiscreteGaussianAccounting,
    DiscreteLaplaceAccounting,
    PureDPPrivacy,
)
from dpsieve.mechanisms._random import RNG, as_source
from dpsieve.mechanisms.base import as_relation, convert_sensitivity
from dpsieve.mechanisms.noise import (
    MAX_DISCRETE_SCALE,
    discrete_gaussian,
    discrete_laplace,
    sampled_sigma2,
)

if TYPE_CHECKING:
    from dpsieve.accounting.pld import PLD

__all__ = [
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "RandomizedResponse",
    "randomized_response",
]

I64 = npt.NDArray[np.int64]


def _values(value: npt.ArrayLike, d: int, owner: str) -> tuple[list[int], bool]:
    """The integers to release, exact (Python ints of any size: no error and no wrap-around
    depends on their magnitude); errors never show them (they are private data)."""
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    ok = flat.size == d and (np.issubdtype(flat.dtype, np.integer) or (
        flat.dtype == object and all(isinstance(v, int | np.integer)
                                     and not isinstance(v, bool) for v in flat.tolist())))
    if not ok:
        raise fail_private("value", owner, f"an integer or {d} integers (dimension)", value)
    return [int(v) for v in flat.tolist()], arr.ndim == 0


def _plus(flat: list[int], noise: I64, scalar: bool) -> int | npt.NDArray[Any]:
    """``value + Z`` exactly; an int64 array when every output fits, else Python ints (the
    dtype depends on the output only: post-processing)."""
    out = [a + int(b) for a, b in zip(flat, noise.tolist(), strict=True)]
    if scalar:
        return out[0]
    if all(-(2**63) <= v < 2**63 for v in out):
        return np.asarray(out, dtype=np.int64)
    return np.asarray(out, dtype=object)


@dataclass(frozen=True, slots=True)
class DiscreteLaplaceMechanism(DiscreteLaplaceAccounting):
    """Integer values + discrete Laplace noise (the two-sided geometric mechanism of Ghosh,
    Roughgarden, Sundararajan 2009): pure eps = sensitivity / scale (L1, integer)."""

    scale: float
    sensitivity: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    dimension: int = 1

    def __post_init__(self) -> None:
        o = "DiscreteLaplaceMechanism"
        check_positive("scale", self.scale, o)
        if not self.scale <= MAX_DISCRETE_SCALE:
            raise fail("scale", o, f"a float in (0, {MAX_DISCRETE_SCALE}]", self.scale)
        check_int("sensitivity", self.sensitivity, o, minimum=1)
        check_int("dimension", self.dimension, o, minimum=1)
        object.__setattr__(self, "neighbouring", as_relation(self.neighbouring, o))

    @classmethod
    def for_epsilon(cls, eps: float, sensitivity: int = 1, **kw: Any) -> DiscreteLaplaceMechanism:
        """scale = sensitivity / eps rounded up (so the exact eps is at most ``eps``)."""
        e = Fraction(check_positive("eps", eps, "for_epsilon"))
        return cls(round_fraction(Fraction(sensitivity) / e, upper=True), sensitivity, **kw)

    def _dlap_parameters(self) -> tuple[float, int]:
        """(t, k) = (scale, sensitivity): eps = k / t, PLD of DLap(t) for d = 1."""
        return self.scale, self.sensitivity

    def under(self, neighbouring: Neighbouring) -> DiscreteLaplaceMechanism:
        nb = as_relation(neighbouring, "under")
        s = convert_sensitivity(self.sensitivity, self.neighbouring, nb, "DiscreteLaplace")
        return replace(self, sensitivity=int(s), neighbouring=nb)

    def sample(self, size: int | None = None, rng: RNG = None) -> int | I64:
        return discrete_laplace(self.scale, size, rng)

    def release(self, value: npt.ArrayLike, rng: RNG = None) -> int | npt.NDArray[Any]:
        """``value + Z`` for integer ``value`` (``dimension`` entries), exact at any size."""
        flat, scalar = _values(value, self.dimension, "DiscreteLaplaceMechanism.release")
        return _plus(flat, discrete_laplace(self.scale, self.dimension, rng), scalar)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": "discrete_laplace",
            "scale": self.scale,
            "sensitivity": self.sensitivity,
            "neighbouring": self.neighbouring.value,
            "dimension": self.dimension,
        }


@dataclass(frozen=True, slots=True)
class DiscreteGaussianMechanism(DiscreteGaussianAccounting):
    """Integer values + discrete Gaussian noise (CKS 2020). ``sensitivity`` is the L2 bound
    on integer shift vectors (for d = 1 only ``floor(sensitivity)`` matters)."""

    sigma: float
    sensitivity: float = 1.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    dimension: int = 1

    _NO_MULTIVARIATE_PLD: ClassVar[str] = (
        "DiscreteGaussianMechanism.pld(): no exact multivariate PLD is implemented; "
        "use privacy() (zCDP) for dimension > 1."
    )

    def __post_init__(self) -> None:
        o = "DiscreteGaussianMechanism"
        sampled_sigma2(self.sigma, o)
        check_positive("sensitivity", self.sensitivity, o)
        check_int("dimension", self.dimension, o, minimum=1)
        object.__setattr__(self, "neighbouring", as_relation(self.neighbouring, o))
        if self.dimension == 1 and not self.sensitivity >= 1:
            raise fail("sensitivity", o, "a float >= 1 (integer shifts)", self.sensitivity)

    @property
    def sampled_sigma2(self) -> Fraction:
        """The exact variance parameter sampled (>= sigma^2; see :func:`sampled_sigma2`)."""
        return sampled_sigma2(self.sigma, "DiscreteGaussianMechanism")

    def _dgauss_parameters(self) -> tuple[Fraction, Fraction]:
        """(k, s^2): k = floor(sensitivity) for d = 1 (integer shifts), else sensitivity."""
        s = Fraction(self.sensitivity)
        k = Fraction(math.floor(s)) if self.dimension == 1 else s
        return k, self.sampled_sigma2

    def under(self, neighbouring: Neighbouring) -> DiscreteGaussianMechanism:
        nb = as_relation(neighbouring, "under")
        s = convert_sensitivity(self.sensitivity, self.neighbouring, nb, "DiscreteGaussian")
        return replace(self, sensitivity=s, neighbouring=nb)

    def sample(self, size: int | None = None, rng: RNG = None) -> int | I64:
        return discrete_gaussian(self.sigma, size, rng)

    def release(self, value: npt.ArrayLike, rng: RNG = None) -> int | npt.NDArray[Any]:
        """``value + Z`` for integer ``value`` (``dimension`` entries), exact at any size."""
        flat, scalar = _values(value, self.dimension, "DiscreteGaussianMechanism.release")
        return _plus(flat, discrete_gaussian(self.sigma, self.dimension, rng), scalar)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": "discrete_gaussian",
            "sigma": self.sigma,
            "sensitivity": self.sensitivity,
            "neighbouring": self.neighbouring.value,
            "dimension": self.dimension,
        }


def randomized_response(value: int, k: int, eps: float, rng: RNG = None) -> int:
    """k-ary randomized response of ``value`` in ``{0, ..., k-1}`` (exact; module docstring)."""
    owner = "randomized_response"
    k = check_int("k", k, owner, minimum=2)
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise fail_private("value", owner, "an int >= 0", value)
    value = int(value)
    if value >= k:
        raise fail_private("value", owner, f"an int in [0, {k - 1}]", value)
    e = (
        Fraction(check_nonnegative("eps", eps, owner, allow_inf=True))
        if math.isfinite(eps)
        else None
    )
    src = as_source(rng, owner)
    while True:
        y = src.below_int(k)
        if y == value:
            return y
        if e is not None and _scalar.bern_exp(e.numerator, e.denominator, src):
            return y


@dataclass(frozen=True, slots=True)
class RandomizedResponse(PureDPPrivacy):
    """k-ary randomized response: eps-DP under replace-one (any two inputs). Its PLD is the
    randomized-response PLD, exactly (two atoms +-eps after the k-2 uninformative outputs
    cancel); it is not defined under add/remove (a local report reveals presence)."""

    eps: float
    k: int = 2
    neighbouring: Neighbouring = Neighbouring.REPLACE_ONE

    def __post_init__(self) -> None:
        o = "RandomizedResponse"
        check_positive("eps", self.eps, o)
        check_int("k", self.k, o, minimum=2)
        nb = as_relation(self.neighbouring, o)
        if nb != Neighbouring.REPLACE_ONE:
            raise UnsupportedError(
                "RandomizedResponse protects a change of one value (replace-one); under "
                "add/remove a local report reveals the presence of a record."
            )
        object.__setattr__(self, "neighbouring", nb)

    def pure_eps(self) -> float:
        return self.eps

    def pld(self) -> PLD:
        from dpsieve.accounting.pld import PLD

        return PLD.randomized_response(self.eps, self.k)

    def under(self, neighbouring: Neighbouring) -> RandomizedResponse:
        return replace(self, neighbouring=as_relation(neighbouring, "under"))

    def release(self, value: int, rng: RNG = None) -> int:
        return randomized_response(value, self.k, self.eps, rng)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": "randomized_response",
            "eps": self.eps,
            "k": self.k,
            "neighbouring": self.neighbouring.value,
        }
