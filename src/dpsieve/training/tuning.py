"""Hyperparameter search, accounted: the best of K independent training runs, K random.

A search by *random stopping* (Liu & Talwar 2019; Papernot & Steinke 2022, "Hyperparameter
tuning with Renyi differential privacy", ICLR 2022) draws K from a law fixed in advance
(:mod:`dpsieve.training._run_counts`: Poisson, truncated negative binomial, geometric), makes K
independent runs -- each a DP training with hyperparameters drawn at random from a fixed
list, each releasing a model *and its score* -- and releases only the best run and its score.
Composing all runs would charge every run; random stopping charges far less.
:class:`TuningAccountant` certifies (eps, delta) for the whole search from one run's
accounting (a :class:`~dpsieve.training.DPSGDAccountant` whose history dominates every
candidate's, or the run's :class:`~dpsieve.accounting.directed.DirectedPLD`), by the smaller
of two upper bounds, both sound:

* ``"rdp"`` -- Papernot & Steinke, Thm. 2 (truncated negative binomial, eta > -1) and
  Thm. 6 (Poisson), from the run's RDP curve (integer orders 2..256 of the subsampled
  Gaussian, Mironov, Talwar & Zhang 2019, log A_a / (a - 1), rounded up), converted to
  (eps, delta) by Canonne, Kamath & Steinke 2020, Prop. 12 (the conversion the filters use).
* ``"profile"`` -- our bound from the run's privacy profile (docs/proofs/training.md §4,
  Thm. 4.1): for every real eps,

      delta_A(eps) <= f'(0) delta(eps) + f'(h(0)) - f'(0)
                      + int_{h(0)}^1 f''(r) delta(eps - c(r)) dr     (eps >= 0),

  f the pgf of K, delta the run's profile in the same direction, h(t) = inf_e (e^e t +
  delta(e)) (the largest probability a lower set of the score order can have under one data
  set given its probability t under the other), g its inverse and c(r) = log f''(r) -
  log(f''(g(r)) g'(r)); and its refinements at a floor a of the score order (Thms. 4.2,
  4.3: below a the weights f' are nearly flat, so the bottom of the order, where h is steep,
  costs about one more run's delta), the least over the floors. Each direction (removal,
  addition) separately; the worse is reported.

Directions of error, all pessimistic: the run's profile is the composed pessimistic PLD's
(upper bounds at every eps, negative ones included); h is built from those upper bounds at a
grid of eps (an inf over fewer lines: larger, still valid); the integral is bounded cell by
cell with f'' and c at their worst ends of the cell and delta at the grid point below its
argument; the weights carry the float error of f' (16 ulp of f'), g is computed from below,
c is widened by 1e-9 and the sum by 1e-9 relative. The RDP values are
rounded up and the conversion's eps rounded up.

What the proofs assume (the caller's side; docs/training.md): the runs are independent given
the data, each draws its hyperparameters from the same fixed list (so one run's accounting
bounds each run: pass the accountant of the most expensive candidate); the score is part of
the run's private output (computed from its DP output or public data, or accounted in the
run); K is drawn by :meth:`RunCount.sample` and stays secret (nothing about the other runs,
nor their number or duration, is released); ties are broken by a fixed rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve._rounding import next_up
from dpsieve._validation import check_in_open, fail
from dpsieve.accounting.directed import DirectedPLD
from dpsieve.accounting.events import RDP, ApproxDP
from dpsieve.training._run_counts import NegativeBinomialRuns, PoissonRuns, RunCount
from dpsieve.training._tuning_profile import SideBound
from dpsieve.training.accountant import DPSGDAccountant, Step

__all__ = ["TuningAccountant", "sgm_rdp_up"]

FloatArray = npt.NDArray[np.float64]
#: Integer RDP orders of the run (2..256): closed forms exist there (Mironov et al. 2019).
RDP_ORDERS: tuple[int, ...] = tuple(range(2, 65)) + tuple(range(72, 257, 8))


def sgm_rdp_up(sigma: float, rate: float, orders: npt.ArrayLike) -> FloatArray:
    """An upper bound on the RDP of one Poisson-subsampled Gaussian step at integer orders.

    eps(a) = log A_a / (a - 1), A_a = sum_k C(a, k) (1 - q)^(a-k) q^k e^{(k^2 - k)/(2 s^2)}
    (Mironov, Talwar & Zhang 2019, Sec. 3.3: exact for removal, and at least the addition
    direction's, for integer a >= 2); rate 1: a / (2 s^2). A log-sum-exp of positive terms,
    widened by 1e-12 relative and by 64 (a + 2) u (1 + the largest |term|) / (a - 1)
    absolute (u = 2^-53): above the float error of lgamma, of each term and of the sum.
    """
    a = np.asarray(orders, dtype=np.float64).reshape(-1)
    if not np.all((a >= 2) & (a == np.floor(a))):
        raise fail("orders", "sgm_rdp_up", "integers >= 2", orders)
    s2 = float(sigma) ** 2
    out = np.empty(a.size)
    for i, al in enumerate(a):
        n = int(al)
        if rate == 1.0:
            out[i] = n / (2.0 * s2)
            continue
        k = np.arange(n + 1, dtype=np.float64)
        logc = special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)
        terms = logc + (n - k) * math.log1p(-rate) + k * math.log(rate) + (k * k - k) / (2 * s2)
        big = float(np.max(np.abs(terms))) + 1.0
        out[i] = float(special.logsumexp(terms)) / (n - 1.0)
        out[i] = out[i] + abs(out[i]) * 1e-12 + 64.0 * (n + 2) * 2.0**-53 * big / (n - 1.0)
    res: FloatArray = np.maximum(out, 0.0).reshape(np.shape(orders))
    return res


def _cks_eps(orders: FloatArray, rdp: FloatArray, delta: float) -> float:
    """min over orders of rdp + log(1 - 1/a) - log(delta a)/(a - 1) (Canonne, Kamath &
    Steinke 2020, Prop. 12), >= 0, widened by 1e-12 relative."""
    with np.errstate(invalid="ignore"):
        e = rdp + np.log1p(-1.0 / orders) - np.log(delta * orders) / (orders - 1.0)
    e = e[np.isfinite(e)]
    if e.size == 0:
        return math.inf
    return max(0.0, float(np.min(e))) * (1.0 + 1e-12) + 1e-15


def _cks_delta(orders: FloatArray, rdp: FloatArray, eps: float) -> float:
    """The inverse of :func:`_cks_eps`: min over orders of
    exp(-(a - 1)(eps - rdp - log(1 - 1/a))) / a, widened by 1e-12 relative; <= 1."""
    with np.errstate(over="ignore", invalid="ignore"):
        ld = -(orders - 1.0) * (eps - rdp - np.log1p(-1.0 / orders)) - np.log(orders)
    ld = ld[~np.isnan(ld)]
    if ld.size == 0:
        return 1.0
    return min(1.0, math.exp(min(float(np.min(ld)), 0.0)) * (1.0 + 1e-12))


# --------------------------------------------------------------------------- accountant
class TuningAccountant:
    """(eps, delta) of a random-stopping hyperparameter search (module docstring).

    ``run``: one run's accounting -- a :class:`DPSGDAccountant` or a :class:`DirectedPLD`
    (profile bound only, and the RDP one when its PLDs have finite RDP) -- or a sequence of
    them, one per candidate configuration when the candidates' schedules differ (each run
    draws its configuration from them at random: the run's profile and RDP are at most the
    candidates' pointwise maxima). ``runs``: the law of K (:class:`PoissonRuns`,
    :class:`NegativeBinomialRuns`). :meth:`epsilon` and :meth:`delta` report the smaller of
    the two bounds (``method="rdp"`` or ``"profile"`` for one of them).
    """

    def __init__(
        self,
        run: DPSGDAccountant | DirectedPLD | Sequence[DPSGDAccountant | DirectedPLD],
        runs: RunCount,
    ) -> None:
        o = "TuningAccountant"
        if not isinstance(runs, RunCount):
            raise fail("runs", o, "a PoissonRuns or NegativeBinomialRuns", runs)
        cands = list(run) if isinstance(run, list | tuple) else [run]
        if not cands:
            raise fail("run", o, "at least one candidate's accounting", "an empty sequence")
        self._plds: list[DirectedPLD] = []
        self._uncuts: list[Any] = []
        all_counts: list[dict[Step, int] | None] = []
        for c in cands:
            if isinstance(c, DPSGDAccountant):
                if len(c) == 0:
                    raise fail("run", o, "an accountant with at least one step", "no steps")
                self._plds.append(c.pld())
                self._uncuts.append(c._pld_uncut)  # the same package: its uncut composition
                all_counts.append(c.counts())
            elif isinstance(c, DirectedPLD):
                self._plds.append(c)
                self._uncuts.append(None)
                all_counts.append(None)
            else:
                raise fail("run", o, "a DPSGDAccountant or a DirectedPLD (or a sequence of them)",
                           type(c).__name__)
        self._runs = runs
        self._orders = np.array(RDP_ORDERS, dtype=np.float64)
        self._rdp = np.max([self._run_rdp(p, c) for p, c in
                            zip(self._plds, all_counts, strict=True)], axis=0)
        self._sides: dict[tuple[str, bool], SideBound] = {}

    @property
    def runs(self) -> RunCount:
        return self._runs

    @property
    def run_plds(self) -> tuple[DirectedPLD, ...]:
        """The candidates' (remove, add) PLDs (pessimistic)."""
        return tuple(self._plds)

    def _run_rdp(self, pld: DirectedPLD, counts: dict[Step, int] | None) -> FloatArray:
        """One candidate's RDP at :data:`RDP_ORDERS`, an upper bound for both directions."""
        if counts is not None:
            total = np.zeros(self._orders.size)
            for st, k in counts.items():
                total += k * sgm_rdp_up(st.sigma, st.rate, self._orders)
            out: FloatArray = total * (1.0 + 1e-12)
            return out
        r = np.maximum(pld.remove.rdp(self._orders), pld.add.rdp(self._orders))
        res: FloatArray = np.asarray(r, dtype=np.float64) * (1.0 + 1e-12)
        return res

    # ------------------------------------------------------------------ RDP (Papernot-Steinke)
    def rdp_curve(self) -> tuple[FloatArray, FloatArray]:
        """(orders, RDP of the search): Papernot & Steinke Thm. 2 for the truncated negative
        binomial -- eps'(a) = eps(a) + min_b [(1 + eta)(1 - 1/b) eps(b) + (1 + eta)
        log(1/gamma)/b] + log E[K] / (a - 1) -- or Thm. 6 for Poisson(mu) -- eps'(a) =
        eps(a) + mu delta_hat + log(mu)/(a - 1), the run being (eps_hat, delta_hat)-DP with
        e^eps_hat = 1 + 1/(a - 1) (delta_hat from the run's profile, eps_hat rounded down)."""
        a, r = self._orders, self._rdp
        runs = self._runs
        if isinstance(runs, NegativeBinomialRuns):
            e1 = 1.0 + runs.eta
            extra = float(np.min(e1 * (1.0 - 1.0 / a) * r + e1 * -math.log(runs.gamma) / a))
            out = r + extra + math.log(runs.mean) / (a - 1.0)
        elif isinstance(runs, PoissonRuns):
            eps_hat = np.log1p(1.0 / (a - 1.0)) * (1.0 - 1e-12)
            d_hat = np.max([np.asarray(p.delta(eps_hat), dtype=np.float64)
                            for p in self._plds], axis=0)
            out = r + runs.mean * d_hat + math.log(runs.mean) / (a - 1.0)
        else:  # pragma: no cover - RunCount has two kinds
            raise fail("runs", "TuningAccountant", "a known law of K", runs)
        res: FloatArray = np.asarray(out, dtype=np.float64) * (1.0 + 1e-12)
        return a, res

    # ------------------------------------------------------------------ profile (Thm. 4.1)
    def _side(self, name: str, uncut: bool = False) -> SideBound:
        hit = self._sides.get((name, uncut))
        if hit is None:
            plds = [u() if uncut and u is not None else p
                    for p, u in zip(self._plds, self._uncuts, strict=True)]
            hit = SideBound.build([getattr(p, name) for p in plds], self._runs)
            self._sides[(name, uncut)] = hit
        return hit

    def _cuts_weigh(self, delta: float) -> bool:
        """Whether the composition's tail cuts (mass at +inf) could matter at ``delta``: then
        the run's uncut composition is used too (as DPSGDAccountant.epsilon does)."""
        cut = max(max(p.remove.inf_mass, p.add.inf_mass)
                  for p, u in zip(self._plds, self._uncuts, strict=True) if u is not None) \
            if any(u is not None for u in self._uncuts) else 0.0
        return cut * (self._runs.mean + 1.0) > 1e-2 * delta

    def _profile_eps(self, d: float) -> float:
        e = max(self._side(s).epsilon(d) for s in ("remove", "add"))
        if self._cuts_weigh(d):
            e = min(e, max(self._side(s, True).epsilon(d) for s in ("remove", "add")))
        return e

    def _profile_delta(self, e: float) -> float:
        d = max(self._side(s).delta(e) for s in ("remove", "add"))
        if self._cuts_weigh(d):
            d = min(d, max(self._side(s, True).delta(e) for s in ("remove", "add")))
        return d

    # ------------------------------------------------------------------ guarantees
    def epsilon(self, delta: float, *, method: str = "best") -> float:
        """An upper bound on eps at ``delta`` for the whole search (``method``: "best", the
        smaller of "rdp" and "profile")."""
        d = check_in_open("delta", delta, 0.0, 1.0, "TuningAccountant.epsilon")
        m = _check_method(method, "TuningAccountant.epsilon")
        out = math.inf
        if m in ("best", "rdp"):
            out = min(out, _cks_eps(*self.rdp_curve(), d))
        if m in ("best", "profile"):
            out = min(out, self._profile_eps(d))
        return out

    def delta(self, eps: float, *, method: str = "best") -> float:
        """An upper bound on delta at ``eps`` for the whole search."""
        e = float(eps)
        if math.isnan(e):
            raise fail("eps", "TuningAccountant.delta", "a float (not NaN)", eps)
        m = _check_method(method, "TuningAccountant.delta")
        out = 1.0
        if m in ("best", "rdp"):
            out = min(out, _cks_delta(*self.rdp_curve(), e))
        if m in ("best", "profile"):
            out = min(out, self._profile_delta(e))
        return out

    # ------------------------------------------------------------------ charges
    def approx_dp(self, delta: float) -> ApproxDP:
        """The search as a charge: ``ApproxDP(epsilon(delta), delta)`` (eps an upper bound,
        rounded up), for an (eps, delta) budget (e.g. :class:`~dpsieve.filters.MixedFilter`,
        a ``Session`` budget). Charge it before the search runs (it depends on public
        choices only: the run's schedule and the law of K)."""
        d = check_in_open("delta", delta, 0.0, 1.0, "TuningAccountant.approx_dp")
        e = self.epsilon(d)
        if not math.isfinite(e):
            raise fail("delta", "TuningAccountant.approx_dp",
                       "a delta at which the search has a finite eps", delta)
        return ApproxDP(next_up(e), d)

    def rdp(self) -> RDP:
        """The search's RDP curve (Papernot & Steinke, :meth:`rdp_curve`) as a description,
        for RDP budgets (:class:`~dpsieve.filters.RDPFilter`; an order between two listed
        ones is charged the next listed order's value, RDP being non-decreasing in the
        order). Orders whose bound is not finite are left out."""
        a, r = self.rdp_curve()
        keep = np.isfinite(r)
        if not np.any(keep):
            raise fail("run", "TuningAccountant.rdp", "a run with a finite RDP curve",
                        "no finite order")
        return RDP(tuple(float(x) for x in a[keep]),
                   tuple(next_up(float(x)) for x in r[keep]))

    def to_dict(self) -> dict[str, Any]:
        """The law of K (the run's accounting is the caller's)."""
        return {"runs": self._runs.to_dict()}


def _check_method(method: str, owner: str) -> str:
    if method not in ("best", "rdp", "profile"):
        raise fail("method", owner, "one of 'best', 'rdp', 'profile'", method)
    return method
