"""The value returned by every release mechanism."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.accounting.events import ApproxDP, PureDP

__all__ = ["PUBLIC_DETAILS", "Release"]

#: Detail keys that are public parameters or part of the private output itself (the
#: sampled transcript, MWEM's measured queries). Any other key a mechanism reports --
#: ``log_z_not_private`` and whatever is added later -- is a diagnostic: a function of the
#: data outside the guarantee (an allow-list, so a new diagnostic is never published).
PUBLIC_DETAILS = frozenset({
    "rounds", "eta", "gamma", "variant", "selections", "trivial_regime", "distinct_columns",
    "signed_query_classes", "groups", "transcripts", "transcript", "measured", "rows",
    "candidates", "l1_sensitivity", "scale", "lattice_step", "budget", "weight_bound",
    "refusal_delta", "log_z", "cells", "count_scale", "projection", "clip", "consistent"})


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

    def public_details(self) -> dict[str, Any]:
        """The details that may be published beside the answers (:data:`PUBLIC_DETAILS`)."""
        return {k: v for k, v in self.details.items() if k in PUBLIC_DETAILS}

    def diagnostics(self) -> dict[str, Any]:
        """What is NOT covered by ``privacy``: the exact expected error and every detail
        outside :data:`PUBLIC_DETAILS` (for the data owner only)."""
        return {"expected_error": self.expected_error,
                **{k: v for k, v in self.details.items() if k not in PUBLIC_DETAILS}}

    def to_dict(self) -> dict[str, Any]:
        """Everything, diagnostics included (labelled ``*_not_private``): for the data
        owner. Publish :meth:`public_details` and the answers, never this."""
        return {
            "mechanism": self.mechanism,
            "answers": [float(a) for a in self.answers],
            "privacy": self.privacy.to_dict(),
            "expected_error_not_private": self.expected_error,
            "details": dict(self.details),
        }
