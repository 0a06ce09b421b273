"""Robust statistics by Propose-Filter-Release (docs/robust.md, docs/proofs/pfr.md).

Layer: above :mod:`dpsieve.mechanisms` and :mod:`dpsieve.accounting`; no I/O.
Every estimator returns a :class:`RobustResult` or a :class:`Refusal` (never a silent
fallback), and states the ``ApproxDP``/``PureDP`` (replace-one) it was charged.

* Means: :func:`pfr_mean` (default: PFR in row-wise form, :func:`rowwise_pfr_mean`: private
  median and MAD, keep the records inside the window, pure eps-DP) and the strong pure-eps
  baseline :func:`mad_clipped_mean` (same window, clipping instead of dropping);
  :func:`private_median` (exponential mechanism on a 2^24-point grid).
* Variant A (friend-count filter + hybrid lemma): :func:`run_pfr` (framework, any metric
  and friendly-DP release), ``pfr_mean(method="friendly")``, :func:`pfr_median`,
  :func:`pfr_pca`.
* Variant B (private threshold + row-wise user score): :func:`score_mean`, :func:`pfr_kl`,
  :func:`pfr_policy`.
* Not available (no proof): :func:`pfr_effective_resistance` raises ``UnsupportedError``.
"""

from dpsieve.robust.friendly import FilterParams, euclidean, hybrid_privacy, l1, release_budget
from dpsieve.robust.kl import pfr_kl
from dpsieve.robust.mean import FriendlyMean, pfr_mean
from dpsieve.robust.median import pfr_median
from dpsieve.robust.pca import pfr_pca
from dpsieve.robust.pipeline import PFRPlan, run_pfr
from dpsieve.robust.policy import pfr_policy
from dpsieve.robust.quantile import private_median
from dpsieve.robust.resistance import pfr_effective_resistance
from dpsieve.robust.results import Refusal, RobustResult
from dpsieve.robust.rowwise import mad_clipped_mean, rowwise_pfr_mean
from dpsieve.robust.variant_b import score_mean

__all__ = [
    "FilterParams",
    "FriendlyMean",
    "PFRPlan",
    "Refusal",
    "RobustResult",
    "euclidean",
    "hybrid_privacy",
    "l1",
    "mad_clipped_mean",
    "pfr_effective_resistance",
    "pfr_kl",
    "pfr_mean",
    "pfr_median",
    "pfr_pca",
    "pfr_policy",
    "private_median",
    "release_budget",
    "rowwise_pfr_mean",
    "run_pfr",
    "score_mean",
]
