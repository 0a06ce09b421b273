"""The filter interface every privacy filter implements, and the decision it returns.

A filter holds a budget and the state needed to decide, for each new query chosen
adaptively, whether admitting it keeps the whole interaction within the budget.

Contract (checked by the conformance suite in ``tests/filters``):

* ``try_spend(q)`` decides; on admission it updates the state, on refusal the state is
  unchanged (``to_json()`` is byte-identical before and after).
* ``dry_run(q)`` returns the decision ``try_spend(q)`` would return and never changes state.
* ``to_json()`` / ``filter_from_json()`` round-trip exactly: a ledger persists the JSON
  and rebuilds the filter in the next transaction.
* Queries are typed charges (:data:`dpsieve.filters.charge.Charge`): a
  :class:`~dpsieve.accounting.pld.PLD`, a privacy description from
  :mod:`dpsieve.accounting.events`, or a training step. A dict is refused
  (:class:`~dpsieve.errors.ChargeTypeError`): JSON is mapped at the edges, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from dpsieve.filters.charge import Charge

__all__ = ["Charge", "Decision", "PrivacyFilter"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of offering one query to a filter.

    ``remaining`` describes the budget left after the decision (after the spend when
    admitted, unchanged when refused) as a JSON-ready dict; ``cost`` describes what the
    query was charged as (JSON-ready); ``reason`` is a sentence a person can read.
    """

    admitted: bool
    reason: str
    remaining: dict[str, Any] = field(default_factory=dict)
    cost: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "admitted": self.admitted,
            "reason": self.reason,
            "remaining": self.remaining,
            "cost": self.cost,
        }


@runtime_checkable
class PrivacyFilter(Protocol):
    """Structural type of every filter (see module docstring for the contract)."""

    @property
    def kind(self) -> str:
        """A stable identifier, e.g. ``"gdp_residue"``; the key for deserialisation."""
        ...

    def try_spend(self, query: Charge) -> Decision:
        """Decide, and spend on admission."""
        ...

    def dry_run(self, query: Charge) -> Decision:
        """Decide without changing any state."""
        ...

    def remaining(self) -> dict[str, Any]:
        """The budget left, JSON-ready."""
        ...

    def to_json(self) -> str:
        """Exact serialisation of the whole state (including ``kind``)."""
        ...
