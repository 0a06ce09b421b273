"""Treatment-rule selection from a randomised trial with public propensities (pfr.md §7.3).

Records ``(x_i, t_i, y_i)``; public propensities ``e(t | x) > 0`` (a row-wise function);
a public finite policy class. IPW terms ``Gamma_i(pi) = y_i 1[t_i = pi(x_i)] / e(t_i | x_i)``
and scores ``s_i = |y_i| / e(t_i | x_i)``. Variant B: a private quantile ``tau~`` of the
scores (exponential mechanism, ``split[0] eps``), drop records with ``s_i > tau~``, then the
exponential mechanism over the policies with utility ``sum_kept Gamma_i(pi)``, sensitivity
``2 tau~`` (``tau~`` if outcomes are publicly known to be non-negative), ``split[1] eps``.
Pure ``eps``-DP, replace-one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, check_positive, fail, fail_private
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.mechanisms.select import exponential_mechanism
from dpsieve.robust.pipeline import check_records
from dpsieve.robust.results import Refusal, RobustResult, zero_cost
from dpsieve.robust.variant_b import check_rowwise_score, private_quantile

__all__ = ["Policy", "Propensity", "ipw_values", "pfr_policy"]

Policy = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.int64]]
"""Covariate rows -> one action (an int) per row. Public."""
Propensity = Callable[[npt.NDArray[np.float64], npt.NDArray[np.int64]], npt.NDArray[np.float64]]
"""``e(t_i | x_i)`` per row: covariate rows and treatments -> probabilities in (0, 1]."""


def ipw_values(x: npt.NDArray[np.float64], t: npt.NDArray[np.int64], y: npt.NDArray[np.float64],
               e: npt.NDArray[np.float64], policies: Sequence[Policy]) -> npt.NDArray[np.float64]:
    """``Gamma[j, i] = y_i 1[t_i = pi_j(x_i)] / e_i`` (no noise; the utility before release)."""
    rows = []
    for pol in policies:
        a = np.asarray(pol(x))
        if a.shape != t.shape:
            raise fail("policies", "ipw_values", "functions returning one action per row",
                       a.shape)
        rows.append(np.where(a == t, y / e, 0.0))
    return np.array(rows)


def pfr_policy(
    x: Any, t: Any, y: Any, propensity: Propensity, policies: Sequence[Policy], eps: float,
    *, bound: float, level: float = 0.9, nonnegative_outcomes: bool = False,
    split: tuple[float, float] = (0.3, 0.7), grid_size: int = 256, n_min: int = 2,
    rng: np.random.Generator | None = None,
) -> RobustResult | Refusal:
    """Index of the selected policy (``eps``-DP). ``bound``: public top of the score grid."""
    owner = "pfr_policy"
    xs = check_records(x, owner)
    xs = xs.reshape(len(xs), -1)
    n = len(xs)
    ts = np.asarray(t)
    ys = check_records(y, owner)
    if ts.shape != (n,) or not np.issubdtype(ts.dtype, np.integer):
        raise fail("t", owner, f"{n} integer treatments", ts.shape)
    if ys.shape != (n,):
        raise fail("y", owner, f"{n} finite outcomes", ys.shape)
    if nonnegative_outcomes and np.any(ys < 0):
        raise fail("y", owner, "non-negative outcomes (nonnegative_outcomes=True)", "negative")
    if len(policies) == 0:
        raise fail("policies", owner, "a non-empty sequence of policies", policies)
    eps = check_positive("eps", eps, owner)
    bound = check_positive("bound", bound, owner)
    check_int("grid_size", grid_size, owner, minimum=2)
    if len(split) != 2 or not all(f > 0 for f in split) or not math.isclose(sum(split), 1.0):
        raise fail("split", owner, "two positive fractions summing to 1", split)
    if n < 2 * n_min:
        return Refusal("public", f"n = {n} < 2 n_min = {2 * n_min}", zero_cost(), {"n": n})
    rec = np.column_stack([xs, ts, ys])
    d = xs.shape[1]

    def _e(rows: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        e = np.asarray(propensity(rows[:, :d], rows[:, d].astype(np.int64)), dtype=np.float64)
        if e.shape != (len(rows),) or not np.all((e > 0) & (e <= 1)):
            raise fail_private("propensity", owner, "probabilities in (0, 1], one per row",
                               e)
        return e

    s = check_rowwise_score(lambda rows: np.abs(rows[:, d + 1]) / _e(rows), rec, owner)
    ea, eb = split[0] * eps, split[1] * eps
    grid = np.linspace(bound / grid_size, bound, grid_size)
    tau = private_quantile(s, level, grid, ea, rng)
    keep = s <= tau
    gam = ipw_values(xs[keep], ts[keep], ys[keep], _e(rec[keep]), policies)
    util = gam.sum(axis=1)
    # 1e-9 relative margin: covers the float summation error of the utilities (< m 2^-53
    # relative to Delta for m kept records, so up to m ~ 10^7).
    sens = (tau if nonnegative_outcomes else 2.0 * tau) * (1.0 + 1e-9)
    idx = exponential_mechanism(util, eb, sens, rng)
    return RobustResult(idx, PureDP(ea + eb, Neighbouring.REPLACE_ONE),
                        {"threshold": tau, "sensitivity": sens})
