"""A continual counter: running counts over data appended in time steps, one Gaussian mechanism.

At each step the steward appends the number of new events (an integer >= 0) and the child
releases the running count plus correlated Gaussian noise from a BLT factorization
(:mod:`dpsieve.interactive.blt`): the whole infinite release is the post-processing ``B``
of one Gaussian mechanism ``C x + z``, ``z ~ N(0, sigma^2 I)``, so it is ``mu``-GDP with

    mu = m ||c|| / sigma,

``||c||`` the column norm of ``C`` (exact, :meth:`BLT.sensitivity_sq`) and ``m`` the most
events one privacy unit contributes (1: event level; ``events_per_unit`` for unit level,
by the triangle inequality ``||C v|| <= ||v||_1 ||c||``; doubled under replace-one). It
holds when the counts are chosen adaptively from earlier releases
(docs/proofs/interactive.md §3). Declared: ``GDP(mu)``, charged once.

Releases are on the lattice ``g Z`` (``granularity``, default 2^-10): the value is the
exact integer count plus the noise rounded to ``g`` (exact in rationals), so the data enter
only as exact integers added to data-independent noise -- no floating-point operation
touches them (Mironov 2012 does not apply). **Float caveat**: the GDP guarantee is that of
the ideal mechanism with real Gaussian ``z``; the implementation draws ``z`` by the inverse
normal CDF of uniforms on the 2^-53 lattice from the secure source (so ``|z| < 8.3 sigma``)
and runs the O(d) noise recursion in floats (relative error ~1e-15 a step). Its noise law
differs from the ideal one by these data-independent errors only.

State: the step, the running count (the data), the d noise buffers and the running noise
(secrets), the last release (public). Memory is O(d), independent of the number of steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
from scipy import special

from dpsieve._rounding import div_up, next_up, sqrt_up
from dpsieve._validation import check_int, check_positive, fail, fail_private
from dpsieve.accounting.events import GDP, Neighbouring
from dpsieve.accounting.pld import PLD
from dpsieve.interactive.base import STATE_VERSION, register_child
from dpsieve.interactive.blt import BLT, DEFAULT_BLT
from dpsieve.mechanisms import RNG, RandomSource, as_source
from dpsieve.mechanisms.base import as_relation

__all__ = ["ContinualCounter", "CounterSpec"]

#: Normal draws fetched from the source at a time (unused ones are never stored).
_BATCH = 512
#: ``total + m g`` is exact in floats when ``total < 2^42``, ``|m| < 2^42`` and
#: ``g >= 2^-10`` (at most 53 significant bits); otherwise it is formed in rationals.
_EXACT = 2**42
_FINEST_FAST = 2.0**-10


@dataclass(frozen=True, slots=True)
class CounterSpec:
    """The public description of a continual counter (module docstring)."""

    sigma: float
    blt: BLT = field(default_factory=lambda: DEFAULT_BLT)
    events_per_unit: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    granularity: float = 2.0**-10

    def __post_init__(self) -> None:
        owner = "CounterSpec"
        check_positive("sigma", self.sigma, owner)
        if not isinstance(self.blt, BLT):
            raise fail("blt", owner, "a BLT", self.blt)
        check_int("events_per_unit", self.events_per_unit, owner, minimum=1)
        object.__setattr__(self, "neighbouring", as_relation(self.neighbouring, owner))
        g = check_positive("granularity", self.granularity, owner)
        if math.frexp(g)[0] != 0.5 or g > 1.0:
            raise fail("granularity", owner, "a power of two <= 1", g)

    @property
    def kind(self) -> str:
        return "counter"

    def _events(self) -> int:
        return self.events_per_unit * (2 if self.neighbouring == Neighbouring.REPLACE_ONE
                                       else 1)

    def sensitivity(self) -> float:
        """``m ||c||`` rounded up (``m`` doubled under replace-one)."""
        return sqrt_up(self._events() ** 2 * self.blt.sensitivity_sq())

    def gdp_mu(self) -> float:
        """``m ||c|| / sigma``, rounded up (computed from the exact ``||c||^2``)."""
        return sqrt_up(self._events() ** 2 * self.blt.sensitivity_sq()
                       / Fraction(self.sigma) ** 2)

    def declared(self) -> GDP:
        return GDP(self.gdp_mu(), self.neighbouring)

    def pld(self) -> PLD:
        return PLD.gdp(self.gdp_mu())

    def max_std(self, n: int) -> float:
        """The largest noise standard deviation of the releases at steps ``0..n-1``
        (``sigma ||b_{0..n-1}||``; an estimate in floats, for utility only)."""
        return self.blt.max_std_per_mu(n) / float(self.blt.sensitivity()) * self.sigma

    @classmethod
    def for_mu(cls, mu: float, **kw: Any) -> CounterSpec:
        """The spec with ``sigma = m ||c|| / mu`` rounded up: its ``gdp_mu() <= mu``
        (checked; one more ulp of sigma when the two roundings meet)."""
        check_positive("mu", mu, "CounterSpec.for_mu")
        probe = cls(1.0, **kw)
        sigma = div_up(probe.sensitivity(), mu)
        spec = cls(sigma, **kw)
        while spec.gdp_mu() > mu:
            sigma = next_up(sigma)
            spec = cls(sigma, **kw)
        return spec

    def to_dict(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "blt": self.blt.to_dict(),
                "events_per_unit": self.events_per_unit,
                "neighbouring": self.neighbouring.value, "granularity": self.granularity}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CounterSpec:
        try:
            blt = BLT(tuple(d["blt"]["theta"]), tuple(d["blt"]["omega"]))
            return cls(d["sigma"], blt, d["events_per_unit"], d["neighbouring"],
                       d["granularity"])
        except (KeyError, TypeError):
            raise fail("spec", "CounterSpec.from_dict", "a dict made by to_dict()",
                       sorted(d) if isinstance(d, dict) else d) from None


class ContinualCounter:
    """An open continual counter (module docstring): :meth:`step` appends one step's count
    and returns the release; :meth:`to_state` stores everything."""

    __slots__ = ("_buffers", "_noise", "_pending", "_src", "last", "spec", "steps", "total")

    kind = "counter"

    def __init__(self, spec: CounterSpec, rng: RNG = None, *, steps: int = 0, total: int = 0,
                 buffers: list[float] | None = None, noise: float = 0.0,
                 last: float | None = None) -> None:
        if not isinstance(spec, CounterSpec):
            raise fail("spec", "ContinualCounter", "a CounterSpec", spec)
        self.spec = spec
        self.steps = check_int("steps", steps, "ContinualCounter", minimum=0)
        self.total = check_int("total", total, "ContinualCounter", minimum=0)
        d = len(spec.blt.theta)
        self._buffers = [0.0] * d if buffers is None else [float(b) for b in buffers]
        if len(self._buffers) != d or not all(math.isfinite(b) for b in self._buffers):
            raise fail("buffers", "ContinualCounter", f"{d} finite floats", "<withheld>")
        self._noise = float(noise)
        self.last = last
        self._src: RandomSource = as_source(rng, "ContinualCounter")
        self._pending: list[float] = []

    def declared(self) -> GDP:
        return self.spec.declared()

    def pld(self) -> PLD:
        return self.spec.pld()

    def _z(self) -> float:
        if not self._pending:
            draws = special.ndtri(self._src.uniform01(_BATCH)) * self.spec.sigma
            self._pending = draws.tolist()
        return self._pending.pop()

    def step(self, count: int) -> float:
        """Append this step's number of events (an int >= 0, private) and return the
        noisy running count (on the lattice ``g Z``)."""
        if isinstance(count, bool) or not isinstance(count, int | np.integer) or count < 0:
            raise fail_private("count", "ContinualCounter.step", "an int >= 0", count)
        u = self._z()
        for w, s in zip(self.spec.blt.omega, self._buffers, strict=True):
            u -= w * s
        self._buffers = [t * s + u for t, s in zip(self.spec.blt.theta, self._buffers,
                                                     strict=True)]
        self._noise += u
        self.total += int(count)
        self.steps += 1
        g = self.spec.granularity
        m = math.floor(self._noise / g + 0.5)  # the noise on the lattice: m g
        if g >= _FINEST_FAST and self.total < _EXACT and -_EXACT < m < _EXACT:
            self.last = self.total + m * g  # exact: fewer than 53 significant bits
        else:
            self.last = float(self.total + Fraction(m) * Fraction(g))
        return self.last

    def public(self) -> dict[str, Any]:
        return {"kind": self.kind, "spec": self.spec.to_dict(),
                "declared": self.declared().to_dict(), "steps": self.steps,
                "last": self.last}

    def to_state(self) -> dict[str, Any]:
        """The whole state: the running count (data) and the noise buffers are secret."""
        return {"version": STATE_VERSION, "kind": self.kind, "spec": self.spec.to_dict(),
                "steps": self.steps, "total": self.total, "buffers": list(self._buffers),
                "noise": self._noise, "last": self.last}

    @classmethod
    def from_state(cls, state: dict[str, Any], rng: RNG = None) -> ContinualCounter:
        try:
            spec = CounterSpec.from_dict(state["spec"])
            return cls(spec, rng, steps=state["steps"], total=state["total"],
                       buffers=state["buffers"], noise=state["noise"], last=state["last"])
        except KeyError as e:
            raise fail(str(e.args[0]), "ContinualCounter.from_state",
                       "present in a stored counter", None) from None


register_child(ContinualCounter.kind, lambda s, rng: ContinualCounter.from_state(s, rng))
