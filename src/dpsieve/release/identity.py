"""The identity mechanism: Laplace noise on the histogram, then consistent answers.

The textbook baseline for statistical-query release (Dwork, McSherry, Nissim, Smith 2006;
the "identity" strategy of the matrix mechanism, Li et al. 2010/2015): release the whole
histogram with Laplace noise, then answer every query from it. dpsieve works on the
collapsed universe (elements with identical query columns merged, which is all the answers
can see; :func:`dpsieve.release.collapse`), so the noise is added to ``T'`` class counts.

Privacy (docs/proofs/release.md, section 10). Replace-one neighbours move one row from one
class to another: the integer class counts differ by at most 2 in L1. Exact discrete
Laplace noise of scale ``t >= 2 / eps`` (``t`` the smallest float at or above ``2 / eps``,
computed exactly) on each count gives probability ratios at most ``exp(2 / t) <= e^eps``:
pure eps-DP with no floating-point gap (the counts are integers, the noise is an exact
integer sampler). Everything after the noisy counts is post-processing of them and of public
objects (``W``, ``n``):

* ``projection="simplex"`` (default): the noisy class frequencies are projected onto the
  probability simplex (Euclidean), and the answers are those of the projected distribution;
* ``projection="workload"``: least squares in answer space, the consistent answer vector
  (answers of some distribution) closest to the noisy answers ``C h~ / n``;
* ``projection="none"``: the noisy answers ``C h~ / n``, each clipped to its query's range.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import round_up
from dpsieve._validation import check_positive, fail
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.mechanisms.noise import discrete_laplace
from dpsieve.release.data import Dataset, Workload
from dpsieve.release.project import clip_to_range, least_squares_simplex, project_simplex
from dpsieve.release.result import Release
from dpsieve.release.transcript import collapse

__all__ = ["IDENTITY_PROJECTIONS", "count_noise_scale", "identity_release"]

IDENTITY_PROJECTIONS = ("simplex", "workload", "none")


def count_noise_scale(eps: float, l1_sensitivity: int = 2) -> float:
    """The smallest float ``t >= l1_sensitivity / eps`` (exact rational comparison): discrete
    Laplace noise of scale ``t`` on integer counts of that L1 sensitivity is eps-DP."""
    e = check_positive("eps", eps, "count_noise_scale")
    want = Fraction(l1_sensitivity) / Fraction(e)
    return round_up(want, finite=True)


def identity_release(workload: Workload, data: Dataset, eps: float, *,
                     projection: str = "simplex",
                     rng: np.random.Generator | None = None) -> Release:
    """Laplace on the (collapsed) histogram, then consistent answers; pure eps-DP, replace-one.

    ``projection``: ``"simplex"`` | ``"workload"`` | ``"none"`` (module docstring). The
    answers always lie in each query's range. ``expected_error`` is None (no closed form;
    the experiments estimate it by Monte Carlo).
    """
    e = check_positive("eps", eps, "identity_release")
    if projection not in IDENTITY_PROJECTIONS:
        raise fail("projection", "identity_release", f"one of {IDENTITY_PROJECTIONS}",
                   projection)
    cw = collapse(workload)
    scale = count_noise_scale(e)
    noisy = cw.counts(data) + np.asarray(discrete_laplace(scale, cw.size, rng), np.int64)
    freq = noisy.astype(np.float64) / data.n
    answers: npt.NDArray[np.float64]
    if projection == "simplex":
        answers = cw.columns @ project_simplex(freq)
    elif projection == "workload":
        p = least_squares_simplex(cw.columns, cw.columns @ freq)
        answers = cw.columns @ p
    else:
        answers = clip_to_range(cw.columns @ freq, workload.matrix)
    return Release(f"identity_{projection}", np.asarray(answers, dtype=np.float64),
                   PureDP(e, Neighbouring.REPLACE_ONE), None,
                   {"cells": cw.size, "count_scale": scale, "projection": projection})
