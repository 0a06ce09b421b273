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

Grid objects of mass above 1 (docs/proofs/training.md, Lemma 1.4): L^'s masses are upper
bounds, so its total is 1 + eta (eta ~ 1e-13 to 1e-11). The budget is made of the PLD L° =
L^ without its lowest eta of mass; :func:`excess` bounds eta, the lower bounds start from L°
(:func:`_below_budget`), and every dual of an upper bound adds the e^{-z}-mass of the lowest
excess to +inf (:func:`dual_upper`), which is what makes it an upper bound of the dual.

Results are cached per (sigma, rate, grid, k): they are pure functions of public numbers.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from dpsieve.accounting import kernels
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


def excess(p: PLD) -> float:
    """An upper bound of |p| - 1 (finite masses plus +inf mass, minus 1), at least 0.

    Pairwise summation errs by at most (log2 n + 1) u of the total; 4 (log2 n + 32) u of it
    is added (as in ``kernels.shed_excess``)."""
    n = p.probs.size
    total = float(np.sum(p.probs)) + p.inf_mass
    slack = 4.0 * (math.log2(max(n, 2)) + 32.0) * U * total
    return max(0.0, (total - 1.0 + slack) * (1.0 + 4 * U))


def excess_b_mass(p: PLD, eta: float | None = None) -> float:
    """An upper bound of sum e^{-z} m_z over the lowest ``eta`` (default: :func:`excess`) of
    p's finite mass: the most any sub-measure of p of mass eta can carry under Q
    (docs/proofs/training.md, Lemma 1.4)."""
    eta = excess(p) if eta is None else eta
    if not eta > 0:
        return 0.0
    n = p.probs.size
    # entry i can hold at most min(p_i, eta - (mass below i)) of the lowest eta: lower
    # bounds of the partial sums give upper bounds of what is left for it
    low = np.cumsum(p.probs) * (1.0 - (np.arange(n) + 3.0) * U)
    k = min(int(np.searchsorted(low, eta, side="left")), n - 1)
    below = np.concatenate([[0.0], low[:k]])
    take = np.minimum(p.probs[: k + 1], np.maximum(eta - below, 0.0) * (1.0 + 4 * U))
    z = kernels.knots(p.offset, k + 1, p.grid)
    with np.errstate(over="ignore"):
        b = float(np.sum(take * np.exp(-z)))
    return b * (1.0 + (k + 8) * U)


def dual_upper(p: PLD) -> PLD | None:
    """An upper bound of dual(X) for every PLD X of which p is an upper representation
    (p = Y + rho with Y a PLD, X <= Y <= p, rho >= 0; every pessimistic result here and in
    ``PLD.compose`` is one): ``p.dual()`` (masses rounded up) with +inf raised by
    :func:`excess_b_mass`. None when that mass makes no valid object (the bound is useless)."""
    d = p.dual()
    inf = d.inf_mass + excess_b_mass(p) * (1.0 + 4 * U)
    if inf > 1.0 or float(np.sum(d.probs)) + inf > 1.0 + 1e-7:
        return None
    return PLD(d.grid, d.offset, d.probs, inf, d.mu, d.direction, d.symmetric)


def _below_budget(p: PLD, add: bool) -> PLD:
    """A valid PLD below the budget's step L° = L^ without its lowest eta of mass (``add``:
    below dual(L°)), docs/proofs/training.md, Lemma 1.4: masses entrywise below L° (or
    dual(L°)), then ``_restored`` (Lemma A2)."""
    eta = excess(p)
    probs = np.array(p.probs)
    if eta > 0:  # remove at least eta from the bottom, the boundary entry rounded down
        up = np.cumsum(probs) * (1.0 + (np.arange(probs.size) + 3.0) * U)
        k = int(np.searchsorted(up, eta, side="right"))  # entries [0, k) sum to <= eta
        before = float(up[k - 1]) if k > 0 else 0.0
        probs[:k] = 0.0
        if k < probs.size:
            probs[k] = max(0.0, (probs[k] - (eta - before)) * (1.0 - 4 * U))
    if not add:
        return _restored(p.offset, probs, p.inf_mass, p.grid)
    # dual(L°): atoms -z with masses m_z e^{-z}, +inf mass 1 - E_{L°}[e^-Z], which is
    # >= max(0, 1 - E_{L^}[e^-Z]) (L° <= L^ entrywise, and L° is a PLD): both rounded down
    z = p.losses
    with np.errstate(over="ignore"):
        q = probs * np.exp(-z)
        m = float(np.sum(p.probs * np.exp(-z)))
    err = (z.size + 4) * U * m
    inf = max(0.0, 1.0 - m - err - 8 * U)
    return _restored(-(p.offset + p.probs.size - 1), q[::-1] * (1.0 - 4 * U), inf, p.grid)


@lru_cache(maxsize=256)
def _upper_pow2(sigma: float, rate: float, grid: float, i: int, add: bool = False) -> PLD:
    if i == 0:
        base = step_remove(sigma, rate, grid)
        if not add:
            return base
        d = dual_upper(base)  # an upper bound of dual(L°) (Lemma 1.4)
        if d is None:
            raise ValueError("_sgm_powers: the step's excess mass leaves no dual bound")
        return d
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
    if a.grid != b.grid:  # the arrays are convolved by index: one grid only
        raise ValueError(f"_lower_compose: operands on different grids ({a.grid!r}, {b.grid!r})")
    grid = a.grid
    conv, rel, err = kernels.convolve(a.probs, b.probs)
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
    o, out, infm = kernels.optimistic(offset, probs, inf, grid)
    finite = math.fsum(out.tolist())
    if finite + infm > 1.0 and finite > 0.0:
        out = out * (max(0.0, 1.0 - infm) / finite * (1.0 - 4 * U))
    return PLD(grid, o, out, infm, 0.0, "optimistic", False)


@lru_cache(maxsize=256)
def _lower_pow2(sigma: float, rate: float, grid: float, i: int, add: bool) -> PLD:
    if i == 0:
        return _below_budget(step_remove(sigma, rate, grid), add)
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
    left, right = one_grid(left, right)
    return bool(kernels.pl_vs_pl(left, right))


def one_grid(left: PLD, right: PLD) -> tuple[PLD, PLD]:
    """An upper bound ``left`` and a lower bound ``right`` brought to one grid, the coarser,
    each in its safe direction: the left by the pessimistic split (Lemma A1, h only rises),
    the right with every loss rounded down and restored (Lemma A2, h only falls). Pessimistic
    compositions past ``max_points`` land on a multiple of the grid (Lemma A5); the lower
    bounds never do, so it is usually the right that moves (by less than one coarse step)."""
    if left.grid == right.grid:
        return left, right
    g = max(left.grid, right.grid)
    if left.grid != g:
        left = kernels.regrid(left, g, pessimistic=True)
    if right.grid != g:
        off, probs, inf = kernels.atoms(right.losses, right.probs, right.inf_mass, g, False)
        right = PLD(g, off, probs, inf, 0.0, "optimistic", False)
    return left, right


def with_reserve(p: PLD, d: float) -> PLD:
    """A lower bound of R_{0,d} (+) p for an optimistic p: masses (1-d) p, +inf d + (1-d) inf."""
    if d == 0.0:
        return p
    probs = p.probs * ((1.0 - d) * (1.0 - 4 * U))
    inf = (d + (1.0 - d) * p.inf_mass) * (1.0 - 4 * U)
    return PLD(p.grid, p.offset, probs, min(inf, 1.0), 0.0, "optimistic", False)


