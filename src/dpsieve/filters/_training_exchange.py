"""The exchange of training-filter units, certified (private; docs/proofs/training.md §2).

An exchange replaces units L°_t^{(+)h} (+) L°_s^{(+)n_s} by L°_t^{(+)(h+k)} (+) L°_s^{(+)m}
and spends reserve d after the check L°_t^{(+)(h+k)} (+) L°_s^{(+)m} (+) C <= R_{0,d} (+)
L°_t^{(+)h} (+) L°_s^{(+)n_s} (+) C (upper bounds on the left, lower bounds on the right,
both directions as x >= 1 of the removal PLDs and of their duals). The state it leaves is
certified inside the target as a whole too (the test a stored state must pass), or the
exchange is not made.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpsieve.accounting.pld import PLD
from dpsieve.filters import _sgm_powers as sp
from dpsieve.filters._common import frac_from_json, frac_to_json
from dpsieve.filters._training_bounds import _lower, _upper, budget_misfit

__all__: list[str] = []

_Kind = tuple[float, float]
#: Each exchange may spend reserve0 / this (twice this without ``sigma_hi``) on top of the
#: +inf mass of its bounds (numerical slack, and far tails of exchanges into the reference).
_EXCHANGES_PER_RESERVE = 32


def _exchange(st: dict[str, Any], units: dict[_Kind, int], target: _Kind) -> dict[str, Any] | None:
    """Convert units of another kind into units of ``target`` (mutates st, units).

    Sources are tried from the largest sigma down (the cheapest steps first: a unit of a
    cheap kind is worth the least of the target, and the rest of the state, whose tails
    are kept, makes exchanges into more expensive kinds affordable; docs/training.md).
    The check keeps the untouched units C on both sides (Lemma 2.2 (b))."""
    d = st
    ref: _Kind = (float(st["reference"][0]), float(st["reference"][1]))
    if not (ref[0] <= target[0] and ref[1] >= target[1]):
        return None  # only kinds dominated by the reference are ever bought
    reserve = frac_from_json(d["reserve"], "reserve")
    extra = frac_from_json(d["reserve0"], "reserve0") / (
        _EXCHANGES_PER_RESERVE if st["mixed"] else 2 * _EXCHANGES_PER_RESERVE)
    grid = float(st["grid"])
    if st["mixed"]:
        sources = sorted((k for k, c in units.items() if c > 0 and k != target),
                         key=lambda k: (-k[0], k[1]))
    else:  # a budget of reference steps: exchanges from the reference pool only
        sources = [ref] if units.get(ref, 0) > 0 and ref != target else []
    for src in sources:
        n_s = units[src]
        dominating = src[0] <= target[0] and src[1] >= target[1]
        rest = [(k, c) for k, c in sorted(units.items()) if c > 0 and k not in (src, target)]
        have = units.get(target, 0)
        k = int(st["exchange_steps"])
        if dominating:
            k = min(k, 4 * n_s)
        while k >= 1:
            if target == ref and have + k > int(st["n0"]):
                k = int(st["n0"]) - have
                continue
            got = _best_m(src, target, n_s, k, grid, reserve, extra, rest, have)
            if got is not None and dominating and n_s - got[0] >= k:
                # k units of a dominating kind for k steps or more: paying each step with
                # one of them (exact) is never worse and spends no reserve (an 8,388,607-
                # unit pool was once traded whole for 8 steps at sigma 1e6)
                got = None
                break
            if got is not None:
                m, spent = got
                after = dict(units)
                after[src] = m
                after[target] = have + k
                kept = sorted([s, q, c] for (s, q), c in after.items() if c > 0)
                if budget_misfit(st["eps"], st["delta"], grid, kept, reserve - spent):
                    got = None  # the state left must pass the stored-state test too
            if got is not None:
                units[src] = m
                units[target] = have + k
                d["reserve"] = frac_to_json(reserve - spent)
                d["cert"] = {"units": kept, "reserve": d["reserve"]}
                st["exchanges"] += 1
                return {"from": list(src), "units": n_s - m, "to": list(target), "got": k,
                        "reserve_spent": float(spent)}
            k //= 2
    return None


def _best_m(
    src: _Kind,
    tgt: _Kind,
    n_s: int,
    k: int,
    grid: float,
    reserve: Fraction,
    extra: Fraction,
    rest: list[tuple[_Kind, int]] | None = None,
    have: int = 0,
) -> tuple[int, Fraction] | None:
    """Largest m < n_s with L_t^{h+k} (+) L_s^m (+) C <= R_{0,d} (+) L_t^h (+) L_s^{n_s} (+) C
    certified (both sides of x, i.e. both directions; C the other units ``rest``, h the
    target's units ``have``), and the reserve d it spends."""
    ctx = list(rest or [])
    right_parts = [(src, n_s), (tgt, have), *ctx]
    right_rem = _lower(right_parts, grid)
    right_add = _lower(right_parts, grid, add=True)
    fixed = [(tgt, have + k), *ctx]
    left_fixed = _upper(fixed, grid)
    left_fixed_add = _upper(fixed, grid, add=True)

    def sides(m: int) -> tuple[PLD, list[PLD]]:
        left = left_fixed if m == 0 else left_fixed.compose(
            sp.upper_power(src[0], src[1], grid, m), tail_mass=sp.TAIL
        )

        def composed_add() -> PLD:
            if m == 0:
                return left_fixed_add
            return left_fixed_add.compose(
                sp.upper_power(src[0], src[1], grid, m, add=True), tail_mass=sp.TAIL
            )

        # two valid upper bounds of the dual of the left side: the dual of ``left``, and
        # the composition of the dual steps (Lemma 1.3); neither is always tighter (the
        # first loses the cut lower tail of ``left`` times e^{-z} after thousands of
        # steps), so the exchange is certified if either bound fits
        dual = sp.dual_upper(left)  # Lemma 1.4: left's excess mass paid at +inf
        return left, ([composed_add()] if dual is None else [dual, composed_add()])

    def passes(left: PLD, add: PLD, d: Fraction) -> bool:
        return d <= reserve and sp.leq_x_ge_1(
            left, sp.with_reserve(right_rem, float(d))
        ) and sp.leq_x_ge_1(add, sp.with_reserve(right_add, float(d)))

    def floor_d(left: PLD, add: PLD) -> Fraction:
        # the +inf mass of the two sides' bounds (numerical: FFT error bounds, cut tails)
        return Fraction(max(left.inf_mass, add.inf_mass)) * Fraction(101, 100)

    # The reserve d is a choice, not part of the proof (any d for which the check passes
    # is sound): the search allows the bounds' +inf mass plus ``extra`` (which also pays
    # for the far tails where an exchange into a more expensive kind binds: a few 1e-9
    # at eps ~ 4-6 buy 100 steps at sigma 0.8 for about 700 units at 1.2 instead of 885),
    # then the exchange found spends the least of a few levels that certifies it
    def check(m: int) -> Fraction | None:
        left, adds = sides(m)
        for add in adds:
            d = floor_d(left, add) + extra
            if passes(left, add, d):
                return d
        return None

    guess = _RATES.get((src, tgt, grid))
    start = n_s - 1 if guess is None else max(0, n_s - math.ceil(k / guess) - 1)
    best: tuple[int, Fraction] | None = None
    d0 = check(start)
    if d0 is not None:  # climb
        best = (start, d0)
        step = 1
        while best[0] + step < n_s:
            d1 = check(best[0] + step)
            if d1 is None:
                break
            best = (best[0] + step, d1)
            step *= 2
        hi = min(n_s, best[0] + step)
    else:  # descend
        hi = start
        step = 1
        lo = start - 1
        while lo >= 0:
            d1 = check(lo)
            if d1 is not None:
                best = (lo, d1)
                break
            hi = lo
            step *= 2
            lo = start - step
        if best is None:
            d1 = check(0)
            if d1 is None:
                return None
            best = (0, d1)
    lo_m = best[0]
    while hi - lo_m > 1:
        mid = (lo_m + hi) // 2
        d1 = check(mid)
        if d1 is not None:
            best, lo_m = (mid, d1), mid
        else:
            hi = mid
    if n_s - best[0] > 0:
        _RATES[(src, tgt, grid)] = k / (n_s - best[0])
    left, adds = sides(best[0])
    for f in (0, 64, 16, 4):
        for add in adds:
            d = floor_d(left, add) + (extra / f if f else Fraction(0))
            if d < best[1] and passes(left, add, d):
                return best[0], d
    return best


_RATES: dict[tuple[_Kind, _Kind, float], float] = {}
