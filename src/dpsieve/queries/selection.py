"""DP key selection: which observed groups a query releases (docs/proofs/queries.md §5).

Every construction keeps a group when a noisy statistic of it clears a bar, and pays
``delta`` for the groups one unit alone could create (at most ``max_groups`` of them):

* :class:`NoisyThreshold` on a **released count** (§5.2): the query's own count (units, or
  rows at most ``max_rows`` a unit) is compared, with the noise it is released with, to a
  threshold. No privacy is set aside for the selection.
* :class:`NoisyThreshold` on a **separate** noisy unit count (§5.1), with a share of the
  privacy (Laplace noise, or for (eps, delta) and zCDP queries Gaussian noise, whose
  threshold grows with sqrt(max_groups) rather than max_groups).
* :class:`GeometricSelection` (§5.3): the truncated geometric partition selection of
  Desfontaines, Voss, Gipson, Mandayam 2022 (optimal for one group per unit) on each
  group's unit count, at ``eps / max_groups`` and ``delta / max_groups`` per group.

:func:`count_candidates` and :func:`unit_candidates` build what a query admits from public
values; :func:`best` keeps the one releasing a group with the fewest units at
probability 1/2 (then 95 %). A row count is rated as if each unit gave one row (what a
group of n units is sure to have): thresholding it wins only when ``max_rows`` is 1 or
the privacy is large; ``select.by = "count"`` forces it (units giving many rows), and
``info()`` states both figures (one row, and ``max_rows`` rows a unit).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_up, rel_up, round_down, round_up, sqrt_up, sub_down
from dpsieve.accounting.events import (
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    PrivacyDescription,
    PureDP,
)
from dpsieve.errors import UnsupportedError
from dpsieve.mechanisms import DiscreteGaussianMechanism, DiscreteLaplaceMechanism, as_source
from dpsieve.mechanisms.noise import (
    MAX_DISCRETE_SCALE,
    MAX_DISCRETE_SIGMA,
    MIN_DISCRETE_SIGMA,
    sampled_sigma2,
)
from dpsieve.queries._selection_math import (
    ONE,
    dgauss_sf,
    dlap_sf,
    geometric_table,
    least_threshold,
    log_tail_up,
    zcdp_delta_up,
)
from dpsieve.queries.engine import Aggregates, GroupBatch
from dpsieve.queries.result import Noise, dgauss_noise, dlap_noise

__all__ = ["GeometricSelection", "Kept", "NoisyThreshold", "Selection", "best",
           "count_candidates", "unit_candidates", "units_for"]

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Kept:
    """The groups a batch kept, and (thresholding a released count) their noisy counts."""

    aggs: Aggregates
    noisy: I64 | None


def _units(batch: GroupBatch) -> I64:
    if batch.units is None:
        raise UnsupportedError(f"The {batch.engine!r} engine returned observed groups "
                               "without their unit counts (Aggregates.units).")
    return np.asarray(batch.units, dtype=np.int64)


def units_for(prob: Callable[[int], float], level: float) -> int:
    """The fewest units (>= 1) a group needs to be released with probability >= level
    (``prob`` is non-decreasing); 2^40 if none below that does."""
    if prob(1) >= level:
        return 1
    lo, hi = 1, 2
    while prob(hi) < level:
        lo, hi = hi, hi * 2
        if hi > 1 << 40:
            return 1 << 40
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if prob(mid) >= level else (mid, hi)
    return hi


@dataclass(frozen=True, slots=True)
class NoisyThreshold:
    """Keep a group when ``statistic + Z >= threshold`` (docs/proofs/queries.md §5.1, §5.2).

    ``statistic``: ``"units"`` (the group's unit count) or ``"rows"`` (the released row
    count ``part``, at most ``rows`` a unit). ``part``: the released count thresholded
    (its noisy value is the one released), or ``None`` for a separate noisy unit count.
    ``tail_delta`` bounds the chance that one of the <= max_groups groups a unit creates
    is kept; ``charge`` is what the selection itself costs beside the aggregations."""

    mechanism: DiscreteLaplaceMechanism | DiscreteGaussianMechanism
    threshold: int
    delta: float
    tail_delta: float
    charge: PrivacyDescription
    statistic: str = "units"
    rows: int = 1
    part: str | None = None

    @property
    def method(self) -> str:
        fam = "laplace" if isinstance(self.mechanism, DiscreteLaplaceMechanism) else "gaussian"
        return f"{fam}_threshold"

    def keep(self, batch: GroupBatch, rng: np.random.Generator | None = None
             ) -> Kept | None:
        """The groups of ``batch`` whose statistic plus fresh noise (one draw per group, in
        the batch's order) reaches the threshold; ``None`` if none. A row count is read
        only for groups whose unit count times ``rows`` plus the noise reaches it (the
        others cannot: their row count is at most that)."""
        units = _units(batch)
        if units.size == 0:
            return None
        z = np.asarray(self.mechanism.sample(units.size, rng), dtype=np.int64).reshape(-1)
        if self.statistic == "units":
            noisy = units + z
            chosen = np.nonzero(noisy >= self.threshold)[0]
            if not chosen.size:
                return None
            return Kept(batch.take(chosen), noisy[chosen] if self.part else None)
        assert self.part is not None
        cand = np.nonzero(units * self.rows + z >= self.threshold)[0]
        if not cand.size:
            return None
        sub = batch.take(cand)
        noisy = np.asarray(sub.values[self.part], dtype=np.int64).reshape(-1) + z[cand]
        ok = np.nonzero(noisy >= self.threshold)[0]
        return Kept(sub.take(ok), noisy[ok]) if ok.size else None

    def probability(self, n: int, rows_per_unit: int = 1) -> float:
        """P[a group of ``n`` units is kept], each unit giving ``rows_per_unit`` rows to a
        row count (default one, the fewest: what the group is sure to have)."""
        m = self.threshold - n * (rows_per_unit if self.statistic == "rows" else 1)
        if isinstance(self.mechanism, DiscreteLaplaceMechanism):
            return dlap_sf(self.mechanism.scale, m)
        return dgauss_sf(float(self.mechanism.sampled_sigma2), m)

    def noise(self) -> Noise:
        m = self.mechanism
        if isinstance(m, DiscreteLaplaceMechanism):
            return dlap_noise(m.scale, 1.0)
        return dgauss_noise(float(m.sampled_sigma2), 1.0)

    def info(self) -> dict[str, Any]:
        return {"method": self.method, "statistic": self.statistic,
                "released_count": self.part is not None, "threshold": self.threshold,
                "noise": self.noise().to_dict(), "delta": self.delta,
                "units_50": units_for(self.probability, 0.5),
                "units_95": units_for(self.probability, 0.95),
                **({"units_50_at_max_rows": units_for(self._at_max_rows, 0.5),
                    "units_95_at_max_rows": units_for(self._at_max_rows, 0.95)}
                   if self.statistic == "rows" else {})}

    def _at_max_rows(self, n: int) -> float:
        return self.probability(n, self.rows)


@dataclass(frozen=True, slots=True)
class GeometricSelection:
    """Keep a group of n units with probability ``table[n] / 2^64`` (the truncated
    geometric of docs/proofs/queries.md §5.3; ``table[-1]`` is 2^64: kept surely)."""

    table: tuple[int, ...]
    eps_group: float
    delta_group: float
    delta: float
    charge: PrivacyDescription
    statistic: str = "units"
    part: None = None
    method: str = "truncated_geometric"

    def keep(self, batch: GroupBatch, rng: np.random.Generator | None = None
             ) -> Kept | None:
        units = _units(batch)
        if units.size == 0:
            return None
        last = len(self.table) - 1
        sure = units >= last
        probs = _table_array(self.table)[np.minimum(np.maximum(units, 0), last - 1)]
        words = as_source(rng, "GeometricSelection").words(units.size)
        chosen = np.nonzero(sure | (words < probs))[0]
        return Kept(batch.take(chosen), None) if chosen.size else None

    def probability(self, n: int) -> float:
        return self.table[min(max(n, 0), len(self.table) - 1)] / ONE

    def noise(self) -> Noise | None:
        return None

    def info(self) -> dict[str, Any]:
        return {"method": self.method, "statistic": "units", "released_count": False,
                "threshold": None, "noise": None, "delta": self.delta,
                "eps_per_group": self.eps_group, "delta_per_group": self.delta_group,
                "units_50": units_for(self.probability, 0.5),
                "units_95": units_for(self.probability, 0.95)}


@functools.lru_cache(maxsize=64)
def _table_array(table: tuple[int, ...]) -> npt.NDArray[np.uint64]:
    return np.asarray(table[:-1], dtype=np.uint64)


Selection: TypeAlias = NoisyThreshold | GeometricSelection


# -- building the candidates -----------------------------------------------------------------

def _sigma_for(l2sq: int, rho: Fraction) -> float | None:
    """The least float sigma, at least the sampler's least (more noise than needed is
    safe), whose sampled variance s2 has l2sq <= 2 rho s2 (None beyond the sampler's
    range)."""
    if Fraction(l2sq) / (2 * rho) > Fraction(MAX_DISCRETE_SIGMA) ** 2:
        return None
    sigma = max(math.sqrt(float(Fraction(l2sq) / (2 * rho))), MIN_DISCRETE_SIGMA)
    while sigma <= MAX_DISCRETE_SIGMA and Fraction(l2sq) > 2 * rho * sampled_sigma2(
            sigma, "select"):
        sigma = next_up(sigma)
    return sigma if sigma <= MAX_DISCRETE_SIGMA else None


@functools.lru_cache(maxsize=256)
def gauss_for_eps(eps: Fraction, delta: float, l2sq: int, rows: int, l0: int
                  ) -> tuple[float, float, int, float] | None:
    """Gaussian noise for a count of L2^2 sensitivity ``l2sq`` within (eps, delta) with a
    threshold: (sigma, delta_g, tau, delta_t) minimising tau over splits delta_g + delta_t
    <= delta, the noise (eps, delta_g)-DP through its zCDP (Canonne, Kamath, Steinke 2020,
    Prop. 12), tau = rows + the least m with l0 P[Z >= m] <= delta_t."""
    e = round_down(eps)
    found: tuple[float, float, int, float] | None = None
    for frac in (0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.7):
        lo, hi = 0.0, max(e, 1e-12)
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if zcdp_delta_up(mid, e) <= delta * frac else (lo, mid)
        if lo <= 0:
            continue
        sigma = _sigma_for(l2sq, Fraction(lo))
        if sigma is None:
            continue
        dg = zcdp_delta_up(lo, e)  # the noise's rho is at most lo
        dt = sub_down(delta, dg)
        if not dt > 0:
            continue
        s2 = float(sampled_sigma2(sigma, "select"))
        m = least_threshold("gaussian", s2, l0, dt)
        if m is None:
            continue
        tau = rows + m
        if found is None or tau < found[2]:
            found = (sigma, dg, tau, dt)
    return found


def count_candidates(total: PureDP | ZCDP, mechanism: DiscreteLaplaceMechanism |
                     DiscreteGaussianMechanism, share: Fraction, l2sq: int, rows: int,
                     statistic: str, part: str, delta: float, l0: int, dim: int
                     ) -> list[tuple[NoisyThreshold, DiscreteGaussianMechanism | None,
                                     PrivacyDescription | None]]:
    """Thresholds on the released count ``part`` (§5.2): with its own noise, and for a
    pure query also with Gaussian noise within (eps share, part of delta); each with the
    replacement mechanism and its charge (``None``: the part as calibrated)."""
    nb = total.neighbouring
    out: list[tuple[NoisyThreshold, DiscreteGaussianMechanism | None,
                    PrivacyDescription | None]] = []
    lap = isinstance(mechanism, DiscreteLaplaceMechanism)
    m = (least_threshold("laplace", mechanism.scale, l0, delta)
         if isinstance(mechanism, DiscreteLaplaceMechanism) else
         least_threshold("gaussian", float(mechanism.sampled_sigma2), l0, delta))
    if m is not None:
        tail = min(l0 * _tail(mechanism, m), delta)  # certified <= delta in logs
        own: PrivacyDescription = (ApproxDP(0.0, tail, nb) if lap
                                   else ApproxZCDP(0.0, tail, nb))
        out.append((NoisyThreshold(mechanism, rows + m, delta, tail, own, statistic, rows,
                                   part), None, None))
    if isinstance(total, PureDP):
        eps = Fraction(total.eps) * share
        g = gauss_for_eps(eps, delta, l2sq, rows, l0)
        if g is not None:
            sigma, dg, tau, dt = g
            mech = DiscreteGaussianMechanism(sigma, _l2(l2sq), nb, max(2, dim))
            out.append((NoisyThreshold(mech, tau, delta, dt, ApproxDP(0.0, dt, nb),
                                       statistic, rows, part),
                        mech, ApproxDP(round_down(eps), dg, nb)))
    return out


def _l2(l2sq: int) -> float:
    """sqrt(l2sq) rounded up (the mechanism's stated L2 sensitivity)."""
    return sqrt_up(l2sq, finite=True)


def _tail(mech: DiscreteLaplaceMechanism | DiscreteGaussianMechanism, m: int) -> float:
    """An upper bound on P[Z >= m] (:func:`log_tail_up`, exponentiated and rounded up)."""
    if isinstance(mech, DiscreteLaplaceMechanism):
        x = log_tail_up("laplace", mech.scale, m)
    else:
        x = log_tail_up("gaussian", float(mech.sampled_sigma2), m)
    return min(1.0, rel_up(math.exp(x), 1e-12)) if x > -745 else 5e-324


def unit_candidates(total: PureDP | ZCDP, share: Fraction, delta: float, l0: int
                    ) -> list[Selection]:
    """Selections on a separate share of the privacy (§5.1, §5.3): for a pure query the
    truncated geometric, Laplace thresholding and Gaussian thresholding within (eps share,
    delta); for a zCDP query Gaussian thresholding at the rho share."""
    nb = total.neighbouring
    out: list[Selection] = []
    if isinstance(total, PureDP):
        eps = Fraction(total.eps) * share
        charge = ApproxDP(round_up(eps), delta, nb)
        table = geometric_table(eps / l0, Fraction(delta) / l0)
        if table is not None:
            out.append(GeometricSelection(table, round_down(eps / l0),
                                          round_down(Fraction(delta) / l0), delta, charge))
        t = round_up(Fraction(l0) / eps)
        m = least_threshold("laplace", t, l0, delta) if t <= MAX_DISCRETE_SCALE else None
        if m is not None:
            lap = DiscreteLaplaceMechanism(t, l0, nb, 1)
            out.append(NoisyThreshold(lap, 1 + m, delta, min(l0 * _tail(lap, m), delta),
                                      charge))
        g = gauss_for_eps(eps, delta, l0, 1, l0)
        if g is not None:
            sigma, _, tau, dt = g
            out.append(NoisyThreshold(DiscreteGaussianMechanism(sigma, _l2(l0), nb, 2),
                                      tau, delta, dt, charge))
        return out
    rho = Fraction(total.rho) * share
    sig = _sigma_for(l0, rho)
    if sig is not None:
        mech = DiscreteGaussianMechanism(sig, _l2(l0), nb, 2)
        m = least_threshold("gaussian", float(mech.sampled_sigma2), l0, delta)
        if m is not None:
            out.append(NoisyThreshold(mech, 1 + m, delta, min(l0 * _tail(mech, m), delta),
                                      ApproxZCDP(round_up(rho), delta, nb)))
    return out


def score(s: Selection) -> tuple[int, int]:
    """(units for 1/2, units for 95 %): smaller releases more."""
    return units_for(s.probability, 0.5), units_for(s.probability, 0.95)


def best(cands: list[Any], key: Callable[[Any], Selection]) -> Any:
    """The candidate whose selection releases a group with the fewest units at
    probability 1/2, then 95 %; the first on ties (callers list the cheaper first)."""
    if not cands:
        raise ValueError("no selection candidate")
    return min(enumerate(cands), key=lambda ic: (*score(key(ic[1])), ic[0]))[1]

