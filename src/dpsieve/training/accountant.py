"""The DP-SGD accountant: T steps of the Poisson-subsampled Gaussian, tight and certified.

A training run is a sequence of steps, each the Poisson-subsampled Gaussian mechanism with
noise multiplier ``sigma`` (noise std / clipping norm) and sampling rate ``rate``
(add/remove neighbours; Zhu, Dong & Wang 2022, Thm. 11). The accountant composes the
exact PLDs of the steps, *each direction separately* (removal and addition of a record,
:class:`~dpsieve.accounting.directed.DirectedPLD`), and reports the worse direction:

    eps(delta) = max(eps_remove(delta), eps_add(delta)).

Direction of error: every reported eps is an upper bound on the exact value for the
recorded history (pessimistic connect-the-dots discretization, :mod:`dpsieve.mechanisms._sgm`;
certified FFT error bounds and tail cuts pushed to +inf). Both directions are composed
from their own step PLDs (the dual of the composed removal direction is valid too,
docs/proofs/training.md §1, but far looser after thousands of steps: see ``_compose_counts``).

Sampling. ``"poisson"`` (each record independently with probability ``rate``) is the only
subsampling accounted for. ``"full_batch"`` (rate 1: every record in every step) is the
Gaussian mechanism G_{1/sigma}, exact. Fixed-size batches (shuffling, sampling without
replacement) are refused (:class:`UnsupportedError`): their privacy is *not* that of the
Poisson-subsampled Gaussian (Chua et al. 2024, "How private are DP-SGD implementations?";
Lebeda et al. 2024 on replace-one pitfalls), and we implement no PLD for them that we can
prove.

The history is public (it is what the training loop chose), but an accountant that is
asked eps after every step does *not* make an adaptive schedule valid: for schedules that
depend on outputs use :class:`dpsieve.filters.TrainingFilter` (docs/training.md).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.accounting.directed import DirectedPLD
from dpsieve.mechanisms.subsampled import ACCOUNTANT_GRID, SAMPLINGS, DPSGDStep, step_grid

__all__ = [
    "ACCOUNTANT_GRID",
    "SAMPLINGS",
    "DPSGDAccountant",
    "DPSGDStep",
    "Step",
    "step_grid",
    "step_pld",
]

#: Tail mass cut (to +inf: pessimistic) at each convolution.
TAIL_MASS = 1e-13
#: When the cut tails' +inf mass exceeds this share of the delta asked about (or returned), the
#: history is also composed without tail cuts (tilted FFT bounds, Lemma A4 of
#: docs/proofs/accounting.md) and the smaller of the two upper bounds is reported: the cuts
#: add ~6e-11 to +inf per 100 steps at sigma 1, rate 0.01, so eps(1e-10) was inf from 1,000
#: steps and eps(1e-15) from 100, where the uncut composition gives 3.29 / 3.69.
UNCUT_SHARE = 1e-2
Step = DPSGDStep


_STEP_CACHE: dict[tuple[float, float, float, bool], DirectedPLD] = {}


def step_pld(
    step: Step, *, grid: float | None = None, pessimistic: bool = True
) -> DirectedPLD:
    """The (remove, add) PLDs of one step (cached; pessimistic by default; ``grid`` None:
    :func:`step_grid`)."""
    if grid is None:
        grid = step_grid(step.sigma, step.rate)
    from dpsieve.mechanisms.subsampled import subsampled_gaussian_pld

    key = (step.sigma, step.rate, grid, pessimistic)
    hit = _STEP_CACHE.get(key)
    if hit is None:
        hit = subsampled_gaussian_pld(step.sigma, step.rate, grid=grid, pessimistic=pessimistic)
        if len(_STEP_CACHE) > 64:
            _STEP_CACHE.clear()
        _STEP_CACHE[key] = hit
    return hit


def _compose_counts(
    counts: dict[Step, int], grid: float, tail_mass: float = TAIL_MASS
) -> DirectedPLD:
    """Pessimistic composition of ``count`` steps of each kind, each direction separately.

    The addition direction is composed from the steps' own (pessimistic) addition PLDs, not
    taken as the dual of the composed removal PLD: that dual is valid (docs/proofs/training.md
    §1, Lemma 1.3) but the removal composition's lower tail, cut and moved up by the tail
    bounds, reappears in the dual multiplied by e^{-z} -- at sigma 1, rate 0.01, 8,000 steps
    the dual had 1.9e-5 at +inf and eps(1e-5) = inf, against 5.454 composed separately
    (dp_accounting 5.456).
    """
    from fractions import Fraction

    from dpsieve._rounding import sqrt_up
    from dpsieve.accounting.pld import PLD

    totals: dict[str, PLD | None] = {"remove": None, "add": None}
    gauss_mu2 = Fraction(0)
    for st in sorted(counts, key=lambda s: (s.rate, s.sigma)):
        k = counts[st]
        if k == 0:
            continue
        if st.rate == 1.0:  # Gaussian: exact, composes in closed form (mu rounded up)
            gauss_mu2 += Fraction(k) / Fraction(st.sigma) ** 2
            continue
        one = step_pld(st, grid=grid)
        for side, step in (("remove", one.remove), ("add", one.add)):
            part = step.self_compose(k, tail_mass=tail_mass)
            done = totals[side]
            totals[side] = part if done is None else done.compose(part, tail_mass=tail_mass)
    out: list[PLD] = []
    for side in ("remove", "add"):
        total = totals[side]
        if gauss_mu2 > 0:  # G_mu is its own dual: the same part in both directions
            g = PLD.gdp(sqrt_up(gauss_mu2), grid=grid)
            total = g if total is None else total.compose(g)
        out.append(PLD.identity(grid=grid) if total is None else total)
    return DirectedPLD(out[0], out[1])


_TRIMMED: dict[tuple[Step, float], DirectedPLD] = {}


def _trimmed_step(st: Step, grid: float) -> DirectedPLD:
    """One step's PLDs with their far tails cut as a composition cuts them (upper tail to
    +inf, lower tail up to the first kept knot: pessimistic): 5,568 of 17,812 points at
    sigma 1, q 0.01, so adding a step convolves a third as much (cached)."""
    hit = _TRIMMED.get((st, grid))
    if hit is None:
        from dpsieve.accounting.pld import PLD

        one = step_pld(st, grid=grid)
        unit = PLD.identity(grid=grid)
        hit = DirectedPLD(one.remove.compose(unit, tail_mass=TAIL_MASS),
                          one.add.compose(unit, tail_mass=TAIL_MASS))
        if len(_TRIMMED) > 64:
            _TRIMMED.clear()
        _TRIMMED[(st, grid)] = hit
    return hit


def _compose_onto(done: DirectedPLD, extra: dict[Step, int], grid: float) -> DirectedPLD:
    """``done`` composed with ``extra[st]`` more steps of each kind (pessimistic, each
    direction separately; a Gaussian step as the exact G_{1/sigma})."""
    more = {st: k for st, k in extra.items() if k > 0}
    if not more:
        return done
    part = _compose_counts(more, grid) if len(more) > 1 or max(more.values()) > 1 else None
    if part is None:
        (st, _), = more.items()
        part = _trimmed_step(st, grid) if st.rate < 1.0 else _compose_counts(more, grid)
    return DirectedPLD(done.remove.compose(part.remove, tail_mass=TAIL_MASS),
                       done.add.compose(part.add, tail_mass=TAIL_MASS))


class DPSGDAccountant:
    """Accountant for a (non-adaptive) sequence of DP-SGD steps (module docstring).

    ``step(sigma, rate)`` records steps; ``epsilon(delta)`` / ``delta(eps)`` report the
    guarantee of everything recorded, each an upper bound (certified) for add/remove
    neighbours. ``grid`` trades speed for tightness (the bound is valid at any grid);
    ``None`` (the default) chooses it from the recorded steps' loss scale: the finest
    :func:`step_grid` over the step kinds recorded. ``incremental``: compose new steps onto
    the last composition (:meth:`pld`; for loops that ask eps after every step).
    """

    def __init__(self, *, grid: float | None = None, incremental: bool = False) -> None:
        self._grid = None if grid is None else check_positive("grid", grid, "DPSGDAccountant")
        self._incremental = bool(incremental)
        self._history: list[tuple[Step, int]] = []
        self._cached: tuple[tuple[tuple[Step, int], ...], DirectedPLD] | None = None
        self._cached_uncut: tuple[tuple[tuple[Step, int], ...], DirectedPLD] | None = None
        self._running: tuple[float, tuple[tuple[Step, int], ...], DirectedPLD] | None = None

    # ------------------------------------------------------------------ history
    def step(
        self, sigma: float, rate: float, *, count: int = 1, sampling: str = "poisson"
    ) -> None:
        """Record ``count`` steps with noise multiplier ``sigma`` and sampling ``rate``."""
        count = check_int("count", count, "DPSGDAccountant.step", minimum=0)
        st = Step(sigma, rate, sampling)
        if count == 0:
            return
        if self._history and self._history[-1][0] == st:
            self._history[-1] = (st, self._history[-1][1] + count)
        else:
            self._history.append((st, count))

    @property
    def history(self) -> list[tuple[Step, int]]:
        """Recorded (step kind, count) runs, in order (a copy)."""
        return list(self._history)

    def __len__(self) -> int:
        return sum(c for _, c in self._history)

    def counts(self) -> dict[Step, int]:
        """Total count per step kind (composition does not depend on the order)."""
        c: Counter[Step] = Counter()
        for st, k in self._history:
            c[st] += k
        return dict(c)

    # ------------------------------------------------------------------ guarantees
    @property
    def grid(self) -> float:
        """The grid the composition uses now (fixed, or chosen from the steps recorded)."""
        if self._grid is not None:
            return self._grid
        return min((step_grid(st.sigma, st.rate) for st in self.counts()), default=ACCOUNTANT_GRID)

    def pld(self) -> DirectedPLD:
        """The composed (remove, add) PLDs of the history (pessimistic; cached).

        With ``incremental=True`` (the adapters, asked for eps after every step): when the
        history only grew since the last composition (on the same grid), the new steps are
        composed onto it (one convolution per direction for a step), not the whole history
        again. Both are upper bounds (each composition is pessimistic); the incremental one
        depends on when it was asked (one more tail cut and FFT bound per call, ~1e-13 at
        +inf a step; eps(1e-5) of 400 steps at sigma 1, q 0.01: 1.203736 against 1.203738
        at once, benchmarks/results/training_adapters.md). Without it, eps is a function
        of the history alone."""
        key = tuple(sorted(self.counts().items(), key=lambda sc: (sc[0].rate, sc[0].sigma)))
        if self._cached is not None and self._cached[0] == key:
            return self._cached[1]
        grid = self.grid
        out: DirectedPLD | None = None
        run = self._running if self._incremental else None
        if run is not None and run[0] == grid:
            before = dict(run[1])
            extra = {st: k - before.get(st, 0) for st, k in key}
            if all(before.get(st, 0) <= k for st, k in key) and len(before) <= len(key):
                out = _compose_onto(run[2], extra, grid)
        if out is None:
            out = _compose_counts(dict(key), grid)
        self._cached = (key, out)
        if self._incremental:
            self._running = (grid, key, out)
        return out

    def _pld_uncut(self) -> DirectedPLD:
        """The same composition without tail cuts (slower; for small deltas; cached)."""
        key = tuple(sorted(self.counts().items(), key=lambda sc: (sc[0].rate, sc[0].sigma)))
        if self._cached_uncut is not None and self._cached_uncut[0] == key:
            return self._cached_uncut[1]
        out = _compose_counts(dict(key), self.grid, 0.0)
        self._cached_uncut = (key, out)
        return out

    def _cut_mass(self) -> float:
        p = self.pld()
        return max(p.remove.inf_mass, p.add.inf_mass)

    def epsilon(self, delta: float) -> float:
        """An upper bound on eps at ``delta`` for everything recorded (0 with no steps).

        When the tail cuts' +inf mass is more than ``UNCUT_SHARE`` of ``delta``, the smaller
        of the cut and the uncut compositions' eps (both upper bounds)."""
        delta = check_in_open("delta", delta, 0.0, 1.0, "DPSGDAccountant.epsilon")
        e = float(self.pld().epsilon(delta))
        if self._cut_mass() > UNCUT_SHARE * delta:
            e = min(e, float(self._pld_uncut().epsilon(delta)))
        return e

    def delta(self, eps: float) -> float:
        """An upper bound on delta at ``eps`` for everything recorded (the smaller of the
        cut and uncut compositions' when the cuts weigh, as in :meth:`epsilon`)."""
        e = float(eps)
        if math.isnan(e):
            raise fail("eps", "DPSGDAccountant.delta", "a float (not NaN)", eps)
        d = float(self.pld().delta(e))
        if self._cut_mass() > UNCUT_SHARE * d:
            d = min(d, float(self._pld_uncut().delta(e)))
        return d

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """JSON-ready state: the grid (None: automatic) and the history."""
        return {
            "grid": self._grid,
            "history": [dict(st.to_dict(), count=k) for st, k in self._history],
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> DPSGDAccountant:
        """Inverse of :meth:`state_dict` (validates every entry)."""
        if not isinstance(state, dict) or "history" not in state:
            raise fail("state", "DPSGDAccountant.from_state_dict", "a dict with 'history'", state)
        acc = cls(grid=state.get("grid"))
        for h in state["history"]:
            if not isinstance(h, dict):
                raise fail("history", "DPSGDAccountant.from_state_dict", "a list of dicts", h)
            acc.step(h["sigma"], h["rate"], count=h["count"], sampling=h.get("sampling", "poisson"))
        return acc
