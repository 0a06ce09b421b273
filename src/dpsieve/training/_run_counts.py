"""How many training runs a hyperparameter search makes: K, drawn at random, kept secret.

A search by random stopping (Liu & Talwar 2019; Papernot & Steinke 2022, "Hyperparameter
tuning with Renyi differential privacy", ICLR 2022) runs K independent trainings, K drawn
from a distribution that does not depend on the data, and releases only the best run and
its score. Its privacy depends on K's law through the probability generating function
f(u) = E[u^K] (docs/proofs/training.md §4): this module gives f' and log f'' (exact
closed forms, float64) and draws K.

* :class:`PoissonRuns` -- K ~ Poisson(mu) (K = 0 is possible: the search releases nothing).
* :class:`NegativeBinomialRuns` -- the truncated negative binomial D_{eta, gamma} of
  Papernot & Steinke (Def. 1), eta > -1, gamma in (0, 1), K >= 1:
  P[K = k] = (1 - gamma)^k prod_{l < k} (l + eta)/(l + 1) / (gamma^-eta - 1); eta = 1 is the
  geometric law (P[K = k] = gamma (1 - gamma)^(k-1), mean 1/gamma), eta = 0 the logarithmic
  one (the limit eta -> 0).

Closed forms (beta = 1 - gamma, C = eta / (gamma^-eta - 1), C = 1/log(1/gamma) at eta = 0):
f'(u) = C beta (1 - beta u)^-(eta+1), f''(u) = C (eta + 1) beta^2 (1 - beta u)^-(eta+2),
E[K] = f'(1) = C beta gamma^-(eta+1); Poisson: f'(u) = mu e^{mu (u - 1)}, f'' = mu f'.

Sampling is by inversion of the cumulative pmf with a uniform from 53 random bits of the
operating system's generator (a seeded numpy Generator only when passed explicitly); the
float64 pmf is not certified (relative error ~1e-15 per atom). The draw must stay secret:
the analysis assumes the adversary sees only the best run, not K nor how many runs were made
(nor their duration).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_open, check_positive, fail
from dpsieve.mechanisms import RNG, RandomSource

__all__ = ["NegativeBinomialRuns", "PoissonRuns", "RunCount"]

FloatArray = npt.NDArray[np.float64]
#: Largest mean number of runs accepted (the sampler's and the bound's cost grow with it).
MAX_MEAN = 1e5


class RunCount(ABC):
    """The law of the number of runs K (independent of the data)."""

    @property
    @abstractmethod
    def mean(self) -> float:
        """E[K] = f'(1)."""

    @property
    @abstractmethod
    def p_one(self) -> float:
        """f'(0) = P[K = 1]."""

    @property
    def p_zero(self) -> float:
        """f(0) = P[K = 0] (the search releases nothing)."""
        return 0.0

    @abstractmethod
    def d1(self, u: npt.ArrayLike) -> FloatArray:
        """f'(u) on [0, 1] (non-decreasing)."""

    @abstractmethod
    def log_d2(self, u: npt.ArrayLike) -> FloatArray:
        """log f''(u) on [0, 1] (non-decreasing; -inf where f'' = 0)."""

    @abstractmethod
    def inv_log_d2(self, y: npt.ArrayLike) -> FloatArray:
        """The u in [0, 1] with log f''(u) = y (clipped to [0, 1])."""

    @abstractmethod
    def pmf_iter(self) -> Any:
        """Yields (k, P[K = k]) for k = 0, 1, ... (float64)."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Its parameters, JSON-ready."""

    def sample(self, rng: RNG = None) -> int:
        """Draw K (inversion; ``rng`` None: the operating system's generator)."""
        src = RandomSource(rng)
        u = float(src.words(1)[0] >> np.uint64(11)) / float(2**53)
        acc = 0.0
        last = 0
        for k, p in self.pmf_iter():
            acc += p
            last = k
            if u < acc:
                return int(k)
            if p == 0.0 and k > 10 * self.mean + 100:
                break
        return int(last)


@dataclass(frozen=True, slots=True)
class PoissonRuns(RunCount):
    """K ~ Poisson(``mean_runs``) (Papernot & Steinke, Sec. 3.1; K = 0 releases nothing)."""

    mean_runs: float

    def __post_init__(self) -> None:
        m = check_positive("mean_runs", self.mean_runs, "PoissonRuns")
        if m > MAX_MEAN:
            raise fail("mean_runs", "PoissonRuns", f"a finite float in (0, {MAX_MEAN:g}]", m)
        object.__setattr__(self, "mean_runs", m)

    @property
    def mean(self) -> float:
        return self.mean_runs

    @property
    def p_one(self) -> float:
        return self.mean_runs * math.exp(-self.mean_runs)

    @property
    def p_zero(self) -> float:
        return math.exp(-self.mean_runs)

    def d1(self, u: npt.ArrayLike) -> FloatArray:
        x = np.asarray(u, dtype=np.float64)
        out: FloatArray = self.mean_runs * np.exp(self.mean_runs * (x - 1.0))
        return out

    def log_d2(self, u: npt.ArrayLike) -> FloatArray:
        x = np.asarray(u, dtype=np.float64)
        out: FloatArray = 2.0 * math.log(self.mean_runs) + self.mean_runs * (x - 1.0)
        return out

    def inv_log_d2(self, y: npt.ArrayLike) -> FloatArray:
        v = np.asarray(y, dtype=np.float64)
        out: FloatArray = np.clip(1.0 + (v - 2.0 * math.log(self.mean_runs)) / self.mean_runs,
                                  0.0, 1.0)
        return out

    def pmf_iter(self) -> Any:
        lm, k = math.log(self.mean_runs), 0
        while True:
            yield k, math.exp(-self.mean_runs + k * lm - math.lgamma(k + 1.0))
            k += 1

    def to_dict(self) -> dict[str, Any]:
        return {"type": "poisson", "mean": self.mean_runs}


@dataclass(frozen=True, slots=True)
class NegativeBinomialRuns(RunCount):
    """K ~ D_{eta, gamma}, the truncated negative binomial (Papernot & Steinke, Def. 1).

    ``eta = 1``: geometric (:meth:`geometric`); ``eta = 0``: logarithmic; heavier tails
    for smaller eta. :meth:`with_mean` solves for gamma given the mean.
    """

    eta: float
    gamma: float

    def __post_init__(self) -> None:
        o = "NegativeBinomialRuns"
        eta = self.eta
        if (isinstance(eta, bool) or not isinstance(eta, int | float)
                or not (-1.0 < float(eta) <= 1e6)):
            raise fail("eta", o, "a float in (-1, 1e6]", eta)
        eta = float(eta)
        g = check_in_open("gamma", self.gamma, 0.0, 1.0, o)
        object.__setattr__(self, "eta", eta)
        object.__setattr__(self, "gamma", g)
        if self.mean > MAX_MEAN:
            raise fail("gamma", o, f"a value giving a mean number of runs <= {MAX_MEAN:g}", g)

    @classmethod
    def geometric(cls, mean: float) -> NegativeBinomialRuns:
        """The geometric law with the given mean >= 1 (eta = 1, gamma = 1/mean)."""
        m = check_positive("mean", mean, "NegativeBinomialRuns.geometric")
        if not (1.0 < m <= MAX_MEAN):
            raise fail("mean", "NegativeBinomialRuns.geometric", f"a float in (1, {MAX_MEAN:g}]",
                       mean)
        return cls(1.0, 1.0 / m)

    @classmethod
    def with_mean(cls, eta: float, mean: float) -> NegativeBinomialRuns:
        """D_{eta, gamma} with E[K] = ``mean`` (> 1): gamma by bisection (E[K] decreases in
        gamma), to relative 1e-13."""
        o = "NegativeBinomialRuns.with_mean"
        m = check_positive("mean", mean, o)
        if not (1.0 < m <= MAX_MEAN):
            raise fail("mean", o, f"a float in (1, {MAX_MEAN:g}]", mean)
        lo, hi = 1e-300, 1.0 - 1e-16
        for _ in range(200):
            mid = 0.5 * (lo + hi) if hi - lo > 1e-3 else math.sqrt(lo * hi)
            if _tnb_mean(float(eta), mid) > m:
                lo = mid
            else:
                hi = mid
            if hi - lo <= 1e-13 * hi:
                break
        return cls(float(eta), hi)

    def _log_c(self) -> float:
        """log C, C = eta / (gamma^-eta - 1) (1 / log(1/gamma) at eta = 0), without overflow."""
        return _tnb_log_c(self.eta, self.gamma)

    @property
    def mean(self) -> float:
        return _tnb_mean(self.eta, self.gamma)

    @property
    def p_one(self) -> float:
        return math.exp(self._log_c()) * (1.0 - self.gamma)

    def d1(self, u: npt.ArrayLike) -> FloatArray:
        b = 1.0 - self.gamma
        x = np.asarray(u, dtype=np.float64)
        out: FloatArray = np.exp(self._log_c() + math.log(b)
                                 - (self.eta + 1.0) * np.log1p(-b * x))
        return out

    def log_d2(self, u: npt.ArrayLike) -> FloatArray:
        b = 1.0 - self.gamma
        x = np.asarray(u, dtype=np.float64)
        out: FloatArray = (self._log_c() + math.log((self.eta + 1.0) * b * b)
                           - (self.eta + 2.0) * np.log1p(-b * x))
        return out

    def inv_log_d2(self, y: npt.ArrayLike) -> FloatArray:
        b = 1.0 - self.gamma
        v = np.asarray(y, dtype=np.float64)
        a = self._log_c() + math.log((self.eta + 1.0) * b * b)
        out: FloatArray = np.clip(-np.expm1(-(v - a) / (self.eta + 2.0)) / b, 0.0, 1.0)
        return out

    def pmf_iter(self) -> Any:
        b = 1.0 - self.gamma
        yield 0, 0.0
        p, k = math.exp(self._log_c()) * b, 1
        while True:
            yield k, p
            p *= b * (k + self.eta) / (k + 1)
            k += 1

    def to_dict(self) -> dict[str, Any]:
        return {"type": "negative_binomial", "eta": self.eta, "gamma": self.gamma}


def _tnb_log_c(eta: float, gamma: float) -> float:
    lg = -math.log(gamma)  # log(1/gamma) > 0
    if eta == 0.0:
        return -math.log(lg)
    x = eta * lg  # C = eta / expm1(x): same sign above and below 0
    if x > 0.0:  # log(eta) - x - log(1 - e^-x)
        return math.log(eta) - x - math.log(-math.expm1(-x))
    return math.log(-eta) - math.log(-math.expm1(x))


def _tnb_mean(eta: float, gamma: float) -> float:
    """E[K] of D_{eta, gamma}: eta (1 - gamma) / (gamma (1 - gamma^eta)); (1/gamma - 1) /
    log(1/gamma) at eta = 0 (Papernot & Steinke, Def. 1); inf past the float range."""
    lg = -math.log(gamma)
    v = _tnb_log_c(eta, gamma) + math.log1p(-gamma) + (eta + 1.0) * lg
    return math.exp(v) if v < 709.0 else math.inf


def run_count_from_dict(d: dict[str, Any]) -> RunCount:
    """Inverse of ``to_dict`` (validates)."""
    if not isinstance(d, dict):
        raise fail("runs", "run_count_from_dict", "a dict with 'type'", d)
    if d.get("type") == "poisson":
        return PoissonRuns(d["mean"])
    if d.get("type") == "negative_binomial":
        return NegativeBinomialRuns(d["eta"], d["gamma"])
    raise fail("type", "run_count_from_dict", "'poisson' or 'negative_binomial'", d.get("type"))
