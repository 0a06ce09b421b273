"""The profile bound of a random-stopping search, one direction (docs/proofs/training.md
§4, Thms. 4.1-4.3): the run's privacy profile on a grid, the lower envelope h of its lines,
and the cells of the integral over the score order, all rounded pessimistically (the
directions are stated where each quantity is computed). Used by
:class:`dpsieve.training.tuning.TuningAccountant`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpsieve.accounting.pld import PLD
from dpsieve.training._run_counts import RunCount

__all__ = ["PROFILE_STEP", "SideBound"]

FloatArray = npt.NDArray[np.float64]
#: Spacing of the eps grid on which the run's profile is evaluated (loss units).
PROFILE_STEP = 2e-4
#: Spacing of the eps at which the lines of h are taken (every 25th grid point).
LINE_EVERY = 25
#: Cells of the integral: log f'' moves by at most this much within a cell.
LOG_D2_STEP = 5e-4
_MARGIN = 1e-9
_U = 2.0**-53
_U2 = 2.0**-52


def _lower_envelope(slopes_log: FloatArray, icepts: FloatArray) -> tuple[FloatArray, ...]:
    """Pieces of h(t) = min(1, min_j e^{s_j} t + b_j) on [0, 1].

    Returns (t_k, s_k, b_k, r_k): on [t_k, t_{k+1}] h is e^{s_k} t + b_k, r_k = h(t_k);
    the last piece ends where h reaches 1 (or at t = 1). Lines sorted by decreasing slope;
    the standard monotone hull (a line is dropped when the next one undercuts it before the
    previous one does)."""
    order = np.lexsort((icepts, -slopes_log))
    s_all, b_all = slopes_log[order], icepts[order]
    a_all = np.exp(s_all)
    hs: list[int] = []
    for j in range(s_all.size):
        if b_all[j] >= 1.0:
            continue
        if hs and s_all[hs[-1]] == s_all[j]:
            continue  # same slope, larger intercept (lexsort): never below
        while hs:
            i = hs[-1]
            # t where line j undercuts line i (j has the smaller slope)
            x_ij = (b_all[j] - b_all[i]) / (a_all[i] - a_all[j])
            if x_ij <= 0.0:
                hs.pop()  # j below i on all of [0, 1]
                continue
            if len(hs) >= 2:
                p = hs[-2]
                x_pi = (b_all[i] - b_all[p]) / (a_all[p] - a_all[i])
                if x_ij <= x_pi:
                    hs.pop()
                    continue
            break
        hs.append(j)
    ts, ss, bs = [0.0], [], []
    for n, i in enumerate(hs):
        if n > 0:
            p = hs[n - 1]
            ts.append(float((b_all[i] - b_all[p]) / (a_all[p] - a_all[i])))
        ss.append(float(s_all[i]))
        bs.append(float(b_all[i]))
    t = np.array(ts)
    s = np.array(ss)
    b = np.array(bs)
    keep = t < 1.0
    t, s, b = t[keep], s[keep], b[keep]
    r = np.exp(s) * t + b
    # stop where h reaches 1 (the cap)
    live = r < 1.0
    return t[live], s[live], b[live], r[live]


@dataclass(frozen=True)
class SideBound:
    """Thm. 4.1 of docs/proofs/training.md for one direction: the run's profile on a grid
    and the cells (weight, c) of the integral, which do not depend on eps."""

    lo: float
    step: float
    deltas: FloatArray  # upper bounds of the run's delta at lo + i step
    p_one: float
    p_zero: float
    head: float  # f'(h(0)) - f'(0)
    weights: FloatArray  # f'(r_b) - f'(r_a) per cell
    shifts: FloatArray  # c upper bound per cell
    # Thm. 4.2 (a floor at each cell start a = r_a, t0 = g(r_a) from below)
    floor_w: FloatArray  # f'(a), rounded up
    floor_shift: FloatArray  # log(f'(a) / f'(t0)), rounded up
    floor_cost: FloatArray  # J(t0) = int_0^t0 t f''(t) dt <= t0 (f'(t0) - f'(0)), rounded up
    bottom_shift: FloatArray  # log(f'(a) / f'(0)), rounded up (Thm. 4.3's lower region)

    @classmethod
    def build(cls, plds: list[PLD], runs: RunCount) -> SideBound:
        """From the candidates' PLDs in this direction: the run's profile is at most their
        pointwise maximum (a data-independent mixture; joint convexity of the hockey-stick)."""
        hi = 1.0
        for pld in plds:
            z = pld.losses[pld.probs > 0]
            top = float(z.max()) + 1.0 if z.size else 1.0
            hi = max(hi, min(max(top, 1.0), 400.0) + pld.mu * 40.0)
        lo = -20.0
        n = math.ceil((hi - lo) / PROFILE_STEP) + 1
        grid: FloatArray = lo + PROFILE_STEP * np.arange(n, dtype=np.float64)
        deltas = np.asarray(plds[0].delta(grid), dtype=np.float64)
        for pld in plds[1:]:
            deltas = np.maximum(deltas, np.asarray(pld.delta(grid), dtype=np.float64))
        sel = np.arange(0, n, LINE_EVERY)
        t_k, s_k, b_k, r_k = _lower_envelope(grid[sel], deltas[sel])
        h0 = float(r_k[0]) if r_k.size else 1.0
        p_one = runs.p_one
        top_h = float(runs.d1(min(h0, 1.0)))
        head = top_h - p_one + 16.0 * _U * top_h
        if r_k.size == 0 or not (runs.log_d2(0.5) > -math.inf):
            e = np.zeros(0)
            return cls(lo, PROFILE_STEP, deltas, p_one, runs.p_zero, max(head, 0.0), e, e, e, e, e,
                       e)
        y0, y1 = float(runs.log_d2(0.0)), float(runs.log_d2(1.0))
        dy = max(LOG_D2_STEP, (y1 - y0) / 400_000)
        tt = runs.inv_log_d2(np.arange(y0, y1 + dy, dy))
        piece = np.clip(np.searchsorted(t_k, tt, side="right") - 1, 0, t_k.size - 1)
        hr = np.exp(s_k[piece]) * tt + b_k[piece]
        pts = np.concatenate([tt, hr, r_k, 1.0 - np.geomspace(1e-15, 1.0, 2000), [h0, 1.0]])
        pts = np.unique(np.clip(pts, h0, 1.0))
        ra, rb = pts[:-1], pts[1:]
        k = np.clip(np.searchsorted(r_k, 0.5 * (ra + rb), side="right") - 1, 0, r_k.size - 1)
        # g(r_a) from below: the subtraction's rounding bounded by 2u(|r_a| + |b|), the
        # product's by 1e-15 relative (a smaller g gives a larger, safe, c)
        diff = (ra - b_k[k]) - _U2 * (np.abs(ra) + np.abs(b_k[k]))
        g_a = np.maximum(diff * np.exp(-s_k[k]) * (1.0 - 1e-15), 0.0)
        shifts = runs.log_d2(rb) - runs.log_d2(g_a) + s_k[k] + _MARGIN
        # f'(r_b) - f'(r_a) widened by 16 u f'(r_b): the rounding of the two evaluations
        # (a few ulp each) and of the difference
        d1b = runs.d1(rb)
        d1a = runs.d1(ra)
        weights = np.maximum(d1b - d1a, 0.0) + 16.0 * _U * d1b
        fa = d1a * (1.0 + 16.0 * _U)
        ft0 = runs.d1(g_a) * (1.0 - 16.0 * _U)
        floor_shift = np.log(fa) - np.log(ft0) + _MARGIN
        floor_cost = g_a * (np.maximum(ft0 - p_one, 0.0) + 32.0 * _U * fa) * (1.0 + 1e-12)
        f0 = p_one * (1.0 - 16.0 * _U)
        with np.errstate(divide="ignore"):
            bottom_shift = np.log(fa) - (math.log(f0) if f0 > 0.0 else -math.inf) + _MARGIN
        return cls(lo, PROFILE_STEP, deltas, p_one, runs.p_zero, max(head, 0.0), weights,
                   shifts, fa, floor_shift, floor_cost, bottom_shift)

    def _lookup(self, x: FloatArray) -> FloatArray:
        """delta at a grid point at or below each x (one point further down than the float
        quotient says, so float error in it cannot move up; 1 below the grid, the last value
        above it): an upper bound of the run's delta(x), delta being non-increasing."""
        top = self.lo + self.step * (self.deltas.size + 2.0)
        x = np.clip(x, self.lo - 2.0 * self.step, top)  # +-inf onto the grid's ends
        idx = np.floor((x - self.lo) * (1.0 / self.step)).astype(np.int64) - 1
        out = np.take(self._padded, np.clip(idx + 1, 0, self._padded.size - 1))
        res: FloatArray = np.asarray(out, dtype=np.float64)
        return res

    @property
    def _padded(self) -> FloatArray:
        """[1.0, deltas...]: index 0 is 'below the grid'."""
        p = self.__dict__.get("_pad")
        if p is None:
            p = np.concatenate([[1.0], self.deltas])
            object.__setattr__(self, "_pad", p)
        out: FloatArray = p
        return out

    def delta(self, eps: float) -> float:
        """The least of Thm. 4.1's bound and Thms. 4.2-4.3's over the floors a = r_a (each
        an upper bound on the search's delta at ``eps`` in this direction)."""
        d0 = float(self._lookup(np.array([eps]))[0])
        total = self.p_one * d0 + self.head
        if self.weights.size:
            cells = self.weights * self._lookup(eps - self.shifts)
            total += float(np.sum(cells))
            # Thm. 4.2 at every cell start: the cells above it, plus the floor
            above = np.cumsum(cells[::-1])[::-1]
            top = self.floor_w * self._lookup(eps - self.floor_shift) + above
            floors = top + math.exp(eps) * self.floor_cost  # Thm. 4.2
            split = top + self.floor_w * self._lookup(eps - self.bottom_shift)  # Thm. 4.3
            total = min(total, float(np.min(floors)), float(np.min(split)))
        if eps < 0.0:  # the empty release, P[K = 0] under both data sets
            total += self.p_zero * -math.expm1(eps)
        return min(1.0, total * (1.0 + _MARGIN))

    def epsilon(self, delta: float) -> float:
        lo, hi = 0.0, self.lo + self.step * self.deltas.size + float(
            np.max(self.shifts, initial=0.0))
        if self.delta(hi) > delta:
            return math.inf
        if self.delta(lo) <= delta:
            return 0.0
        for _ in range(64):
            mid = 0.5 * (lo + hi)
            if self.delta(mid) <= delta:
                hi = mid
            else:
                lo = mid
            if hi - lo < 1e-9:
                break
        return hi
