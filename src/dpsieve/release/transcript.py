"""The selection-only PMW transcript (Fitzsimons 2026, section 3), on a collapsed universe.

Signed queries S = Q x {-1, +1} (K = 2k) act as the rows of ``signed = [W; -W]``. From the
uniform mu_0, round t draws s_t with probability proportional to
exp(eta (a_s - s(mu_{t-1}))) (eq. 3.4) and updates mu_t ∝ mu_{t-1} e^{gamma s_t} (eq. 3.3).
The decoder (eq. 3.5) answers the queries at the average of mu_0 .. mu_{J-1}.

Universe collapse: elements with identical query columns are interchangeable (every
mu_t is constant on such a class, and targets only see class counts), so we work with the
distinct columns and their multiplicities; mu_0 of a class is multiplicity / T. This is an
exact reformulation: every transcript probability is unchanged (docs/proofs/release.md).

Signed-query collapse: two signed queries that differ by a constant function (e.g. q and
-(1 - q) for a binary attribute's two marginal cells, or duplicated queries) have the same
logit under every database target (a(y)_s and s(mu) shift by the same constant) and the same
update (the constant cancels in the normalisation). The transcript law factorises into a law
over classes times a uniform, data-independent choice inside each class, and the decoder
only sees classes; so we enumerate class transcripts with logits eta (a_c - c(mu)) + log m_c
(m_c = class size). Again exact (docs/proofs/release.md). "Selections" below are classes.

All probabilities are handled in log space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from dpsieve._validation import check_in_closed, check_int, check_positive, fail
from dpsieve.mechanisms import exponential_mechanism
from dpsieve.release.data import Dataset, Workload

__all__ = [
    "CollapsedWorkload",
    "PMWParams",
    "collapse",
    "decode",
    "sample_transcript",
    "transcript_log_likelihood",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class PMWParams:
    """Public PMW parameters: ``rounds`` J (decoder averages mu_0..mu_{J-1}), selection
    strength ``eta`` > 0 and update step 0 < ``gamma`` <= 1. They must not depend on data."""

    rounds: int
    eta: float
    gamma: float

    def __post_init__(self) -> None:
        check_int("rounds", self.rounds, "PMWParams", minimum=1)
        check_positive("eta", self.eta, "PMWParams")
        check_in_closed("gamma", self.gamma, 0.0, 1.0, "PMWParams")
        if not self.gamma > 0:
            raise fail("gamma", "PMWParams", "a float in (0, 1]", self.gamma)


@dataclass(frozen=True, slots=True, eq=False)
class CollapsedWorkload:
    """Distinct query columns ``columns`` (k x T'), their multiplicities, the class of every
    universe element; ``signed`` holds one representative row per signed-query class
    (K' x T'), ``signed_multiplicity`` the class sizes and ``signed_index`` the index of each
    representative in the K = 2k signed queries [W; -W]."""

    columns: FloatArray
    multiplicity: IntArray
    classes: IntArray
    universe_size: int
    signed: FloatArray
    signed_multiplicity: IntArray
    signed_index: IntArray

    @property
    def k(self) -> int:
        return int(self.columns.shape[0])

    @property
    def size(self) -> int:
        """T', the number of distinct columns."""
        return int(self.columns.shape[1])

    @property
    def signed_classes(self) -> int:
        """K', the number of signed-query classes (<= 2k)."""
        return int(self.signed.shape[0])

    @property
    def log_signed_multiplicity(self) -> FloatArray:
        out: FloatArray = np.log(self.signed_multiplicity.astype(np.float64))
        return out

    @property
    def log_mu0(self) -> FloatArray:
        out: FloatArray = np.log(self.multiplicity / self.universe_size)
        return out

    def counts(self, data: Dataset) -> IntArray:
        """Class histogram of a dataset (sum of its counts over each class)."""
        if data.universe_size != self.universe_size:
            raise fail("data", "CollapsedWorkload.counts",
                       f"a dataset over a universe of size {self.universe_size}",
                       data.universe_size)
        out: IntArray = np.bincount(self.classes, weights=data.counts,
                                    minlength=self.size).astype(np.int64)
        return out

    def targets_from_answers(self, answers: FloatArray) -> FloatArray:
        """Class targets a_c = s_c(y) from answer vectors F(y) (rows)."""
        F = np.atleast_2d(answers)
        out: FloatArray = np.hstack([F, -F])[:, self.signed_index]
        return out

    def target(self, class_counts: IntArray, n: int) -> FloatArray:
        """a(y)_c = (1/n) sum_i s_c(y_i) (eq. 3.1) from a class histogram."""
        out: FloatArray = self.signed @ class_counts.astype(np.float64) / n
        return out


def collapse(workload: Workload) -> CollapsedWorkload:
    """Group universe elements with identical query columns and signed queries that differ by
    a constant (both exact; see module doc)."""
    cols, classes, mult = np.unique(workload.matrix.T, axis=0, return_inverse=True,
                                    return_counts=True)
    columns = np.ascontiguousarray(cols.T)
    full = np.vstack([columns, -columns])
    shifted = np.round(full - full[:, :1], 12) + 0.0  # canonical up to an additive constant
    _, first, smult = np.unique(shifted, axis=0, return_index=True, return_counts=True)
    order = np.argsort(first)
    rep = first[order].astype(np.int64)
    return CollapsedWorkload(columns, mult.astype(np.int64),
                             classes.reshape(-1).astype(np.int64), workload.universe_size,
                             np.ascontiguousarray(full[rep]), smult[order].astype(np.int64),
                             rep)


def _mu_path(cw: CollapsedWorkload, selections: IntArray, gamma: float) -> FloatArray:
    """log mu_0 .. log mu_{len(selections)} as rows."""
    S = cw.signed
    out = np.empty((len(selections) + 1, cw.size))
    out[0] = cw.log_mu0
    for t, s in enumerate(selections):
        nxt = out[t] + gamma * S[s]
        out[t + 1] = nxt - logsumexp(nxt)
    return out


def transcript_log_likelihood(cw: CollapsedWorkload, targets: FloatArray,
                              selections: IntArray, eta: float, gamma: float) -> FloatArray:
    """log p_a(omega) for each row a of class ``targets`` (G x K'): the product of the softmax
    probabilities (eq. 3.4) of the selections along the (public) mu trajectory."""
    A = np.atleast_2d(np.asarray(targets, dtype=np.float64))
    S = cw.signed
    logmu = _mu_path(cw, np.asarray(selections, dtype=np.int64), gamma)
    total = np.zeros(A.shape[0])
    for t, s in enumerate(selections):
        m = S @ np.exp(logmu[t])
        logits = eta * (A - m) + cw.log_signed_multiplicity
        total += logits[:, s] - logsumexp(logits, axis=1)
    return total


def sample_transcript(cw: CollapsedWorkload, target: FloatArray, selections: int,
                      eta: float, gamma: float,
                      rng: np.random.Generator | None = None) -> IntArray:
    """Draw ``selections`` signed-query classes from P_a (eq. 3.4). Each round is one call
    of :func:`dpsieve.mechanisms.exponential_mechanism` with scores equal to the logits and
    eps / (2 Delta) = 1, i.e. probability ∝ exp(logit). ``rng=None`` is the secure source."""
    S = cw.signed
    logmu = cw.log_mu0.copy()
    out = np.empty(selections, dtype=np.int64)
    for t in range(selections):
        m = S @ np.exp(logmu)
        logits = eta * (target - m) + cw.log_signed_multiplicity
        s = exponential_mechanism(logits, 2.0, 1.0, rng)
        out[t] = s
        logmu = logmu + gamma * S[s]
        logmu -= logsumexp(logmu)
    return out


def decode(cw: CollapsedWorkload, selections: IntArray, rounds: int,
           gamma: float) -> FloatArray:
    """Ans(omega) = q(mean of mu_0..mu_{J-1}) (eq. 3.5); needs >= J - 1 selections."""
    if len(selections) < rounds - 1:
        raise fail("selections", "decode", f"at least rounds - 1 = {rounds - 1} selections",
                   len(selections))
    logmu = _mu_path(cw, np.asarray(selections[: rounds - 1], dtype=np.int64), gamma)
    mubar = np.exp(logmu).mean(axis=0)
    out: FloatArray = cw.columns @ mubar
    return out
