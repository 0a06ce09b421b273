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

from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Protocol, runtime_checkable

from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
    description_from_dict,
)
from dpsieve.filters.charge import Charge

__all__ = ["BudgetLeft", "Charge", "Cost", "Decision", "PrivacyFilter"]


class _Frozen:
    """An immutable view of a filter's JSON-ready numbers, read like a mapping (``[key]``,
    ``get``, ``in``, ``keys``/``items``/``values``, ``len``, iteration; ``dict(v)`` copies it).
    Not a ``collections.abc.Mapping`` subclass: its ``isinstance`` checks cost a decision
    about a microsecond each (filters build one per query)."""

    __slots__ = ("_values",)
    _values: dict[str, Any]

    def __init__(self, values: Mapping[str, Any] | _Frozen | None = None) -> None:
        object.__setattr__(self, "_values", dict(values) if values else {})

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: str, default: Any = None) -> Any:
        return self._values.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._values.keys()

    def items(self) -> ItemsView[str, Any]:
        return self._values.items()

    def values(self) -> ValuesView[Any]:
        return self._values.values()

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values == other._values

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (a new one each call), exactly what decisions always carried."""
        return dict(self._values)


class BudgetLeft(_Frozen):
    """The budget left (a filter's :meth:`~PrivacyFilter.remaining`, a decision's
    ``remaining``: after the spend when admitted, unchanged when refused) in the filter's
    own public numbers: ``eps`` (pure DP), ``rho`` (zCDP), ``mu`` (GDP), a mixed budget's
    parts, a training budget's units, ... Immutable; not equal to a dict (compare
    ``to_dict()``, the JSON the ledger's audit log, the service and the CLI state).
    ``neighbouring`` is the budget's relation where it is known (a filter's
    :meth:`~PrivacyFilter.remaining`; not part of the JSON nor of equality)."""

    __slots__ = ("_neighbouring",)
    _neighbouring: Neighbouring | None

    def __init__(self, values: Mapping[str, Any] | _Frozen | None = None,
                 neighbouring: Neighbouring | None = None) -> None:
        super().__init__(values)
        object.__setattr__(self, "_neighbouring", neighbouring)

    @property
    def neighbouring(self) -> Neighbouring | None:
        """The budget's neighbouring relation (``None``: not known here)."""
        return self._neighbouring

    def under(self, neighbouring: Neighbouring | None) -> BudgetLeft:
        """This budget left stated under ``neighbouring`` (itself when that changes
        nothing)."""
        if neighbouring is None or neighbouring == self._neighbouring:
            return self
        return BudgetLeft(self, neighbouring)

    def description(self) -> PrivacyDescription | None:
        """The privacy description this budget left states, under the budget's relation
        (:attr:`neighbouring`; add/remove where it is not known), or ``None`` where no
        single description states it (a mixed budget's split: :meth:`mixed_split`;
        training, per-record and profile budgets; a malformed stored value).

        Reads the filters' own forms: ``{"mu"}`` (GDP), ``{"eps"}`` (pure),
        ``{"rho"}`` (zCDP), ``{"rho", "delta"}`` (approximate zCDP), ``{"orders", "rdp"}``
        (RDP), an undecided mixed budget's whole (eps, delta) target, and a description's
        own JSON (a residue filter's budget). Exact strings (``"exact"``) are ignored: the
        floats they sit beside are rounded down by the filters (never more privacy left
        than the truth)."""
        v = self._values
        nb = self._neighbouring or Neighbouring.ADD_REMOVE
        try:
            if v.get("split") == "undecided":  # the whole (eps, delta) target
                return ApproxDP(_num(v["eps"]), _num(v["delta"]), nb)
            if "type" not in v:
                keys = set(v) - {"exact", "kind", "neighbouring"}
                if keys == {"mu"}:
                    return GDP(max(0.0, _num(v["mu"])), nb)
                if keys == {"eps"}:
                    return PureDP(max(0.0, _num(v["eps"])), nb)
                if keys == {"rho"}:
                    return ZCDP(max(0.0, _num(v["rho"])), nb)
                if keys == {"rho", "delta"}:
                    return ApproxZCDP(max(0.0, _num(v["rho"])),
                                      min(1.0, max(0.0, _num(v["delta"]))), nb)
                if keys == {"orders", "rdp"}:
                    return RDP(tuple(float(a) for a in v["orders"]),
                               tuple(max(0.0, _num(x)) for x in v["rdp"]), nb)
                return None
            return description_from_dict({"neighbouring": nb.value, **v})
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return None

    def mixed_split(self) -> tuple[Fraction, float] | None:
        """A mixed budget's parts left (:class:`~dpsieve.filters.MixedFilter` after its
        split): the pure part, exact, and the Gaussian part's mu; ``None`` otherwise."""
        v = self._values
        if "pure_exact" not in v or "mu" not in v:
            return None
        try:
            return Fraction(v["pure_exact"]), max(0.0, _num(v["mu"]))
        except (TypeError, ValueError, ZeroDivisionError):
            return None


def _num(x: Any) -> float:
    """A stored number: a float, or an exact fraction's string."""
    return float(Fraction(x)) if isinstance(x, str) else float(x)


class Cost(_Frozen):
    """What a query was charged as: the filter's numbers (``mu``, ``pure_eps``, ``route``,
    ...) and, under ``query``, the charge's JSON description
    (:func:`dpsieve.filters.charge.charge_to_dict`). Immutable; not equal to a dict."""

    __slots__ = ()

    def charged(self) -> PrivacyDescription | None:
        """The privacy description the query was charged as, or ``None`` (a PLD, a
        training step, a cost without a query)."""
        q = self._values.get("query")
        if not isinstance(q, dict) or q.get("type") in (None, "pld"):
            return None
        try:
            return description_from_dict(q)
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of offering one query to a filter.

    ``remaining`` (:class:`BudgetLeft`) is the budget left after the decision, ``cost``
    (:class:`Cost`) what the query was charged as, both typed and immutable; ``reason`` is
    a sentence a person can read. ``to_dict()`` is the JSON a ledger stores and the
    service sends (unchanged), :meth:`from_dict` its inverse.
    """

    admitted: bool
    reason: str
    remaining: BudgetLeft = field(default_factory=BudgetLeft)
    cost: Cost = field(default_factory=Cost)

    @classmethod
    def of(cls, admitted: bool, reason: str,
           remaining: Mapping[str, Any] | BudgetLeft | None = None,
           cost: Mapping[str, Any] | Cost | None = None) -> Decision:
        """A decision from a filter's JSON-ready numbers (how the filters build theirs)."""
        return cls(admitted, reason,
                   remaining if type(remaining) is BudgetLeft else BudgetLeft(remaining),
                   cost if type(cost) is Cost else Cost(cost))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Decision:
        """Inverse of :meth:`to_dict` (a decision a ledger stored)."""
        return cls(bool(d["admitted"]), str(d["reason"]), BudgetLeft(d["remaining"]),
                   Cost(d["cost"]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "admitted": self.admitted,
            "reason": self.reason,
            "remaining": self.remaining.to_dict(),
            "cost": self.cost.to_dict(),
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

    def remaining(self) -> BudgetLeft:
        """The budget left, typed (:class:`BudgetLeft`: the filter's own public numbers;
        ``to_dict()`` is the JSON the service, the CLI and the audit log state)."""
        ...

    def to_json(self) -> str:
        """Exact serialisation of the whole state (including ``kind``)."""
        ...
