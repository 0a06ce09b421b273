"""PFR mean of scalars or vectors.

Two constructions, chosen by ``method``:

* ``"rowwise"`` (default; docs/proofs/robust_mean.md §3): propose a private centre and
  window (median and MAD per coordinate), keep the records inside the window (a row-wise
  filter, PFR Variant B), release their centred sum and count. Pure eps-DP; ``delta`` is
  not used. See :func:`dpsieve.robust.rowwise.rowwise_pfr_mean`.
* ``"friendly"`` (docs/proofs/pfr.md §6.1, Lemma 5 and Theorem 2): the friend-count filter
  and the hybrid lemma, for any metric; below.

Friendly release on an r-friendly core ``S`` (pairwise L1 distance <= 2r):
``n~ = |S| + Z - m`` (``Z`` discrete Laplace of scale ``1/eps_1``, ``m`` with
``P[Z > m] <= delta_1``); refuse if ``n~ < n_min``; else ``mean(S)`` plus Laplace noise for
L1 sensitivity ``2r / n~`` and budget ``eps_2``. Lemma 5: ``(eps_1 + eps_2, delta_1)``-
friendly-DP; with Propose and the hybrid lemma the run is ``(eps, delta)``-DP under
replace-one (Theorem 2). The metric is L1 (for scalars, ``|x - y|``).

On heavy-tailed or contaminated data the estimate is the mean of the kept core, i.e. a
trimmed mean (records with fewer than ``t0`` friends are never kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.mechanisms.noise import MAX_DISCRETE_SCALE
from dpsieve.robust._noise import (
    count_margin,
    count_scale,
    exact_column_means,
    laplace_release,
    noisy_count,
)
from dpsieve.robust.friendly import FilterParams, l1
from dpsieve.robust.pipeline import PFRPlan, check_records, run_pfr
from dpsieve.robust.propose import check_radii, geometric_radii, propose_plan
from dpsieve.robust.results import Refusal, RobustResult, zero_cost
from dpsieve.robust.rowwise import RowwisePlan, rowwise_pfr_mean, rowwise_plan

__all__ = [
    "COUNT_FRACTION", "MAX_COLUMNS", "MAX_EPS", "METHODS", "RADII_COUNT", "FriendlyMean",
    "default_radii", "mean_plan", "pfr_mean",
]

#: Largest number of coordinates: float L1 distances then err by < 1e-12 relative (pfr.md §3).
MAX_COLUMNS = 4000
#: Largest eps accepted: the hybrid lemma's accounting computes exp(eps) in floats.
MAX_EPS = 700.0
#: Share of the release budget eps_M spent on the noisy size n~ (the rest on the value).
#: 0.5 (was 0.3): the public shift m ~ log(1/delta_M) / eps_count of the noisy size is what
#: makes n~ small near n0; a smaller shift both raises n~ and cuts refusals there.
COUNT_FRACTION = 0.5
#: Default grid size of :func:`default_radii` (96 points: ratio ~1.16 between radii).
RADII_COUNT = 96
METHODS = ("rowwise", "friendly")


def default_radii(bound: float, count: int = RADII_COUNT) -> npt.NDArray[np.float64]:
    """Public geometric grid from ``bound * 1e-6`` to ``2 * bound`` (``bound`` = Lambda)."""
    b = check_positive("bound", bound, "default_radii")
    return geometric_radii(b * 1e-6, 2.0 * b, count)


@dataclass(frozen=True, slots=True)
class FriendlyMean:
    """The friendly-DP mean release of Lemma 5 with budget ``(eps_m, delta_m)``."""

    eps_m: float
    delta_m: float
    n_min: int = 2
    count_fraction: float = COUNT_FRACTION

    def __post_init__(self) -> None:
        check_positive("eps_m", self.eps_m, "FriendlyMean")
        check_in_open("delta_m", self.delta_m, 0.0, 1.0, "FriendlyMean")
        check_int("n_min", self.n_min, "FriendlyMean", minimum=2)
        check_in_open("count_fraction", self.count_fraction, 0.0, 1.0, "FriendlyMean")

    @property
    def eps_count(self) -> float:
        return self.count_fraction * self.eps_m

    @property
    def eps_value(self) -> float:
        return self.eps_m - self.eps_count

    @property
    def margin(self) -> int:
        """The public shift ``m`` of the noisy size (``P[Z > m] <= delta_m``)."""
        return count_margin(self.eps_count, self.delta_m)

    @property
    def n0(self) -> int:
        """Public condition: below ``n_min + m + 2`` records even a full core is refused
        with probability >= 1/2 (``P[Z <= 0] >= 1/2``), so the run refuses up front (and
        spends nothing)."""
        return self.n_min + self.margin + 2

    def __call__(
        self, core: npt.NDArray[np.float64], r: float, eps_m: float, delta_m: float,
        rng: np.random.Generator | None,
    ) -> tuple[Any, dict[str, Any]] | Refusal:
        if not (eps_m >= self.eps_m and delta_m >= self.delta_m):
            raise fail("eps_m", "FriendlyMean", f"a release budget >= ({self.eps_m}, "
                       f"{self.delta_m})", (eps_m, delta_m))
        n_tilde = noisy_count(len(core), self.eps_count, self.delta_m, rng)
        if n_tilde < self.n_min:
            return Refusal("release", f"noisy core size {n_tilde} < n_min = {self.n_min}",
                           zero_cost(), {"noisy_core_size": n_tilde})
        rows = core.reshape(core.shape[0], int(np.prod(core.shape[1:])))
        # An empty core with n~ >= n_min lies in Lemma 5's bad event (probability <= delta_1):
        # any fixed output is allowed there; we release noise around the origin.
        centre = exact_column_means(rows) if len(rows) else [Fraction(0)] * rows.shape[1]
        sens = 2.0 * r / n_tilde * (1.0 + 1e-12)  # rounded up; pfr.md Lemma 5
        value = laplace_release(centre, sens, self.eps_value, rng)
        return value, {"noisy_core_size": n_tilde, "noise_scale": sens / self.eps_value}


def mean_plan(
    n: int, eps: float, delta: float, *, bound: float | None = None,
    radii: npt.ArrayLike | None = None, columns: int = 1, method: str = "rowwise",
    width: float = 3.0, propose_fraction: float = 0.2, beta: float = 0.3,
    n_min: int | None = None, params: FilterParams | None = None,
    count_fraction: float = COUNT_FRACTION,
) -> tuple[PFRPlan, FriendlyMean] | tuple[RowwisePlan, None] | Refusal:
    """The public part of :func:`pfr_mean`, from public values only (``n`` is public under
    replace-one): every check that can fail, the plan and its release, or a public
    :class:`Refusal` (charged nothing). A caller that charges before reading the data
    (the session) runs this first, so no parameter error can follow a charge; the
    ``privacy`` of the plan (``plan[0].privacy``) covers what any run with these parameters
    states (for the row-wise method ``ApproxDP(eps, 0)``, i.e. pure eps-DP)."""
    check_int("n", n, "pfr_mean", minimum=1)
    if method not in METHODS:
        raise fail("method", "pfr_mean", f"one of {METHODS}", method)
    if method == "rowwise":
        check_in_open("delta", delta, 0.0, 1.0, "pfr_mean")
        if bound is None or radii is not None:
            raise fail("bound", "pfr_mean", "given (and 'radii' not given) for method "
                       "'rowwise'", bound)
        return rowwise_plan(n, columns, eps, bound=bound, width=width,
                            n_min=2 if n_min is None else n_min, trim=True), None
    if not check_positive("eps", eps, "pfr_mean") <= MAX_EPS:
        raise fail("eps", "pfr_mean", f"a float <= {MAX_EPS} (the hybrid lemma's accounting "
                   "needs exp(eps) as a finite float)", eps)
    if (radii is None) == (bound is None):
        raise fail("radii", "pfr_mean", "given, or else 'bound' given (exactly one)", radii)
    grid = check_radii(radii, "pfr_mean") if radii is not None else default_radii(bound or 0.0)
    if columns > MAX_COLUMNS:
        raise fail("data", "pfr_mean", f"at most {MAX_COLUMNS} columns (float distance error "
                   "must stay inside the 1e-12 sensitivity margin)", (n, columns))
    if n < 4:
        return Refusal("public", f"n = {n} < 4 records", zero_cost(), {"n": n, "n0": 4})
    plan = PFRPlan.build(n, grid, eps, delta, propose_fraction=propose_fraction, beta=beta,
                         params=params if params is not None else FilterParams.default(n))
    propose_plan(plan.params, plan.eps_propose, plan.beta)
    eps_m, delta_m = plan.release_budget
    rel = FriendlyMean(eps_m, delta_m, max(2, n // 10) if n_min is None else n_min,
                       count_fraction)
    check_positive("eps_value", rel.eps_value, "pfr_mean")
    if not count_scale(rel.eps_count) <= MAX_DISCRETE_SCALE:
        raise fail("eps", "pfr_mean", "large enough that the noisy core size's scale "
                   f"1/eps_count is <= {MAX_DISCRETE_SCALE}", eps)
    rel.margin  # noqa: B018 - computes the public count margin (raises on bad values)
    if n < rel.n0:
        return Refusal("public", f"n = {n} < n0 = {rel.n0} (the noisy core size would fall "
                       "below n_min)", zero_cost(), {"n": n, "n0": rel.n0})
    plan.privacy  # noqa: B018 - the stated privacy must be computable before any run
    return plan, rel


def pfr_mean(
    data: npt.ArrayLike,
    eps: float,
    delta: float,
    *,
    bound: float | None = None,
    radii: npt.ArrayLike | None = None,
    method: str = "rowwise",
    width: float = 3.0,
    propose_fraction: float = 0.2,
    beta: float = 0.3,
    n_min: int | None = None,
    params: FilterParams | None = None,
    count_fraction: float = COUNT_FRACTION,
    rng: np.random.Generator | None = None,
) -> RobustResult | Refusal:
    """``(eps, delta)``-DP (replace-one, ``n`` public) mean of the rows of ``data``.

    ``method="rowwise"`` (default): pure eps-DP (``delta`` unused; the result states
    ``PureDP(eps)``), needs ``bound`` (a public scale ``Lambda``: the centre is searched in
    ``[-Lambda, Lambda]``); ``width`` is the window half-width in robust SDs; ``n_min``
    (default 2) the smallest noisy count released
    (:func:`dpsieve.robust.rowwise.rowwise_pfr_mean`).

    ``method="friendly"``: the friend-count filter with the hybrid lemma; give either
    ``radii`` (a public strictly increasing grid) or ``bound`` (the grid is
    :func:`default_radii`); ``propose_fraction`` and ``beta`` are Propose's share of ``eps``
    and level (default 0.3: PFR tolerates fewer than 30 % outliers); ``n_min`` (default
    ``max(2, n // 10)``) is the smallest noisy core size released, which caps the noise at
    ``2r / n_min``; ``params`` (public ``t0``, ``W``; default :meth:`FilterParams.default`)
    and ``count_fraction`` (the share of the release budget on the noisy core size) are the
    remaining public choices. Its result states the ``ApproxDP`` the run was charged.

    Returns a :class:`RobustResult` (value has one entry per column; a scalar for 1-D data)
    or a :class:`Refusal`.
    """
    x = check_records(data, "pfr_mean", min_rows=1)
    scalar = x.ndim == 1
    n = len(x)
    planned = mean_plan(n, eps, delta, bound=bound, radii=radii, columns=x.reshape(n, -1).shape[1],
                        method=method, width=width, propose_fraction=propose_fraction,
                        beta=beta, n_min=n_min, params=params, count_fraction=count_fraction)
    if isinstance(planned, Refusal):
        return planned
    plan, rel = planned
    if isinstance(plan, RowwisePlan):
        return rowwise_pfr_mean(x, eps, bound=plan.bound, width=plan.width, n_min=plan.n_min,
                                rng=rng)
    assert rel is not None  # the friendly plan always carries its release
    out = run_pfr(x.reshape(n, -1), l1, plan, rel, rng)
    if isinstance(out, RobustResult) and scalar:
        return RobustResult(float(out.value[0]), out.privacy, out.details)
    return out
