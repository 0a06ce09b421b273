"""Monotone bisection shared by the closed-form inversions (private).

No rounding direction is chosen here: callers decide which end of the final bracket is the
safe answer (``hi`` for an upper bound, ``lo`` for a lower one).
"""

from __future__ import annotations

from collections.abc import Callable

__all__: list[str] = []


def bracket(
    flip: Callable[[float], bool], lo: float, hi: float, rtol: float
) -> tuple[float, float]:
    """Shrink [lo, hi], with ``flip(lo)`` False and ``flip(hi)`` True for a monotone ``flip``,
    until ``hi - lo <= rtol * max(1, hi)``; the invariant holds for the returned pair."""
    while hi - lo > rtol * max(1.0, hi):
        mid = 0.5 * (lo + hi)
        if flip(mid):
            hi = mid
        else:
            lo = mid
    return lo, hi
