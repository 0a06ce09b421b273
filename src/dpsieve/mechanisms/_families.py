"""Privacy methods shared by several mechanism classes (private mixins and a helper).

Each mixin is a plain class with empty ``__slots__``, so the frozen slotted dataclasses that
inherit it stay slotted. A mixin holds only code whose privacy statement is the same, word
for word, for every class using it; the class supplies the parameters through one hook.

* :class:`NoFamilies` -- ``gdp_mu``, ``zcdp_rho`` and ``rdp`` are ``None``: the mechanism
  claims none of these parameters (a pure-DP mechanism, or one accounted by its PLD only).
* :class:`NoFamilyParameters` -- as :class:`NoFamilies`, and ``pure_eps`` is ``None`` too.
* :class:`PureDPPrivacy` -- ``privacy() = PureDP(pure_eps(), neighbouring)``.
* :class:`DiscreteLaplaceAccounting` -- integer noise ``DLap(t)`` against an integer L1
  sensitivity ``k`` (hook ``_dlap_parameters() -> (t, k)``): pure ``eps = k / t``, rounded
  up (Ghosh, Roughgarden, Sundararajan 2009; Canonne, Kamath, Steinke 2020, Sec. 4). PLD:
  the discrete Laplace PLD for ``dimension == 1``, else ``R_eps = PLD.pure_dp(eps)``, which
  dominates every eps-DP mechanism (Kairouz, Oh, Viswanath 2015, Thm. 2.1).
* :class:`DiscreteGaussianAccounting` -- integer noise ``N_Z(0, s^2)`` against an L2
  sensitivity ``k`` (hook ``_dgauss_parameters() -> (k, s^2)``, both exact rationals, ``k``
  an integer when ``dimension == 1``): ``rho = k^2 / (2 s^2)``-zCDP rounded up (CKS 2020,
  Thm. 4 for d = 1, Thm. 14 for d > 1), hence ``(alpha, alpha rho)``-RDP for every order
  (Bun & Steinke 2016, Def. 1.1). PLD: the exact discrete Gaussian PLD for ``dimension ==
  1``; for d > 1 :class:`UnsupportedError` with the class's ``_NO_MULTIVARIATE_PLD``.
  No pure eps and no GDP parameter is claimed.

All derived parameters are rounded up (:func:`round_fraction` with ``upper=True``), so they
never report less privacy loss than the theorem gives.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, ClassVar, Protocol

from dpsieve.accounting.events import RDP, ZCDP, Neighbouring, PureDP
from dpsieve.accounting.families import round_fraction
from dpsieve.errors import UnsupportedError

if TYPE_CHECKING:
    from dpsieve.accounting.pld import PLD

__all__ = [
    "DiscreteGaussianAccounting",
    "DiscreteLaplaceAccounting",
    "NoFamilies",
    "NoFamilyParameters",
    "PureDPPrivacy",
]


class _Related(Protocol):
    @property
    def neighbouring(self) -> Neighbouring: ...


class _PureLike(_Related, Protocol):
    def pure_eps(self) -> float: ...


class _DLapLike(_PureLike, Protocol):
    @property
    def dimension(self) -> int: ...

    def _dlap_parameters(self) -> tuple[float, int]: ...


class _DGaussLike(_Related, Protocol):
    _NO_MULTIVARIATE_PLD: ClassVar[str]

    @property
    def dimension(self) -> int: ...

    def _dgauss_parameters(self) -> tuple[Fraction, Fraction]: ...

    def zcdp_rho(self) -> float: ...


class NoFamilies:
    """``gdp_mu()``, ``zcdp_rho()`` and ``rdp(orders)`` are ``None`` (no such claim)."""

    __slots__ = ()

    def gdp_mu(self) -> float | None:
        return None

    def zcdp_rho(self) -> float | None:
        return None

    def rdp(self, orders: Sequence[float]) -> RDP | None:
        return None


class NoFamilyParameters(NoFamilies):
    """No family parameter at all: ``pure_eps()`` is ``None`` as well."""

    __slots__ = ()

    def pure_eps(self) -> float | None:
        return None


class PureDPPrivacy(NoFamilies):
    """``privacy()`` is ``PureDP(pure_eps(), neighbouring)``; no other family is claimed."""

    __slots__ = ()

    def privacy(self: _PureLike) -> PureDP:
        return PureDP(self.pure_eps(), self.neighbouring)


class DiscreteLaplaceAccounting(PureDPPrivacy):
    """Pure eps and PLD of integer discrete Laplace noise (module docstring)."""

    __slots__ = ()

    def pure_eps(self: _DLapLike) -> float:
        t, k = self._dlap_parameters()
        return round_fraction(Fraction(k) / Fraction(t), upper=True)

    def pld(self: _DLapLike) -> PLD:
        from dpsieve.accounting.pld import PLD

        if self.dimension == 1:
            return PLD.discrete_laplace(*self._dlap_parameters())
        return PLD.pure_dp(self.pure_eps())


class DiscreteGaussianAccounting:
    """zCDP, RDP and PLD of integer discrete Gaussian noise (module docstring)."""

    __slots__ = ()

    def zcdp_rho(self: _DGaussLike) -> float:
        k, s2 = self._dgauss_parameters()
        return round_fraction(k * k / (2 * s2), upper=True)

    def pure_eps(self) -> float | None:
        return None

    def gdp_mu(self) -> float | None:
        return None

    def rdp(self: _DGaussLike, orders: Sequence[float]) -> RDP:
        rho = self.zcdp_rho()
        return RDP(tuple(orders), tuple(a * rho for a in orders), self.neighbouring)

    def privacy(self: _DGaussLike) -> ZCDP:
        return ZCDP(self.zcdp_rho(), self.neighbouring)

    def pld(self: _DGaussLike) -> PLD:
        from dpsieve.accounting.pld import PLD

        if self.dimension != 1:
            raise UnsupportedError(self._NO_MULTIVARIATE_PLD)
        k, s2 = self._dgauss_parameters()
        return PLD.discrete_gaussian(math.sqrt(float(s2)), int(k))
