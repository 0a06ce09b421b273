"""Exact enumeration of the transcript envelope, with one-pass Gumbel-max sampling.

Implements the private core of Fitzsimons (2026), Proposition 4.1 / eq. (4.1)-(4.2):

    p~_x(w) = max_g e^{-(eps/2) D_g} p_{a_g}(w),   p^_x(w) = p~_x(w) / Z_x,

over all transcripts w of ``selections`` signed queries, with the groups of
:mod:`dpsieve.release.groups`. Transcripts are enumerated breadth-first with shared
prefixes in memory-bounded chunks; a prefix carries, for every group, c_g = log p_g(prefix)
- (eps/2) D_g. One matrix product gives every group's softmax normaliser at a prefix:
sum_s exp(eta a_{g,s}) exp(-eta s(mu)) = (E e)_g.

Exact pruning (optional): a group g can never attain the maximum below a prefix whose
leader is l if c_g + 2 eta r ||a_g - a_l||_inf <= c_l, r = rounds still to enumerate (each
round moves log p_g - log p_l by at most 2 eta ||a_g - a_l||_inf). Pruning changes the
running time in a data-dependent way, so the releasing mechanism keeps it off by default.

One streaming pass over the leaves yields log Z_x (log-sum-exp), the exact expected error
sum_w p^_x(w) L_x(w), and a sample by Gumbel-max: argmax_w log p~_x(w) + G_w is distributed
as p^_x. All of this is exact up to floating point (about 1e-13 relative in log p~).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from dpsieve._validation import check_int, check_positive
from dpsieve.release._rng import RandomSource, gumbel, source
from dpsieve.release.errors import InstanceTooLargeError
from dpsieve.release.groups import Groups
from dpsieve.release.transcript import CollapsedWorkload, PMWParams

__all__ = [
    "DEFAULT_MAX_COST",
    "SECONDS_PER_UNIT",
    "EnvelopeEnumeration",
    "enumerate_envelope",
    "enumeration_cost",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
Progress = Callable[[int, int], None]

DEFAULT_MAX_COST = 2.0e10
#: Measured on the reference 2-core machine (benchmarks/release_reach.py), used only to
#: turn the cost estimate into seconds in refusal messages.
SECONDS_PER_UNIT = 8.0e-9
_MAX_CHUNK_ELEMENTS = 1 << 21
_MATMUL_ETA_LIMIT = 300.0


@dataclass(frozen=True, slots=True, eq=False)
class EnvelopeEnumeration:
    """Result of one pass. ``selections`` is the sampled transcript (None if not sampled);
    ``log_z`` = log Z_x; ``expected_error`` = E_{w ~ p^_x} ||Ans(w) - F(x)||_inf (None if
    no F(x) was given); ``log_masses`` the normalised log p^_x of every transcript in
    base-K order (only when requested); ``groups_used`` after root pruning."""

    selections: IntArray | None
    log_z: float
    expected_error: float | None
    leaves: int
    groups_used: int
    log_masses: FloatArray | None


def enumeration_cost(k: int, selections: int, groups: int) -> float:
    """Work units ~ K'^J' * G * K'/(K'-1) with K' = ``k`` signed-query classes: one unit is
    one (prefix, group, class) entry."""
    K = max(2, k)
    return float(K) ** selections * groups * (K / (K - 1)) + groups


class _Walker:
    def __init__(self, cw: CollapsedWorkload, groups: Groups, params: PMWParams,
                 eps: float, selections: int, f_x: FloatArray | None,
                 rng: RandomSource | None, prune: bool, keep_all: bool,
                 progress: Progress | None) -> None:
        self.S = cw.signed
        self.cols = cw.columns
        self.K = self.S.shape[0]
        self.logmult = cw.log_signed_multiplicity
        self.eta, self.gamma, self.J = params.eta, params.gamma, params.rounds
        self.Jp = selections
        self.f_x = f_x
        self.rng = rng
        self.prune = prune
        self.progress = progress
        self.total = self.K ** selections
        self.done = 0
        A = groups.targets
        c0 = -(eps / 2.0) * groups.distance.astype(np.float64)
        active = np.arange(A.shape[0])
        if prune and selections > 0:
            delta = np.abs(A - A[groups.center]).max(axis=1)
            keep = c0 + 2.0 * self.eta * selections * delta > c0[groups.center]
            keep[groups.center] = True
            active = np.flatnonzero(keep)
        self.A = A[active]
        self.c0 = c0[active]
        self.matmul = self.eta <= _MATMUL_ETA_LIMIT
        amax = self.A.max(axis=1)
        self.E = np.exp(self.eta * (self.A - amax[:, None]) + self.logmult[None, :])
        self.shift = self.eta * amax
        # streaming accumulators
        self.log_z = -math.inf
        self.err_ref = -math.inf
        self.err_acc = 0.0
        self.best_key = -math.inf
        self.best_idx = -1
        self.keep_all = keep_all
        self.all_idx: list[IntArray] = []
        self.all_val: list[FloatArray] = []

    # state: (c (P,G'), cols (G',) indices into self.A, logmu (P,T'), musum (P,T'), idx (P,))
    def run(self, log_mu0: FloatArray) -> None:
        mu0 = np.exp(log_mu0)
        state = (self.c0[None, :].copy(), np.arange(self.A.shape[0]), log_mu0[None, :].copy(),
                 mu0[None, :].copy(), np.zeros(1, dtype=np.int64))
        if self.Jp == 0:
            self._consume(state[0].max(axis=1), state[3], state[4])
            return
        self._walk(state, 0)

    def _walk(self, state: tuple[FloatArray, IntArray, FloatArray, FloatArray, IntArray],
              t: int) -> None:
        c, cols, logmu, musum, idx = state
        rows = max(1, _MAX_CHUNK_ELEMENTS // (self.K * max(1, cols.size)))
        for lo in range(0, c.shape[0], rows):
            hi = lo + rows
            leaf = t + 1 == self.Jp
            child = self._expand(c[lo:hi], cols, logmu[lo:hi], musum[lo:hi], idx[lo:hi], t,
                                 leaf)
            if leaf:
                self._consume(child[0][:, 0], child[3], child[4])
            else:
                if self.prune:
                    child = self._prune(child, self.Jp - t - 1)
                self._walk(child, t + 1)

    def _expand(self, c: FloatArray, cols: IntArray, logmu: FloatArray, musum: FloatArray,
                idx: IntArray, t: int, leaf: bool
                ) -> tuple[FloatArray, IntArray, FloatArray, FloatArray, IntArray]:
        """Children of P prefixes. For leaves, column 0 of the first array is the envelope
        max_g c_g(child) (the per-group values are never materialised as a state)."""
        P, K, eta = c.shape[0], self.K, self.eta
        A = self.A[cols]
        m = np.exp(logmu) @ self.S.T  # (P, K): s(mu_t) for every signed query
        if self.matmul:
            mmin = m.min(axis=1)
            e = np.exp(-eta * (m - mmin[:, None]))
            lognorm = np.log(e @ self.E[cols].T)
            lognorm += self.shift[cols][None, :]
            lognorm -= eta * mmin[:, None]
        else:
            lognorm = logsumexp(eta * (A[None, :, :] - m[:, None, :])
                                + self.logmult[None, None, :], axis=2)
        base = c - lognorm  # (P, G')
        BT = np.ascontiguousarray(eta * A.T + self.logmult[:, None])  # (K', G')
        cc = np.empty((P, K, cols.size))
        np.add(base[:, None, :], BT[None, :, :], out=cc)
        nl = logmu[:, None, :] + self.gamma * self.S[None, :, :]
        nl -= logsumexp(nl, axis=2, keepdims=True)
        nl = nl.reshape(P * K, -1)
        ms = np.repeat(musum, K, axis=0)
        if t + 1 <= self.J - 1:  # mu_{t+1} enters the decoder's average
            ms += np.exp(nl)
        nidx = (idx[:, None] * K + np.arange(K)[None, :]).reshape(-1)
        if leaf:
            val = cc.max(axis=2)
            val -= eta * m
            return val.reshape(P * K, 1), cols, nl, ms, nidx
        cc -= (eta * m)[:, :, None]
        return cc.reshape(P * K, -1), cols, nl, ms, nidx

    def _prune(self, state: tuple[FloatArray, IntArray, FloatArray, FloatArray, IntArray],
               remaining: int
               ) -> tuple[FloatArray, IntArray, FloatArray, FloatArray, IntArray]:
        c, cols, logmu, musum, idx = state
        if cols.size <= 1:
            return state
        A = self.A[cols]
        lead = c.argmax(axis=1)
        lead_val = c[np.arange(c.shape[0]), lead]
        uniq, inv = np.unique(lead, return_inverse=True)
        delta = np.abs(A[None, :, :] - A[uniq][:, None, :]).max(axis=2)  # (U, G')
        bound = c + 2.0 * self.eta * remaining * delta[inv.reshape(-1)]
        dominated = bound <= lead_val[:, None]
        dominated[np.arange(c.shape[0]), lead] = False
        keep = ~dominated.all(axis=0)
        if keep.all():
            return state
        return c[:, keep], cols[keep], logmu, musum, idx

    def _consume(self, val: FloatArray, musum: FloatArray, idx: IntArray) -> None:
        lz = float(logsumexp(val))
        self.log_z = float(np.logaddexp(self.log_z, lz))
        if self.f_x is not None:
            ans = (musum / self.J) @ self.cols.T
            loss = np.abs(ans - self.f_x[None, :]).max(axis=1)
            ref = float(val.max())
            new_ref = max(ref, self.err_ref)
            self.err_acc = self.err_acc * math.exp(self.err_ref - new_ref) if \
                self.err_ref > -math.inf else 0.0
            self.err_acc += float(np.sum(np.exp(val - new_ref) * loss))
            self.err_ref = new_ref
        if self.rng is not None:
            keys = val + gumbel(self.rng, val.size)
            j = int(np.argmax(keys))
            if keys[j] > self.best_key:
                self.best_key, self.best_idx = float(keys[j]), int(idx[j])
        if self.keep_all:
            self.all_idx.append(idx.copy())
            self.all_val.append(val.copy())
        self.done += val.size
        if self.progress is not None:
            self.progress(self.done, self.total)


def enumerate_envelope(cw: CollapsedWorkload, groups: Groups, params: PMWParams, eps: float,
                       *, selections: int, f_x: FloatArray | None = None, sample: bool = True,
                       rng: np.random.Generator | None = None, prune: bool = False,
                       keep_all: bool = False, max_cost: float = DEFAULT_MAX_COST,
                       progress: Progress | None = None) -> EnvelopeEnumeration:
    """Enumerate every transcript of ``selections`` signed queries under the envelope.

    Refuses (:class:`InstanceTooLargeError`, with the estimated cost and seconds) when
    :func:`enumeration_cost` exceeds ``max_cost``. ``rng=None`` with ``sample=True`` draws
    the Gumbel noise from a secure source.
    """
    check_positive("eps", eps, "enumerate_envelope")
    Jp = check_int("selections", selections, "enumerate_envelope", minimum=0)
    check_positive("max_cost", max_cost, "enumerate_envelope", allow_inf=True)
    cost = enumeration_cost(cw.signed_classes, Jp, groups.size)
    if cost > max_cost:
        raise InstanceTooLargeError(
            f"exact envelope enumeration needs about {cost:.3g} work units "
            f"(~{cost * SECONDS_PER_UNIT:.3g} s: K'^J' = {cw.signed_classes}^{Jp} transcripts x "
            f"{groups.size} groups), over the limit max_cost={max_cost:.3g}; lower the "
            "rounds, use the rejection sampler, or raise max_cost",
            estimated_cost=cost, limit=max_cost, estimated_seconds=cost * SECONDS_PER_UNIT)
    if cw.signed_classes ** Jp >= 2**62:
        raise InstanceTooLargeError(
            f"{cw.signed_classes}^{Jp} transcripts do not fit the int64 transcript index",
            estimated_cost=cost, limit=float(2**62))
    if keep_all and cw.signed_classes ** Jp > 5_000_000:
        raise InstanceTooLargeError("keep_all=True stores every transcript; too many",
                                    estimated_cost=float(cw.signed_classes ** Jp), limit=5e6)
    g = source(rng, "enumerate_envelope") if sample else None
    w = _Walker(cw, groups, params, eps, Jp, f_x, g, prune, keep_all, progress)
    w.run(cw.log_mu0)
    selections_out: IntArray | None = None
    if sample:
        digits = np.empty(Jp, dtype=np.int64)
        code = w.best_idx
        for i in range(Jp - 1, -1, -1):
            digits[i] = code % w.K
            code //= w.K
        selections_out = digits
    err = None
    if f_x is not None:
        err = float(w.err_acc * math.exp(w.err_ref - w.log_z))
    masses = None
    if keep_all:
        order = np.argsort(np.concatenate(w.all_idx))
        masses = np.concatenate(w.all_val)[order] - w.log_z
    return EnvelopeEnumeration(selections_out, w.log_z, err, w.done, int(w.A.shape[0]),
                               masses)
