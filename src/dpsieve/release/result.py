"""The value returned by every release mechanism."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.accounting.events import ApproxDP, PureDP

__all__ = ["Release"]


@dataclass(frozen=True, slots=True, eq=False)
class Release:
    """Released ``answers`` (one per query) and the ``privacy`` they cost (pure eps-DP,
    replace-one neighbours; (eps, delta) only for the rejection sampler, whose refusal is an
    observable event).

    ``expected_error`` is E||M(x) - F(x)||_inf computed exactly at the true data (or None).
    It is a function of the private data and is **not** covered by ``privacy``: a
    diagnostic for the data owner, never to be published. ``details`` holds public,
    data-independent facts (parameters, cost) and, where stated, further diagnostics.
    """

    mechanism: str
    answers: npt.NDArray[np.float64]
    privacy: PureDP | ApproxDP
    expected_error: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "answers": [float(a) for a in self.answers],
            "privacy": self.privacy.to_dict(),
            "expected_error_not_private": self.expected_error,
            "details": dict(self.details),
        }
