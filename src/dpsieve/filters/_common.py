"""Shared machinery of every filter: the decide/spend split, JSON state, the registry.

Each filter implements ``_decide(query) -> (Decision, new_state | None)`` as a pure
function of its current state. ``dry_run`` returns the decision and drops the new state;
``try_spend`` installs the new state only when the query is admitted. A refused query
therefore never touches the state, and ``to_json()`` stays byte-identical (the contract
of :mod:`dpsieve.filters.base`).

State is a JSON-ready dict. Exact numbers (``fractions.Fraction``) are written as
``"p/q"`` strings, floats with ``repr`` precision, so ``filter_from_json(f.to_json())``
rebuilds the same state bit for bit. Those JSON helpers and :class:`StateReader` live in
:mod:`dpsieve.filters._state` (re-exported here), so a filter's own methods never call
back into this module.

A stored state is not trusted: ``from_state`` runs the filter's ``_check_state`` on a
:class:`StateReader`, which checks every field's type and range and every relation
between fields (a spend within its budget, lists of equal length, ...), and rejects
missing and unknown fields. A violation raises :class:`~dpsieve.errors.FilterStateError`
naming the filter kind and the field. ``_load`` (which installs a state the filter
produced itself) stays unchecked, so spends pay no validation cost.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Self

from dpsieve.accounting.events import Neighbouring, check_same_relation
from dpsieve.filters._state import (
    StateReader,
    float_down,
    float_up,
    frac_from_json,
    frac_to_json,
    frac_up,
)
from dpsieve.filters.base import BudgetLeft, Decision
from dpsieve.filters.charge import Charge, check_charge

__all__ = [
    "FilterBase",
    "StateReader",
    "float_down",
    "float_up",
    "frac_from_json",
    "frac_to_json",
    "frac_up",
    "registered_kinds",
]

_REGISTRY: dict[str, type[FilterBase]] = {}


def registered_kinds() -> dict[str, type[FilterBase]]:
    """A copy of the ``kind -> class`` registry used by ``filter_from_json``."""
    return dict(_REGISTRY)


class FilterBase(ABC):
    """Base class of dpsieve's filters (implements :class:`~dpsieve.filters.base.PrivacyFilter`).

    Subclasses set ``KIND``, implement ``_decide``, ``_state`` (JSON-ready dict of the
    whole state), ``_from_state`` (inverse) and ``_remaining``.
    """

    KIND: ClassVar[str] = ""
    _neighbouring: Neighbouring | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            _REGISTRY[cls.KIND] = cls

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def neighbouring(self) -> Neighbouring | None:
        """The budget's neighbouring relation, or ``None`` if not declared."""
        return self._neighbouring

    def with_neighbouring(self, neighbouring: Neighbouring | str) -> Self:
        """Declare the budget's neighbouring relation (at creation); returns ``self``.

        Once declared, queries stated under another relation raise
        :class:`NeighbourRelationError` (a replace-one cost can be twice the add/remove one;
        convert explicitly). PLD queries carry no relation and are taken to be under the
        budget's. Undeclared (the default), the caller is responsible for the relation.
        """
        self._neighbouring = Neighbouring(neighbouring)
        return self

    def _check_relation(self, query: Charge) -> None:
        rel = getattr(query, "neighbouring", None)
        if self._neighbouring is not None and isinstance(rel, Neighbouring):
            check_same_relation(rel, self._neighbouring)

    # -- to implement ---------------------------------------------------------------
    @abstractmethod
    def _decide(self, query: Charge) -> tuple[Decision, dict[str, Any] | None]:
        """The decision and, if admitted, the state after the spend (pure function);
        ``query`` is a typed charge (checked by ``dry_run``/``try_spend``)."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """The whole state as a JSON-ready dict."""

    @abstractmethod
    def _load(self, state: dict[str, Any]) -> None:
        """Install a state produced by ``_state`` or ``_decide``."""

    @abstractmethod
    def _remaining(self) -> BudgetLeft:
        """The budget left in the filter's own numbers (:meth:`remaining` adds the
        budget's relation)."""

    def remaining(self) -> BudgetLeft:
        """The budget left, typed (``to_dict()`` for JSON), stated under the budget's
        neighbouring relation (:meth:`BudgetLeft.description` keeps it)."""
        return self._remaining().under(self._neighbouring)

    @classmethod
    @abstractmethod
    def _check_state(cls, r: StateReader) -> None:
        """Read every field of a stored state through ``r`` and check every invariant.

        Raise (``r.error`` / ``r.require``) on the first violation; the fields read are
        then checked for completeness by ``r.done()``. This guards ``from_state``: a
        stored state is untrusted input (docs/filters.md, "Stored states").
        """

    # -- the protocol ---------------------------------------------------------------
    def dry_run(self, query: Charge) -> Decision:
        """The decision ``try_spend`` would return; never changes state. A dict (or any
        untyped query) raises :class:`~dpsieve.errors.ChargeTypeError`."""
        query = check_charge(query, "query", f"{type(self).__name__}.dry_run")
        self._check_relation(query)
        decision, _ = self._decide(query)
        return decision

    def try_spend(self, query: Charge) -> Decision:
        """Decide; on admission install the new state. A refusal changes nothing. A dict
        (or any untyped query) raises :class:`~dpsieve.errors.ChargeTypeError`, nothing
        spent."""
        query = check_charge(query, "query", f"{type(self).__name__}.try_spend")
        self._check_relation(query)
        decision, new_state = self._decide(query)
        if decision.admitted and new_state is not None:
            self._load(new_state)
        return decision

    def to_json(self) -> str:
        """Exact serialisation of the whole state, ``kind`` included (sorted keys)."""
        d: dict[str, Any] = {"kind": self.KIND, "state": self._state()}
        if self._neighbouring is not None:
            d["neighbouring"] = self._neighbouring.value
        return json.dumps(d, sort_keys=True, allow_nan=False)

    @classmethod
    def check_state(cls, state: Any) -> None:
        """Check a stored state; raise :class:`FilterStateError` naming the bad field."""
        r = StateReader(cls.KIND, state)
        cls._check_state(r)
        r.done()

    @classmethod
    def from_state(cls, state: Any, neighbouring: str | None = None) -> FilterBase:
        """Rebuild a filter from a stored state, after checking every invariant."""
        cls.check_state(state)
        obj = cls.__new__(cls)
        obj._load(state)
        obj._neighbouring = None if neighbouring is None else Neighbouring(neighbouring)
        return obj

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()})"
