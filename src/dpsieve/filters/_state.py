"""A filter's stored state as JSON: exact numbers written ``"p/q"`` and the checking
reader :class:`StateReader` (used by :mod:`dpsieve.filters._common` and by each filter's
``_state``, ``_load`` and ``_check_state``; re-exported by ``_common``).

Kept apart from :class:`~dpsieve.filters._common.FilterBase` so a filter's methods, called
by the base class's template methods, call down into this module and never back into
``_common`` (issue 27: no module entered twice on one query's route).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

from dpsieve._rounding import round_down, round_up
from dpsieve._validation import fail
from dpsieve.errors import FilterStateError

__all__ = [
    "StateReader",
    "float_down",
    "float_up",
    "frac_from_json",
    "frac_to_json",
    "frac_up",
]


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
