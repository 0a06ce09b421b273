"""Selection mechanisms as mechanism objects (samplers in :mod:`.select`).

Each is eps-DP for scores of the stated sensitivity under its neighbouring relation. Their
PLD is ``R_eps`` = ``PLD.pure_dp(eps)``, which dominates every eps-DP mechanism (Kairouz,
Oh, Viswanath 2015, Thm. 2.1) -- pessimistic, not the exact worst case of each mechanism.
The exponential mechanism (and report-noisy-max with Gumbel noise, the same distribution)
is also eps-bounded-range, hence eps^2/8-zCDP (Cesar & Rogers 2021, Lemma 3.2 / Durfee &
Rogers 2019); that ``rho`` is reported by ``zcdp_rho()`` for non-monotonic scores.

``under(replace_one)`` doubles both the score sensitivity and eps: the sampler (which uses
``eps / (2 sensitivity)``) is unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

import numpy.typing as npt

from dpsieve._validation import check_positive, fail
from dpsieve.accounting.events import Neighbouring
from dpsieve.accounting.families import round_fraction
from dpsieve.mechanisms._families import PureDPPrivacy
from dpsieve.mechanisms._random import RNG
from dpsieve.mechanisms.base import as_relation, convert_sensitivity
from dpsieve.mechanisms.select import (
    above_threshold,
    exponential_mechanism,
    permute_and_flip,
    report_noisy_max,
)

if TYPE_CHECKING:
    from dpsieve.accounting.pld import PLD

__all__ = [
    "AboveThreshold",
    "ExponentialMechanism",
    "PermuteAndFlip",
    "ReportNoisyMax",
]


@dataclass(frozen=True, slots=True)
class _PureSelection(PureDPPrivacy):
    eps: float
    sensitivity: float = 1.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    monotonic: bool = False

    def __post_init__(self) -> None:
        o = type(self).__name__
        check_positive("eps", self.eps, o)
        check_positive("sensitivity", self.sensitivity, o)
        if not isinstance(self.monotonic, bool):
            raise fail("monotonic", o, "a bool", self.monotonic)
        object.__setattr__(self, "neighbouring", as_relation(self.neighbouring, o))

    def pure_eps(self) -> float:
        return self.eps

    def pld(self) -> PLD:
        from dpsieve.accounting.pld import PLD

        return PLD.pure_dp(self.eps)

    def under(self, neighbouring: Neighbouring) -> Any:
        nb = as_relation(neighbouring, "under")
        s = convert_sensitivity(self.sensitivity, self.neighbouring, nb, type(self).__name__)
        factor = Fraction(s) / Fraction(self.sensitivity)
        eps = round_fraction(Fraction(self.eps) * factor, upper=True)
        return replace(self, eps=eps, sensitivity=s, neighbouring=nb)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": type(self).__name__,
            "eps": self.eps,
            "sensitivity": self.sensitivity,
            "neighbouring": self.neighbouring.value,
            "monotonic": self.monotonic,
        }


@dataclass(frozen=True, slots=True)
class ExponentialMechanism(_PureSelection):
    """P[r] proportional to exp(eps q_r / (2 Delta)) (Gumbel-max; see :mod:`.select`)."""

    def zcdp_rho(self) -> float | None:
        if self.monotonic:
            return None
        return round_fraction(Fraction(self.eps) ** 2 / 8, upper=True)

    def release(self, scores: npt.ArrayLike, rng: RNG = None, *, exact: bool = False) -> int:
        return exponential_mechanism(
            scores, self.eps, self.sensitivity, rng, monotonic=self.monotonic, exact=exact
        )


@dataclass(frozen=True, slots=True)
class PermuteAndFlip(_PureSelection):
    """Permute-and-flip (McKenna & Sheldon 2020) with exact coin flips."""

    def release(self, scores: npt.ArrayLike, rng: RNG = None) -> int:
        return permute_and_flip(scores, self.eps, self.sensitivity, rng, monotonic=self.monotonic)


@dataclass(frozen=True, slots=True)
class ReportNoisyMax(_PureSelection):
    """Report-noisy-max with exponential noise (= permute-and-flip in distribution)."""

    def release(self, scores: npt.ArrayLike, rng: RNG = None) -> int:
        return report_noisy_max(scores, self.eps, self.sensitivity, rng, monotonic=self.monotonic)


@dataclass(frozen=True, slots=True)
class AboveThreshold(_PureSelection):
    """AboveThreshold / sparse vector with one positive answer (Lyu, Su, Li 2017, Alg. 1)."""

    def release(self, queries: npt.ArrayLike, threshold: float, rng: RNG = None) -> int | None:
        return above_threshold(
            queries, threshold, self.eps, self.sensitivity, rng, monotonic=self.monotonic
        )
