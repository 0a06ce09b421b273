"""What a session's query returns: :class:`QueryResult`, typed (its ``cost`` and
``remaining`` as the filter's decision states them); ``to_dict()`` is the JSON the service
and the CLI send."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dpsieve._validation import fail
from dpsieve.filters.base import BudgetLeft, Cost

if TYPE_CHECKING:
    from dpsieve.queries.result import Answer

__all__ = ["QueryResult"]


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A released answer with its noise description, its cost and the budget left
    (``cost`` and ``remaining`` typed, as the decision states them; ``to_dict()`` is the
    JSON the service and CLI send)."""

    value: Any
    noise: dict[str, Any]
    cost: Cost
    remaining: BudgetLeft
    key: str
    replayed: bool = False
    query: dict[str, Any] = field(default_factory=dict)
    #: The budget left in plain words and numbers (:func:`dpsieve.filters.summary.budget_summary`
    #: with "about N more queries like this one" for this query's charge).
    budget: dict[str, Any] = field(default_factory=dict)
    #: The 95 % interval of ``value`` (noise only; plans carry one per estimate instead).
    interval: Any = None
    #: Lattice internals (granularity, integer sensitivities, lattice scales) for auditors.
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> Answer:
        """A plan's answer as a typed :class:`~dpsieve.queries.result.Answer` (groups,
        estimates with their 95 % intervals, noise in the answer's units, details)."""
        from dpsieve.queries.result import Answer

        if self.query.get("type") != "query" or not isinstance(self.value, dict):
            raise fail("answer", "QueryResult", "the result of a query plan",
                       self.query.get("type"))
        return Answer.from_dict({**self.value, "noise": self.noise}, self.details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value, "noise": self.noise, "interval": self.interval,
            "details": self.details, "cost": self.cost.to_dict(),
            "remaining": self.remaining.to_dict(), "key": self.key, "replayed": self.replayed,
            "query": self.query, "budget": self.budget,
        }
