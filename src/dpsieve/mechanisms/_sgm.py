"""Grid PLDs of the Poisson-subsampled *continuous* Gaussian, per direction (private).

Base pair (sensitivity 1, noise sigma): P = N(0, s^2), Q = N(1, s^2); M = (1 - q) P + q Q.
Zhu, Dong & Wang (AISTATS 2022, Thm. 11): under add/remove neighbours the subsampled
mechanism is dominated by (M, P) for removal and by (P, M) for addition. Both pairs are
tight (they are realised by a record whose clipped gradient is a unit vector).

Remove, (A, B) = (M, P): the loss is l(x) = log(1 - q + q e^{(2x - 1) / (2 s^2)}), x ~ M,
increasing in x, with range (log(1 - q), inf). Add, (A, B) = (P, M): the loss is -l(x),
x ~ P, decreasing, with range (-inf, -log(1 - q)). ``x(z) = s^2 (log(1-q) + log(expm1(z -
log(1-q))) - log q) + 1/2`` inverts l. Cell masses are differences of normal CDFs, taken on
the side where they do not cancel, with an absolute error bound per cell
(:func:`_interval`).

Pessimistic ("connect the dots", docs/proofs/training.md §1): a cell of losses between
knots z_j < z_{j+1} with A-mass a and B-mass b (b = E_A[e^{-Z}; cell]) is split as
left = (e^{z_{j+1}} b - a) / (e^g - 1), right = a - left, the exact hat split of
:mod:`dpsieve.accounting._grid`. The x-boundaries are computed for the loss z_j - kappa
(kappa = 2^-30, at least twice the float error of the boundary), so each cell's losses lie
in [z_j - 2 kappa, z_{j+1}]; raising the sliver below z_j to z_j (pessimistic) lowers b by
at most 2 kappa times the sliver's B-mass, which is bounded by one more pair of boundaries
(:func:`_sliver`; a global factor e^{-2 kappa} would leave E[e^{-Z}] short by 2e-9 per
step, which the dual direction would turn into +inf mass). ``left`` is computed from an
upper bound on a and that lower bound on b, and rounded down; ``right`` takes the rest of
the upper bound on a. Every deviation from the exact split moves mass up or adds mass, so
h only rises.
Optimistic: boundaries for z_j + kappa (cell losses in [z_j, z_{j+1} + 2 kappa]), lower
bounds of the masses rounded down to z_j, then the PLD condition is restored
(:func:`dpsieve.accounting.kernels.optimistic`).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve.accounting import kernels
from dpsieve.errors import NumericalError

__all__: list[str] = []

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Relative error of scipy's ndtr per evaluation (generous; as in accounting._curves).
NDTR_REL = 1e-14
#: Loss margin of the cell boundaries (see module docstring).
KAPPA = 2.0**-30
#: Standard deviations beyond which the Gaussian tails are left to the tail rules.
TAIL_SD = 13.0
Z_CAP = kernels.Z_LOW  # this PLD's window: above -> +inf (pess.) / down (opt.)
Parts = tuple[int, FloatArray, float]


def _interval(lo: FloatArray, hi: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Standard normal mass of [lo, hi) (lo <= hi, +-inf allowed) and an error bound.

    Left of 0: Phi(hi) - Phi(lo); right of 0: Phi(-lo) - Phi(-hi); across 0:
    1 - Phi(lo) - Phi(-hi). Each Phi value v at argument t errs by at most
    (NDTR_REL + 8u(1 + t^2)) v (ndtr's own error plus a relative argument error of 2u
    amplified by the slope of log Phi, at most |t| + 1/|t|); one more rounding per step.
    """
    with np.errstate(invalid="ignore"):
        a, b = special.ndtr(lo), special.ndtr(hi)
        ac, bc = special.ndtr(-lo), special.ndtr(-hi)

    def e(v: FloatArray, t: FloatArray) -> FloatArray:
        tt = np.where(np.isfinite(t), t * t, 0.0)
        out: FloatArray = (NDTR_REL + 8 * U * (1.0 + tt)) * v
        return out

    left = hi <= 0
    right = lo >= 0
    m = np.where(left, b - a, np.where(right, ac - bc, 1.0 - a - bc))
    err = np.where(
        left,
        e(b, hi) + e(a, lo),
        np.where(right, e(ac, lo) + e(bc, hi), e(a, lo) + e(bc, hi) + 2 * U),
    )
    m = np.clip(m, 0.0, None)
    return m, err + 2 * U * m


def _x_of_loss(z: FloatArray, sigma: float, q: float) -> tuple[FloatArray, FloatArray]:
    """x(z) with l(x(z)) = z, and a bound on |l(x_float) - z|; -inf where z <= log(1-q)."""
    l1q = math.log1p(-q)
    w = z - l1q
    ok = w > 0
    ws = np.where(ok, w, 1.0)
    with np.errstate(over="ignore"):
        lem = np.where(ws > 30.0, ws + np.log1p(-np.exp(-ws)), np.log(np.expm1(ws)))
    s = l1q + lem - math.log(q)
    s2 = sigma * sigma
    x = s2 * s + 0.5
    # error of l at x: w's rounding maps to itself; the rest is |dx| / s^2 (l' <= 1/s^2)
    eta = 8 * U * (
        np.abs(z) + abs(l1q) + abs(math.log(q)) + np.abs(lem) + np.abs(s) + np.abs(x) / s2 + 1.0
    )
    return np.where(ok, x, -math.inf), np.where(ok, eta, 0.0)


def _loss_of_x(x: float, sigma: float, q: float) -> float:
    """l(x) = log(1 - q + q e^{(2x - 1) / (2 s^2)}) (only used to size the grid)."""
    t = (2.0 * x - 1.0) / (2.0 * sigma * sigma)
    return float(np.logaddexp(math.log1p(-q), math.log(q) + t))


def _masses(
    xb: FloatArray, sigma: float, q: float, remove: bool
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """(a, a_err, b, b_err) on the x-intervals [xb[i], xb[i+1]) (xb increasing)."""
    lo, hi = xb[:-1], xb[1:]
    p, pe = _interval(lo / sigma, hi / sigma)
    qq, qe = _interval((lo - 1.0) / sigma, (hi - 1.0) / sigma)
    m = (1.0 - q) * p + q * qq
    me = (1.0 - q) * pe + q * qe + 4 * U * m
    return (m, me, p, pe) if remove else (p, pe, m, me)


def _sliver(zs: FloatArray, sigma: float, q: float, remove: bool) -> FloatArray:
    """Upper bounds on the B-mass with loss in [z - 2 kappa, z] for each knot z in ``zs``.

    Those losses lie in x between the boundaries computed for z - 3 kappa and z + kappa
    (each within kappa/2 of its target), in the order the direction dictates.
    """
    if remove:
        lo, e1 = _x_of_loss(zs - 3.0 * KAPPA, sigma, q)
        hi, e2 = _x_of_loss(zs + KAPPA, sigma, q)
    else:
        lo, e1 = _x_of_loss(-zs - KAPPA, sigma, q)
        hi, e2 = _x_of_loss(-zs + 3.0 * KAPPA, sigma, q)
    if not max(float(np.max(e1)), float(np.max(e2))) <= KAPPA / 2:
        raise NumericalError(f"The subsampled Gaussian PLD cannot be certified at sigma={sigma!r}.")
    edges_lo, edges_hi = lo / sigma, hi / sigma
    p, pe = _interval(edges_lo, np.maximum(edges_hi, edges_lo))
    if not remove:  # B = M
        qq, qe = _interval(edges_lo - 1.0 / sigma, np.maximum(edges_hi, edges_lo) - 1.0 / sigma)
        out: FloatArray = (1.0 - q) * (p + pe) + q * (qq + qe)
        return out * (1.0 + 4 * U)
    out = (p + pe) * (1.0 + 4 * U)
    return out


def directed_parts(sigma: float, q: float, grid: float, remove: bool, pessimistic: bool) -> Parts:
    """(offset, probs, inf_mass) of one direction on the grid (module docstring)."""
    l1q = math.log1p(-q)
    if remove:
        z_lo, z_hi = l1q, min(Z_CAP, _loss_of_x(1.0 + TAIL_SD * sigma, sigma, q))
    else:
        z_lo, z_hi = max(-Z_CAP, -_loss_of_x(TAIL_SD * sigma, sigma, q)), -l1q
    i0 = math.floor(z_lo / grid)
    i1 = max(math.ceil(z_hi / grid), i0 + 1)
    n = i1 - i0 + 1
    z = (i0 + np.arange(n, dtype=np.float64)) * grid
    shift = -KAPPA if pessimistic else KAPPA
    # boundary for knot j: loss z_j + shift; in x (remove) or in -x order (add)
    xb, eta = _x_of_loss(z + shift if remove else -(z + shift), sigma, q)
    if not float(np.max(eta)) <= KAPPA / 2:
        raise NumericalError(
            f"The subsampled Gaussian PLD cannot be certified at sigma={sigma!r}, q={q!r}: "
            f"boundary error {float(np.max(eta))!r} exceeds {KAPPA / 2!r}."
        )
    if remove:  # edges -inf, xb_1..xb_{n-1}, inf: cells 0..n-2, then the top bucket
        a, ae, b, be = _masses(np.concatenate([[-math.inf], xb[1:], [math.inf]]), sigma, q, True)
        below, below_e = 0.0, 0.0  # l >= log(1 - q) >= z_0
        top, top_e = float(a[-1]), float(ae[-1])
        a, ae, b, be = a[:-1], ae[:-1], b[:-1], be[:-1]
    else:  # x decreases in the loss: edges -inf, xb_{n-1}..xb_0, inf, read backwards
        ra, rae, rb, rbe = _masses(
            np.concatenate([[-math.inf], xb[::-1], [math.inf]]), sigma, q, False
        )
        a, ae, b, be = ra[::-1], rae[::-1], rb[::-1], rbe[::-1]
        # now [below z_0, cell 0, ..., cell n-2, top bucket]
        below, below_e = float(a[0]), float(ae[0])
        top, top_e = float(a[-1]), float(ae[-1])
        a, ae, b, be = a[1:-1], ae[1:-1], b[1:-1], be[1:-1]
    probs = np.zeros(n)
    if pessimistic:
        eg = math.expm1(grid)
        a_hi = a + ae
        b_lo = np.clip(b - be - 2.0 * KAPPA * _sliver(z[:-1], sigma, q, remove), 0.0, None)
        with np.errstate(over="ignore", invalid="ignore"):
            left = (np.exp(z[1:]) * b_lo * (1.0 - 4 * U) - a_hi) / eg * (1.0 - 8 * U)
        left = np.where(np.isfinite(left), np.clip(left, 0.0, a_hi), 0.0)
        probs[:-1] += left
        probs[1:] += (a_hi - left) * (1.0 + 2 * U)
        probs[0] += below + below_e  # losses below the bottom knot: up to it
        if remove:  # above the top knot: to +inf
            inf_mass = (top + top_e) * (1.0 + 4 * U)
        else:  # add: losses in [z_{n-1} - 2 kappa, -log(1-q)]: up to the top knot
            inf_mass = 0.0
            probs[-1] += top + top_e
        probs *= 1.0 + 4 * U
        return kernels.trim(i0, probs, inf_mass)
    probs[:-1] += np.clip(a - ae, 0.0, None)
    probs[-1] += max(top - top_e, 0.0)  # above the top knot: down to it
    # below the bottom knot (add only): dropped, which lowers h
    probs *= 1.0 - 4 * U
    return kernels.optimistic(i0, probs, 0.0, grid)
