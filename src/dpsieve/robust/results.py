"""Results of the robust estimators: a released value, or a clear refusal (never a fallback).

A :class:`Refusal` is a *result*, not an exception: it says which stage refused and why.
Its ``privacy`` is what the run was charged — zero when the refusal was decided from
public quantities only (``stage == "public"``), the whole declared budget otherwise
(the accounting of a run is fixed before it starts; docs/proofs/pfr.md §5).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP

__all__ = ["Refusal", "RobustResult", "zero_cost"]


def zero_cost() -> ApproxDP:
    """The cost of a refusal decided on public data only."""
    return ApproxDP(0.0, 0.0, Neighbouring.REPLACE_ONE)


def _jsonable(v: Any) -> Any:
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, (np.floating, np.integer)):
        return v.item()
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    return v


@dataclass(frozen=True, slots=True)
class Refusal:
    """No value released. ``stage``: ``"public"`` (the public ``n >= n0`` condition failed),
    ``"propose"`` (no radius on the grid qualified), or ``"release"`` (the noisy size of
    the kept set fell below ``n_min``)."""

    stage: str
    reason: str
    privacy: ApproxDP | PureDP
    details: dict[str, Any] = field(default_factory=dict)

    refused = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "refused": True,
            "stage": self.stage,
            "reason": self.reason,
            "privacy": self.privacy.to_dict(),
            "details": _jsonable(self.details),
        }


@dataclass(frozen=True, slots=True)
class RobustResult:
    """A released value with the privacy the whole run was charged and public diagnostics
    (every entry of ``details`` is itself a DP output or a public quantity)."""

    value: Any
    privacy: ApproxDP | PureDP
    details: dict[str, Any] = field(default_factory=dict)

    refused = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "refused": False,
            "value": _jsonable(self.value),
            "privacy": self.privacy.to_dict(),
            "details": _jsonable(self.details),
        }
