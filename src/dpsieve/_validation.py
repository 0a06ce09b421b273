"""Parameter checks with scikit-learn style messages.

Every check is written so that NaN fails it (``not (x > 0)`` rather than ``x <= 0``).
Messages name the parameter, the function, the constraint and the value::

    The 'sigma' parameter of gaussian() must be a float > 0. Got -1.0 instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.errors import ValidationError

__all__ = [
    "Redacted",
    "check_finite",
    "check_in_closed",
    "check_in_open",
    "check_int",
    "check_nonnegative",
    "check_positive",
    "check_probability_vector",
    "fail",
    "fail_private",
    "redacted",
]


def fail(name: str, owner: str, constraint: str, value: Any) -> ValidationError:
    """Build (not raise) the standard error for parameter ``name`` of ``owner``."""
    where = f" of {owner}()" if owner else ""
    return ValidationError(
        f"The '{name}' parameter{where} must be {constraint}. Got {value!r} instead.",
        parameter=name,
        constraint=constraint,
        value=value,
    )


class Redacted(str):
    """A redacted description (a str whose ``repr`` is itself, so messages read cleanly)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return str(self)


def redacted(value: Any) -> Redacted:
    """A description of a value that may hold private data -- its type and size, never
    its contents -- for error messages (an error never echoes a data value)."""
    if isinstance(value, Redacted):
        return value
    if isinstance(value, np.ndarray):
        return Redacted(f"<array of shape {tuple(value.shape)}, values withheld>")
    if isinstance(value, list | tuple | dict | set | frozenset):
        return Redacted(f"<{type(value).__name__} of {len(value)} entries, values withheld>")
    if value is None:
        return Redacted("None")
    return Redacted(f"<{type(value).__name__}, value withheld>")


def fail_private(name: str, owner: str, constraint: str, value: Any) -> ValidationError:
    """:func:`fail` for a parameter that holds private data: the message and the error's
    ``value`` carry :func:`redacted` (type and shape), never the data. ``constraint``
    must itself be free of data values."""
    return fail(name, owner, constraint, redacted(value))


def _as_float(name: str, owner: str, value: Any, constraint: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise fail(name, owner, constraint, value)
    return float(value)


def check_finite(name: str, value: Any, owner: str = "") -> float:
    """Return ``value`` as a float, rejecting NaN and infinities."""
    x = _as_float(name, owner, value, "a finite float")
    if not math.isfinite(x):
        raise fail(name, owner, "a finite float", value)
    return x


def check_positive(name: str, value: Any, owner: str = "", *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float > 0 (finite unless ``allow_inf``)."""
    constraint = "a float > 0" if allow_inf else "a finite float > 0"
    x = _as_float(name, owner, value, constraint)
    if not (x > 0) or (not allow_inf and not math.isfinite(x)):
        raise fail(name, owner, constraint, value)
    return x


def check_nonnegative(name: str, value: Any, owner: str = "", *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float >= 0 (finite unless ``allow_inf``)."""
    constraint = "a float >= 0" if allow_inf else "a finite float >= 0"
    x = _as_float(name, owner, value, constraint)
    if not (x >= 0) or (not allow_inf and not math.isfinite(x)):
        raise fail(name, owner, constraint, value)
    return x


def check_in_closed(name: str, value: Any, lo: float, hi: float, owner: str = "") -> float:
    """Return ``value`` as a float in ``[lo, hi]``."""
    constraint = f"a float in [{lo}, {hi}]"
    x = _as_float(name, owner, value, constraint)
    if not (lo <= x <= hi):
        raise fail(name, owner, constraint, value)
    return x


def check_in_open(name: str, value: Any, lo: float, hi: float, owner: str = "") -> float:
    """Return ``value`` as a float in ``(lo, hi)``."""
    constraint = f"a float in ({lo}, {hi})"
    x = _as_float(name, owner, value, constraint)
    if not (lo < x < hi):
        raise fail(name, owner, constraint, value)
    return x


def check_int(name: str, value: Any, owner: str = "", *, minimum: int | None = None) -> int:
    """Return ``value`` as an int (bools rejected), optionally ``>= minimum``."""
    constraint = "an int" if minimum is None else f"an int >= {minimum}"
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise fail(name, owner, constraint, value)
    if minimum is not None and int(value) < minimum:
        raise fail(name, owner, constraint, value)
    return int(value)


def check_probability_vector(
    name: str, value: Sequence[float] | npt.ArrayLike, owner: str = "", *, atol: float = 1e-9
) -> npt.NDArray[np.float64]:
    """Return a 1-D float array of non-negative finite entries summing to 1 (within ``atol``).

    The result is renormalised to sum to exactly 1 in floating point as far as possible;
    callers that need a bound on the renormalisation error must add it themselves.
    """
    constraint = "a 1-D vector of finite non-negative probabilities summing to 1"
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(name, owner, constraint, value) from None
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 0):
        raise fail(name, owner, constraint, value)
    total = float(arr.sum())
    if not abs(total - 1.0) <= atol:
        raise fail(name, owner, constraint + f" (sum is {total!r})", value)
    out: npt.NDArray[np.float64] = arr / total
    return out
