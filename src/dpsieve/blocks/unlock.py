"""Unlocking: how much of a block's budget may be spent so far (pure, public inputs only).

A block arrives with its whole budget, but an unlocking policy lets only a fraction of it
be spent at first, so that the first analysts cannot drain a block before later ones
arrive (DPF, Luo et al., OSDI 2021). The fraction unlocked is a function of **public
facts only** -- the policy, the block's age and how many analysts (or requests) have
asked for the block -- never of the data (docs/proofs/blocks.md §4):

* ``none``: everything is unlocked at arrival;
* ``periodic``: ``fraction`` at arrival and ``fraction`` more each ``period`` seconds,
  ``min(1, fraction * (1 + floor(age / period)))`` (DPF-T);
* ``arrivals``: ``fraction`` more for each distinct arriving analyst (``by="analyst"``)
  or request (``by="request"``), ``min(1, fraction * arrivals)`` (DPF-N with
  ``fraction = 1/N``).

The fraction is exact (a :class:`~fractions.Fraction`) and never decreases: a later time
or more arrivals unlock at least as much. Unlocking only ever refuses *more* than the
block's filter: a spend is admitted when the filter admits it *and* the fraction of the
budget used after it is at most the fraction unlocked
(:func:`dpsieve.blocks.currency.used_fraction`), so it cannot weaken any guarantee.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpsieve._validation import fail

__all__ = ["UNLOCK_KINDS", "Unlock", "unlock_from_dict"]

#: The unlocking policies, by name.
UNLOCK_KINDS = ("none", "periodic", "arrivals")
_BY = ("analyst", "request")


@dataclass(frozen=True, slots=True)
class Unlock:
    """An unlocking policy (module docstring). ``fraction`` is exact (a float given is
    read as its exact binary value); ``period`` is in seconds."""

    kind: str = "none"
    fraction: Fraction = Fraction(1)
    period: float = 0.0
    by: str = "analyst"

    def __post_init__(self) -> None:
        if self.kind not in UNLOCK_KINDS:
            raise fail("type", "unlock", f"one of {list(UNLOCK_KINDS)}", self.kind)
        f = self.fraction
        if not isinstance(f, Fraction) or not (0 < f <= 1):
            raise fail("fraction", "unlock", "a number in (0, 1]", f)
        if self.kind == "periodic" and not (0 < self.period < math.inf):
            raise fail("period", "unlock", "a finite number of seconds > 0", self.period)
        if self.by not in _BY:
            raise fail("by", "unlock", f"one of {list(_BY)}", self.by)

    @property
    def counts_arrivals(self) -> bool:
        """Whether arrivals unlock (the ledger then records them)."""
        return self.kind == "arrivals"

    def unlocked(self, age: float, arrivals: int) -> Fraction:
        """The fraction of the block's budget unlocked ``age`` seconds after its arrival,
        after ``arrivals`` distinct arrivals: exact, in [0, 1], non-decreasing in both."""
        if self.kind == "none":
            return Fraction(1)
        if self.kind == "periodic":
            steps = 1 + max(0, math.floor(age / self.period)) if math.isfinite(age) else 1
            return min(Fraction(1), self.fraction * steps)
        return min(Fraction(1), self.fraction * max(0, int(arrivals)))

    def describe(self) -> str:
        """The policy in words (for the budget page and the CLI)."""
        pct = f"{float(self.fraction) * 100:.4g} %"
        if self.kind == "none":
            return "the whole budget is unlocked when the block arrives"
        if self.kind == "periodic":
            return (f"{pct} of the budget is unlocked when the block arrives and {pct} "
                    f"more every {self.period:g} s")
        return f"{pct} of the budget is unlocked by each {self.by} that asks for the block"

    def to_dict(self) -> dict[str, Any]:
        """The policy's JSON (read back by :func:`unlock_from_dict`)."""
        if self.kind == "none":
            return {"type": "none"}
        frac = {"fraction": f"{self.fraction.numerator}/{self.fraction.denominator}"}
        if self.kind == "periodic":
            return {"type": "periodic", **frac, "period": self.period}
        return {"type": "arrivals", **frac, "by": self.by}


def _fraction(d: Mapping[str, Any]) -> Fraction:
    if "n" in d:
        n = d["n"]
        if isinstance(n, bool) or not isinstance(n, int) or not (1 <= n <= 10**9):
            raise fail("n", "unlock", "an integer between 1 and 10^9 (1/n unlocked per "
                       "arrival or period)", n)
        if "fraction" in d:
            raise fail("fraction", "unlock", "absent when 'n' is given", d["fraction"])
        return Fraction(1, n)
    f = d.get("fraction")
    if isinstance(f, str):
        try:
            out = Fraction(f)
        except (ValueError, ZeroDivisionError):
            raise fail("fraction", "unlock", "a number in (0, 1]", f) from None
        return out
    if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f):
        raise fail("fraction", "unlock", "a number in (0, 1] (or 'n': 1/n at a time)", f)
    return Fraction(f)


def unlock_from_dict(d: Any) -> Unlock:
    """A policy from its JSON: ``{"type": "none"}``, ``{"type": "periodic", "fraction":
    0.1, "period": 86400}`` or ``{"type": "arrivals", "n": 10, "by": "analyst"}``
    (``n``: ``fraction = 1/n``). Every failure names the parameter."""
    if d is None:
        return Unlock()
    if not isinstance(d, Mapping):
        raise fail("unlock", "blocks", "an object such as {'type': 'periodic', "
                   "'fraction': 0.1, 'period': 86400}", d)
    kind = d.get("type")
    allowed = {"none": {"type"}, "periodic": {"type", "fraction", "n", "period"},
               "arrivals": {"type", "fraction", "n", "by"}}
    if kind not in allowed:
        raise fail("type", "unlock", f"one of {list(UNLOCK_KINDS)}", kind)
    extra = sorted(set(d) - allowed[kind])
    if extra:
        raise fail(extra[0], "unlock", f"one of {sorted(allowed[kind])}", extra[0])
    if kind == "none":
        return Unlock()
    frac = _fraction(d)
    if kind == "periodic":
        p = d.get("period")
        if isinstance(p, bool) or not isinstance(p, int | float):
            raise fail("period", "unlock", "a finite number of seconds > 0", p)
        return Unlock("periodic", frac, float(p))
    return Unlock("arrivals", frac, 0.0, str(d.get("by", "analyst")))
