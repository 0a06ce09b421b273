"""Independent brute-force oracle: the envelope over ALL T^n databases, no collapse."""

from __future__ import annotations

import functools
import itertools

import numpy as np
from scipy.special import logsumexp


def full_transcript_logp(W: np.ndarray, y: tuple[int, ...], w: tuple[int, ...], eta: float,
                         gamma: float) -> float:
    """log p_y(w) of the selection-only PMW transcript over the uncollapsed universe."""
    S = np.vstack([W, -W])
    T = W.shape[1]
    a = S[:, list(y)].mean(axis=1)
    mu = np.full(T, 1.0 / T)
    lp = 0.0
    for s in w:
        logits = eta * (a - S @ mu)
        lp += logits[s] - logsumexp(logits)
        mu = mu * np.exp(gamma * S[s])
        mu /= mu.sum()
    return lp


def class_of_signed(W: np.ndarray, reps: np.ndarray) -> list[int]:
    """For each of the 2k signed queries, the index of the representative row it equals up
    to an additive constant."""
    S = np.vstack([W, -W])
    out = []
    for s in S:
        d = reps - s[None, :]
        out.append(int(np.flatnonzero(np.ptp(d, axis=1) < 1e-12)[0]))
    return out


@functools.lru_cache(maxsize=32)
def _brute_cached(W_rows: tuple[tuple[float, ...], ...], x: tuple[int, ...], eta: float,
                  gamma: float, eps: float, selections: int, classes: tuple[int, ...],
                  n_classes: int) -> tuple[float, ...]:
    W = np.array(W_rows)
    S = np.vstack([W, -W])
    T = W.shape[1]
    K = S.shape[0]
    n = len(x)
    ys = np.array(list(itertools.product(range(T), repeat=n)))
    dist = (ys != np.array(x)[None, :]).sum(axis=1)
    A = S[:, ys].mean(axis=2).T  # (T^n, K): every database's target, no grouping
    agg = np.full(n_classes ** selections, -np.inf)
    for w in itertools.product(range(K), repeat=selections):
        mu = np.full(T, 1.0 / T)
        lp = np.zeros(len(ys))
        for s in w:
            logits = eta * (A - S @ mu)
            lp += logits[:, s] - logsumexp(logits, axis=1)
            mu = mu * np.exp(gamma * S[s])
            mu /= mu.sum()
        best = float(np.max(lp - eps / 2 * dist))
        code = 0
        for s in w:
            code = code * n_classes + classes[s]
        agg[code] = np.logaddexp(agg[code], best)
    return tuple(agg - logsumexp(agg))


def brute_envelope(W: np.ndarray, x: tuple[int, ...], eta: float, gamma: float, eps: float,
                   selections: int, classes: list[int], n_classes: int) -> np.ndarray:
    """Normalised log envelope masses over class transcripts (base-K' order), by max over
    every database y in D^n (each simulated separately) and every full transcript."""
    return np.array(_brute_cached(tuple(map(tuple, W.tolist())), tuple(x), eta, gamma, eps,
                                  selections, tuple(classes), n_classes))
