"""Operations on grid PLDs: composition, regridding, duals, eps(delta), tradeoff (private)."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import hypot_down, hypot_up, sqrt_down, sqrt_up
from dpsieve.accounting import _construct, _convolve, _curves, _grid
from dpsieve.errors import UnsupportedError, ValidationError

if TYPE_CHECKING:
    from dpsieve.accounting.pld import PLD

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Largest support (grid points) of a composition's discrete part: 2^21 points, 16 MiB per
#: float64 array. Larger compositions are coarsened pessimistically (:func:`fit`).
MAX_POINTS = 1 << 21


def _direction(a: str, b: str) -> str:
    ds = {a, b} - {"exact"}
    if len(ds) > 1:
        raise UnsupportedError(
            "Cannot compose a pessimistic PLD with an optimistic one: the result would be "
            "neither an upper nor a lower bound."
        )
    return ds.pop() if ds else "exact"


def _mu(direction: str, a: float, b: float) -> float:
    """mu of G_a (+) G_b = G_hypot(a, b), rounded up (down for optimistic compositions)."""
    return hypot_down(a, b) if direction == "optimistic" else hypot_up(a, b)


def is_unit(p: PLD) -> bool:
    """Whether the discrete part is the identity (all finite mass at loss 0)."""
    return p.offset == 0 and p.probs.size == 1 and p.probs[0] == 1.0 and p.inf_mass == 0.0


def _new(
    like: PLD,
    grid: float,
    offset: int,
    probs: FloatArray,
    inf_mass: float,
    mu: float,
    direction: str,
    symmetric: bool,
) -> PLD:
    return type(like)(grid, offset, probs, min(inf_mass, 1.0), mu, direction, symmetric)


def regrid(p: PLD, grid: float, pessimistic: bool | None = None) -> PLD:
    """The discrete part of p on another grid, in p's direction (exact -> pessimistic) unless
    ``pessimistic`` is given (the order check always rounds the smaller side up)."""
    if grid == p.grid:
        return p
    pess = p.direction != "optimistic" if pessimistic is None else pessimistic
    off, probs, inf = _construct.atoms(p.losses, p.probs, p.inf_mass, grid, pess)
    return _new(
        p, grid, off, probs, inf, p.mu, "optimistic" if not pess else "pessimistic", p.symmetric
    )


def _finish(
    like: PLD,
    grid: float,
    offset: int,
    probs: FloatArray,
    inf_mass: float,
    mu: float,
    direction: str,
    symmetric: bool,
    tail_mass: float,
) -> PLD:
    off, probs, up_cut, low_cut = _convolve.trim(offset, probs, tail_mass)
    if direction == "optimistic":
        if up_cut > 0:
            probs[-1] += up_cut
        # masses scaled down by (1 - rel) at every composition lose ~rel of the total each
        # time (rel ~ size * u): 1.3e-9 after 1,000 subsampled-Gaussian steps at grid 2e-3,
        # past PLD()'s 1e-9 tolerance (a crash). Restored like a cut lower tail (Lemma A2):
        # a valid PLD of total mass 1, still below the truth.
        if low_cut > 0 or math.fsum(probs.tolist()) + inf_mass < 1.0 - 1e-12:
            off, probs, inf_mass = _construct.optimistic(off, probs, inf_mass, grid)
    else:
        inf_mass += up_cut
        probs[0] += low_cut
    return _new(like, grid, off, probs, inf_mass, mu, direction, symmetric)


def _lattice_step(a: PLD, b: PLD) -> int:
    """gcd of the grid indices carrying mass in a and b (>= 1): coarsening by a multiple of
    it keeps those indices on coarse knots."""
    idx = [p.offset + np.flatnonzero(p.probs) for p in (a, b)]
    return max(int(np.gcd.reduce(np.abs(np.concatenate([*idx, np.zeros(1, np.int64)])))), 1)


def _coarsen(p: PLD, coarse: float) -> PLD:
    """p's discrete part on the coarser grid by the hat split (dominates p, keeps the mass
    and E[e^-Z]; Lemma A5); not for optimistic PLDs."""
    off, probs = _grid.coarsen_hat(p.offset, p.probs, p.grid, coarse)
    direction = "pessimistic" if p.direction == "exact" else p.direction
    return _new(p, coarse, off, probs, p.inf_mass, p.mu, direction, p.symmetric)


def fit(a: PLD, b: PLD, max_points: int, param: str) -> tuple[PLD, PLD]:
    """a and b (on one grid) such that their convolution has at most ``max_points`` entries.

    When ``a.size + b.size - 1`` exceeds it, both are coarsened pessimistically onto the grid
    ``m * grid`` (:func:`_grid.coarsen_hat`: the hat split onto the coarse knots, so each
    result dominates its input and, composition being monotone in the Blackwell order, the
    composition dominates the exact one; Lemma A5), m the smallest multiple of the lattice
    step of both supports that fits (m equal to that step moves no mass). Optimistic PLDs are
    not coarsened (the hat split is pessimistic; rounding down would need the restore of
    Lemma A2 on a support reaching z = 0): a ValidationError naming ``param``, the
    constraint and the estimated size is raised before anything is allocated.
    """
    n_out = a.probs.size + b.probs.size - 1
    if n_out <= max_points:
        return a, b
    if a.direction == "optimistic" or b.direction == "optimistic":
        raise ValidationError(
            f"The '{param}' parameter of compose() is too large for an optimistic PLD: the "
            f"composition would hold {n_out} support points at grid {a.grid!r}, over "
            f"max_points = {max_points} (optimistic PLDs are never coarsened: rounding losses "
            "up would break their lower bound). Use a coarser grid, fewer compositions or a "
            "larger max_points.",
            parameter=param,
            constraint=f"support points of the composition <= max_points = {max_points}",
            value=n_out,
        )
    spans = a.probs.size - 1 + b.probs.size - 1
    s = _lattice_step(a, b)
    need = max(1, -(-spans // (max_points - 3)))  # coarse sizes <= span/m + 2 each
    m = s * -(-need // s)
    while True:
        ca, cb = _coarsen(a, a.grid * m), _coarsen(b, a.grid * m)
        if ca.probs.size + cb.probs.size - 1 <= max_points:
            return ca, cb
        m += s  # not reached (the sizes are bounded above); kept as a guard


def compose(
    a: PLD, b: PLD, tail_mass: float, max_points: int = MAX_POINTS, param: str = "other"
) -> PLD:
    direction = _direction(a.direction, b.direction)
    if is_unit(b) or is_unit(a):
        keep = a if is_unit(b) else b
        return _finish(
            keep,
            keep.grid,
            keep.offset,
            keep.probs.copy(),
            keep.inf_mass,
            _mu(direction, a.mu, b.mu),
            direction,
            a.symmetric and b.symmetric,
            tail_mass,
        )
    grid = max(a.grid, b.grid)
    a, b = fit(regrid(a, grid), regrid(b, grid), max_points, param)
    grid = a.grid
    if direction == "exact":
        direction = "pessimistic"  # products of masses are rounded
    opt = direction == "optimistic"
    if (
        opt
        and min(a.probs.size, b.probs.size) * max(a.probs.size, b.probs.size)
        > (_convolve.DIRECT_LIMIT)
        and min(a.probs.size, b.probs.size) > 32
    ):
        conv = np.convolve(a.probs, b.probs)  # no FFT noise in the optimistic direction
        rel, err = (min(a.probs.size, b.probs.size) + 2) * U, 0.0
    else:
        conv, rel, err = _convolve.convolve(a.probs, b.probs)
    inf = a.inf_mass + b.inf_mass - a.inf_mass * b.inf_mass
    if opt:
        conv *= 1.0 - rel
        inf *= 1.0 - 4 * U
    else:
        conv *= 1.0 + rel
        inf = inf * (1.0 + 4 * U)
        off = a.offset + b.offset
        if tail_mass > 0:  # tails are cut to +inf anyway: the l1 bound sqrt(N) * err goes there
            _convolve.lift_negative_noise(off, conv, grid, err)
            inf += math.sqrt(conv.size) * err
        elif err > 0:  # keep the support and raise the entries (Lemmas A3, A4)
            # the upper tail from tilted FFTs (relative error), the rest with the bound err
            stop, top, to_inf = _convolve.tilted_bands(
                a.probs, b.probs, conv, err, min(max(-off, 0), conv.size)
            )
            _convolve.lift_negative_noise(off, conv, grid, err)
            if top < conv.size:  # a large region certified <= 1e-30 goes to +inf (Lemma A4)
                conv, inf = conv[:top].copy(), inf + to_inf
            elif stop >= conv.size:  # no tilt helped: cut the noise region as before
                top, moved = _convolve.cut_noise_top(conv, err)
                if moved > 0:
                    conv, inf = conv[:top].copy(), inf + moved
            _convolve.add_entry_bound(off, conv, grid, err, stop)
        _convolve.shed_excess(conv, inf)  # the bounds' extra mass off the bottom (18.1)
    mu = _mu(direction, a.mu, b.mu)
    return _finish(
        a,
        grid,
        a.offset + b.offset,
        conv,
        inf,
        mu,
        direction,
        a.symmetric and b.symmetric,
        tail_mass,
    )


def self_compose(p: PLD, k: int, tail_mass: float, max_points: int = MAX_POINTS) -> PLD:
    from dpsieve.accounting.pld import PLD as _PLD

    # sqrt(k) mu, rounded in p's direction (up unless optimistic)
    mu2 = k * Fraction(p.mu) ** 2
    mu = sqrt_down(mu2) if p.direction == "optimistic" else sqrt_up(mu2)
    disc = _new(p, p.grid, p.offset, p.probs.copy(), p.inf_mass, 0.0, p.direction, p.symmetric)
    result = _PLD.identity(grid=p.grid)
    while k:
        if k & 1:
            if result.grid < disc.grid and not is_unit(result):  # coarsened by fit: the hat
                result = _coarsen(result, disc.grid)  # split without regrid's loss window
            elif disc.grid < result.grid:
                disc = _coarsen(disc, result.grid)
            result = compose(result, disc, tail_mass, max_points, "k")
        k >>= 1
        if k:
            disc = compose(disc, disc, tail_mass, max_points, "k")
    direction = result.direction if result.direction != "exact" else p.direction
    return _new(
        p,
        result.grid,
        result.offset,
        result.probs.copy(),
        result.inf_mass,
        mu,
        direction,
        p.symmetric,
    )


def discretize(p: PLD, grid: float) -> PLD:
    q = regrid(p, grid)
    if p.mu == 0.0:
        return q
    pess = p.direction != "optimistic"
    off, probs, inf = _construct.gaussian(p.mu, grid, pess)
    from dpsieve.accounting.pld import PLD as _PLD

    g = _PLD(grid, off, probs, inf, 0.0, "pessimistic" if pess else "optimistic", True)
    base = _new(
        q,
        grid,
        q.offset,
        q.probs.copy(),
        q.inf_mass,
        0.0,
        q.direction if q.direction != "exact" else g.direction,
        q.symmetric,
    )
    return compose(base, g, 0.0)


def truncate(p: PLD, tail_mass: float) -> PLD:
    direction = p.direction if p.direction != "exact" else "pessimistic"
    return _finish(
        p, p.grid, p.offset, p.probs.copy(), p.inf_mass, p.mu, direction, p.symmetric, tail_mass
    )


def dual(p: PLD, upper: bool | None = None) -> PLD:
    """PLD(Q || P), rounded up (``upper``; default for non-optimistic p) or down.

    Atoms -z with masses p e^{-z}; +inf mass 1 - E[e^{-Z}]. The order checks use upper duals
    for the smaller side and lower duals (no restore step; internal only) for the larger one.
    """
    up = p.direction != "optimistic" if upper is None else upper
    z = p.losses
    with np.errstate(divide="ignore", over="ignore"):
        q = np.where(p.probs > 0, np.exp(np.log(p.probs) - z), 0.0)
    q = q[::-1].copy()
    m = float(np.sum(q))
    err = (q.size + 4) * U * m
    if up:
        q *= 1.0 + 4 * U
        inf = max(0.0, 1.0 - m) + err + 8 * U
    else:
        q *= 1.0 - 4 * U
        inf = max(0.0, 1.0 - m - err - 8 * U)
    off = -(p.offset + p.probs.size - 1)
    if not up and upper is None:  # public optimistic dual: make it a valid PLD again
        off, q, inf = _construct.optimistic(off, q, inf, p.grid)
    return _new(p, p.grid, off, q, inf, p.mu, p.direction, p.symmetric)


def is_symmetric(p: PLD, tol: float) -> bool:
    d = dual(p)
    lo = min(p.offset, d.offset)
    hi = max(p.offset + p.probs.size, d.offset + d.probs.size)
    a = np.zeros(hi - lo)
    b = np.zeros(hi - lo)
    a[p.offset - lo : p.offset - lo + p.probs.size] = p.probs
    b[d.offset - lo : d.offset - lo + d.probs.size] = d.probs
    return bool(np.all(np.abs(a - b) <= tol)) and abs(p.inf_mass - d.inf_mass) <= tol


def eps_bisect(p: PLD, deltas: FloatArray) -> FloatArray:
    """Vectorized bisection for eps(delta) when mu > 0 (certified in p's direction)."""
    opt = p.direction == "optimistic"
    z, probs = p.losses, p.probs

    def h(e: FloatArray) -> FloatArray:
        val, err = _curves.h_mixed(z, probs, p.inf_mass, p.mu, e)
        out: FloatArray = val - err if opt else val + err
        return out

    d = deltas.astype(np.float64)
    out = np.full(d.shape, math.inf)
    live = d > p.inf_mass
    if not np.any(live):
        return out
    dl = d[live]
    zero = h(np.zeros(dl.shape)) <= dl
    lo = np.zeros(dl.shape)
    hi = np.ones(dl.shape)
    for _ in range(16):
        bad = h(hi) > dl
        if not np.any(bad):
            break
        lo = np.where(bad, hi, lo)
        hi = np.where(bad, hi * 2.0, hi)
    ok_hi = h(hi) <= dl
    for _ in range(200):
        if np.all(hi - lo <= 1e-12 * np.maximum(1.0, hi)):
            break
        mid = 0.5 * (lo + hi)
        ok = h(mid) <= dl
        hi = np.where(ok, mid, hi)
        lo = np.where(ok, lo, mid)
    res = lo if opt else hi
    res = np.where(zero, 0.0, np.where(ok_hi, res, math.inf))
    out[live] = res
    return out


def tradeoff_pl(p: PLD, alpha: FloatArray) -> FloatArray:
    """tau of a purely discrete PLD: through (P(Z < z_k), Q(Z >= z_k)) (exact, linear between)."""
    z, probs = p.losses, p.probs
    _, b = _curves.tail_sums(z, probs)
    keep = np.concatenate([[True], probs > 0])  # knot k starts a new segment iff p_{k-1} > 0
    alphas = np.concatenate([[0.0], np.cumsum(probs)])[keep]
    taus = b[keep]
    err = (probs.size + 4) * U
    out: FloatArray = np.interp(alpha, alphas, taus, right=0.0)
    out = np.clip(out + (err if p.direction == "optimistic" else -err), 0.0, 1.0)
    return out
