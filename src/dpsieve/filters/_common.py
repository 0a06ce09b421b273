"""Shared machinery of every filter: the decide/spend split, JSON state, the registry.

Each filter implements ``_decide(query) -> (Decision, new_state | None)`` as a pure
function of its current state. ``dry_run`` returns the decision and drops the new state;
``try_spend`` installs the new state only when the query is admitted. A refused query
therefore never touches the state, and ``to_json()`` stays byte-identical (the contract
of :mod:`dpsieve.filters.base`).

State is a JSON-ready dict. Exact numbers (``fractions.Fraction``) are written as
``"p/q"`` strings, floats with ``repr`` precision, so ``filter_from_json(f.to_json())``
rebuilds the same state bit for bit.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from fractions import Fraction
from typing import Any, ClassVar, Self

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, check_same_relation
from dpsieve.filters.base import Decision

__all__ = [
    "FilterBase",
    "frac_from_json",
    "frac_to_json",
    "frac_up",
    "registered_kinds",
]

_REGISTRY: dict[str, type[FilterBase]] = {}


def frac_to_json(x: Fraction) -> str:
    """``Fraction`` -> ``"p/q"`` (exact)."""
    return f"{x.numerator}/{x.denominator}"


def frac_from_json(s: Any, name: str = "state") -> Fraction:
    """``"p/q"`` -> ``Fraction`` (exact); anything else is a :class:`ValidationError`."""
    if not isinstance(s, str):
        raise fail(name, "filter_from_json", "a 'p/q' string", s)
    try:
        return Fraction(s)
    except (ValueError, ZeroDivisionError):
        raise fail(name, "filter_from_json", "a 'p/q' string", s) from None


def frac_up(x: float) -> Fraction:
    """The exact value of the float ``x`` (every finite float is a dyadic rational)."""
    if not math.isfinite(x):
        raise fail("x", "frac_up", "a finite float", x)
    return Fraction(x)


def registered_kinds() -> dict[str, type[FilterBase]]:
    """A copy of the ``kind -> class`` registry used by ``filter_from_json``."""
    return dict(_REGISTRY)


class FilterBase(ABC):
    """Base class of dpsieve's filters (implements :class:`~dpsieve.filters.base.PrivacyFilter`).

    Subclasses set ``KIND``, implement ``_decide``, ``_state`` (JSON-ready dict of the
    whole state), ``_from_state`` (inverse) and ``remaining``.
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

    def _check_relation(self, query: Any) -> None:
        rel = getattr(query, "neighbouring", None)
        if self._neighbouring is not None and isinstance(rel, Neighbouring):
            check_same_relation(rel, self._neighbouring)

    # -- to implement ---------------------------------------------------------------
    @abstractmethod
    def _decide(self, query: Any) -> tuple[Decision, dict[str, Any] | None]:
        """The decision and, if admitted, the state after the spend (pure function)."""

    @abstractmethod
    def _state(self) -> dict[str, Any]:
        """The whole state as a JSON-ready dict."""

    @abstractmethod
    def _load(self, state: dict[str, Any]) -> None:
        """Install a state produced by ``_state`` or ``_decide``."""

    @abstractmethod
    def remaining(self) -> dict[str, Any]:
        """The budget left, JSON-ready."""

    # -- the protocol ---------------------------------------------------------------
    def dry_run(self, query: Any) -> Decision:
        """The decision ``try_spend`` would return; never changes state."""
        self._check_relation(query)
        decision, _ = self._decide(query)
        return decision

    def try_spend(self, query: Any) -> Decision:
        """Decide; on admission install the new state. A refusal changes nothing."""
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
    def from_state(cls, state: dict[str, Any], neighbouring: str | None = None) -> FilterBase:
        obj = cls.__new__(cls)
        obj._load(state)
        obj._neighbouring = None if neighbouring is None else Neighbouring(neighbouring)
        return obj

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()})"
