"""The query of the per-record filters: one full-batch Gaussian step (:class:`RecordStep`).

Defined apart from :mod:`dpsieve.filters.per_record` so the typed charge of every filter
(:data:`dpsieve.filters.base.Charge`) can name it without an import cycle.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, check_positive, fail

__all__ = ["RecordStep"]

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, eq=False)
class RecordStep:
    """One full-batch Gaussian step as a query: noise std and each record's norm bound.

    ``expected_step`` (optional) must equal the filter's step counter, so a mask computed from
    a loaded state is exactly the one charged (optimistic concurrency for ledger use).
    ``norms`` is private data: ``to_dict`` only reports public numbers.
    """

    noise_std: float
    norms: FloatArray = field(repr=False)
    expected_step: int | None = None

    def __post_init__(self) -> None:
        check_positive("noise_std", self.noise_std, "RecordStep")
        a = np.asarray(self.norms, dtype=np.float64).reshape(-1)
        # two reductions, no temporaries: NaN makes min() NaN (fails >= 0), inf fails max()
        if a.size == 0 or not (a.min() >= 0.0 and a.max() < math.inf):
            raise fail("norms", "RecordStep", "a non-empty array of finite norms >= 0", "<array>")
        object.__setattr__(self, "norms", a)
        if self.expected_step is not None:
            check_int("expected_step", self.expected_step, "RecordStep", minimum=0)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "record_step", "noise_std": self.noise_std, "records": self.norms.size}
