"""Certified bounds on compositions of training-filter units (private).

A budget of units (+)_tau L°_tau^{(+)n_tau} (docs/proofs/training.md §2, Lemma 1.4) is
bounded from above by pessimistic compositions of :func:`._sgm_powers.upper_power` and from
below by :func:`._sgm_powers.lower_power` composed with ``_lower_compose``; the addition
direction is the dual (Lemma 1.3). :func:`budget_misfit` is the constructor's test, re-run
on every stored state.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache
from typing import Any

from dpsieve._rounding import toward_zero
from dpsieve.accounting.pld import PLD
from dpsieve.filters import _sgm_powers as sp

__all__: list[str] = []

_Kind = tuple[float, float]

def _upper(parts: list[tuple[_Kind, int]], grid: float, add: bool = False) -> PLD:
    """Upper bound (pessimistic compositions) of (+)_tau L^_tau^{(+)n_tau}, or of its dual
    composed from the dual steps (``add``, Lemma 1.3 (ii))."""
    out: PLD | None = None
    for (s, q), n in parts:
        if n <= 0:
            continue
        p = sp.upper_power(s, q, grid, n, add=add)
        out = p if out is None else out.compose(p, tail_mass=sp.TAIL)
    return PLD.identity(grid=grid) if out is None else out


def _lower(parts: list[tuple[_Kind, int]], grid: float, add: bool = False) -> PLD:
    """Lower bound (valid optimistic PLD, meant for x >= 1) of the same composition."""
    out: PLD | None = None
    for (s, q), n in parts:
        if n <= 0:
            continue
        p = sp.lower_power(s, q, grid, n, add=add)
        out = p if out is None else sp._lower_compose(out, p)
    return PLD.identity(grid=grid) if out is None else out


def _certified_delta_parts(parts: list[tuple[_Kind, int]], eps: float, grid: float) -> float:
    up = _upper(parts, grid)
    # two valid upper bounds of the addition side; neither is always tighter (the dual of
    # the removal power loses its cut lower tail times e^{-z} after thousands of steps)
    add = float(_upper(parts, grid, add=True).delta(eps))
    dual = sp.dual_upper(up)  # with the e^{-z}-mass of up's excess at +inf (Lemma 1.4)
    if dual is not None:
        add = min(add, float(dual.delta(eps)))
    return max(float(up.delta(eps)), add)


def _certified_delta(sigma: float, rate: float, n: int, eps: float, grid: float) -> float:
    return _certified_delta_parts([((sigma, rate), n)], eps, grid)


def _largest_count(ok: Any) -> int:
    """The largest n >= 0 with ok(n) (ok monotone, ok(0) assumed), by doubling and bisection."""
    if not ok(1):
        return 0
    lo, hi = 1, 2
    while ok(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 22:
            break
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def _largest_n(sigma: float, rate: float, eps: float, delta: float, grid: float) -> int:
    return _largest_count(lambda n: _certified_delta(sigma, rate, n, eps, grid) <= delta)


def _largest_mixed(lo: _Kind, a: int, hi: _Kind, eps: float, delta: float, grid: float) -> int:
    """The largest c with L^_lo^{(+)a} (+) L^_hi^{(+)c} certified at (eps, delta)."""
    return _largest_count(
        lambda c: _certified_delta_parts([(lo, a), (hi, c)], eps, grid) <= delta
    )


def fits_delta(delta: float, reserve: Fraction) -> float:
    """(delta - r)/(1 - r) rounded down: the units' delta that R_{0,r} (+) units may reach."""
    rest = float((Fraction(delta) - reserve) / (1 - reserve))
    return toward_zero(rest)


def budget_misfit(
    eps: float, delta: float, grid: float, units: list[list[Any]], reserve: Fraction
) -> str | None:
    """None if B = R_{0,reserve} (+) (+) units is certified inside (eps, delta) (the
    constructor's test: one certified composition per direction); otherwise the field that
    fails: ``reserve`` if the units alone fit the target, else ``units``."""
    key = tuple((float(s), float(q), int(c)) for s, q, c in units)
    return _misfit(float(eps), float(delta), float(grid), key, reserve)


@lru_cache(maxsize=64)
def _misfit(eps: float, delta: float, grid: float, units: tuple[tuple[float, float, int], ...],
            reserve: Fraction) -> str | None:
    parts = [((s, q), c) for s, q, c in units if c > 0]
    if not parts:
        return None if reserve <= Fraction(delta) else "reserve"
    d = _certified_delta_parts(parts, eps, grid)
    if d <= fits_delta(delta, reserve):
        return None
    return "reserve" if d <= fits_delta(delta, Fraction(0)) else "units"
