"""Mean KL divergence of user histograms to a public reference (pfr.md §7.2, Variant B).

User ``u`` holds a histogram ``h_u`` over ``K`` categories (one row); the score is
``s_u = KL(h~_u || Q)`` with ``h~_u = (h_u + alpha) / (|h_u| + K alpha)`` and a public
reference ``Q`` (all entries > 0), so ``0 <= s_u <= log(1 / min Q)``, the public range of
the quantile grid. A private ``level``-quantile ``tau~`` (exponential mechanism), then the
mean score of the users with ``s_u <= tau~`` from a noisy sum and count. Pure
``eps``-DP, replace-one (one user's histogram replaced). It estimates the mean over users
whose score is below ``tau~`` (a trimmed mean); the pooled variant is not shipped.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_positive, check_probability_vector, fail
from dpsieve.robust.pipeline import check_records
from dpsieve.robust.results import Refusal, RobustResult
from dpsieve.robust.variant_b import score_mean

__all__ = ["kl_scores", "pfr_kl"]


def kl_scores(hist: npt.NDArray[np.float64], reference: npt.NDArray[np.float64],
              alpha: float = 0.5) -> npt.NDArray[np.float64]:
    """``KL((h_u + alpha)/(|h_u| + K alpha) || Q)`` per row (row-wise by construction)."""
    h = np.asarray(hist, dtype=np.float64) + alpha
    p = h / h.sum(axis=1, keepdims=True)
    out: npt.NDArray[np.float64] = np.maximum(np.sum(p * np.log(p / reference), axis=1), 0.0)
    return out


def pfr_kl(
    hist: Any, reference: Any, eps: float, *, alpha: float = 0.5, level: float = 0.9,
    grid_size: int = 256, split: tuple[float, float, float] = (0.3, 0.5, 0.2),
    n_min: int = 2, rng: np.random.Generator | None = None,
) -> RobustResult | Refusal:
    """``eps``-DP mean KL(user || reference) over the users below a private quantile."""
    h = check_records(hist, "pfr_kl", min_rows=1)
    if h.ndim != 2 or np.any(h < 0):
        raise fail("hist", "pfr_kl", "a 2-D array of non-negative counts (users x bins)",
                   h.shape)
    q = check_probability_vector("reference", reference, "pfr_kl")
    if q.size != h.shape[1] or not np.all(q > 0):
        raise fail("reference", "pfr_kl", f"{h.shape[1]} probabilities, all > 0", reference)
    alpha = check_positive("alpha", alpha, "pfr_kl")
    top = math.log(1.0 / float(q.min()))
    return score_mean(h, lambda rows: kl_scores(rows, q, alpha), eps, top, level=level,
                      grid_size=grid_size, split=split, n_min=n_min, rng=rng)
