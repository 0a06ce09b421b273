"""What a query answers: values with their noise in user terms, lattice internals apart.

* :class:`Noise` -- the noise added to one released number, in the answer's units: the
  mechanism, its scale (Laplace ``b`` or Gaussian ``sigma``), its standard deviation and
  the half-width of an interval that holds the noise with probability >= 95 %.
* :class:`Estimate` -- one aggregation's value for one group, with the 95 % interval it
  implies (for the bounded aggregate: clipping and contribution bounds are not noise).
* :class:`Answer` -- every group's estimates; ``details`` keeps the lattice internals
  (granularity, integer sensitivities, lattice scales) for those who check the charge.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from dpsieve.queries.schema import KeyValue

__all__ = [
    "Answer",
    "Estimate",
    "GroupAnswer",
    "Noise",
    "dgauss_halfwidth",
    "dgauss_noise",
    "dlap_halfwidth",
    "dlap_noise",
]


@dataclass(frozen=True, slots=True)
class Noise:
    """Noise on one released coordinate, in the answer's units."""

    mechanism: str
    scale: float
    std: float
    ci95: float

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "scale": self.scale, "std": self.std,
                "ci95": self.ci95}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Noise:
        return cls(str(d["mechanism"]), float(d["scale"]), float(d["std"]), float(d["ci95"]))


def dlap_halfwidth(t: float, level: float = 0.95) -> float:
    """Least integer m with P[|Z| > m] = 2 q^(m+1) / (1 + q) <= 1 - level for the discrete
    Laplace of scale ``t`` (q = e^(-1/t)): m + 1 >= x = t ln(2 / ((1 - level)(1 + q))).
    Up to t = 2^20, m is stepped in floats from x until the inequality holds; beyond, q^m
    cannot resolve single steps in floats (and at t >~ 1e16 q rounds to 1, where stepping
    never ended: a request hung after its spend), so m = ceil(x (1 + 1e-9)), one step or
    so wide of the least (a wide interval is safe, a narrow one is not)."""
    tail = 1.0 - level
    q = math.exp(-1.0 / t)
    x = t * (math.log(2.0) - math.log1p(q) - math.log(tail))
    if not math.isfinite(x):
        return math.inf
    if t > 2.0**20:
        return float(math.ceil(x * (1.0 + 1e-9)))
    m = max(0, math.ceil(x) - 1)
    while m > 0 and 2.0 * q ** m / (1.0 + q) <= tail:
        m -= 1
    while 2.0 * q ** (m + 1) / (1.0 + q) > tail:
        m += 1
    return m


def dgauss_halfwidth(sigma2: float, level: float = 0.95) -> int:
    """Least integer m with P[|Z| <= m] >= level for the discrete Gaussian of variance
    parameter ``sigma2``: from the pmf for sigma <= 1e4, else the normal quantile (the
    two differ by less than 1e-6 relative there)."""
    from statistics import NormalDist

    s = math.sqrt(sigma2)
    if s > 1e4:
        return math.ceil(NormalDist().inv_cdf(0.5 + level / 2.0) * s)
    k = math.ceil(12 * s) + 10
    w = [math.exp(-(z * z) / (2.0 * sigma2)) for z in range(k + 1)]
    total = w[0] + 2.0 * sum(w[1:])
    inside, m = w[0] / total, 0
    while inside < level and m < k:
        m += 1
        inside += 2.0 * w[m] / total
    return m


def dlap_noise(t: float, unit: float) -> Noise:
    """Discrete Laplace of lattice scale ``t`` (P[Z = z] ~ exp(-|z|/t)) times ``unit``:
    std = sqrt(2 q) / (1 - q), q = e^(-1/t)."""
    q = math.exp(-1.0 / t)
    std = math.sqrt(2.0 * q) / -math.expm1(-1.0 / t)
    return Noise("discrete_laplace", t * unit, std * unit, dlap_halfwidth(t) * unit)


def dgauss_noise(sigma2: float, unit: float) -> Noise:
    """Discrete Gaussian with variance parameter ``sigma2`` times ``unit``. Its variance
    is below sigma2 (Canonne, Kamath, Steinke 2020), so std is reported as sqrt(sigma2),
    an upper bound."""
    s = math.sqrt(sigma2)
    return Noise("discrete_gaussian", s * unit, s * unit, dgauss_halfwidth(sigma2) * unit)


@dataclass(frozen=True, slots=True)
class Estimate:
    """One aggregation for one group: ``value`` (a number, or a list for histograms,
    workloads and several quantiles), ``interval`` (95 % for the bounded aggregate, or
    ``None`` where no simple one follows) and the noise of each released part."""

    value: float | list[float] | None
    interval: tuple[float, float] | list[tuple[float, float]] | None = None

    def to_dict(self) -> dict[str, Any]:
        iv: Any = self.interval
        if isinstance(iv, tuple):
            iv = list(iv)
        elif isinstance(iv, list):
            iv = [list(x) for x in iv]
        return {"value": self.value, "interval": iv}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Estimate:
        iv: Any = d.get("interval")
        if isinstance(iv, list) and len(iv) == 2 and not isinstance(iv[0], list):
            iv = (iv[0], iv[1])
        elif isinstance(iv, list):
            iv = [(x[0], x[1]) for x in iv]
        return cls(d.get("value"), iv)


@dataclass(frozen=True, slots=True)
class GroupAnswer:
    key: tuple[KeyValue, ...]
    estimates: tuple[Estimate, ...]


@dataclass(frozen=True, slots=True)
class Answer:
    """Every group's estimates, aligned with ``labels`` (one per aggregation).

    ``noise[label]`` is the noise of each released part of that aggregation (e.g. a mean
    has a centred ``sum`` and a ``count``); ``selection`` says how groups were chosen (DP
    key selection: method, threshold, noise, the units a group needs; public keys:
    ``None``); ``details`` holds the lattice internals. ``intervals[label]`` says what the
    95 % intervals hold: ``"truth"`` (no bound can change that aggregate: the noise is all
    the error), ``"bounded"`` (the aggregate after clipping and contribution bounds: the
    noise only, not the bias of the bounds) or ``None`` (no interval). ``bounds``: for a
    plan with ``"auto"`` bounds, the bounds its first stage released and the plan used
    (:mod:`dpsieve.queries.auto`); ``None`` otherwise.
    """

    labels: tuple[str, ...]
    groups: tuple[GroupAnswer, ...]
    noise: dict[str, dict[str, Noise]]
    selection: dict[str, Any] | None = None
    details: dict[str, Any] = field(default_factory=dict)
    intervals: dict[str, str | None] = field(default_factory=dict)
    bounds: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "labels": list(self.labels),
            "groups": [{"key": list(g.key),
                        "estimates": [e.to_dict() for e in g.estimates]} for g in self.groups],
            "noise": {k: {p: n.to_dict() for p, n in v.items()} for k, v in self.noise.items()},
            "selection": self.selection,
            "intervals": dict(self.intervals),
        }
        if self.bounds is not None:
            out["bounds"] = self.bounds
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], details: Mapping[str, Any] | None = None
                  ) -> Answer:
        """The answer from its JSON (:meth:`to_dict`), e.g. as a ledger stored it."""
        return cls(tuple(d["labels"]),
                   tuple(GroupAnswer(tuple(g["key"]), tuple(Estimate.from_dict(e)
                                                            for e in g["estimates"]))
                         for g in d["groups"]),
                   {k: {p: Noise.from_dict(n) for p, n in v.items()}
                    for k, v in d["noise"].items()},
                   d.get("selection"), dict(details or {}), dict(d.get("intervals") or {}),
                   d.get("bounds"))
