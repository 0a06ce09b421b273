"""The envelope mechanism (Fitzsimons 2026, sections 1.2 and 4): pure eps-DP query release.

1. Selection-only PMW transcript law P_y (section 3; :mod:`dpsieve.release.transcript`).
2. Sample the transcript from the normalised envelope p~_x / Z_x,
   p~_x(w) = max_y e^{-(eps/2) d_H(x,y)} p_y(w) (eq. 4.1; Proposition 4.1: pure eps-DP for
   ANY public J, eta, gamma, under replace-one neighbours).
3. Decode publicly: the answers at the average of mu_0..mu_{J-1} (eq. 3.5).

``variant="drop-last"`` (default) takes the envelope of the first J - 1 selections' law: the
decoder never reads the J-th selection, the result is again eps-DP (Proposition 4.1 applied
to the (J-1)-round transcript, then post-processing) and keeps the utility bound; it is K'
times cheaper (K' <= 2k signed-query classes; docs/proofs/release.md). ``variant="full"``
is the paper's J-selection law.

Trivial regime: when eta <= eps n / (4 J' r) (r = largest query range, J' selections), every
y's discounted likelihood is below x's own, so the envelope IS the PMW law (Z = 1) and we
sample PMW directly (docs/proofs/release.md).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np

from dpsieve._validation import check_positive, fail
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.release.data import Dataset, Workload
from dpsieve.release.envelope import (
    DEFAULT_MAX_COST,
    Progress,
    enumerate_envelope,
    enumeration_cost,
)
from dpsieve.release.errors import InstanceTooLargeError
from dpsieve.release.groups import Groups, enumerate_histograms, group_histograms, histogram_count
from dpsieve.release.params import auto_rounds, practical_parameters
from dpsieve.release.rejection import (
    budget_for,
    refusal_delta,
    sample_envelope_rejection,
    weight_bound,
)
from dpsieve.release.result import Release
from dpsieve.release.transcript import (
    CollapsedWorkload,
    PMWParams,
    collapse,
    decode,
    sample_transcript,
)

__all__ = [
    "AUTO_ROUNDS_COST",
    "center_only_groups",
    "envelope_release",
    "is_trivial_regime",
    "selection_count",
    "worst_case_expected_error",
]

#: Enumeration budget (work units, about a second) used to choose J when none is given.
AUTO_ROUNDS_COST = 2.0e8

Variant = Literal["drop-last", "full"]
Method = Literal["exact", "rejection"]


def selection_count(rounds: int, variant: Variant) -> int:
    """J' = J - 1 for ``drop-last``, J for ``full``."""
    if variant not in ("drop-last", "full"):
        raise fail("variant", "envelope_release", "'drop-last' or 'full'", variant)
    return rounds - 1 if variant == "drop-last" else rounds


def is_trivial_regime(params: PMWParams, eps: float, n: int, query_range: float,
                      selections: int) -> bool:
    """eta <= eps n / (4 J' r): the envelope equals the PMW law (Z = 1)."""
    if selections == 0 or query_range == 0:
        return True
    return params.eta * 4.0 * selections * query_range <= eps * n


def center_only_groups(cw: CollapsedWorkload, data: Dataset) -> Groups:
    """The single group {x}: enumerating it gives the plain PMW law p_x."""
    F = (cw.columns @ cw.counts(data).astype(np.float64) / data.n)[None, :]
    return Groups(F, cw.targets_from_answers(F), np.zeros(1, dtype=np.int64), 0)


def envelope_release(workload: Workload, data: Dataset, eps: float,
                     params: PMWParams | None = None, *, rounds: int | None = None,
                     variant: Variant = "drop-last", method: Method = "exact",
                     rejection_delta: float = 1e-9,
                     rng: np.random.Generator | None = None,
                     prune: bool = False, compute_error: bool = False,
                     max_cost: float = DEFAULT_MAX_COST,
                     progress: Progress | None = None) -> Release:
    """Release ``workload`` on ``data`` with the envelope mechanism, pure ``eps``-DP
    (replace-one). ``params`` default to :func:`practical_parameters` with ``rounds``; if
    ``rounds`` is None too, J is the largest whose exact enumeration costs at most
    ``AUTO_ROUNDS_COST`` units (about a second; :func:`auto_rounds`, public inputs only),
    or 20 for the rejection sampler.

    Sampling is exact (one Gumbel-max pass over all transcripts) and refuses with
    :class:`~dpsieve.release.errors.InstanceTooLargeError` (carrying the estimated cost)
    when the enumeration is too large. ``prune=True`` is faster but makes the running time
    depend on the data; keep it off when time is observable. ``compute_error`` adds the
    exact expected error at x (a non-private diagnostic).

    ``method="rejection"`` samples with :func:`~dpsieve.release.rejection.
    sample_envelope_rejection` using the data-independent budget that makes its refusal
    probability at most ``rejection_delta``; the returned privacy is then
    ApproxDP(eps, (1 + e^eps) * that bound) because a refusal is observable.
    """
    if method not in ("exact", "rejection"):
        raise fail("method", "envelope_release", "'exact' or 'rejection'", method)
    e = check_positive("eps", eps, "envelope_release")
    n = data.n
    cw = collapse(workload)
    if params is not None:
        p = params
    else:
        if rounds is None:
            rounds = 20 if method == "rejection" else auto_rounds(
                cw.signed_classes, group_histograms(cw, cw.counts(data)).size,
                AUTO_ROUNDS_COST)
        p = practical_parameters(workload.universe_size, n, e, rounds)
    Jp = selection_count(p.rounds, variant)
    f_x = workload.answers(data)
    r = workload.query_range
    trivial = is_trivial_regime(p, e, n, r, Jp)
    details: dict[str, Any] = {"rounds": p.rounds, "eta": p.eta, "gamma": p.gamma,
                               "variant": variant, "selections": Jp, "trivial_regime": trivial,
                               "distinct_columns": cw.size,
                               "signed_query_classes": cw.signed_classes}
    err: float | None = None
    if trivial:
        x_counts = cw.counts(data)
        sel = sample_transcript(cw, cw.target(x_counts, n), Jp, p.eta, p.gamma, rng)
        if compute_error:
            res = enumerate_envelope(cw, center_only_groups(cw, data), p, e, selections=Jp,
                                     f_x=f_x, sample=False, max_cost=max_cost,
                                     progress=progress)
            err = res.expected_error
        details["log_z"] = 0.0
    elif method == "rejection":
        groups = group_histograms(cw, cw.counts(data))
        w_max = weight_bound(n, cw.size, groups.size, e)
        budget = budget_for(check_positive("rejection_delta", rejection_delta,
                                           "envelope_release"), w_max)
        rs = sample_envelope_rejection(cw, groups, p, e, n=n, selections=Jp, budget=budget,
                                       rng=rng)
        sel = rs.selections
        delta = refusal_delta(e, budget, w_max)
        details.update(groups=groups.size, budget=budget, weight_bound=w_max,
                       failure_bound=rs.failure_bound, refusal_delta=delta)
        answers = decode(cw, sel, p.rounds, p.gamma)
        details["transcript"] = [int(cw.signed_index[s]) for s in sel]
        return Release("envelope", answers,
                       ApproxDP(e, min(1.0, delta), Neighbouring.REPLACE_ONE), err, details)
    else:
        groups = group_histograms(cw, cw.counts(data))
        res = enumerate_envelope(cw, groups, p, e, selections=Jp,
                                 f_x=f_x if compute_error else None, sample=True, rng=rng,
                                 prune=prune, max_cost=max_cost, progress=progress)
        assert res.selections is not None  # sample=True always returns a transcript
        sel = res.selections
        err = res.expected_error
        details.update(groups=groups.size, transcripts=res.leaves,
                       log_z_not_private=res.log_z)
    answers = decode(cw, sel, p.rounds, p.gamma)
    details["transcript"] = [int(cw.signed_index[s]) for s in sel]
    return Release("envelope", answers, PureDP(e, Neighbouring.REPLACE_ONE), err, details)


def worst_case_expected_error(workload: Workload, n: int, eps: float, params: PMWParams, *,
                              variant: Variant = "drop-last",
                              max_cost: float = DEFAULT_MAX_COST) -> float:
    """max over ALL databases of n rows of the exact expected error of the envelope.

    Data-independent, so it may be published and used to tune (J, eta, gamma) without
    touching the private data. The error depends on x only through its class histogram,
    so all C(n + T' - 1, T' - 1) class histograms are enumerated (refused past
    ``max_cost`` units in total)."""
    e = check_positive("eps", eps, "worst_case_expected_error")
    cw = collapse(workload)
    Jp = selection_count(params.rounds, variant)
    hists = histogram_count(n, cw.size)
    one = enumeration_cost(cw.signed_classes, Jp, hists)
    if hists * one > max_cost:
        raise InstanceTooLargeError(
            f"worst case over {hists} class histograms needs about {hists * one:.3g} units, "
            f"over max_cost={max_cost:.3g}", estimated_cost=hists * one, limit=max_cost)
    worst = 0.0
    for h in enumerate_histograms(n, cw.size):
        groups = group_histograms(cw, h)
        f_x = groups.answers[groups.center]
        res = enumerate_envelope(cw, groups, params, e, selections=Jp, f_x=f_x,
                                 sample=False, prune=True, max_cost=max_cost)
        if res.expected_error is not None:
            worst = max(worst, res.expected_error)
    return worst
