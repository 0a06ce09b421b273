"""The sparse vector technique as a child: one threshold question at a time, from its state.

An analyst sends one question at a time: a number computed from the data (a count, a sum)
whose sensitivity is at most ``sensitivity``, and a public threshold. The child answers
*above* or *below* until ``positives`` answers were *above*; then it is exhausted
(:class:`~dpsieve.interactive.base.ChildExhaustedError`). NumericSparse also releases a
noisy value with each *above*.

* :class:`LaplaceSVT` -- Lyu, Su, Li (VLDB 2017), Algorithm 1 with ``c`` positives: the
  threshold noise ``rho ~ Lap(Delta/eps1)`` is drawn once, each question gets
  ``nu ~ Lap(2 c Delta/eps2)`` (``c Delta/eps2`` for monotone questions), the answer is
  *above* iff ``q + nu >= T + rho``; it is ``(eps1 + eps2)``-DP (their Thm. 2) for any
  number of questions. NumericSparse adds a fresh ``Lap(c Delta/eps3)`` to each released
  value: ``eps1 + eps2 + eps3`` in all. Declared privacy: ``PureDP(eps)``.
* :class:`GaussianSVT` -- the same with discrete Gaussian noise (Zhu & Wang, NeurIPS 2020,
  Gaussian SVT); its privacy depends on the most questions it will answer
  (``max_questions``), declared up front, and is stated as ``ApproxDP(eps, delta)``
  (:mod:`._svt_privacy`; our proof, docs/proofs/interactive.md §2).

Both run on the lattice ``g Z`` with exact discrete noise and integer comparisons (the
values are snapped exactly, :func:`~dpsieve.mechanisms.noise.snap_exact`; docs/proofs/
mechanisms.md, Lemmas 1 and 4 and docs/proofs/interactive.md §1 for ``c`` positives): no
floating-point hole. Each question's noise is drawn before its comparison; the time taken
does not depend on the data.

The noisy threshold ``rho`` is the child's secret: it is independent of the data, but an
analyst who learns it learns from every *below* answer as if no threshold noise had been
drawn, so it lives only in ``to_state()``, never in ``public()`` (module
:mod:`dpsieve.interactive.base`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpsieve._rounding import round_down, round_up
from dpsieve._validation import (
    check_finite,
    check_in_closed,
    check_int,
    check_positive,
    fail,
    fail_private,
)
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.interactive._svt_privacy import svt_epsilon
from dpsieve.interactive.base import STATE_VERSION, ChildExhaustedError, register_child
from dpsieve.mechanisms import RNG, RandomSource, as_source
from dpsieve.mechanisms.base import as_relation
from dpsieve.mechanisms.noise import (
    MAX_DISCRETE_SCALE,
    MAX_DISCRETE_SIGMA,
    MIN_DISCRETE_SIGMA,
    discrete_gaussian,
    discrete_laplace,
    snap_exact,
)

__all__ = ["Answer", "GaussianSVT", "LaplaceSVT", "SparseVector"]


def _pow2(g: float, owner: str) -> float:
    g = check_positive("granularity", g, owner)
    if math.frexp(g)[0] != 0.5:
        raise fail("granularity", owner, "a power of two (e.g. 2.0**-20)", g)
    return g


def _common(spec: LaplaceSVT | GaussianSVT, owner: str) -> None:
    check_positive("sensitivity", spec.sensitivity, owner)
    check_int("positives", spec.positives, owner, minimum=1)
    if not isinstance(spec.monotonic, bool):
        raise fail("monotonic", owner, "a bool", spec.monotonic)
    object.__setattr__(spec, "neighbouring", as_relation(spec.neighbouring, owner))
    if spec.granularity is not None:
        _pow2(spec.granularity, owner)


@dataclass(frozen=True, slots=True)
class LaplaceSVT:
    """Laplace sparse vector, pure ``eps``-DP (module docstring).

    ``numeric_share`` of ``eps`` pays for the values released with positives (0: answers
    are above/below only). The rest is split ``eps1 : eps2 = 1 : (2c)^(2/3)``
    (``1 : c^(2/3)`` monotone), the ratio Lyu, Su and Li recommend (Sec. 4.2); the split is
    made exactly (``eps1 + eps2 + eps3 = eps`` in rationals) and every noise scale is
    rounded up, so the realised privacy is at most ``eps``.
    """

    eps: float
    sensitivity: float = 1.0
    positives: int = 1
    monotonic: bool = False
    numeric_share: float = 0.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    granularity: float | None = None

    def __post_init__(self) -> None:
        owner = "LaplaceSVT"
        check_positive("eps", self.eps, owner)
        _common(self, owner)
        check_in_closed("numeric_share", self.numeric_share, 0.0, 1.0, owner)
        if self.numeric_share == 1.0:
            raise fail("numeric_share", owner, "a float in [0, 1)", self.numeric_share)
        scales = self.scales()
        if not max(s for s in scales if s is not None) <= MAX_DISCRETE_SCALE:
            raise fail("eps", owner, f"large enough for noise scales <= {MAX_DISCRETE_SCALE}",
                       self.eps)

    @property
    def kind(self) -> str:
        return "laplace"

    def lattice(self) -> tuple[float, int]:
        """(g, k): the lattice step and the sensitivity in steps, ``k = ceil(Delta/g)``."""
        g = self.granularity
        if g is None:
            g = math.ldexp(1.0, math.frexp(self.sensitivity)[1] - 1 - 30)
        return g, math.ceil(Fraction(self.sensitivity) / Fraction(g))

    def split(self) -> tuple[Fraction, Fraction, Fraction]:
        """(eps1, eps2, eps3) as exact rationals summing to ``eps``."""
        total = Fraction(self.eps)
        e3 = Fraction(round_down(total * Fraction(self.numeric_share)))
        rest = total - e3
        c = self.positives if self.monotonic else 2 * self.positives
        e1 = Fraction(round_down(float(rest) / (1.0 + c ** (2.0 / 3.0))))
        return e1, rest - e1, e3

    def scales(self) -> tuple[float, float, float | None]:
        """Discrete Laplace scales in lattice steps: threshold, question, value (rounded up).
        A pure function of the (frozen) spec, memoised: a stored child rebuilt for each
        question reads them twice."""
        return _laplace_scales(self)

    def _scales(self) -> tuple[float, float, float | None]:
        _, k = self.lattice()
        e1, e2, e3 = self.split()
        c = self.positives
        b1 = round_up(Fraction(k) / e1)
        b2 = round_up(Fraction(k * (c if self.monotonic else 2 * c)) / e2)
        b3 = round_up(Fraction(k * c) / e3) if e3 > 0 else None
        return b1, b2, b3

    def declared(self) -> PureDP:
        return PureDP(self.eps, self.neighbouring)

    def pld(self) -> PLD:
        """``R_eps``, which dominates every eps-DP mechanism (Kairouz, Oh, Viswanath 2015)."""
        return PLD.pure_dp(self.eps)

    def to_dict(self) -> dict[str, Any]:
        return {"noise": "laplace", "eps": self.eps, "sensitivity": self.sensitivity,
                "positives": self.positives, "monotonic": self.monotonic,
                "numeric_share": self.numeric_share, "neighbouring": self.neighbouring.value,
                "granularity": self.granularity}


@functools.lru_cache(maxsize=1024)
def _laplace_scales(spec: LaplaceSVT) -> tuple[float, float, float | None]:
    return spec._scales()


@dataclass(frozen=True, slots=True)
class GaussianSVT:
    """Gaussian sparse vector answering at most ``max_questions``, ``(eps, delta)``-DP.

    ``sigma`` is the threshold noise's standard deviation and ``question_sigma`` each
    question's (default ``sigma (4c)^(1/4)``, ``sigma c^(1/4)`` monotone: the ratio that
    minimises the comparison's variance ``sigma^2 + question_sigma^2`` for a fixed Renyi
    bound), both in data units. ``eps`` is computed for the declared ``delta``
    (:meth:`epsilon`); :meth:`calibrate` finds ``sigma`` for a target.
    """

    sigma: float
    max_questions: int
    delta: float = 1e-6
    sensitivity: float = 1.0
    positives: int = 1
    monotonic: bool = False
    question_sigma: float | None = None
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    granularity: float | None = None

    def __post_init__(self) -> None:
        owner = "GaussianSVT"
        check_positive("sigma", self.sigma, owner)
        check_int("max_questions", self.max_questions, owner, minimum=1)
        check_in_closed("delta", self.delta, 0.0, 1.0, owner)
        if not 0.0 < self.delta < 1.0:
            raise fail("delta", owner, "a float in (0, 1)", self.delta)
        _common(self, owner)
        if self.question_sigma is None:
            ratio = (self.positives if self.monotonic else 4 * self.positives) ** 0.25
            object.__setattr__(self, "question_sigma", self.sigma * ratio)
        qs = check_positive("question_sigma", self.question_sigma, owner)
        g, _ = self.lattice()
        for name, s in (("sigma", self.sigma), ("question_sigma", qs)):
            if not MIN_DISCRETE_SIGMA <= s / g <= MAX_DISCRETE_SIGMA:
                raise fail(name, owner, f"between {MIN_DISCRETE_SIGMA * g:.3g} and "
                           f"{MAX_DISCRETE_SIGMA * g:.3g} on the lattice step {g}", s)

    @property
    def kind(self) -> str:
        return "gaussian"

    def lattice(self) -> tuple[float, int]:
        """(g, k), default ``g = 2^(floor(log2 Delta) - 10)``: k = 1024 for a power of two."""
        g = self.granularity
        if g is None:
            g = math.ldexp(1.0, math.frexp(self.sensitivity)[1] - 1 - 10)
        return g, math.ceil(Fraction(self.sensitivity) / Fraction(g))

    def variances(self) -> tuple[Fraction, Fraction]:
        """(s1^2, s2^2) in lattice units as requested: lower bounds of the sampled ones."""
        g, _ = self.lattice()
        qs = self.question_sigma if self.question_sigma is not None else self.sigma
        return (Fraction(self.sigma) / Fraction(g)) ** 2, (Fraction(qs) / Fraction(g)) ** 2

    def epsilon(self, delta: float | None = None) -> float:
        """eps with (eps, delta)-DP, an upper bound (``delta`` defaults to the declared)."""
        _, k = self.lattice()
        s1, s2 = self.variances()
        return svt_epsilon(self.delta if delta is None else delta, k=k, s1_sq=s1, s2_sq=s2,
                           questions=self.max_questions, positives=self.positives,
                           monotonic=self.monotonic)

    def declared(self) -> ApproxDP:
        return ApproxDP(self.epsilon(), self.delta, self.neighbouring)

    def pld(self) -> PLD:
        """``R_{eps,delta}``, which dominates every (eps, delta)-DP mechanism."""
        return PLD.approx_dp(self.epsilon(), self.delta)

    @classmethod
    def calibrate(cls, eps: float, delta: float, max_questions: int, **kw: Any) -> GaussianSVT:
        """The spec with the smallest ``sigma`` (to 1e-6 relative) whose eps is <= ``eps``."""
        check_positive("eps", eps, "GaussianSVT.calibrate")
        lo, hi = 1e-3 * kw.get("sensitivity", 1.0), 1.0 * kw.get("sensitivity", 1.0)
        while cls(hi, max_questions, delta, **kw).epsilon() > eps:
            lo, hi = hi, hi * 2.0
            if hi > 1e12:
                raise fail("eps", "GaussianSVT.calibrate", "reachable with sigma <= 1e12", eps)
        while hi - lo > 1e-6 * hi:
            mid = (lo + hi) / 2.0
            if cls(mid, max_questions, delta, **kw).epsilon() <= eps:
                hi = mid
            else:
                lo = mid
        return cls(hi, max_questions, delta, **kw)

    def to_dict(self) -> dict[str, Any]:
        return {"noise": "gaussian", "sigma": self.sigma, "max_questions": self.max_questions,
                "delta": self.delta, "sensitivity": self.sensitivity,
                "positives": self.positives, "monotonic": self.monotonic,
                "question_sigma": self.question_sigma, "neighbouring": self.neighbouring.value,
                "granularity": self.granularity}


def spec_from_dict(d: dict[str, Any]) -> LaplaceSVT | GaussianSVT:
    """Inverse of ``to_dict`` of either spec (unknown keys are refused)."""
    body = dict(d)
    noise = body.pop("noise", None)
    cls: type[LaplaceSVT] | type[GaussianSVT]
    if noise == "laplace":
        cls = LaplaceSVT
    elif noise == "gaussian":
        cls = GaussianSVT
    else:
        raise fail("noise", "sparse vector spec", "'laplace' or 'gaussian'", noise)
    try:
        return cls(**body)
    except TypeError:
        raise fail("spec", "sparse vector spec", f"the fields of {cls.__name__}",
                   sorted(body)) from None


@dataclass(frozen=True, slots=True)
class Answer:
    """One answer: ``above``, the released ``value`` (NumericSparse positives only), the
    question's number (from 1) and the positives left after it."""

    above: bool
    value: float | None
    question: int
    positives_left: int


class SparseVector:
    """An open sparse vector child (module docstring): :meth:`open` draws the threshold
    noise, :meth:`ask` answers one question, :meth:`to_state` stores everything."""

    __slots__ = ("_rho", "_src", "positives_used", "questions", "spec")

    kind = "sparse_vector"

    def __init__(self, spec: LaplaceSVT | GaussianSVT, rho: int, questions: int = 0,
                 positives_used: int = 0, rng: RNG = None) -> None:
        if not isinstance(spec, LaplaceSVT | GaussianSVT):
            raise fail("spec", "SparseVector", "a LaplaceSVT or GaussianSVT", spec)
        self.spec = spec
        self._rho = int(rho)
        self.questions = check_int("questions", questions, "SparseVector", minimum=0)
        self.positives_used = check_int("positives_used", positives_used, "SparseVector",
                                        minimum=0)
        if positives_used > spec.positives:
            raise fail("positives_used", "SparseVector", f"<= {spec.positives}",
                       positives_used)
        self._src: RandomSource = as_source(rng, "SparseVector")

    @classmethod
    def open(cls, spec: LaplaceSVT | GaussianSVT, rng: RNG = None) -> SparseVector:
        """A fresh child: draws the secret threshold noise (secure source by default)."""
        src = as_source(rng, "SparseVector.open")
        if isinstance(spec, LaplaceSVT):
            rho = discrete_laplace(spec.scales()[0], None, src.gen)
        else:
            rho = discrete_gaussian(spec.sigma / spec.lattice()[0], None, src.gen)
        return cls(spec, rho, rng=src.gen)

    def declared(self) -> PureDP | ApproxDP:
        return self.spec.declared()

    def pld(self) -> PLD:
        return self.spec.pld()

    @property
    def source(self) -> RandomSource:
        """The source of this child's noise (children built on it draw from it too)."""
        return self._src

    @property
    def exhausted(self) -> bool:
        """True when no more questions are answered (positives or questions used up)."""
        if self.positives_used >= self.spec.positives:
            return True
        return isinstance(self.spec, GaussianSVT) and self.questions >= self.spec.max_questions

    def ask(self, value: float, threshold: float) -> Answer:
        """Answer one question: is ``value`` (private, sensitivity <= the spec's) above the
        public ``threshold``? Refused (:class:`ChildExhaustedError`, public) once exhausted."""
        owner = "SparseVector.ask"
        if self.exhausted:
            raise ChildExhaustedError(
                f"this sparse vector child is exhausted ({self.positives_used} of "
                f"{self.spec.positives} positives, {self.questions} questions answered)")
        t = check_finite("threshold", threshold, owner)
        try:
            v = float(value)
        except (TypeError, ValueError, OverflowError):
            raise fail_private("value", owner, "a finite float", value) from None
        if not math.isfinite(v):
            raise fail_private("value", owner, "a finite float", value)
        g, _ = self.spec.lattice()
        qi, ti = (int(x) for x in snap_exact([v, t], g, owner).tolist())
        gen = self._src.gen
        if isinstance(self.spec, LaplaceSVT):
            _, b2, b3 = self.spec.scales()
            nu = discrete_laplace(b2, None, gen)
        else:
            qs = self.spec.question_sigma if self.spec.question_sigma is not None else 1.0
            nu = discrete_gaussian(qs / g, None, gen)
            b3 = None
        self.questions += 1
        above = qi + nu >= ti + self._rho
        released: float | None = None
        if above:
            self.positives_used += 1
            if b3 is not None:
                released = float(Fraction(qi + discrete_laplace(b3, None, gen)) * Fraction(g))
        return Answer(above, released, self.questions, self.spec.positives - self.positives_used)

    def public(self) -> dict[str, Any]:
        """What an analyst may see: the spec, the declared privacy and the counters."""
        return {"kind": self.kind, "spec": self.spec.to_dict(),
                "declared": self.declared().to_dict(), "questions": self.questions,
                "positives_used": self.positives_used, "exhausted": self.exhausted}

    def to_state(self) -> dict[str, Any]:
        """The whole state, including the secret threshold noise (lattice steps)."""
        return {"version": STATE_VERSION, "kind": self.kind, "spec": self.spec.to_dict(),
                "threshold_noise": self._rho, "questions": self.questions,
                "positives_used": self.positives_used}

    @classmethod
    def from_state(cls, state: dict[str, Any], rng: RNG = None) -> SparseVector:
        owner = "SparseVector.from_state"
        try:
            spec = spec_from_dict(state["spec"])
            rho = state["threshold_noise"]
            q, p = state["questions"], state["positives_used"]
        except KeyError as e:
            raise fail(str(e.args[0]), owner, "present in a stored sparse vector", None) \
                from None
        if not isinstance(rho, int) or isinstance(rho, bool):
            raise fail("threshold_noise", owner, "an int", type(rho).__name__)
        return cls(spec, rho, q, p, rng=rng)


register_child(SparseVector.kind, lambda s, rng: SparseVector.from_state(s, rng))
