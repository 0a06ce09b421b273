"""Rejection sampling from the envelope with a fixed, data-independent work budget.

Proposal: pick group g with probability w_g / W, w_g = e^{-(eps/2) D_g}, W = sum_g w_g; draw
a transcript w ~ p_g (plain PMW aimed at a_g); accept with probability
max_h w_h p_h(w) / sum_h w_h p_h(w). The proposal density is sum_h w_h p_h(w) / W, so an
accepted transcript has density ∝ max_h w_h p_h(w) = p~_x(w): exactly the envelope law
p^_x, whatever the number of trials. The acceptance probability is Z_x / W >= 1 / W.

Timing: the number of trials until acceptance is geometric with a data-dependent mean W/Z_x,
a timing side channel. We never stop early: exactly ``budget`` proposals are always drawn
and scored (each with data-independent work: J' rounds, all G groups, no pruning), and the
first accepted one is returned. If none is accepted we raise
:class:`~dpsieve.release.errors.RejectionBudgetExceededError`. That refusal is observable and its
probability f_x = (1 - Z_x / W_x)^budget depends on the data; it is at most
(1 - 1 / W_max)^budget with the data-independent W_max of :func:`weight_bound`. With the
refusal counted as an output the mechanism is (eps, delta)-DP with
delta = (1 + e^eps) (1 - 1 / W_max)^budget (docs/proofs/release.md); conditionally on
success the output law is exactly the pure eps-DP envelope law.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from dpsieve._validation import check_int, check_positive, fail
from dpsieve.release._rng import RandomSource, gumbel, source
from dpsieve.release.errors import RejectionBudgetExceededError
from dpsieve.release.groups import Groups
from dpsieve.release.transcript import CollapsedWorkload, PMWParams

__all__ = [
    "RejectionSample",
    "budget_for",
    "refusal_delta",
    "sample_envelope_rejection",
    "weight_bound",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class RejectionSample:
    """The accepted transcript, the fixed ``budget`` and the data-independent
    ``failure_bound`` >= P(refusal)."""

    selections: IntArray
    budget: int
    failure_bound: float


def weight_bound(n: int, classes: int, groups: int, eps: float) -> float:
    """Data-independent W_max >= W_x = sum_g e^{-(eps/2) D_g} for every x.

    At most min(G, C(T'+d-1, d)^2) groups lie at distance exactly d (remove a sub-multiset
    of d rows, add d rows), and x's own group has weight 1."""
    total = 1.0
    for d in range(1, n + 1):
        total += min(float(groups), float(math.comb(classes + d - 1, d)) ** 2) \
            * math.exp(-eps / 2 * d)
    return min(total, float(groups))


def budget_for(delta: float, w_max: float) -> int:
    """Smallest budget with (1 - 1 / W_max)^budget <= delta."""
    check_positive("delta", delta, "budget_for")
    if w_max <= 1.0:
        return 1
    return max(1, math.ceil(math.log(delta) / math.log1p(-1.0 / w_max)))


def refusal_delta(eps: float, budget: int, w_max: float) -> float:
    """delta = (1 + e^eps) (1 - 1/W_max)^budget of the mechanism that may refuse."""
    f = 0.0 if w_max <= 1.0 else math.exp(budget * math.log1p(-1.0 / w_max))
    return (1.0 + math.exp(eps)) * f


def sample_envelope_rejection(cw: CollapsedWorkload, groups: Groups, params: PMWParams,
                              eps: float, *, n: int, selections: int, budget: int,
                              rng: np.random.Generator | None = None) -> RejectionSample:
    """Draw one transcript from p^_x with exactly ``budget`` proposals (see module doc)."""
    e = check_positive("eps", eps, "sample_envelope_rejection")
    B = check_int("budget", budget, "sample_envelope_rejection", minimum=1)
    Jp = check_int("selections", selections, "sample_envelope_rejection", minimum=0)
    if B > 10_000_000:
        raise fail("budget", "sample_envelope_rejection", "an int <= 10000000", budget)
    src = source(rng, "sample_envelope_rejection")
    logw = -(e / 2.0) * groups.distance.astype(np.float64)
    nn = check_int("n", n, "sample_envelope_rejection", minimum=1)
    w_max = weight_bound(nn, cw.size, groups.size, e)
    cum = np.cumsum(np.exp(logw - logsumexp(logw)))
    chunk = max(1, (1 << 20) // max(1, groups.size * cw.signed_classes))
    accepted: IntArray | None = None
    done = 0
    while done < B:  # fixed work: every chunk is processed, acceptance never stops early
        size = min(chunk, B - done)
        picks = np.minimum(np.searchsorted(cum, src.uniform01(size)), groups.size - 1)
        sel, scores = _propose(cw, groups, params, picks, Jp, src)
        scores += logw[None, :]
        log_acc = scores.max(axis=1) - logsumexp(scores, axis=1)
        ok = np.flatnonzero(np.log(src.uniform01(size)) < log_acc)
        if accepted is None and ok.size:
            accepted = sel[ok[0]].copy()
        done += size
    bound = 0.0 if w_max <= 1.0 else math.exp(B * math.log1p(-1.0 / w_max))
    if accepted is None:
        raise RejectionBudgetExceededError(
            f"no proposal accepted within the fixed budget of {B} proposals (probability "
            f"<= {bound:.3g} for every dataset); nothing was released", budget=B,
            failure_bound=bound)
    return RejectionSample(accepted, B, bound)



def _propose(cw: CollapsedWorkload, groups: Groups, params: PMWParams, picks: IntArray,
             selections: int, src: RandomSource) -> tuple[IntArray, FloatArray]:
    """A batch of PMW transcripts, row b aimed at group picks[b] (Gumbel-max per round),
    and log p_h(w_b) for every group h (B x G). Work depends only on the shapes."""
    S, eta, gamma = cw.signed, params.eta, params.gamma
    A, logmult = groups.targets, cw.log_signed_multiplicity
    B, K = picks.size, cw.signed_classes
    logmu = np.repeat(cw.log_mu0[None, :], B, axis=0)
    ll = np.zeros((B, groups.size))
    sel = np.empty((B, selections), dtype=np.int64)
    rows = np.arange(B)
    for t in range(selections):
        m = np.exp(logmu) @ S.T  # (B, K)
        logits = eta * (A[picks] - m) + logmult[None, :]
        s = np.argmax(logits + gumbel(src, B * K).reshape(B, K), axis=1)
        sel[:, t] = s
        lognorm = logsumexp(eta * (A[None, :, :] - m[:, None, :]) + logmult[None, None, :],
                            axis=2)  # (B, G)
        ll += eta * A[:, s].T - (eta * m[rows, s] - logmult[s])[:, None] - lognorm
        logmu = logmu + gamma * S[s]
        logmu -= logsumexp(logmu, axis=1, keepdims=True)
    return sel, ll
