"""Shared machinery of every filter: the decide/spend split, JSON state, the registry.

Each filter implements ``_decide(query) -> (Decision, new_state | None)`` as a pure
function of its current state. ``dry_run`` returns the decision and drops the new state;
``try_spend`` installs the new state only when the query is admitted. A refused query
therefore never touches the state, and ``to_json()`` stays byte-identical (the contract
of :mod:`dpsieve.filters.base`).

State is a JSON-ready dict. Exact numbers (``fractions.Fraction``) are written as
``"p/q"`` strings, floats with ``repr`` precision, so ``filter_from_json(f.to_json())``
rebuilds the same state bit for bit.

A stored state is not trusted: ``from_state`` runs the filter's ``_check_state`` on a
:class:`StateReader`, which checks every field's type and range and every relation
between fields (a spend within its budget, lists of equal length, ...), and rejects
missing and unknown fields. A violation raises :class:`~dpsieve.errors.FilterStateError`
naming the filter kind and the field. ``_load`` (which installs a state the filter
produced itself) stays unchecked, so spends pay no validation cost.
"""

from __future__ import annotations

import json
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from fractions import Fraction
from typing import Any, ClassVar, Self, TypeVar

from dpsieve._rounding import round_down, round_up
from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, check_same_relation
from dpsieve.errors import FilterStateError
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


#: The least float >= x / the greatest float <= x (x exact): costs up, budgets down.
float_up = round_up
float_down = round_down


_FRAC = re.compile(r"-?[0-9]+/[0-9]+")
_T = TypeVar("_T")


class StateReader:
    """Reads one stored filter state field by field, checking each as it goes.

    Every accessor names the field in the error it raises (:class:`FilterStateError`, a
    :class:`~dpsieve.errors.ValidationError`), so a ledger can say which part of a stored
    budget is corrupt. ``done()`` rejects fields nobody read. Use it in ``_check_state``::

        @classmethod
        def _check_state(cls, r: StateReader) -> None:
            budget = r.frac("budget", lo=0)
            r.frac("spent", lo=0, hi=budget)
    """

    def __init__(self, kind: str, state: Any, prefix: str = "") -> None:
        self.kind = kind
        self._prefix = prefix
        if not isinstance(state, dict):
            raise self.error(prefix[:-1] or "state", "a JSON object", state, prefixed=True)
        self._state: dict[str, Any] = state
        self._seen: set[str] = set()

    def error(
        self, field: str, constraint: str, value: Any, *, prefixed: bool = False
    ) -> FilterStateError:
        """The error for ``field`` (build, then raise it)."""
        name = field if prefixed else self._prefix + field
        return FilterStateError(
            f"The stored state of a '{self.kind}' filter is invalid: '{name}' must be "
            f"{constraint}. Got {_short(value)} instead.",
            kind=self.kind,
            field=name,
            constraint=constraint,
            value=value,
        )

    def nested(self, key: str) -> StateReader:
        """A reader for the JSON object in ``key`` (its fields named ``key.field``); call its
        ``done()`` too."""
        return StateReader(self.kind, self.raw(key), self._prefix + key + ".")

    def raw(self, key: str) -> Any:
        """The field's JSON value, unchecked (it must be present)."""
        if key not in self._state:
            raise self.error(key, "present", "nothing")
        self._seen.add(key)
        return self._state[key]

    def optional(self, key: str) -> bool:
        """Whether ``key`` is present (an optional field; read it if it is)."""
        return key in self._state

    def frac(
        self, key: str, *, lo: Fraction | int | None = None, hi: Fraction | None = None
    ) -> Fraction:
        """An exact number written ``"p/q"``, with lo <= value <= hi."""
        return self._frac_value(key, self.raw(key), lo, hi)

    def _frac_value(
        self, key: str, v: Any, lo: Fraction | int | None, hi: Fraction | None
    ) -> Fraction:
        if not isinstance(v, str) or len(v) > 5000 or _FRAC.fullmatch(v) is None:
            raise self.error(key, "an exact number written 'p/q'", v)
        try:
            x = Fraction(v)
        except (ValueError, ZeroDivisionError):
            raise self.error(key, "an exact number written 'p/q' (q > 0)", v) from None
        _check_range(self, key, x, lo, hi, v)
        return x

    def number(
        self,
        key: str,
        *,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
        hi_open: bool = False,
    ) -> float:
        """A finite JSON number (not a boolean) within the bounds."""
        return self._number_value(key, self.raw(key), lo, hi, lo_open, hi_open)

    def _number_value(
        self,
        key: str,
        v: Any,
        lo: float | None,
        hi: float | None,
        lo_open: bool = False,
        hi_open: bool = False,
    ) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise self.error(key, "a finite number", v)
        x = float(v)
        if lo is not None and (x <= lo if lo_open else x < lo):
            raise self.error(key, f"a number {'>' if lo_open else '>='} {lo!r}", v)
        if hi is not None and (x >= hi if hi_open else x > hi):
            raise self.error(key, f"a number {'<' if hi_open else '<='} {hi!r}", v)
        return x

    def integer(self, key: str, *, lo: int | None = None, hi: int | None = None) -> int:
        """A JSON integer (not a boolean, not 1.0) within the bounds."""
        v = self.raw(key)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(key, "an integer", v)
        if lo is not None and v < lo:
            raise self.error(key, f"an integer >= {lo}", v)
        if hi is not None and v > hi:
            raise self.error(key, f"an integer <= {hi}", v)
        return v

    def boolean(self, key: str) -> bool:
        v = self.raw(key)
        if not isinstance(v, bool):
            raise self.error(key, "true or false", v)
        return v

    def string(self, key: str, choices: tuple[str, ...] | None = None) -> str:
        v = self.raw(key)
        if not isinstance(v, str) or (choices is not None and v not in choices):
            raise self.error(key, f"one of {list(choices)}" if choices else "a string", v)
        return v

    def listed(
        self, key: str, read: Callable[[str, Any], _T], *, size: int | None = None
    ) -> list[_T]:
        """A JSON list, each item read by ``read(field_name, item)`` (``"key[i]"`` names it)."""
        v = self.raw(key)
        if not isinstance(v, list) or (size is not None and len(v) != size):
            what = f"a list of {size} items" if size is not None else "a list"
            raise self.error(key, what, v)
        return [read(f"{key}[{i}]", item) for i, item in enumerate(v)]

    def frac_item(
        self, lo: Fraction | int | None = None, hi: Fraction | None = None
    ) -> Callable[[str, Any], Fraction]:
        """An item reader for :meth:`listed`: exact numbers within the bounds."""
        return lambda name, v: self._frac_value(name, v, lo, hi)

    def number_item(
        self, lo: float | None = None, *, lo_open: bool = False
    ) -> Callable[[str, Any], float]:
        """An item reader for :meth:`listed`: finite numbers within the bounds."""
        return lambda name, v: self._number_value(name, v, lo, None, lo_open)

    def require(self, ok: bool, field: str, constraint: str, value: Any) -> None:
        """A relation between fields: raise for ``field`` unless ``ok``."""
        if not ok:
            raise self.error(field, constraint, value)

    def done(self) -> None:
        """Reject fields that were not read (a state written by another version or hand)."""
        extra = sorted(set(self._state) - self._seen)
        if extra:
            raise self.error(extra[0], "absent (not a field of this filter)", self._state[extra[0]])


def _check_range(
    r: StateReader, key: str, x: Fraction, lo: Fraction | int | None, hi: Fraction | None, v: Any
) -> None:
    if lo is not None and x < lo:
        raise r.error(key, f"an exact number >= {_fmt(lo)}", v)
    if hi is not None and x > hi:
        raise r.error(key, f"an exact number <= {_fmt(hi)}", v)


def _fmt(x: Fraction | int) -> str:
    f = Fraction(x)
    return str(f.numerator) if f.denominator == 1 else f"{float(f)!r} ('{f}')"


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 200 else text[:200] + "..."


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
