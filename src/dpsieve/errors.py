"""Exceptions raised by dpsieve.

One root, families that subclass the matching built-in so callers can catch either::

    DPError
    ├── ValidationError(ValueError)        bad input; names parameter, constraint, value
    │   ├── FilterStateError                a stored filter state violates an invariant
    │   └── ChargeTypeError(TypeError)      a filter or ledger given an untyped charge (a dict)
    ├── BudgetExceededError                 a spend the filter refuses (carries both sides)
    ├── IncompatiblePrivacyError(ValueError)  a query kind the budget can never admit
    ├── QueryFailedError(RuntimeError)      a charged query's computation failed (one text)
    ├── NumericalError(ArithmeticError)     a computation whose error would dominate
    ├── UnsupportedError(NotImplementedError)  a combination we refuse on purpose
    ├── NeighbourRelationError(ValueError)  mixing add/remove and replace-one events
    ├── InstanceTooLargeError(RuntimeError)  refused from public sizes before any work
    │                                        (dpsieve.release.errors)
    ├── RejectionBudgetExceededError(RuntimeError)  the rejection sampler ran out
    │                                        (dpsieve.release.errors)
    ├── ChildExhaustedError                 an interactive child has nothing left to answer
    │                                        (dpsieve.interactive.base)
    └── LedgerError(RuntimeError)           persistence failures (nothing was spent)
        ├── ConcurrencyError                lost a race; retry is safe
        ├── IdempotencyKeyReuseError        a key reused for another request
        ├── KeyRevokedError                 the API key was revoked during the request
        ├── LedgerUnavailableError          the store cannot be reached or written
        ├── LedgerIntegrityError            a budget's log or state was altered
        ├── BudgetNotFoundError(KeyError)   no such budget
        └── ChildAccessError(PermissionError)  a child the principal may not use
                                             (the ledger's in dpsieve.ledger.base/children)
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

__all__ = [
    "BudgetExceededError",
    "ChargeTypeError",
    "ConcurrencyError",
    "DPError",
    "FilterStateError",
    "IncompatiblePrivacyError",
    "LedgerError",
    "NeighbourRelationError",
    "NumericalError",
    "QueryFailedError",
    "Stated",
    "UnsupportedError",
    "ValidationError",
]


@runtime_checkable
class Stated(Protocol):
    """A typed privacy value an error carries -- a budget left
    (:class:`dpsieve.filters.base.BudgetLeft`) or the privacy asked for (a
    :class:`dpsieve.accounting.events.PrivacyDescription`) -- stated as JSON by
    ``to_dict()`` at the edge (service, CLI). This module imports nothing of dpsieve: every
    layer may raise these errors."""

    def to_dict(self) -> dict[str, Any]: ...


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


class FilterStateError(ValidationError):
    """A stored filter state (``filter_from_json``) violates one of the filter's invariants.

    ``kind`` is the filter kind (``None`` if the JSON did not name a valid one) and ``field``
    the offending field of the stored state (also ``parameter``). A ledger that meets it
    must refuse to serve that budget, saying why, rather than trust the state.
    """

    def __init__(
        self,
        message: str,
        *,
        kind: str | None = None,
        field: str | None = None,
        constraint: str | None = None,
        value: Any = None,
    ) -> None:
        super().__init__(message, parameter=field, constraint=constraint, value=value)
        self.kind = kind
        self.field = field


class ChargeTypeError(ValidationError, TypeError):
    """A filter or a ledger was given something that is not a typed charge
    (:data:`dpsieve.filters.charge.Charge`), e.g. a description dict: JSON is mapped to
    typed values once, at the service, the CLI or a Session entry point
    (:func:`dpsieve.filters.charge.charge_from_dict`), never inside a filter. Nothing was
    spent. A ``TypeError`` (a caller's bug) and a ``ValidationError`` (names the parameter).
    """


class BudgetExceededError(DPError):
    """A privacy spend was refused; carries the remaining budget (the decision's typed
    :class:`~dpsieve.filters.base.BudgetLeft`) and the privacy requested (a typed
    :class:`~dpsieve.accounting.events.PrivacyDescription`), both :class:`Stated`; the
    service and the CLI make their JSON (``to_dict()``) at the edge.

    ``summary`` (optional) is the budget left in plain words and numbers
    (:class:`dpsieve.filters.summary.BudgetSummary` as a dict, like ``QueryResult.budget``).
    """

    def __init__(self, message: str, *, remaining: Stated | None = None,
                 requested: Stated | None = None,
                 summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.remaining = remaining
        self.requested = requested
        self.summary = summary


class IncompatiblePrivacyError(DPError, ValueError):
    """A query whose kind of privacy the budget can never admit, however small.

    Carries ``fits`` (the kinds that fit, e.g. ``["pure"]``) and ``requested`` (the
    privacy asked for, a typed description; ``to_dict()`` for JSON). Nothing was spent.
    Distinct from :class:`BudgetExceededError`: more budget would not help.
    """

    def __init__(self, message: str, *, fits: list[str] | None = None,
                 requested: Stated | None = None) -> None:
        super().__init__(message)
        self.fits = list(fits or [])
        self.requested = requested


class QueryFailedError(DPError, RuntimeError):
    """An admitted query whose computation failed after its charge (the engine ran out of
    memory or time, or failed otherwise). The message is one fixed text, the same for
    every failure and every data set (a failure must not tell anything about the rows);
    the details go to the data owner's log. The charge is kept, and a retry with the same
    idempotency key returns this outcome again, never a fresh computation."""


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
