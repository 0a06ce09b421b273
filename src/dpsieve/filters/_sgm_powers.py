"""k-fold compositions of one subsampled-Gaussian step, from above and from below (private).

The training filter's budgets are exact compositions of the *discretized* (pessimistic) step
PLDs L^ of :func:`dpsieve.mechanisms.subsampled.subsampled_gaussian_pld`, removal direction
(the addition direction is the dual, docs/proofs/training.md §1, Lemma 1.3). An exchange is
certified by comparing an upper bound of L^_t composed k times with a lower bound of L^_s
composed j times:

* :func:`upper_power`: ``PLD.compose`` (pessimistic; FFT error bounds added, tails cut to
  +inf), by repeated squaring over cached powers of two;
* :func:`lower_power`: FFT convolution with the entrywise error bound *subtracted* (every
  mass rounded down, far tails dropped or moved down), then the PLD condition restored by
  ``restore_optimistic``: a valid PLD dominated by the exact composition (Lemma A2 of
  docs/proofs/accounting.md; masses rounded down only lower h).

Results are cached per (sigma, rate, grid, k): they are pure functions of public numbers.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from dpsieve.accounting import _construct, _convolve, _ops
from dpsieve.accounting.pld import PLD
from dpsieve.mechanisms.subsampled import subsampled_gaussian_pld

__all__: list[str] = []

U = 2.0**-53
#: Tail mass cut at each convolution (upper: to +inf; lower bound: dropped / moved down).
TAIL = 1e-14


@lru_cache(maxsize=64)
def step_remove(sigma: float, rate: float, grid: float) -> PLD:
    """L^: the pessimistic removal-direction PLD of one step: a grid PLD (no analytic
    Gaussian part, which the lower bounds below would drop: rate 1 is refused)."""
    p = subsampled_gaussian_pld(sigma, rate, grid=grid).remove
    if p.mu != 0.0:
        raise ValueError(f"_sgm_powers: rate {rate} gives a PLD with a Gaussian part")
    return p


@lru_cache(maxsize=256)
def _upper_pow2(sigma: float, rate: float, grid: float, i: int, add: bool = False) -> PLD:
    if i == 0:
        base = step_remove(sigma, rate, grid)
        return base.dual() if add else base  # dual rounded up: an upper bound of dual(L^)
    h = _upper_pow2(sigma, rate, grid, i - 1, add)
    return h.compose(h, tail_mass=TAIL)


@lru_cache(maxsize=256)
def upper_power(sigma: float, rate: float, grid: float, k: int, add: bool = False) -> PLD:
    """An upper bound (pessimistic PLD) of L^ composed k times (k >= 1); ``add``: of dual(L^)
    composed k times, which is dual(L^ composed k times) (docs/proofs/training.md, Lemma 1.3).

    Compose the dual step rather than take the dual of the removal power: the removal
    power's lower tail, cut and moved up by the tail bounds, would come back multiplied by
    e^{-z} (sigma 1, rate 0.01: 1.9e-5 at +inf after 8,000 steps, which capped the budget at
    6,871 reference steps for every eps at delta 1e-5)."""
    out: PLD | None = None
    i = 0
    while k:
        if k & 1:
            p = _upper_pow2(sigma, rate, grid, i, add)
            out = p if out is None else out.compose(p, tail_mass=TAIL)
        k >>= 1
        i += 1
    if out is None:
        return PLD.identity(grid=grid)
    return out


def _lower_compose(a: PLD, b: PLD) -> PLD:
    """A valid PLD dominated by the exact a (+) b, for optimistic/exact grid PLDs (mu = 0)."""
    if a.mu != 0.0 or b.mu != 0.0:
        raise ValueError("_lower_compose: grid PLDs only (a Gaussian part would be dropped)")
    grid = a.grid
    conv, rel, err = _convolve.convolve(a.probs, b.probs)
    low = np.clip(conv * (1.0 - rel) - err, 0.0, None)
    inf = (a.inf_mass + b.inf_mass - a.inf_mass * b.inf_mass) * (1.0 - 4 * U)
    off = a.offset + b.offset
    # far tails: the lower one is dropped, the upper one moved down to the last kept knot
    c = np.cumsum(low)
    lo = int(np.searchsorted(c, TAIL / 2, side="right"))
    cu = np.cumsum(low[::-1])
    hi = low.size - 1 - int(np.searchsorted(cu, TAIL / 2, side="right"))
    hi = max(hi, lo)
    up = float(np.sum(low[hi + 1 :]))
    kept = np.array(low[lo : hi + 1])
    kept[-1] += up * (1.0 - 4 * U)
    return _restored(off + lo, kept, inf, grid)


def _restored(offset: int, probs: np.ndarray, inf: float, grid: float) -> PLD:
    """Lower-bound masses made a valid PLD (``restore_optimistic``, Lemma A2 of
    docs/proofs/accounting.md), then its finite masses scaled down so that they and the
    +inf mass total at most 1 (scaling masses down only lowers h, at every x).

    The scaling is needed: when the restore lowers the hull onto 1 - x at x = 1 while the
    +inf mass is positive, it keeps that mass *and* puts 1 + (a positive slope) at z = 0
    (the addition direction of the step at sigma 50, rate 1e-3: 1 + 1.5e-10; composed 2^13
    times the excess reached 1.2e-6, an inflated 'lower' bound, and then a PLD() error)."""
    o, out, infm = _construct.optimistic(offset, probs, inf, grid)
    finite = math.fsum(out.tolist())
    if finite + infm > 1.0 and finite > 0.0:
        out = out * (max(0.0, 1.0 - infm) / finite * (1.0 - 4 * U))
    return PLD(grid, o, out, infm, 0.0, "optimistic", False)


def _as_exact_input(p: PLD) -> PLD:
    """L^ itself is the exact object of a budget: its masses are inputs, not estimates."""
    return PLD(p.grid, p.offset, p.probs, p.inf_mass, 0.0, "optimistic", False)


def _dual_down(p: PLD) -> PLD:
    """A valid PLD dominated by dual(p): masses p e^{-z} rounded down, then restored."""
    d = _ops.dual(p, upper=False)  # rounded down, not restored
    return _restored(d.offset, d.probs, d.inf_mass, d.grid)


@lru_cache(maxsize=256)
def _lower_pow2(sigma: float, rate: float, grid: float, i: int, add: bool) -> PLD:
    if i == 0:
        base = _as_exact_input(step_remove(sigma, rate, grid))
        return _dual_down(base) if add else base
    h = _lower_pow2(sigma, rate, grid, i - 1, add)
    return _lower_compose(h, h)


@lru_cache(maxsize=128)
def lower_power(sigma: float, rate: float, grid: float, k: int, add: bool = False) -> PLD:
    """A lower bound (valid optimistic PLD) of L^ (``add``: of its dual) composed k times.

    Only x >= 1 of the result is meant to be used (see :func:`leq_both`): its far lower tail
    is dropped, which lowers h but only where x e^{-z} >= 1 already made it vanish... for
    x >= 1 those losses (z < 0 by far) contribute nothing.
    """
    out: PLD | None = None
    i = 0
    while k:
        if k & 1:
            p = _lower_pow2(sigma, rate, grid, i, add)
            out = p if out is None else _lower_compose(out, p)
        k >>= 1
        i += 1
    if out is None:
        return PLD.identity(grid=grid)
    return out


def leq_x_ge_1(left: PLD, right: PLD) -> bool:
    """Sound check of h_left(x) <= h_right(x) for every x >= 1 (grid PLDs, mu = 0).

    Applied to the removal PLDs and to their duals it is the Blackwell order (for x < 1,
    h_L(x) = 1 - x + x h_{dual L}(1/x); docs/proofs/training.md, Lemma 1.3), with each side
    compared against its own lower bound (the dual of a lower bound loses the far tail).
    """
    from dpsieve.accounting.order import _pl_vs_pl

    return bool(_pl_vs_pl(left, right))


def with_reserve(p: PLD, d: float) -> PLD:
    """A lower bound of R_{0,d} (+) p for an optimistic p: masses (1-d) p, +inf d + (1-d) inf."""
    if d == 0.0:
        return p
    probs = p.probs * ((1.0 - d) * (1.0 - 4 * U))
    inf = (d + (1.0 - d) * p.inf_mass) * (1.0 - 4 * U)
    return PLD(p.grid, p.offset, probs, min(inf, 1.0), 0.0, "optimistic", False)


