"""Robust statistics by Propose-Filter-Release (docs/robust.md, docs/proofs/pfr.md).

Layer: above :mod:`dpsieve.mechanisms` and :mod:`dpsieve.accounting`; no I/O.
Every estimator returns a :class:`RobustResult` or a :class:`Refusal` (never a silent
fallback), and states the ``ApproxDP``/``PureDP`` (replace-one) it was charged.
"""

from dpsieve.robust.friendly import FilterParams, euclidean, hybrid_privacy, l1, release_budget
from dpsieve.robust.mean import FriendlyMean, pfr_mean
from dpsieve.robust.pipeline import PFRPlan, run_pfr
from dpsieve.robust.results import Refusal, RobustResult

__all__ = [
    "FilterParams",
    "FriendlyMean",
    "PFRPlan",
    "Refusal",
    "RobustResult",
    "euclidean",
    "hybrid_privacy",
    "l1",
    "pfr_mean",
    "release_budget",
    "run_pfr",
]
