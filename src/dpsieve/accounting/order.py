"""The Blackwell order on PLDs, checked soundly, and suprema of PLDs.

``L <= B`` iff h_L(x) <= h_B(x) for every x > 0 (paper, Prop. 10). Every check here may refuse
a pair that exact arithmetic admits, never the reverse: values of L are rounded up and values
of B down by their floating-point error bounds, and between the points where we evaluate we
use only convexity and monotonicity (docs/proofs/accounting.md, Section B):

* against a piecewise-linear B (no Gaussian part): h_L convex lies below its chords and h_B is
  linear between its kinks, so checking at x = 1 and at the kinks of B is exact; two grid PLDs
  are compared through their difference measure, so equal curves pass with zero margin;
* against a smooth B (Gaussian part): on each cell [a, b] of a fine grid, chord of h_L <= the
  larger of B's tangents at a and b (h_B lies above its tangents), checked at a, b and where
  the tangents cross;
* x < 1 reduces to x > 1 for the duals, h_L(x) = 1 - x + x h_{dual L}(1/x); it is skipped when
  both exact PLDs are symmetric (paper, Lemma 8);
* Gaussian parts: if mu_L <= mu_B, L = D (+) G_a <= B = E (+) G_b follows from
  D <= E (+) G_sqrt(b^2 - a^2) (composition is monotone; G_r (+) G_a = G_b).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import sqrt_down
from dpsieve._validation import check_in_closed, check_nonnegative, fail
from dpsieve.accounting import _curves, _ops
from dpsieve.accounting.pld import PLD
from dpsieve.errors import UnsupportedError

__all__ = [
    "compose_with_supremum",
    "leq",
    "leq_approx",
    "leq_gdp",
    "smallest_gdp_mu",
    "smallest_pure_eps",
    "supremum",
    "symmetrize",
]

FloatArray = npt.NDArray[np.float64]
U = 2.0**-53
#: Cell width (in log x) of the tangent check against smooth curves.
TANGENT_STEP = 5e-4
_MAX_POINTS = 200_000
#: Largest number of (point, atom) Gaussian terms one check evaluates.
_MAX_WORK = 40_000_000


def _strip_mu(p: PLD, mu: float) -> PLD:
    return PLD(p.grid, p.offset, p.probs, p.inf_mass, mu, p.direction, p.symmetric)


def _as_pessimistic(p: PLD) -> PLD:
    d = "pessimistic" if p.direction == "exact" else p.direction
    if d == "optimistic":  # the smaller side must be rounded up: relabel, never round down
        d = "pessimistic"
    return PLD(p.grid, p.offset, p.probs, p.inf_mass, p.mu, d, p.symmetric)


def _aligned(a: PLD, b: PLD) -> tuple[int, FloatArray, FloatArray]:
    lo = min(a.offset, b.offset)
    hi = max(a.offset + a.probs.size, b.offset + b.probs.size)
    pa, pb = np.zeros(hi - lo), np.zeros(hi - lo)
    pa[a.offset - lo : a.offset - lo + a.probs.size] = a.probs
    pb[b.offset - lo : b.offset - lo + b.probs.size] = b.probs
    return lo, pa, pb


def _pl_vs_pl(L: PLD, B: PLD) -> bool:
    """Both mu = 0, same grid: h_B - h_L >= 0 for x >= 1 via the difference measure.

    Both arrays are aligned by index and every loss is read on one grid, so operands on
    different grids are refused (a ValueError: a caller's defect, never a verdict); callers
    bring them to one grid first, each in its safe direction (:func:`_upper_vs_pl`).
    """
    if L.grid != B.grid:
        raise ValueError(f"_pl_vs_pl: operands on different grids ({L.grid!r}, {B.grid!r})")
    if not L.inf_mass <= B.inf_mass:
        return False
    lo, pl, pb = _aligned(L, B)
    z = _curves.knots(lo, pl.size, L.grid)
    d = pb - pl
    start = int(np.searchsorted(z, 0.0, side="left"))
    xs = np.concatenate([[1.0], np.exp(z[start:])])
    k1 = int(np.searchsorted(z, 0.0, side="right"))
    ks = np.concatenate([[k1], np.arange(start, z.size) + 1])
    with np.errstate(over="ignore"):
        e = np.exp(-z)
    a_d = np.concatenate([np.cumsum(d[::-1])[::-1], [0.0]])
    b_d = np.concatenate([np.cumsum((d * e)[::-1])[::-1], [0.0]])
    ad = np.abs(d)
    a_abs = np.concatenate([np.cumsum(ad[::-1])[::-1], [0.0]])
    b_abs = np.concatenate([np.cumsum((ad * e)[::-1])[::-1], [0.0]])
    diff = a_d[ks] - xs * b_d[ks] + (B.inf_mass - L.inf_mass)
    err = (pl.size + 6) * U * (a_abs[ks] + xs * b_abs[ks])
    return bool(np.all(diff >= err))


def _upper_vs_pl(L: PLD, B: PLD) -> bool:
    """B has mu = 0 (piecewise linear); any L. Exact check for x >= 1 at B's kinks."""
    if L.mu == 0.0:
        if L.grid != B.grid:
            L = _ops.regrid(L, B.grid, pessimistic=True)
        return _pl_vs_pl(L, B)
    zb = B.losses[B.probs > 0]
    ts = np.concatenate([[0.0], zb[zb > 0]])
    if ts.size * np.count_nonzero(L.probs) > _MAX_WORK:
        # too many Gaussian terms: put L's Gaussian part on B's grid (pessimistic, Lemma A1)
        # and compare the two grid PLDs exactly
        Lg = _ops.discretize(_as_pessimistic(L), B.grid)
        return _pl_vs_pl(Lg, B)
    hl, el = L.h_log_with_error(ts)
    hb, eb = B.h_log_with_error(ts)
    return bool(np.all(hl + el <= hb - eb)) and (zb.size == 0 or L.inf_mass <= B.inf_mass)


def _upper_vs_smooth(L: PLD, B: PLD) -> bool:
    """B has mu > 0. Tangent check on a grid of log x in [0, T], then the tail beyond T."""
    if L.mu == 0.0:
        if L.inf_mass > B.inf_mass:
            return False
        pos = L.losses[L.probs > 0]
        t_max = float(pos.max()) if pos.size else 0.0
        if L.inf_mass > 0 or B.inf_mass > 0:
            t_max = _tail_point(L, B, max(t_max, 1.0))
    elif B.inf_mass > 0:
        t_max = _tail_point(L, B, 1.0)
    else:
        t_max = _gauss_tail_point(L, B)
    if not math.isfinite(t_max):
        return False
    t_max = max(t_max, TANGENT_STEP)
    # cells of width TANGENT_STEP, fewer when the Gaussian sums would get expensive (the
    # check stays sound on any grid, only less tight)
    budget = _MAX_WORK // max(1, int(np.count_nonzero(L.probs) + np.count_nonzero(B.probs)))
    n = int(min(_MAX_POINTS, budget, max(64, math.ceil(t_max / TANGENT_STEP)))) + 1
    n = max(n, 65)
    ts = np.linspace(0.0, t_max, n)
    xs = np.exp(ts)
    hl, el = L.h_log_with_error(ts)
    hb, eb = B.h_log_with_error(ts)
    hl_up, hb_lo = hl + el, hb - eb
    if not np.all(hl_up <= hb_lo):
        return False
    db = _curves.dh_mixed(B.losses, B.probs, B.mu, ts)
    a, b = xs[:-1], xs[1:]
    da, dbb = db[:-1], db[1:]
    with np.errstate(divide="ignore", invalid="ignore"):
        c = (hb[1:] - hb[:-1] + da * a - dbb * b) / (da - dbb)
    c = np.where(np.isfinite(c), np.clip(c, a, b), b)
    chord = hl_up[:-1] + (hl_up[1:] - hl_up[:-1]) * (c - a) / (b - a)
    tan = np.maximum(hb_lo[:-1] + da * (c - a), hb_lo[1:] + dbb * (c - b))
    # relative error of the derivatives (ndtr, 1e-13 generous) and of the few roundings here
    margin = 1e-13 * (np.abs(da) * (c - a) + np.abs(dbb) * (b - c)) + 8 * U * (
        np.abs(hb_lo[:-1]) + np.abs(hb_lo[1:]) + np.abs(chord)
    )
    return bool(np.all(chord <= tan - margin))


def _tail_point(L: PLD, B: PLD, t0: float) -> float:
    """A t with h_L(e^t) (rounded up) <= inf_B (rounded down), or inf."""
    target = B.inf_mass * (1.0 - 4 * U)
    t = t0
    for _ in range(14):
        h, e = L.h_log_with_error(np.array([t]))
        if float(h[0] + e[0]) <= target:
            return t
        t *= 2.0
    return math.inf


def _gauss_tail_point(L: PLD, B: PLD) -> float:
    """A T with h_L(e^t) <= h_B(e^t) for every t >= T, or inf (docs/proofs, Lemma B3).

    h(e^t) = int_0^inf e^{-s} S(t + s) ds with S(y) = P(Z > y), so S_L <= S_B on [T, inf)
    suffices. L = D (+) G_a (inf_L = 0), B = G_b shifted by its only atom d, a < b:
    S_L(y) <= Phi(-(y - c - a^2/2)/a) with c the largest loss of D, S_B(y) = Phi(-(y - d -
    b^2/2)/b), and the first argument is the larger one for y >= T (linear in y).
    """
    if L.inf_mass > 0 or not L.mu < B.mu or np.count_nonzero(B.probs) != 1:
        return math.inf
    if not float(B.probs[B.probs > 0][0]) >= 1.0:
        return math.inf
    a, b = L.mu, B.mu
    c = float(L.losses[L.probs > 0].max())
    d = float(B.losses[B.probs > 0][0])
    # (y - c - a^2/2)/a >= (y - d - b^2/2)/b  <=>  y (1/a - 1/b) >= (c + a^2/2)/a - (d + b^2/2)/b
    rhs = (c + a * a / 2.0) / a - (d + b * b / 2.0) / b
    k = 1.0 / a - 1.0 / b
    y = max(rhs / k, 0.0) * (1.0 + 1e-6) + 1e-6  # slack for masses summing to 1 + O(u)
    return max(y, 1.0)


def _dual_up(p: PLD) -> PLD:
    return _ops.dual(p, upper=True)


def _dual_down(p: PLD) -> PLD:
    return _ops.dual(p, upper=False)


def _upper(L: PLD, B: PLD) -> bool:
    return _upper_vs_pl(L, B) if B.mu == 0.0 else _upper_vs_smooth(L, B)


def _reduce(L: PLD, B: PLD) -> tuple[PLD, PLD]:
    if L.mu > 0 and B.mu >= L.mu:
        r = sqrt_down(Fraction(B.mu) ** 2 - Fraction(L.mu) ** 2)  # rounded down: B shrinks
        return _strip_mu(L, 0.0), _strip_mu(B, r)
    return L, B


def leq(L: PLD, B: PLD) -> bool:
    """Sound Blackwell order: True only if h_L(x) <= h_B(x) for all x > 0.

    Where the *exact* PLDs are meant (``direction``): a pessimistic L and an optimistic or
    exact B make a True answer a statement about the mechanisms. Cost: O(size) against
    piecewise-linear B, O(size * log(T)/5e-4) against a Gaussian part.
    """
    if not isinstance(L, PLD) or not isinstance(B, PLD):
        raise fail("L", "leq", "two PLDs", (L, B))
    if L == B or (_ops.is_unit(L) and L.mu == 0.0):
        return True  # Id is the least PLD (paper, Sec. 2)
    both_sym = L.symmetric and B.symmetric
    Lr, Br = _reduce(L, B)
    if _upper(Lr, Br) and (both_sym or _upper(_dual_up(Lr), _dual_down(Br))):
        return True
    if Lr is L:
        return False
    # the reduction is sufficient, not necessary: try the pair itself (Gaussian tails)
    return _upper(L, B) and (both_sym or _upper(_dual_up(L), _dual_down(B)))


def leq_gdp(pld: PLD, mu: float) -> bool:
    """Sound check of pld <= G_mu (mu-GDP)."""
    mu = check_nonnegative("mu", mu, "leq_gdp", allow_inf=True)
    if math.isinf(mu):
        return True
    return leq(pld, PLD.gdp(mu, grid=pld.grid))


def leq_approx(pld: PLD, eps: float, delta: float) -> bool:
    """Sound check of pld <= R_{eps,delta}, i.e. (eps, delta)-DP *at every x*, in closed form.

    h_R is linear on [1, e^eps] and constant = delta beyond, so (chord argument) it suffices
    that h(1) <= delta + (1 - delta) tanh(eps/2) and h(e^eps) <= delta; for x < 1 the same on
    the dual unless the exact PLD is symmetric.
    """
    eps = check_nonnegative("eps", eps, "leq_approx", allow_inf=True)
    delta = check_in_closed("delta", delta, 0.0, 1.0, "leq_approx")
    if math.isinf(eps) or delta == 1.0:
        return True
    # h_R(1) is rounded down by 4 ulp; h_R(e^eps) = delta is exact
    bound = np.array([delta + (1.0 - delta) * math.tanh(eps / 2.0) - 4 * U, delta])
    ts = np.array([0.0, eps])

    def ok(p: PLD) -> bool:
        h, e = p.h_log_with_error(ts)
        return bool(np.all(h + e <= bound))

    if not ok(pld):
        return False
    return pld.symmetric or ok(_dual_up(pld))


def smallest_gdp_mu(pld: PLD, *, rtol: float = 1e-9) -> float:
    """The smallest mu (certified upper end of a bisection) with pld <= G_mu; inf if none."""
    if pld.inf_mass > 0:
        return math.inf
    if pld.offset == 0 and pld.probs.size == 1:
        return pld.mu  # a pure Gaussian part: exact
    lo, hi = pld.mu, max(2.0 * pld.mu, 1.0)
    while not leq_gdp(pld, hi):
        lo, hi = hi, 2.0 * hi
        if hi > 1e4:
            return math.inf
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if leq_gdp(pld, mid):
            hi = mid
        else:
            lo = mid
    return hi


def smallest_pure_eps(pld: PLD) -> float:
    """The smallest eps (certified) with pld <= R_{eps,0}; inf if there is none.

    For mu = 0 and no +inf mass the candidate is the largest loss (and minus the smallest one
    unless symmetric), confirmed by :func:`leq_approx` with a few ulp of slack.

    Symmetric, non-optimistic PLDs need no curve comparison (which cannot resolve
    h(1) = tanh(eps/2) from 1 in floating point once eps > ~37): above the largest loss z* no
    atom is active and there is no +inf mass, so h(e^{z*}) = 0 exactly; the exact PLD is
    dominated by this one, so its h(e^{z*}) is 0 too, and being symmetric so is its dual's:
    the mechanism is z*-DP (P(S) <= e^{z*} Q(S) and back).
    """
    if pld.inf_mass > 0 or pld.mu > 0:
        return math.inf
    z = pld.losses[pld.probs > 0]
    e = max(0.0, float(z.max()))
    if pld.symmetric and pld.direction != "optimistic":
        return e
    if not pld.symmetric:
        e = max(e, -float(z.min()))
    for _ in range(4):
        if leq_approx(pld, e, 0.0):
            return e
        e = e * (1.0 + 1e-12) + 1e-12
    return math.inf


def supremum(plds: Sequence[PLD]) -> PLD:
    """sup of PLDs: hockey-stick curve = pointwise max (paper, Prop. 11), made pessimistic.

    Gaussian parts are discretized pessimistically and all members regridded to the coarsest
    grid. The max is sampled at the knots and interpolated by chords (above the convex max);
    atoms are the slope changes (mass at z = (change of slope at e^z) e^z), +inf mass the
    largest member's. Within a cell where one member is the max at both knots the slope is
    that member's own, so no cancellation occurs; clipping negative round-off only raises h.
    """
    if len(plds) == 0:
        raise fail("plds", "supremum", "a non-empty sequence of PLDs", plds)
    for p in plds:
        if not isinstance(p, PLD):
            raise fail("plds", "supremum", "a sequence of PLDs", plds)
        if p.direction == "optimistic":
            raise UnsupportedError("supremum() of optimistic PLDs is not supported.")
    grid = max(p.grid for p in plds)
    ms = [_ops.discretize(p, grid) if (p.mu > 0 or p.grid != grid) else p for p in plds]
    if len(ms) == 1:
        return ms[0]
    lo = min(p.offset for p in ms)
    hi = max(p.offset + p.probs.size for p in ms)
    n = hi - lo
    z = _curves.knots(lo, n, grid)
    y = np.exp(z)
    H = np.empty((len(ms), n))
    Bs = np.empty((len(ms), n + 1))
    for k, p in enumerate(ms):
        full = np.zeros(n)
        full[p.offset - lo : p.offset - lo + p.probs.size] = p.probs
        a, b = _curves.tail_sums(z, full)
        H[k] = np.clip(a[1:] - y * b[1:], 0.0, None) + p.inf_mass
        Bs[k] = b
    arg = np.argmax(H, axis=0)
    hmax = H[arg, np.arange(n)]
    sig = np.zeros(n + 1)  # sig[j + 1] = slope on [y_j, y_{j+1}]; sig[0] on [0, y_0]
    sig[0] = -Bs[arg[0], 0]
    same = arg[:-1] == arg[1:]
    own = -Bs[arg[:-1], np.arange(1, n)]
    chord = (hmax[1:] - hmax[:-1]) / (y[1:] - y[:-1])
    sig[1:n] = np.where(same, own, chord)
    sig[n] = 0.0
    probs = np.clip(y * (sig[1:] - sig[:-1]), 0.0, None)
    inf = max(p.inf_mass for p in ms) + (n + 8) * 8 * U
    # move a fraction 1e-12 of the finite mass to +inf: raises h (primal margin) and lowers
    # E[e^-Z] (a margin for the dual side, x < 1, which +inf mass alone does not give)
    eta = 1e-12
    inf += eta * float(np.sum(probs))
    probs *= 1.0 - eta
    total = float(np.sum(probs)) + inf
    if total < 1.0:  # round-off below 1: the missing mass goes to +inf (only raises h)
        inf += 1.0 - total
    sym = all(p.symmetric for p in ms)
    return PLD(grid, lo, probs, min(inf, 1.0), 0.0, "pessimistic", sym)


def compose_with_supremum(pld: PLD, plds: Sequence[PLD]) -> PLD:
    """L (+) sup(plds): the worst one-step continuation (paper, Thm. 6 / Sec. 5)."""
    return pld.compose(supremum(plds))


def symmetrize(pld: PLD) -> PLD:
    """sup(L, PLD(Q||P)): the least symmetric PLD dominating L (pessimistic, flagged symmetric).

    A PLD dominating both L and its dual dominates the dual of anything it dominates, and the
    supremum of L and its dual is its own dual (Blackwell order is preserved by swapping).
    """
    s = supremum([pld, _ops.dual(pld, upper=True)])
    return PLD(s.grid, s.offset, s.probs, s.inf_mass, s.mu, s.direction, True)
