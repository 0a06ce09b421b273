"""PFR median (pfr.md §6.2): a PFR centre and radius, then an exponential-mechanism median.

Stage 1: :func:`pfr_mean` with ``(eps_a, delta)`` gives a centre ``c~`` and a radius ``r``
(row-wise method: the window half-width; friendly method: the proposed radius). Stage 2:
the exponential mechanism over ``K`` points of ``[c~ - 3r, c~ + 3r]`` (public given stage 1)
with utility ``-|#{x_i < y} - n/2|`` (replace-one sensitivity 1), ``eps_b``. Basic
composition: ``(eps_a + eps_b, delta)``-DP, replace-one (pure when stage 1 is). A refusal of
stage 1 is a refusal of the median (no fallback value).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpsieve._rounding import next_up
from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.mechanisms.select import exponential_mechanism
from dpsieve.robust.mean import mean_plan, pfr_mean
from dpsieve.robust.pipeline import check_records
from dpsieve.robust.results import Refusal, RobustResult

__all__ = ["em_median", "median_plan", "pfr_median"]


def em_median(x: np.ndarray[Any, Any], lo: float, hi: float, eps: float, candidates: int = 1000,
              rng: np.random.Generator | None = None) -> float:
    """Exponential-mechanism median over ``candidates`` points of the public ``[lo, hi]``."""
    check_int("candidates", candidates, "em_median", minimum=2)
    if not (hi > lo):
        raise fail("hi", "em_median", f"a float > lo = {lo}", hi)
    grid = np.linspace(lo, hi, candidates)
    xs = np.sort(np.asarray(x, dtype=np.float64))
    below = np.searchsorted(xs, grid, side="left")
    util = -np.abs(below - len(xs) / 2.0)
    return float(grid[exponential_mechanism(util, eps, 1.0, rng)])


def median_plan(n: int, eps: float, delta: float, *, bound: float, candidates: int = 1000,
                centre_fraction: float = 0.5, method: str = "friendly") -> ApproxDP | Refusal:
    """The public part of :func:`pfr_median` (``n`` public): every check that can fail,
    and the privacy any run states (or a public :class:`Refusal`, charged nothing). With the
    row-wise stage 1 the privacy is ``ApproxDP(eps', 0)`` (pure; a run states ``PureDP``)."""
    eps = check_positive("eps", eps, "pfr_median")
    f = check_in_open("centre_fraction", centre_fraction, 0.0, 1.0, "pfr_median")
    check_int("candidates", candidates, "pfr_median", minimum=2)
    eps_b = check_positive("eps_b", (1.0 - f) * eps, "pfr_median")
    stage1 = mean_plan(n, f * eps, delta, bound=bound, method=method)
    if isinstance(stage1, Refusal):
        return stage1
    p1 = stage1[0].privacy
    return ApproxDP(next_up(p1.eps + eps_b), p1.delta,
                    Neighbouring.REPLACE_ONE)


def pfr_median(
    data: Any, eps: float, delta: float, *, bound: float, candidates: int = 1000,
    centre_fraction: float = 0.5, method: str = "friendly",
    rng: np.random.Generator | None = None,
) -> RobustResult | Refusal:
    """``(eps, delta)``-DP median of scalar data; ``bound`` is the public scale Lambda.

    Stage 1 is :func:`pfr_mean` with ``method`` (default ``"friendly"``: the friend-count
    filter, (eps, delta); ``"rowwise"``: pure, so the whole median is pure eps-DP, but its
    private centre gets only a tenth of eps). For a plain private median,
    :func:`dpsieve.robust.private_median` (the exponential mechanism on a 2^24-point grid)
    is more accurate."""
    x = check_records(data, "pfr_median")
    if x.ndim != 1:
        raise fail("data", "pfr_median", "a 1-D array of scalars", x.shape)
    planned = median_plan(len(x), eps, delta, bound=bound, candidates=candidates,
                          centre_fraction=centre_fraction, method=method)
    if isinstance(planned, Refusal):
        return planned
    f = centre_fraction
    stage1 = pfr_mean(x, f * eps, delta, bound=bound, method=method, rng=rng)
    if isinstance(stage1, Refusal):
        return stage1
    c, r = float(stage1.value), float(stage1.details["radius"])
    eps_b = (1.0 - f) * eps
    med = em_median(x, c - 3 * r, c + 3 * r, eps_b, candidates, rng)
    p1 = stage1.privacy
    total = next_up(p1.eps + eps_b)
    privacy: ApproxDP | PureDP = (
        ApproxDP(total, p1.delta, Neighbouring.REPLACE_ONE) if isinstance(p1, ApproxDP)
        else PureDP(total, Neighbouring.REPLACE_ONE))
    return RobustResult(med, privacy, {"centre": c, "radius": r})
