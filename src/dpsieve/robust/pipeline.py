"""The Propose-Filter-Release framework (docs/proofs/pfr.md, Theorem 1).

:class:`PFRPlan` fixes every public parameter and the accounting of a whole run *before*
the data are looked at: ``plan.privacy`` is the ``ApproxDP(eps, delta, REPLACE_ONE)`` a
privacy filter is charged, whatever the outcome. :func:`run_pfr` then

1. computes the friend-count table for every radius of the public grid (user metric);
2. **Propose**: AboveThreshold on ``q_r = sum_i p_i(r)`` (``eps_propose``, pure);
3. **Filter**: keeps record ``i`` with probability ``p_i(r)`` (exact coins);
4. **Release**: calls ``release(core, r, eps_M, delta_M, rng)``, a mechanism the caller
   asserts is ``(eps_M, delta_M)``-friendly-DP (pfr.md §2) for r-friendly sets under the
   user's metric; ``(eps_M, delta_M) = release_budget(...)`` from the hybrid lemma.

A release returns either a value (anything) with public details, or a :class:`Refusal`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_up
from dpsieve._validation import check_in_open, check_positive, fail
from dpsieve.accounting.events import ApproxDP, Neighbouring
from dpsieve.robust.friendly import (
    FilterParams,
    Metric,
    friend_count_table,
    hybrid_privacy,
    keep_numerators,
    release_budget,
    sample_core,
)
from dpsieve.robust.propose import check_radii, propose_queries, propose_radius
from dpsieve.robust.results import Refusal, RobustResult

__all__ = ["PFRPlan", "Release", "check_records", "run_pfr"]

Release = Callable[
    [npt.NDArray[np.float64], float, float, float, "np.random.Generator | None"],
    "tuple[Any, dict[str, Any]] | Refusal",
]
"""``release(core, r, eps_M, delta_M, rng) -> (value, details) | Refusal``."""


def check_records(data: Any, owner: str, *, min_rows: int = 1) -> npt.NDArray[np.float64]:
    """Data as a float array with rows = records: non-empty, finite (no NaN/inf)."""
    try:
        x = np.asarray(data, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail("data", owner, "a numeric array with one record per row", type(data)) from None
    if x.ndim == 0 or len(x) < min_rows:
        raise fail("data", owner, f"an array with at least {min_rows} records", x.shape)
    if not np.all(np.isfinite(x)):
        raise fail("data", owner, "finite values (no NaN or infinity)", "non-finite entries")
    return x


@dataclass(frozen=True, slots=True)
class PFRPlan:
    """Public parameters of one PFR run and its total privacy (Theorem 1, pfr.md §5).

    ``eps_propose`` goes to AboveThreshold; ``eps - eps_propose`` and ``delta`` go to the
    filter-and-release through the hybrid lemma (``kappa = params.kappa``).
    """

    params: FilterParams
    radii: tuple[float, ...]
    eps: float
    delta: float
    eps_propose: float
    beta: float = 0.3

    def __post_init__(self) -> None:
        check_positive("eps", self.eps, "PFRPlan")
        check_in_open("delta", self.delta, 0.0, 1.0, "PFRPlan")
        check_positive("eps_propose", self.eps_propose, "PFRPlan")
        if not (self.eps_propose < self.eps):
            raise fail("eps_propose", "PFRPlan", f"a float < eps = {self.eps}", self.eps_propose)
        check_in_open("beta", self.beta, 0.0, 1.0, "PFRPlan")
        check_radii(self.radii, "PFRPlan")

    @classmethod
    def build(
        cls, n: int, radii: Any, eps: float, delta: float, *, propose_fraction: float = 0.2,
        beta: float = 0.3, params: FilterParams | None = None,
    ) -> PFRPlan:
        """Default filter parameters for ``n`` and ``eps_propose = propose_fraction * eps``."""
        check_in_open("propose_fraction", propose_fraction, 0.0, 1.0, "PFRPlan.build")
        p = params if params is not None else FilterParams.default(n)
        r = tuple(float(v) for v in check_radii(radii, "PFRPlan.build"))
        eps = check_positive("eps", eps, "PFRPlan.build")
        return cls(p, r, eps, delta, propose_fraction * eps, beta)

    @property
    def release_budget(self) -> tuple[float, float]:
        """``(eps_M, delta_M)`` for the friendly-DP release (rounded down, pfr.md Lemma 3)."""
        return release_budget(self.eps - self.eps_propose, self.delta, self.params.kappa)

    @property
    def privacy(self) -> ApproxDP:
        """The whole run, rounded up: ``eps_P + (e^eps_M - 1) kappa``, ``kappa e^eps' delta_M``."""
        eps_m, delta_m = self.release_budget
        e2, d2 = hybrid_privacy(eps_m, delta_m, self.params.kappa)
        total = next_up(self.eps_propose + e2)
        return ApproxDP(total, d2, Neighbouring.REPLACE_ONE)


def run_pfr(
    records: npt.NDArray[np.float64],
    metric: Metric,
    plan: PFRPlan,
    release: Release,
    rng: np.random.Generator | None = None,
) -> RobustResult | Refusal:
    """One Propose-Filter-Release run; ``plan.privacy`` is charged whatever the outcome."""
    x = check_records(records, "run_pfr", min_rows=2)
    if len(x) != plan.params.n:
        raise fail("records", "run_pfr", f"{plan.params.n} records (the plan's public n)", len(x))
    radii = np.asarray(plan.radii)
    z = friend_count_table(x, metric, radii)
    q = propose_queries(z, plan.params)
    g = propose_radius(q, plan.params, plan.eps_propose, plan.beta, rng)
    if g is None:
        return Refusal("propose", "no radius on the public grid keeps (1 - beta) n records "
                       "(data too few or too spread for the grid)", plan.privacy)
    r = float(radii[g])
    keep = sample_core(keep_numerators(z[g], plan.params), plan.params.width, rng)
    eps_m, delta_m = plan.release_budget
    out = release(x[keep], r, eps_m, delta_m, rng)
    if isinstance(out, Refusal):
        return Refusal(out.stage, out.reason, plan.privacy, {**out.details, "radius": r})
    value, details = out
    return RobustResult(value, plan.privacy, {**details, "radius": r})
