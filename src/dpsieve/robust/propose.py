"""Propose: a private choice of the friendliness radius from a public grid (pfr.md §4).

``q_r(D) = sum_i p_i(D; r)`` has replace-one sensitivity ``1 + (n - 1)/W`` (Lemma 4; the code
works with ``W q_r``, an exact integer of sensitivity ``W + n - 1``), and
AboveThreshold (Lyu, Su, Li 2017, Alg. 1; Dwork & Roth 2014, Thm 3.23) over the increasing
grid with threshold ``(1 - beta) n`` picks the first radius at which most records are
kept, or refuses. It is ``eps_P``-DP (pure) whatever the data; privacy never depends on the
radius being a good one.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_open, check_positive, fail
from dpsieve.mechanisms.select import above_threshold, above_threshold_plan
from dpsieve.robust.friendly import FilterParams, keep_numerators

__all__ = ["check_radii", "geometric_radii", "propose_plan", "propose_queries",
           "propose_radius"]


def check_radii(radii: npt.ArrayLike, owner: str = "propose_radius") -> npt.NDArray[np.float64]:
    """A public grid: non-empty, 1-D, finite, > 0 and strictly increasing."""
    constraint = "a non-empty 1-D grid of finite radii > 0, strictly increasing"
    try:
        r = np.asarray(radii, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail("radii", owner, constraint, radii) from None
    if r.ndim != 1 or r.size == 0 or not np.all(np.isfinite(r)) or not np.all(r > 0):
        raise fail("radii", owner, constraint, radii)
    if np.any(np.diff(r) <= 0):
        raise fail("radii", owner, constraint, radii)
    return r


def geometric_radii(lo: float, hi: float, count: int = 48) -> npt.NDArray[np.float64]:
    """A public geometric grid ``lo .. hi`` (a convenient default for a range ``Lambda``)."""
    lo = check_positive("lo", lo, "geometric_radii")
    hi = check_positive("hi", hi, "geometric_radii")
    if not (hi > lo):
        raise fail("hi", "geometric_radii", f"a float > lo = {lo}", hi)
    out: npt.NDArray[np.float64] = np.geomspace(lo, hi, count)
    return out


def propose_queries(
    z_table: npt.NDArray[np.int64], params: FilterParams
) -> npt.NDArray[np.float64]:
    """``W q_r = sum_i clip(z_i(r) - t0, 0, W)`` for every radius: exact integers (as floats,
    exact below 2^53), so no rounding touches the queries AboveThreshold compares."""
    tot = keep_numerators(z_table, params).sum(axis=1)
    if np.any(tot >= 2**53):
        raise fail("z_table", "propose_queries", "sums below 2^53", int(tot.max()))
    out: npt.NDArray[np.float64] = tot.astype(np.float64)
    return out


def propose_radius(
    queries: npt.NDArray[np.float64],
    params: FilterParams,
    eps: float,
    beta: float = 0.3,
    rng: np.random.Generator | None = None,
) -> int | None:
    """Index of the proposed radius, or ``None`` (refuse). ``eps``-DP, replace-one.

    ``queries`` are :func:`propose_queries` (``q_r`` scaled by ``W``); in those units the
    sensitivity of Lemma 4 is the exact integer ``W + n - 1`` and the public threshold is
    ``(1 - beta) n W`` (AboveThreshold is invariant under scaling queries, threshold and
    sensitivity together). ``rng=None`` uses the secure generator of
    :mod:`dpsieve.mechanisms`.
    """
    thr, sens = propose_plan(params, eps, beta)
    return above_threshold(queries, thr, eps, sens, rng)


def propose_plan(params: FilterParams, eps: float, beta: float = 0.2) -> tuple[float, float]:
    """The public part of :func:`propose_radius` (threshold, sensitivity), with every check
    of its parameters, the AboveThreshold noise range included."""
    eps = check_positive("eps", eps, "propose_radius")
    beta = check_in_open("beta", beta, 0.0, 1.0, "propose_radius")
    thr = (1.0 - beta) * params.n * params.width
    if not math.isfinite(thr):
        raise fail("beta", "propose_radius", "a float in (0, 1)", beta)
    sens = float(params.width + params.n - 1)
    above_threshold_plan(thr, eps, sens)
    return thr, sens
