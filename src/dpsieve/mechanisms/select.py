"""Private selection: exponential mechanism, permute-and-flip, report-noisy-max, AboveThreshold.

All of them are ``eps``-DP for scores of sensitivity ``sensitivity`` (each score moves by at
most that much between neighbours). With ``monotonic=True`` (all scores move in the same
direction between neighbours, e.g. counts) the factor 2 in the exponent is dropped.

Floating point and timing, per function:

* :func:`exponential_mechanism` (Gumbel-max, default): ``argmax(eps q / (2 Delta) + G)``
  with ``G = -log(-log U)`` computed in floating point from ``U`` on the ``2^-53`` lattice.
  Float caveat: the selection probabilities equal the ideal ones only up to rounding of
  the noise (relative error of order ``1e-15`` per score, plus the truncation of ``U`` to
  53 bits, which bounds the Gumbel noise to ``[-3.6, 36.8]``: a candidate more than about
  40 below the best in ``c q`` units is never chosen, where the ideal chooses it with
  probability below ``e^-40``); the output is an index, so there is no Mironov-style hole
  in a released real, but the eps guarantee holds for the ideal real-arithmetic algorithm.
  Scores are centred on their maximum before scaling (:func:`_centred`), so the noise is
  never rounded away at large magnitudes. Time is independent of the scores (one vectorized pass).
  With ``exact=True`` it is rejection sampling with exact CKS Bernoulli trials on the
  rational ``eps (max q - q_r) / (2 Delta)``: the distribution is exact, but the number of
  rounds (mean ``n / sum_r exp(-gamma_r)``) depends on the scores: a timing channel that
  the privacy analysis does not cover. Use it only where time is not observable.
* :func:`permute_and_flip` (McKenna & Sheldon 2020): exact CKS Bernoulli trials on rational
  exponents, so its distribution is exact; the number of flips depends on the scores
  (same timing caveat). :func:`report_noisy_max` with exponential noise has the same output
  distribution (Ding, Kifer et al. 2021) and constant-time vectorized code, with the float
  caveat of the exponential noise ``-log U``.
* :func:`above_threshold` runs entirely on a lattice with exact discrete Laplace noise and
  integer comparisons; all noise is drawn up front, so time does not depend on the data.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import round_down, round_up
from dpsieve._validation import check_finite, check_positive, fail, fail_private
from dpsieve.mechanisms import _scalar
from dpsieve.mechanisms._random import RNG, RandomSource, as_source
from dpsieve.mechanisms.noise import MAX_DISCRETE_SCALE, discrete_laplace, snap_exact

__all__ = [
    "above_threshold",
    "above_threshold_plan",
    "exponential_mechanism",
    "permute_and_flip",
    "report_noisy_max",
]

F64 = npt.NDArray[np.float64]


def _scores(scores: Sequence[float] | npt.ArrayLike, owner: str) -> F64:
    try:
        q = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        raise fail_private("scores", owner, "a non-empty 1-D array of finite floats",
                           scores) from None
    if q.ndim != 1 or q.size == 0 or not np.all(np.isfinite(q)):
        raise fail_private("scores", owner, "a non-empty 1-D array of finite floats", scores)
    return q


def _coef(eps: float, sensitivity: float, monotonic: bool, owner: str) -> Fraction:
    """eps / (2 Delta) (or eps / Delta if monotonic) as an exact rational."""
    e = check_positive("eps", eps, owner)
    d = check_positive("sensitivity", sensitivity, owner)
    return Fraction(e) / (Fraction(d) * (1 if monotonic else 2))


def _centred(q: F64, c: Fraction) -> F64:
    """``-c (max q - q_r)`` in floats: 0 for the maximisers, never NaN or +inf.

    Centring keeps the noise added next from being rounded away: ``c q`` itself at
    ``|c q| > 2^55`` has a spacing of 8 or more, which would swallow the Gumbel noise and
    break ties towards the first index (at ``q = 2^53``, ``Delta = 2``, ``eps = 10`` the
    second of two equal scores would win 11% of the time instead of 50%), and ``c q`` would
    overflow to ``inf`` for large scores. ``c`` is rounded down
    (:func:`dpsieve._rounding.round_down`):
    a smaller coefficient is the same mechanism at a smaller eps, so the guarantee holds;
    an ``eps / Delta`` above the largest float does not fail ``float(c)``."""
    cf = round_down(c)
    with np.errstate(over="ignore", invalid="ignore"):
        gap = np.max(q) - q  # >= 0; exact where q_r is within a factor 2 of the max
        out: F64 = np.where(gap > 0, -(cf * gap), 0.0)
    return out


def _bern_exp_frac(gamma: Fraction, src: RandomSource) -> bool:
    """Exact Bernoulli(exp(-gamma)) for a rational gamma >= 0 (CKS Algorithm 1)."""
    return _scalar.bern_exp(gamma.numerator, gamma.denominator, src)


def exponential_mechanism(
    scores: Sequence[float] | npt.ArrayLike,
    eps: float,
    sensitivity: float = 1.0,
    rng: RNG = None,
    *,
    monotonic: bool = False,
    exact: bool = False,
) -> int:
    """Index r with probability proportional to exp(eps q_r / (2 Delta)) (McSherry-Talwar 2007).

    eps-DP (and eps^2/8-zCDP, Cesar & Rogers 2021). See the module docstring for the float
    caveat of the default Gumbel-max path and the timing caveat of ``exact=True``.
    """
    owner = "exponential_mechanism"
    q = _scores(scores, owner)
    c = _coef(eps, sensitivity, monotonic, owner)
    src = as_source(rng, owner)
    if exact:
        qmax = Fraction(float(q.max()))
        gammas = [c * (qmax - Fraction(float(x))) for x in q.tolist()]
        while True:
            r = src.below_int(q.size)
            if _bern_exp_frac(gammas[r], src):
                return r
    g = -np.log(-np.log(src.uniform01(q.size)))
    return int(np.argmax(_centred(q, c) + g))


def permute_and_flip(
    scores: Sequence[float] | npt.ArrayLike,
    eps: float,
    sensitivity: float = 1.0,
    rng: RNG = None,
    *,
    monotonic: bool = False,
) -> int:
    """Permute-and-flip (McKenna & Sheldon 2020, Alg. 1), eps-DP, exact coin flips.

    Visit the candidates in a uniformly random order; return r with probability
    exp(eps (q_r - q*) / (2 Delta)), q* = max q. Never worse in expected score than the
    exponential mechanism (their Thm. 2). Timing depends on the scores (module docstring).
    """
    owner = "permute_and_flip"
    q = _scores(scores, owner)
    c = _coef(eps, sensitivity, monotonic, owner)
    src = as_source(rng, owner)
    qmax = Fraction(float(q.max()))
    while True:  # the maximiser accepts with probability 1, so each pass returns
        order = list(range(q.size))
        for i in range(q.size - 1, 0, -1):  # Fisher-Yates with exact uniform indices
            j = src.below_int(i + 1)
            order[i], order[j] = order[j], order[i]
        for r in order:
            if _bern_exp_frac(c * (qmax - Fraction(float(q[r]))), src):
                return r


def report_noisy_max(
    scores: Sequence[float] | npt.ArrayLike,
    eps: float,
    sensitivity: float = 1.0,
    rng: RNG = None,
    *,
    monotonic: bool = False,
    noise: str = "exponential",
) -> int:
    """argmax_r (eps q_r / (2 Delta) + N_r), eps-DP, in one vectorized pass.

    ``noise="exponential"``: N_r ~ Exp(1); identical in distribution to permute-and-flip
    (Ding, Kifer, Sheldon et al., "The permute-and-flip mechanism is identical to
    report-noisy-max with exponential noise", 2021). ``noise="gumbel"``: N_r ~ Gumbel(0, 1);
    identical to the exponential mechanism. Noise is computed in floating point (module
    docstring: float caveat); time does not depend on the scores.
    """
    owner = "report_noisy_max"
    q = _scores(scores, owner)
    c = _coef(eps, sensitivity, monotonic, owner)
    src = as_source(rng, owner)
    u = src.uniform01(q.size)
    if noise == "exponential":
        n = -np.log(u)
    elif noise == "gumbel":
        n = -np.log(-np.log(u))
    else:
        raise fail("noise", owner, "'exponential' or 'gumbel'", noise)
    return int(np.argmax(_centred(q, c) + n))


def above_threshold(
    queries: Sequence[float] | npt.ArrayLike,
    threshold: float,
    eps: float,
    sensitivity: float = 1.0,
    rng: RNG = None,
    *,
    monotonic: bool = False,
    granularity: float | None = None,
) -> int | None:
    """Index of the first query whose noisy value reaches the noisy threshold, else None.

    Lyu, Su, Li (VLDB 2017), Algorithm 1 with c = 1 and eps_1 = eps_2 = eps / 2:
    rho ~ Lap(Delta / eps_1), nu_i ~ Lap(2 Delta / eps_2) (Lap(Delta / eps_2) if
    ``monotonic``); output the first i with q_i + nu_i >= T + rho. eps-DP (their Thm. 2).

    Implementation on the lattice g Z (``g`` a power of two, default 2^-30 Delta rounded
    down to a power of two): queries and threshold are snapped exactly (:func:`snap_exact`),
    sensitivity becomes the integer k = ceil(Delta / g), and the noises are exact discrete
    Laplace with scales k/eps_1 and 2k/eps_2 (k/eps_2). The proof carries over verbatim with
    sums over Z in place of integrals (shifts by k and 2k are lattice shifts and the
    discrete Laplace has the same density ratio bound); see docs/proofs/mechanisms.md. All
    comparisons are integer comparisons; all noise is drawn before any comparison.
    """
    owner = "above_threshold"
    q = _scores(queries, owner)
    granularity, rho_scale, nu_scale = above_threshold_plan(
        threshold, eps, sensitivity, monotonic=monotonic, granularity=granularity)
    qi = snap_exact(q, granularity, owner)  # exact Python ints: no magnitude fails or wraps
    ti = int(snap_exact([threshold], granularity, owner)[0])
    rho = discrete_laplace(rho_scale, 1, rng)
    nu = discrete_laplace(nu_scale, q.size, rng)
    bar = ti + int(rho[0])
    for i, (a, b) in enumerate(zip(qi.tolist(), nu.tolist(), strict=True)):
        if a + int(b) >= bar:
            return i
    return None


def above_threshold_plan(threshold: float, eps: float, sensitivity: float = 1.0, *,
                         monotonic: bool = False, granularity: float | None = None
                         ) -> tuple[float, float, float]:
    """The public part of :func:`above_threshold`: ``(g, rho_scale, nu_scale)``, with
    every check on the parameters (a caller that charges first runs it before the
    charge). The noise scales k/eps_1 and 2k/eps_2 (rounded up) must lie within the exact
    sampler's range (at most ``MAX_DISCRETE_SCALE``): a tiny eps is refused here."""
    owner = "above_threshold"
    check_finite("threshold", threshold, owner)
    e = check_positive("eps", eps, owner)
    delta_q = check_positive("sensitivity", sensitivity, owner)
    if granularity is None:
        granularity = math.ldexp(1.0, math.frexp(delta_q)[1] - 1 - 30)
    g = check_positive("granularity", granularity, owner)
    if math.frexp(g)[0] != 0.5:
        raise fail("granularity", owner, "a power of two (e.g. 2.0**-30)", g)
    k = math.ceil(Fraction(delta_q) / Fraction(g))
    half = Fraction(e) / 2
    rho_scale = _ceil_float(Fraction(k) / half)
    nu_scale = _ceil_float(Fraction(k if monotonic else 2 * k) / half)
    if not nu_scale <= MAX_DISCRETE_SCALE:
        raise fail("eps", owner, f"large enough for noise scales <= {MAX_DISCRETE_SCALE} "
                   f"(the lattice sensitivity is {k} steps, the noise scale would be "
                   f"{nu_scale:.4g})", eps)
    return g, rho_scale, nu_scale


def _ceil_float(x: Fraction) -> float:
    """The smallest float >= x (noise scales are rounded up: more noise, never less);
    inf past the largest float (then refused by the range check)."""
    return round_up(x)
