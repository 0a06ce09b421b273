"""Exceptions raised by dpsieve.

One root, families that subclass the matching built-in so callers can catch either::

    DPError
    ├── ValidationError(ValueError)        bad input; names parameter, constraint, value
    ├── BudgetExceededError                 a spend the filter refuses (carries both sides)
    ├── NumericalError(ArithmeticError)     a computation whose error would dominate
    ├── UnsupportedError(NotImplementedError)  a combination we refuse on purpose
    ├── NeighbourRelationError(ValueError)  mixing add/remove and replace-one events
    └── LedgerError(RuntimeError)           persistence failures (nothing was spent)
        └── ConcurrencyError                lost a race; retry is safe
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BudgetExceededError",
    "ConcurrencyError",
    "DPError",
    "LedgerError",
    "NeighbourRelationError",
    "NumericalError",
    "UnsupportedError",
    "ValidationError",
]


class DPError(Exception):
    """Root of every exception dpsieve raises on purpose."""


class ValidationError(DPError, ValueError):
    """A parameter violates its constraint.

    The message names the parameter, the constraint and the offending value, e.g.
    ``The 'sigma' parameter of gaussian() must be a float > 0. Got -1.0 instead.``
    """

    def __init__(
        self,
        message: str,
        *,
        parameter: str | None = None,
        constraint: str | None = None,
        value: Any = None,
    ) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.constraint = constraint
        self.value = value


class BudgetExceededError(DPError):
    """A privacy spend was refused; carries the remaining budget and the request."""

    def __init__(self, message: str, *, remaining: Any = None, requested: Any = None) -> None:
        super().__init__(message)
        self.remaining = remaining
        self.requested = requested


class NumericalError(DPError, ArithmeticError):
    """A computation could not be certified (floating-point error would dominate)."""


class UnsupportedError(DPError, NotImplementedError):
    """A combination dpsieve refuses on purpose because no sound guarantee is known."""


class NeighbourRelationError(DPError, ValueError):
    """Privacy events under different neighbouring relations were mixed without conversion."""


class LedgerError(DPError, RuntimeError):
    """The budget store failed; no budget was spent by the failed operation."""


class ConcurrencyError(LedgerError):
    """A concurrent writer won a race; the operation changed nothing and may be retried."""
