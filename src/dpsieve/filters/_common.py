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
from typing import Any, ClassVar

from dpsieve._validation import fail
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

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            _REGISTRY[cls.KIND] = cls

    @property
    def kind(self) -> str:
        return self.KIND

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
        decision, _ = self._decide(query)
        return decision

    def try_spend(self, query: Any) -> Decision:
        """Decide; on admission install the new state. A refusal changes nothing."""
        decision, new_state = self._decide(query)
        if decision.admitted and new_state is not None:
            self._load(new_state)
        return decision

    def to_json(self) -> str:
        """Exact serialisation of the whole state, ``kind`` included (sorted keys)."""
        return json.dumps(
            {"kind": self.KIND, "state": self._state()}, sort_keys=True, allow_nan=False
        )

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> FilterBase:
        obj = cls.__new__(cls)
        obj._load(state)
        return obj

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.to_json()})"
