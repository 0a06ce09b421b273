"""Variant B of PFR: a private threshold, then a row-wise filter (docs/proofs/pfr.md §7).

When each record's score depends only on the record (and on public or already released
values), dropping the records whose score exceeds a privately chosen ``tau`` is a row-wise
map: replace-one neighbours stay at most one change apart (Lemma 6), so plain composition
applies and there is no ``kappa`` factor.

The per-record score is a **user-supplied function** ``score(records) -> (n,)`` array of
finite non-negative floats that must be *row-wise*: the score of a record may not depend
on the other records. :func:`check_rowwise_score` tests what it can (shape, finiteness,
sign, permutation equivariance and agreement with one-row calls on a sample of the data);
a score that fails is rejected with a :class:`ValidationError` naming ``score``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.mechanisms.select import exponential_mechanism
from dpsieve.robust._noise import laplace_release
from dpsieve.robust.results import Refusal, RobustResult, zero_cost

__all__ = [
    "Score",
    "check_rowwise_score",
    "private_quantile",
    "quantile_utility",
    "score_mean",
    "trimmed_mean",
]

Score = Callable[[npt.NDArray[np.float64]], npt.NDArray[np.float64]]
"""Records (one per row) -> one finite non-negative score per record, computed row-wise."""

_CHECK_ROWS = 40


def check_rowwise_score(score: Score, records: npt.NDArray[np.float64],
                        owner: str) -> npt.NDArray[np.float64]:
    """Evaluate ``score`` on all records after checking the conditions the proof needs."""
    n = len(records)
    constraint = "a row-wise function returning one finite float >= 0 per record"
    try:
        s = np.asarray(score(records), dtype=np.float64)
    except ValidationError:
        raise
    except (TypeError, ValueError) as exc:
        raise fail("score", owner, constraint, f"a function that raised {exc!r}") from None
    if s.shape != (n,) or not np.all(np.isfinite(s)) or not np.all(s >= 0):
        raise fail("score", owner, constraint, f"output of shape {s.shape}")
    m = min(n, _CHECK_ROWS)
    perm = np.random.default_rng(0).permutation(m)  # public, fixed: a check, not a release
    sub = np.asarray(score(records[:m][perm]), dtype=np.float64)
    if sub.shape != (m,) or not np.allclose(sub, s[:m][perm], rtol=1e-12, atol=0.0):
        raise fail("score", owner, constraint, "a score that changes with the other records")
    for i in range(min(m, 5)):
        one = np.asarray(score(records[i : i + 1]), dtype=np.float64)
        if one.shape != (1,) or not math.isclose(float(one[0]), float(s[i]), rel_tol=1e-12):
            raise fail("score", owner, constraint, "a score that differs on a single record")
    return s


def private_quantile(
    values: npt.NDArray[np.float64], level: float, grid: npt.NDArray[np.float64], eps: float,
    rng: np.random.Generator | None = None,
) -> float:
    """A grid point near the ``level`` quantile, by the exponential mechanism (eps-DP).

    Utility ``-|#{i : v_i <= c} - ceil(level n)|`` has replace-one sensitivity 1
    (McSherry & Talwar 2007, Thm 6; pfr.md §7). ``grid`` must be public.
    """
    level = check_in_open("level", level, 0.0, 1.0, "private_quantile")
    eps = check_positive("eps", eps, "private_quantile")
    g = np.asarray(grid, dtype=np.float64)
    if g.ndim != 1 or g.size == 0 or not np.all(np.isfinite(g)) or np.any(np.diff(g) <= 0):
        raise fail("grid", "private_quantile", "a non-empty increasing 1-D grid", grid)
    util = quantile_utility(values, level, g)
    return float(g[exponential_mechanism(util, eps, 1.0, rng)])


def quantile_utility(values: npt.NDArray[np.float64], level: float,
                     grid: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """``-|#{i : v_i <= c} - ceil(level n)|`` for each grid point (sensitivity 1)."""
    v = np.sort(np.asarray(values, dtype=np.float64))
    counts = np.searchsorted(v, grid, side="right")
    out: npt.NDArray[np.float64] = -np.abs(counts - math.ceil(level * len(v))).astype(np.float64)
    return out


def trimmed_mean(
    values: npt.NDArray[np.float64], tau: float, eps_sum: float, eps_count: float,
    n_min: int = 2, rng: np.random.Generator | None = None,
) -> tuple[float, dict[str, Any]] | Refusal:
    """Mean of the values ``<= tau`` (values ``>= 0``) from a noisy sum and a noisy count.

    Sum: L1 sensitivity ``tau`` under Lemma 6's changes; count: sensitivity 1; Laplace on
    the lattice (exact rational sum). ``(eps_sum + eps_count)``-DP for each fixed ``tau``.
    A noisy count below ``n_min`` gives a :class:`Refusal` (post-processing).
    """
    tau = check_positive("tau", tau, "trimmed_mean")
    check_int("n_min", n_min, "trimmed_mean", minimum=1)
    v = np.asarray(values, dtype=np.float64)
    if np.any(v < 0):
        raise fail("values", "trimmed_mean", "non-negative values", "negative entries")
    kept = v[v <= tau]
    total = sum((Fraction(a) for a in kept.tolist()), Fraction(0))
    noisy_sum = float(laplace_release([total], tau, eps_sum, rng)[0])
    noisy_count = float(laplace_release([Fraction(len(kept))], 1.0, eps_count, rng)[0])
    details = {"threshold": tau, "noisy_sum": noisy_sum, "noisy_count": noisy_count}
    if not (noisy_count >= n_min):
        return Refusal("release", f"noisy count {noisy_count:.1f} < n_min = {n_min}",
                       zero_cost(), details)
    return noisy_sum / noisy_count, details


def score_mean(
    records: npt.NDArray[np.float64], score: Score, eps: float, bound: float, *,
    level: float = 0.9, grid_size: int = 256, split: tuple[float, float, float] = (0.3, 0.5, 0.2),
    n_min: int = 2, rng: np.random.Generator | None = None,
) -> RobustResult | Refusal:
    """Variant B estimator: mean of a user-supplied row-wise score below a private quantile.

    ``bound`` is a public upper end of the quantile grid (``grid_size`` points on
    ``(0, bound]``). Pure ``eps``-DP, replace-one, with ``eps`` split as
    ``split = (quantile, sum, count)`` (pfr.md §7, §7.1).
    """
    eps = check_positive("eps", eps, "score_mean")
    bound = check_positive("bound", bound, "score_mean")
    check_int("grid_size", grid_size, "score_mean", minimum=2)
    check_in_open("level", level, 0.0, 1.0, "score_mean")
    if len(split) != 3 or not all(f > 0 for f in split) or not math.isclose(sum(split), 1.0):
        raise fail("split", "score_mean", "three positive fractions summing to 1", split)
    n = len(records)
    if n < 2 * n_min:
        return Refusal("public", f"n = {n} < 2 n_min = {2 * n_min}", zero_cost(), {"n": n})
    s = check_rowwise_score(score, records, "score_mean")
    grid = np.linspace(bound / grid_size, bound, grid_size)
    ea, eb, ec = (f * eps for f in split)
    privacy = PureDP(ea + eb + ec, Neighbouring.REPLACE_ONE)
    tau = private_quantile(s, level, grid, ea, rng)
    out = trimmed_mean(s, tau, eb, ec, n_min, rng)
    if isinstance(out, Refusal):
        return Refusal(out.stage, out.reason, privacy, out.details)
    value, details = out
    return RobustResult(value, privacy, details)
