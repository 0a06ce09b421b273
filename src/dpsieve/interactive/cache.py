"""An answer cache: private multiplicative weights over a declared domain (Hardt & Rothblum 2010).

The analyst asks linear counting queries over a public, finite domain (a query is a vector
``q`` in ``[0, 1]^T`` and its answer the count ``sum_rows q(row)``, sensitivity 1 under
add/remove and under replace-one). The cache keeps a synthetic distribution ``p`` over the
domain and a total ``N``; its estimate of a query is ``N <q, p>``. Each question is a sparse
vector question (:mod:`dpsieve.interactive.sparse_vector`, Laplace):

* is ``|answer - estimate|`` above the public ``tolerance``? If not, the estimate is
  returned: no data-dependent value beyond that *below* leaves, nothing more is paid;
* if so (an *update*), the answer is released with fresh Laplace noise and the cache moves
  ``p`` towards it by a multiplicative-weights step (``log p += eta q (v/N - <q, p>)``,
  renormalised); a query that is all ones also sets ``N`` to the released value.

After ``updates`` updates the sparse vector is exhausted: :meth:`AnswerCache.ask` refuses
(:class:`~dpsieve.interactive.base.ChildExhaustedError`) and :meth:`AnswerCache.estimate`
still answers any query from the state, free (post-processing of released values).

Privacy, declared up front: ``PureDP(eps)``. The sparse vector's comparisons get
``eps * (1 - numeric_share)`` and the released values ``eps * numeric_share`` (each a
Laplace of scale ``updates / eps3`` on the lattice, at most ``updates`` of them): the
NumericSparse bound of docs/proofs/interactive.md §1, where the released value may be any
query of sensitivity <= 1 fixed by the transcript (§4). ``p`` and ``N`` are functions of the
released values and the public queries only, so the state holds no secret beyond the sparse
vector's noisy threshold; ``expected_rows`` (the starting ``N``) is a public guess, never
read from the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from dpsieve._rounding import round_down, round_up
from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.interactive.base import STATE_VERSION, ChildExhaustedError, register_child
from dpsieve.interactive.sparse_vector import LaplaceSVT, SparseVector
from dpsieve.mechanisms import RNG, as_source
from dpsieve.mechanisms.base import as_relation
from dpsieve.mechanisms.noise import discrete_laplace, snap_exact

__all__ = ["AnswerCache", "CacheAnswer", "CacheSpec"]

F64 = npt.NDArray[np.float64]
#: Lattice of the released values (counts): k = 1 / g = 2^10 steps per unit of sensitivity.
_G = 2.0**-10


@dataclass(frozen=True, slots=True)
class CacheSpec:
    """Public description of an answer cache (module docstring)."""

    eps: float
    domain_size: int
    updates: int
    tolerance: float
    expected_rows: float
    numeric_share: float = 0.5
    learning_rate: float = 1.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        owner = "CacheSpec"
        check_positive("eps", self.eps, owner)
        check_int("domain_size", self.domain_size, owner, minimum=1)
        check_int("updates", self.updates, owner, minimum=1)
        check_positive("tolerance", self.tolerance, owner)
        check_positive("expected_rows", self.expected_rows, owner)
        check_in_open("numeric_share", self.numeric_share, 0.0, 1.0, owner)
        check_positive("learning_rate", self.learning_rate, owner)
        object.__setattr__(self, "neighbouring", as_relation(self.neighbouring, owner))

    @property
    def kind(self) -> str:
        return "cache"

    def svt(self) -> LaplaceSVT:
        """The sparse vector inside: ``eps (1 - numeric_share)``, sensitivity 1, ``updates``
        positives (its eps is rounded down: the rest goes to the released values)."""
        e = Fraction(self.eps) * (1 - Fraction(self.numeric_share))
        return LaplaceSVT(round_down(e), 1.0, self.updates,
                          neighbouring=self.neighbouring, granularity=_G)

    def value_scale(self) -> float:
        """Discrete Laplace scale (lattice steps) of each released value: ``c k / eps3``
        rounded up, ``eps3 = eps - svt().eps`` exactly."""
        e3 = Fraction(self.eps) - Fraction(self.svt().eps)
        k = math.ceil(1 / Fraction(_G))
        return round_up(Fraction(self.updates * k) / e3)

    def declared(self) -> PureDP:
        return PureDP(self.eps, self.neighbouring)

    def pld(self) -> PLD:
        return PLD.pure_dp(self.eps)

    def to_dict(self) -> dict[str, Any]:
        return {"eps": self.eps, "domain_size": self.domain_size, "updates": self.updates,
                "tolerance": self.tolerance, "expected_rows": self.expected_rows,
                "numeric_share": self.numeric_share, "learning_rate": self.learning_rate,
                "neighbouring": self.neighbouring.value}


@dataclass(frozen=True, slots=True)
class CacheAnswer:
    """An answer: the value, whether it was an update (released from the data) or the
    cache's estimate, and the updates left."""

    value: float
    updated: bool
    updates_left: int


class AnswerCache:
    """An open answer cache (module docstring)."""

    __slots__ = ("_logp", "_svt", "spec", "total")

    kind = "cache"

    def __init__(self, spec: CacheSpec, svt: SparseVector, logp: F64 | None = None,
                 total: float | None = None) -> None:
        if not isinstance(spec, CacheSpec):
            raise fail("spec", "AnswerCache", "a CacheSpec", spec)
        self.spec = spec
        self._svt = svt
        t = spec.domain_size
        self._logp: F64 = np.full(t, -math.log(t)) if logp is None \
            else np.asarray(logp, dtype=np.float64)
        if self._logp.shape != (t,) or not np.all(self._logp < math.inf):
            raise fail("logp", "AnswerCache", f"{t} log-weights", "<shape differs>")
        self.total = float(spec.expected_rows if total is None else total)

    @classmethod
    def open(cls, spec: CacheSpec, rng: RNG = None) -> AnswerCache:
        return cls(spec, SparseVector.open(spec.svt(), rng))

    def declared(self) -> PureDP:
        return self.spec.declared()

    def pld(self) -> PLD:
        return self.spec.pld()

    def _query(self, query: npt.ArrayLike) -> F64:
        q = np.asarray(query, dtype=np.float64)
        if q.shape != (self.spec.domain_size,) or not np.all((q >= 0.0) & (q <= 1.0)):
            raise fail("query", "AnswerCache", f"{self.spec.domain_size} coefficients in "
                       "[0, 1] (one per domain element)", f"<shape {q.shape}>")
        return q

    def estimate(self, query: npt.ArrayLike) -> float:
        """The cache's estimate ``N <q, p>`` (from the state only: free)."""
        q = self._query(query)
        return self.total * float(np.exp(self._logp) @ q)

    @property
    def exhausted(self) -> bool:
        return self._svt.exhausted

    def ask(self, query: npt.ArrayLike, answer: float) -> CacheAnswer:
        """Answer one query. ``answer`` is its true count on the data (private, computed by
        the caller; sensitivity 1; a non-finite value is taken as 0, so no value fails
        after the charge). Refused once the updates are used up (public)."""
        q = self._query(query)
        if self._svt.exhausted:
            raise ChildExhaustedError(f"this answer cache has used its {self.spec.updates} "
                                      "updates; estimate() still answers from its state")
        est = self.total * float(np.exp(self._logp) @ q)
        a = float(answer)
        gap = abs(a - est) if math.isfinite(a) else math.inf
        if not self._svt.ask(gap if math.isfinite(gap) else 0.0,
                             self.spec.tolerance).above:
            return CacheAnswer(est, False, self.spec.updates - self._svt.positives_used)
        snapped = int(snap_exact([a if math.isfinite(a) else 0.0], _G, "AnswerCache")[0])
        noisy = snapped + discrete_laplace(self.spec.value_scale(), None,
                                           self._svt.source.gen)
        v = float(Fraction(noisy) * Fraction(_G))
        self._update(q, v)
        return CacheAnswer(v, True, self.spec.updates - self._svt.positives_used)

    def _update(self, q: F64, v: float) -> None:
        """Multiplicative weights towards ``v`` (post-processing of released values)."""
        if np.all(q == 1.0):
            self.total = max(v, 1.0)
            return
        p = np.exp(self._logp)
        step = self.spec.learning_rate * q * (v / self.total - float(p @ q))
        logp = self._logp + np.clip(step, -50.0, 50.0)
        self._logp = logp - logsumexp(logp)

    def public(self) -> dict[str, Any]:
        return {"kind": self.kind, "spec": self.spec.to_dict(),
                "declared": self.declared().to_dict(),
                "questions": self._svt.questions,
                "updates_used": self._svt.positives_used, "exhausted": self.exhausted}

    def to_state(self) -> dict[str, Any]:
        """The whole state; its only secret is the sparse vector's (``svt``)."""
        return {"version": STATE_VERSION, "kind": self.kind, "spec": self.spec.to_dict(),
                "svt": self._svt.to_state(), "logp": self._logp.tolist(),
                "total": self.total}

    @classmethod
    def from_state(cls, state: dict[str, Any], rng: RNG = None) -> AnswerCache:
        try:
            spec = CacheSpec(**state["spec"])
            svt = SparseVector.from_state(state["svt"], as_source(rng, "AnswerCache").gen)
            return cls(spec, svt, np.asarray(state["logp"], dtype=np.float64),
                       float(state["total"]))
        except (KeyError, TypeError):
            raise fail("state", "AnswerCache.from_state", "a state made by to_state()",
                       sorted(state) if isinstance(state, dict) else state) from None


register_child(AnswerCache.kind, lambda s, rng: AnswerCache.from_state(s, rng))
