"""Baseline pure-DP query-release mechanisms (all eps-DP under replace-one neighbours).

* :func:`laplace_release` - Laplace on all k answers, L1 sensitivity of the workload
  (:class:`dpsieve.mechanisms.LaplaceMechanism`: exact lattice noise, its reported eps is
  at most the requested one), clipped to each query's range by default (post-processing),
  optionally made consistent by least squares over the simplex.
* :func:`dpsieve.release.identity_release` (module ``identity``) - Laplace on the histogram.

Every other mechanism here outputs the answers of a distribution over the universe (PMW,
MWEM: the average synthetic distribution; BLR: a synthetic histogram), so its answers are
already in range and consistent.
* :func:`pmw_release` - "pure PMW": the selection-only PMW transcript (Fitzsimons 2026,
  section 3) released directly with eta = eps n / (2 J' r), so each of the J' selections
  is (eps / J')-DP by the bounded log-ratio 2 eta r / n (proof of Prop. 3.1) and basic
  composition gives eps. Cube-root rate.
* :func:`mwem_release` - MWEM (Hardt, Ligett, McSherry 2012): R rounds, each an
  exponential-mechanism selection (eps / 2R) and a Laplace measurement (eps / 2R).
* :func:`blr_release` - the small-database mechanism (Blum, Ligett, Roth 2013): the
  exponential mechanism over all synthetic (class) histograms of m rows, score minus the
  max error, sensitivity r / n. Exact expected error for tiny instances.

Noise and selection come from :mod:`dpsieve.mechanisms` (secure by default).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.special import logsumexp

from dpsieve._validation import check_int, check_positive
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.mechanisms import LaplaceMechanism, exponential_mechanism
from dpsieve.release.data import Dataset, Workload
from dpsieve.release.envelope import DEFAULT_MAX_COST, enumerate_envelope
from dpsieve.release.groups import enumerate_histograms, histogram_count
from dpsieve.release.mechanism import center_only_groups
from dpsieve.release.project import answer_range, clip_to_range, least_squares_simplex
from dpsieve.release.result import Release
from dpsieve.release.transcript import PMWParams, collapse, decode, sample_transcript

__all__ = [
    "blr_release",
    "blr_rows",
    "clipped_laplace_expected_max_error",
    "laplace_expected_max_error",
    "laplace_mechanism",
    "laplace_release",
    "mwem_release",
    "pmw_parameters",
    "pmw_release",
]

FloatArray = npt.NDArray[np.float64]


def _pure(eps: float) -> PureDP:
    return PureDP(eps, Neighbouring.REPLACE_ONE)


def _laplace(sensitivity: float, eps: float, dimension: int) -> LaplaceMechanism:
    """:class:`dpsieve.mechanisms.LaplaceMechanism` with exact lattice eps <= ``eps`` for
    L1 ``sensitivity`` under replace-one (exact integer noise on g Z; see there)."""
    return LaplaceMechanism.for_epsilon(eps, sensitivity, neighbouring=Neighbouring.REPLACE_ONE,
                                        dimension=dimension)


def laplace_mechanism(workload: Workload, n: int, eps: float) -> LaplaceMechanism:
    """The mechanism :func:`laplace_release` adds to a workload's answers at ``n`` rows
    (public under replace-one): its noise is known before the data are read."""
    return _laplace(workload.l1_sensitivity(n), check_positive("eps", eps, "laplace_release"),
                    workload.k)


def laplace_expected_max_error(scale: float, k: int) -> float:
    """E max_i |Lap_i(scale)| = scale * H_k (max of k iid Exp(scale)). The lattice release
    (step g, reported by :func:`laplace_release`) differs from this continuous value by at
    most about g."""
    return scale * sum(1.0 / i for i in range(1, k + 1))


def clipped_laplace_expected_max_error(scale: float, answers: npt.ArrayLike,
                                       lo: npt.ArrayLike, hi: npt.ArrayLike) -> float:
    """E max_i |clip(F_i + L_i, lo_i, hi_i) - F_i| for iid continuous Laplace(scale) L_i.

    With a_i = F_i - lo_i and b_i = hi_i - F_i the clipped error is clip(L_i, -a_i, b_i), so
    with x = e^{-t/s}, P(|err_i| <= t) is 1 - x (t below a_i and b_i), 1 - x/2 (below one of
    them) or 1. Between consecutive knots (the sorted a_i, b_i) the expectation
    int (1 - prod_i P(|err_i| <= t)) dt equals s int (1 - (1-x)^A (1-x/2)^B) / x dx, the
    integral of a polynomial of degree A + B - 1 in x, which Gauss-Legendre quadrature with
    ceil((A + B)/2) + 1 nodes computes exactly (up to float rounding). The lattice release
    differs from the continuous one by at most about its step g."""
    s = check_positive("scale", scale, "clipped_laplace_expected_max_error")
    f = np.asarray(answers, dtype=np.float64)
    a = f - np.asarray(lo, dtype=np.float64)
    b = np.asarray(hi, dtype=np.float64) - f
    knots = np.unique(np.concatenate([[0.0], a, b]))
    total = 0.0
    for t0, t1 in itertools.pairwise(knots):
        both = int(np.sum((a > t0) & (b > t0)))
        one = int(np.sum((a > t0) != (b > t0)))
        if both + one == 0 or t1 <= t0:
            continue
        x_hi, x_lo = math.exp(-t0 / s), math.exp(-t1 / s)
        if not x_hi > x_lo:  # e^{-t/s} underflows: the piece contributes < 1e-300
            continue
        nodes, weights = np.polynomial.legendre.leggauss((both + one + 1) // 2 + 1)
        x = x_lo + (nodes + 1.0) * (x_hi - x_lo) / 2.0
        g = (1.0 - np.power(1.0 - x, both) * np.power(1.0 - x / 2.0, one)) / x
        total += s * float(weights @ g) * (x_hi - x_lo) / 2.0
    return total


def laplace_release(workload: Workload, data: Dataset, eps: float,
                    rng: np.random.Generator | None = None, *, clip: bool = True,
                    consistent: bool = False) -> Release:
    """F(x) + Laplace(Delta_1 / eps)^k with the exact replace-one L1 sensitivity of the
    workload (:meth:`Workload.l1_sensitivity`); pure eps-DP (Dwork et al. 2006).

    Post-processing (free): ``clip`` (default) clips each answer to its query's range
    (:func:`dpsieve.release.project.clip_to_range`); ``consistent`` replaces the noisy
    answers by the closest answer vector of a distribution (least squares over the simplex,
    :func:`dpsieve.release.project.least_squares_simplex`), which also lies in range.
    ``expected_error`` (at the true data, not private): ``scale * H_k`` unclipped, the
    clipped-Laplace integral when clipped, None when made consistent."""
    mech = laplace_mechanism(workload, data.n, eps)
    sens = mech.sensitivity
    f = workload.answers(data)
    noisy = np.asarray(mech.release(f, rng), dtype=np.float64)
    err: float | None
    if consistent:
        cw = collapse(workload)
        p = least_squares_simplex(cw.columns, noisy)
        noisy = cw.columns @ p
        err = None
    elif clip:
        lo, hi = answer_range(workload.matrix)
        noisy = clip_to_range(noisy, workload.matrix)
        err = clipped_laplace_expected_max_error(mech.scale, f, lo, hi)
    else:
        err = laplace_expected_max_error(mech.scale, workload.k)
    name = "laplace_consistent" if consistent else "laplace" if clip else "laplace_unclipped"
    return Release(name, noisy, mech.privacy(), err,
                   {"l1_sensitivity": sens, "scale": mech.scale, "lattice_step": mech.step,
                    "clip": bool(clip or consistent), "consistent": bool(consistent)})


def pmw_parameters(universe_size: int, n: int, eps: float, query_range: float,
                   rounds: int) -> PMWParams:
    """Pure-PMW parameters: eta = eps n / (2 (J - 1) r), gamma = min(1, sqrt(2 log T / J))."""
    J = check_int("rounds", rounds, "pmw_parameters", minimum=2)
    gamma = min(1.0, math.sqrt(2.0 * math.log(universe_size) / J)) if universe_size > 1 \
        else 1.0
    return PMWParams(J, eps * n / (2.0 * (J - 1) * max(query_range, 1e-300)), gamma)


def pmw_release(workload: Workload, data: Dataset, eps: float, *, rounds: int = 4,
                rng: np.random.Generator | None = None, compute_error: bool = False,
                max_cost: float = DEFAULT_MAX_COST) -> Release:
    """Selection-only PMW with J - 1 selections released directly; pure eps-DP."""
    e = check_positive("eps", eps, "pmw_release")
    p = pmw_parameters(workload.universe_size, data.n, e, workload.query_range, rounds)
    cw = collapse(workload)
    sel = sample_transcript(cw, cw.target(cw.counts(data), data.n), p.rounds - 1, p.eta,
                            p.gamma, rng)
    err = None
    if compute_error:
        err = enumerate_envelope(cw, center_only_groups(cw, data), p, e,
                                 selections=p.rounds - 1, f_x=workload.answers(data),
                                 sample=False, max_cost=max_cost).expected_error
    return Release("pmw", decode(cw, sel, p.rounds, p.gamma), _pure(e), err,
                   {"rounds": p.rounds, "eta": p.eta, "gamma": p.gamma})


def mwem_release(workload: Workload, data: Dataset, eps: float, *, rounds: int = 4,
                 rng: np.random.Generator | None = None) -> Release:
    """MWEM: R rounds of (EM select with eps/2R, Laplace measure with eps/2R, MW update
    A <- A exp(q (m - q(A)) / 2)); output the answers at the average of A_1..A_R.

    Score |F_q(x) - q(A)| has sensitivity r / n (r the query range), and so does a single
    measurement; basic composition of 2R pieces gives pure eps-DP. Every past measurement
    is re-applied once per round (the paper's practical variant, post-processing)."""
    e = check_positive("eps", eps, "mwem_release")
    R = check_int("rounds", rounds, "mwem_release", minimum=1)
    W = workload.matrix
    f = workload.answers(data)
    r = max(workload.query_range, 1e-300)
    sens = r / data.n
    logA = np.full(workload.universe_size, -math.log(workload.universe_size))
    A = np.exp(logA)
    meas: list[tuple[int, float]] = []
    total = np.zeros_like(A)
    for _ in range(R):
        scores = np.abs(f - W @ A)
        i = exponential_mechanism(scores, e / (2 * R), sens, rng)
        noisy = float(_laplace(sens, e / (2 * R), 1).release(float(f[i]), rng))
        meas.append((i, noisy))
        for j, m in meas:
            # in log space throughout: a huge noisy measurement (tiny eps) may drive weights
            # to 0, which is a valid distribution (post-processing), never log(0)
            logA = logA + W[j] * (m - W[j] @ A) / 2.0
            logA = logA - logsumexp(logA)
            A = np.exp(logA)
        total += A
    return Release("mwem", W @ (total / R), _pure(e), None,
                   {"rounds": R, "measured": [int(j) for j, _ in meas]})


def blr_rows(universe_classes: int, n: int, k: int, eps: float, query_range: float, *,
             limit: int = 2_000_000) -> int:
    """Public choice of the synthetic size m: minimise the BLR bound
    r sqrt(log(2k) / (2m)) + 2 (r / n) log(#candidates(m)) / eps over m = 1..n."""
    best_m, best = 1, math.inf
    for m in range(1, n + 1):
        count = histogram_count(m, universe_classes)
        if count > limit:
            break
        b = query_range * math.sqrt(math.log(2 * k) / (2 * m)) \
            + 2.0 * query_range / n * math.log(count) / eps
        if b < best:
            best_m, best = m, b
    return best_m


def blr_release(workload: Workload, data: Dataset, eps: float, *, rows: int | None = None,
                rng: np.random.Generator | None = None) -> Release:
    """Exponential mechanism over all class histograms of m rows (uniform base measure),
    utility -||F(y) - F(x)||_inf with sensitivity r / n: pure eps-DP (McSherry-Talwar 2007;
    the candidate set is public). Returns the exact expected error (non-private)."""
    e = check_positive("eps", eps, "blr_release")
    cw = collapse(workload)
    r = max(workload.query_range, 1e-300)
    m = rows if rows is not None else blr_rows(cw.size, data.n, workload.k, e, r)
    check_int("rows", m, "blr_release", minimum=1)
    H = enumerate_histograms(m, cw.size, limit=2_000_000)
    cand = (H @ cw.columns.T) / m
    f = workload.answers(data)
    loss = np.abs(cand - f[None, :]).max(axis=1)
    i = exponential_mechanism(-loss, e, r / data.n, rng)
    logits = -e * loss * data.n / (2.0 * r)
    err = float(np.exp(logits - logsumexp(logits)) @ loss)
    details: dict[str, Any] = {"rows": m, "candidates": int(H.shape[0])}
    return Release("blr", cand[i].copy(), _pure(e), err, details)
