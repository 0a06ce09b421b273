"""Release-specific refusals (both are :class:`dpsieve.errors.DPError`).

    DPError
    ├── InstanceTooLargeError(RuntimeError)    exact enumeration refused; carries the cost
    └── RejectionBudgetExceededError(RuntimeError)  rejection sampler used its whole work budget
"""

from __future__ import annotations

from dpsieve.errors import DPError

__all__ = ["InstanceTooLargeError", "RejectionBudgetExceededError"]


class InstanceTooLargeError(DPError, RuntimeError):
    """Exact enumeration refused: ``estimated_cost`` (work units) exceeds ``limit``."""

    def __init__(self, message: str, *, estimated_cost: float, limit: float,
                 estimated_seconds: float | None = None) -> None:
        super().__init__(message)
        self.estimated_cost = estimated_cost
        self.limit = limit
        self.estimated_seconds = estimated_seconds


class RejectionBudgetExceededError(DPError, RuntimeError):
    """No proposal was accepted within the fixed budget of ``budget`` proposals.

    The refusal is itself an observable, data-dependent event: see
    :func:`dpsieve.release.rejection.sample_envelope_rejection` for its probability bound.
    """

    def __init__(self, message: str, *, budget: int, failure_bound: float) -> None:
        super().__init__(message)
        self.budget = budget
        self.failure_bound = failure_bound
