"""The approximate-DP family R_{eps,delta} and randomized response, in closed form.

R_{eps,delta} is the PLD with atoms +inf w.p. delta, +eps w.p. (1 - delta)/(1 + e^-eps)
and -eps w.p. (1 - delta)/(1 + e^eps) (Regehr et al. 2026, section 2). R_eps = R_{eps,0}
is the pure-DP family and R_{0,delta} the (0, delta) family. With E = e^eps:

* hockey-stick  h(x) = max{delta, delta + (1-delta)(E - x)/(1 + E), 1 - (1-delta) x}
* tradeoff      f(alpha) = max{0, 1 - delta - E alpha, (1 - delta - alpha)/E}
* RDP           infinite if delta > 0; else log(p e^{t eps} + q e^{-t eps}) / t, t = order - 1
* k-fold        R_{eps,delta}^k: +inf w.p. 1 - (1-delta)^k, else (2j - k) eps with
                probability (1-delta)^k C(k,j) p^j q^(k-j), p = E/(1+E), q = 1/(1+E)

Exact algebra (proofs in docs/proofs/families.md): R_{0,d1} (+) L = d1 inf + (1-d1) L,
hence R_{eps,d1} (+) R_{0,d2} = R_{eps, 1-(1-d1)(1-d2)}; R_{e1,d1} <= R_{e2,d2} iff
1 - d2 <= (1 - d1) min{1, (1 + e^e2)/(1 + e^e1)}; a symmetric PLD L satisfies
L <= R_{eps,delta} iff h_L(e^eps) <= delta; R_eps <= G_mu iff mu >= 2 Phi^-1(E/(1+E)).

Floating point: every numeric function takes ``upper``. ``upper=True`` returns a value
at or above the exact one, ``upper=False`` at or below (a margin proportional to a bound
on the rounding error is added or subtracted, see each docstring); the default is the
pessimistic side (larger delta/h/RDP/mu, smaller tradeoff value). Order checks return
``True`` only when the exact relation holds. ``math.exp``/``math.log`` are assumed
accurate to < 1 ulp (glibc); brackets of e^eps use two ulps.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpsieve import _rounding
from dpsieve._rounding import next_down_array, next_up_array
from dpsieve._validation import check_in_closed, check_int, check_nonnegative, fail
from dpsieve.accounting._bisect import bracket
from dpsieve.accounting.gdp import H_ABS_ERR, gdp_delta, gdp_hockey_stick
from dpsieve.errors import UnsupportedError

__all__ = [
    "MAX_ENUMERATED_ATOMS",
    "approx_dp_compose_delta",
    "approx_dp_compose_epsilon",
    "approx_dp_compose_heterogeneous_delta",
    "approx_dp_delta",
    "approx_dp_gdp_mu",
    "approx_dp_hockey_stick",
    "approx_dp_rdp",
    "approx_dp_tradeoff",
    "approx_leq",
    "approx_leq_gdp",
    "exp_bracket",
    "exp_bracket_fraction",
    "gdp_approx_dp_compose_hockey_stick",
    "gdp_leq_approx",
    "gdp_pure_eps",
    "pure_dp_compose_delta",
    "randomized_response_epsilon",
    "randomized_response_hockey_stick",
    "randomized_response_pld",
    "round_fraction",
    "zero_delta_compose",
]

#: Heterogeneous exact enumeration refuses to hold more distinct loss values than this.
MAX_ENUMERATED_ATOMS = 2**20

FloatArray = npt.NDArray[np.float64]
_U = 2.0**-53  # unit roundoff of float64
_REL = 2.0**-44  # relative margin for closed forms with a handful of roundings (~5.7e-14)
_ABS = 2.0**-50  # absolute margin where a formula may cancel (~8.9e-16)


def _eps(eps: Any, owner: str, name: str = "eps") -> float:
    return check_nonnegative(name, eps, owner, allow_inf=True)


def _delta(delta: Any, owner: str, name: str = "delta") -> float:
    return check_in_closed(name, delta, 0.0, 1.0, owner)


def _array(name: str, value: Any, owner: str, lo: float, hi: float, what: str) -> FloatArray:
    try:
        arr = np.array(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise fail(name, owner, what, value) from None
    if np.any(np.isnan(arr)) or np.any(arr < lo) or np.any(arr > hi):
        raise fail(name, owner, what, value)
    return arr


def _nudge(v: FloatArray, upper: bool, rel: Any, abs_: Any = 0.0) -> FloatArray:
    """Move ``v`` by ``rel |v| + abs_`` and one more ulp (so that subnormal results move
    too) up (``upper``) or down, clipped to [0, 1]."""
    with np.errstate(invalid="ignore"):
        m = rel * np.abs(v) + abs_
        out = next_up_array(v + m) if upper else next_down_array(v - m)
    res: FloatArray = np.clip(np.where(np.isfinite(v), out, v), 0.0, 1.0)
    return res


def _max_finite_abs(terms: FloatArray) -> FloatArray:
    """Row-wise max of |terms| over finite entries (0 for a row with none)."""
    out: FloatArray = np.max(np.where(np.isfinite(terms), np.abs(terms), 0.0), axis=1)
    return out


def exp_bracket(eps: float) -> tuple[float, float]:
    """(lo, hi) floats with lo <= e^eps <= hi (:func:`dpsieve._rounding.exp_bracket`)."""
    return _rounding.exp_bracket(eps)


def exp_bracket_fraction(eps: float) -> tuple[Fraction, Fraction]:
    """Rationals (lo, hi) with lo <= e^eps <= hi
    (:func:`dpsieve._rounding.exp_bracket_fraction`)."""
    return _rounding.exp_bracket_fraction(eps)


def round_fraction(q: Fraction, upper: bool) -> float:
    """The float next to the exact rational ``q`` on the requested side (directed rounding,
    :func:`dpsieve._rounding.round_up` / :func:`~dpsieve._rounding.round_down`)."""
    return _rounding.round_up(q) if upper else _rounding.round_down(q)


# ----------------------------------------------------------------------------- one R_{eps,delta}
def approx_dp_hockey_stick(
    eps: float, delta: float, x: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """h(x) of R_{eps,delta} for x >= 0 (x = 0 gives 1, x = inf gives delta).

    h(x) = max{delta, delta + (1-delta)(1 - x e^-eps)/(1 + e^-eps), 1 - (1-delta)x}.
    Exactly ``delta`` where x >= e^eps certainly; elsewhere the float value is moved by
    2^-44 relative plus 2^-50 absolute (the winning line has terms <= 1, <= 8 roundings).
    """
    owner = "approx_dp_hockey_stick"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    xs = _array("x", x, owner, 0.0, math.inf, "an array of floats >= 0")
    if eps == math.inf or delta == 1.0:
        return np.ones_like(xs)
    em = math.exp(-eps)
    with np.errstate(invalid="ignore", over="ignore"):
        l2 = delta + (1.0 - delta) * (1.0 - xs * em) / (1.0 + em)
        l3 = 1.0 - (1.0 - delta) * xs
    h = np.maximum(delta, np.nan_to_num(np.maximum(l2, l3), nan=delta, neginf=delta))
    h = np.where(xs == 0.0, 1.0, _nudge(h, upper, _REL, _ABS))
    return np.where(xs >= exp_bracket(eps)[1], delta, h)


def approx_dp_delta(
    eps: float, delta: float, eps_prime: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """delta(eps') = h(e^eps') of R_{eps,delta}, for any real eps' (and +-inf).

    delta for eps' >= eps (returned exactly); delta + (1-delta)(-expm1(eps'-eps))/(1+e^-eps)
    for -eps <= eps' < eps; -expm1(eps' + log1p(-delta)) for eps' < -eps. All terms are
    positive, so the relative error is a few ulp; the margin is 2^-44 relative.
    """
    owner = "approx_dp_delta"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    ep = _array("eps_prime", eps_prime, owner, -math.inf, math.inf, "an array of floats (no NaN)")
    if eps == math.inf or delta == 1.0:
        return np.ones_like(ep)
    out = np.full_like(ep, delta)
    mid = (ep < eps) & (ep >= -eps)
    out[mid] = delta + (1.0 - delta) * (-np.expm1(ep[mid] - eps)) / (1.0 + math.exp(-eps))
    low = ep < -eps
    out[low] = -np.expm1(ep[low] + math.log1p(-delta))
    return np.where(ep >= eps, out, _nudge(out, upper, _REL))


def approx_dp_tradeoff(
    eps: float, delta: float, alpha: npt.ArrayLike, *, upper: bool = False
) -> FloatArray:
    """f(alpha) = max{0, 1 - delta - e^eps alpha, e^-eps (1 - delta - alpha)} on [0, 1].

    Default ``upper=False``: a value at or below the exact one (pessimistic for a query).
    Margin 2^-44 relative plus 2^-50 absolute (the winning line has terms <= 1).
    """
    owner = "approx_dp_tradeoff"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    a = _array("alpha", alpha, owner, 0.0, 1.0, "an array of floats in [0, 1]")
    if eps == math.inf or delta == 1.0:
        return np.zeros_like(a)
    with np.errstate(invalid="ignore", over="ignore"):
        big, em = np.exp(eps), math.exp(-eps)
        l1 = np.where(a == 0.0, 1.0 - delta, (1.0 - delta) - big * a)
    f = np.maximum(0.0, np.maximum(l1, em * ((1.0 - delta) - a)))
    return _nudge(f, upper, _REL, _ABS)


def approx_dp_rdp(
    eps: float, delta: float, order: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """Renyi divergence of R_{eps,delta} at each order > 1 (its RDP curve).

    Infinite when delta > 0 (the +inf atom). For R_eps, with t = order - 1, y = t eps:
    RDP = softplus(L)/t, L = y + log(-expm1(-y)) + log(-expm1(-y-eps)) - log1p(e^-eps),
    from p e^y + q e^-y - 1 = expm1(y)(e^eps - e^-y)/(1 + e^eps) (no cancellation). The
    absolute error of L is at most 2^-48 times the sum of the magnitudes of its terms;
    it enters relatively through softplus'(L)/softplus(L).
    """
    owner = "approx_dp_rdp"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    a = _array("order", order, owner, 1.0, math.inf, "an array of finite floats > 1")
    if np.any(a <= 1.0) or not np.all(np.isfinite(a)):
        raise fail("order", owner, "an array of finite floats > 1", order)
    if delta > 0.0 or eps == math.inf:
        return np.full_like(a, math.inf)
    if eps == 0.0:
        return np.zeros_like(a)
    t = a - 1.0
    y = t * eps
    t1, t2, t3 = np.log(-np.expm1(-y)), np.log(-np.expm1(-y - eps)), math.log1p(math.exp(-eps))
    big_l = y + t1 + t2 - t3
    val: FloatArray = np.logaddexp(0.0, big_l) / t
    # softplus'(L)/softplus(L) <= 1 turns the absolute error of L into a relative one.
    abs_l = 2.0**-48 * (4.0 + np.abs(y) + np.abs(t1) + np.abs(t2) + t3)
    m = abs_l * special.expit(big_l) / np.logaddexp(0.0, big_l) * val
    res: FloatArray = np.maximum(val + m if upper else val - m, 0.0)
    return res


# ----------------------------------------------------------------------------- compositions
def approx_dp_compose_delta(
    eps: float, delta: float, k: int, eps_prime: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """delta(eps') of R_{eps,delta}^{(+)k}, the exact binomial sum (Kairouz-Oh-Viswanath 2015).

    delta_k(eps') = 1 - (1-delta)^k + (1-delta)^k sum_{j: z_j > eps'} C(k,j) p^j q^(k-j)
    (1 - e^{eps' - z_j}), z_j = (2j - k) eps; summed in log space (logsumexp of positive
    terms). At eps' = (k - 2i) eps this is KOV's Theorem 3.3. Error bound: relative
    64u(1 + k(log(k+1) + eps + 1) + |eps'| + max|log term|) (gammaln, logs, and exp of
    the log-sum), plus absolute 4u k eps (rounding of z_j); applied toward ``upper``.
    """
    owner = "approx_dp_compose_delta"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    k = check_int("k", k, owner, minimum=0)
    ep = _array("eps_prime", eps_prime, owner, -math.inf, math.inf, "an array of floats (no NaN)")
    if k == 0:
        eps, delta = 0.0, 0.0  # the empty composition is Id whatever eps and delta are
    if eps == math.inf or delta == 1.0:
        return np.ones_like(ep)
    log_keep = k * math.log1p(-delta)
    a, b = -math.expm1(log_keep), math.exp(log_keep)
    j = np.arange(k + 1, dtype=np.float64)
    z = (2.0 * j - k) * eps
    logw = (
        special.gammaln(k + 1.0)
        - special.gammaln(j + 1.0)
        - special.gammaln(k - j + 1.0)
        - j * np.logaddexp(0.0, -eps)
        - (k - j) * np.logaddexp(0.0, eps)
    )
    flat = ep.reshape(-1)
    s = np.empty_like(flat)
    mag = np.zeros_like(flat)  # largest |log term|: exp turns its abs error into rel error
    step = max(1, 4_000_000 // (k + 1))
    for i in range(0, flat.size, step):
        d = flat[i : i + step, None] - z[None, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            terms = np.where(d < 0.0, logw[None, :] + np.log(-np.expm1(d)), -np.inf)
        s[i : i + step] = np.exp(special.logsumexp(terms, axis=1))
        mag[i : i + step] = _max_finite_abs(terms)
    total = (a + b * s).reshape(ep.shape)
    rel = (
        64.0
        * _U
        * (1.0 + k * (math.log(k + 1.0) + eps + 1.0) + np.nan_to_num(np.abs(ep)) + mag).reshape(
            ep.shape
        )
    )
    return _nudge(total, upper, rel, 4.0 * _U * k * eps * b)


def pure_dp_compose_delta(
    eps: float, k: int, eps_prime: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """delta(eps') of R_eps^{(+)k}: :func:`approx_dp_compose_delta` with delta = 0."""
    return approx_dp_compose_delta(eps, 0.0, k, eps_prime, upper=upper)


def approx_dp_compose_epsilon(
    eps: float, delta: float, k: int, target_delta: float, *, upper: bool = True
) -> float:
    """The smallest eps' >= 0 with delta_k(eps') <= target_delta for R_{eps,delta}^{(+)k}.

    Bisection (to relative width 1e-12) on the directed values of
    :func:`approx_dp_compose_delta`: ``upper=True`` (default, pessimistic) never returns
    less than the exact eps', ``upper=False`` never more. ``inf`` if no eps' suffices.
    """
    owner = "approx_dp_compose_epsilon"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    k = check_int("k", k, owner, minimum=0)
    target = _delta(target_delta, owner, "target_delta")

    def ok(e: float) -> bool:
        return float(approx_dp_compose_delta(eps, delta, k, e, upper=upper)) <= target

    if ok(0.0):
        return 0.0
    hi = k * eps
    if not math.isfinite(hi) or not ok(hi):
        return math.inf
    lo, hi = bracket(ok, 0.0, hi, 1e-12)
    return hi if upper else lo


def approx_dp_compose_heterogeneous_delta(
    eps: Sequence[float], delta: Sequence[float], eps_prime: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """delta(eps') of R_{eps_1,delta_1} (+) ... (+) R_{eps_n,delta_n} by exact enumeration.

    The finite part is the law of sum_i (+-eps_i) (equal sums merged); the +inf mass is
    1 - prod(1 - delta_i). Refuses (UnsupportedError) more than MAX_ENUMERATED_ATOMS
    distinct loss values. Margin: relative 64u(1 + n + sum eps_i + |eps'| + max|log term|),
    plus absolute 4u n sum eps_i (rounding of the summed losses, |dh/dz| <= 1).
    """
    owner = "approx_dp_compose_heterogeneous_delta"
    if len(eps) != len(delta):
        raise fail("delta", owner, f"a sequence as long as 'eps' ({len(eps)})", delta)
    es = [_eps(e, owner) for e in eps]
    ds = [_delta(d, owner) for d in delta]
    ep = _array("eps_prime", eps_prime, owner, -math.inf, math.inf, "an array of floats (no NaN)")
    if any(e == math.inf for e in es) or any(d == 1.0 for d in ds):
        return np.ones_like(ep)
    z, lw = np.zeros(1), np.zeros(1)
    for e in es:
        z = np.concatenate([z + e, z - e])
        lw = np.concatenate([lw - np.logaddexp(0.0, -e), lw - np.logaddexp(0.0, e)])
        order = np.argsort(z, kind="stable")
        z, lw = z[order], lw[order]
        starts = np.flatnonzero(np.concatenate([[True], z[1:] != z[:-1]]))
        z, lw = z[starts], np.logaddexp.reduceat(lw, starts)
        if z.size > MAX_ENUMERATED_ATOMS:
            raise UnsupportedError(
                f"approx_dp_compose_heterogeneous_delta(): more than {MAX_ENUMERATED_ATOMS} "
                "distinct privacy-loss values; use the discretized PLD type instead."
            )
    log_keep = math.fsum(math.log1p(-d) for d in ds)
    a, b = -math.expm1(log_keep), math.exp(log_keep)
    d = ep.reshape(-1)[:, None] - z[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(d < 0.0, lw[None, :] + np.log(-np.expm1(d)), -np.inf)
    s = np.exp(special.logsumexp(terms, axis=1)).reshape(ep.shape)
    mag = _max_finite_abs(terms).reshape(ep.shape)
    n, tot = len(es), math.fsum(es)
    rel = 64.0 * _U * (1.0 + n + tot + np.nan_to_num(np.abs(ep)) + mag)
    return _nudge(a + b * s, upper, rel, 4.0 * _U * n * tot * b)


def zero_delta_compose(*deltas: float, upper: bool = True) -> float:
    """R_{0,d_1} (+) ... (+) R_{0,d_n} = R_{0, 1 - prod(1 - d_i)}: exact in Fraction, then
    rounded to the float on the side of ``upper`` (default up, pessimistic). The same
    parameter composes R_{eps,d_1} with R_{0,d_2}, ...: R_{eps, 1 - prod(1 - d_i)}."""
    keep = Fraction(1)
    for d in deltas:
        keep *= 1 - Fraction(_delta(d, "zero_delta_compose", "deltas"))
    return round_fraction(1 - keep, upper)


# ----------------------------------------------------------------------------- order relations
def approx_leq(eps1: float, delta1: float, eps2: float, delta2: float) -> bool:
    """Sound test of R_{eps1,delta1} <= R_{eps2,delta2} (Blackwell order).

    Exact criterion (docs/proofs/families.md, Prop. F2):
    1 - delta2 <= (1 - delta1) * min{1, (1 + e^eps2)/(1 + e^eps1)}. Evaluated in Fraction
    with e^eps bracketed outward, so ``True`` only when the relation holds exactly; it may
    answer ``False`` within a few ulp of the boundary when eps1 > eps2.
    """
    owner = "approx_leq"
    e1, d1 = _eps(eps1, owner, "eps1"), _delta(delta1, owner, "delta1")
    e2, d2 = _eps(eps2, owner, "eps2"), _delta(delta2, owner, "delta2")
    if d2 == 1.0 or e2 == math.inf:
        return True
    if d1 == 1.0 or e1 == math.inf:
        return False
    if e1 <= e2:
        return d1 <= d2
    lo2, hi1 = exp_bracket_fraction(e2)[0], exp_bracket_fraction(e1)[1]
    rhs = (1 - Fraction(d1)) * (1 + lo2) / (1 + hi1)
    return 1 - Fraction(d2) <= rhs


def gdp_leq_approx(mu: float, eps: float, delta: float) -> bool:
    """Sound test of G_mu <= R_{eps,delta}: holds iff delta_mu(eps) <= delta (Prop. F3,
    G_mu is symmetric). ``True`` only if gdp_delta(mu, eps) + H_ABS_ERR <= delta."""
    owner = "gdp_leq_approx"
    mu = check_nonnegative("mu", mu, owner)
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    if mu == 0.0 or delta == 1.0 or eps == math.inf:
        return True
    return float(gdp_delta(mu, eps)) + H_ABS_ERR <= delta


def approx_dp_gdp_mu(eps: float, delta: float, *, upper: bool = True) -> float:
    """The smallest mu with R_{eps,delta} <= G_mu: inf if delta > 0, else
    mu* = 2 Phi^-1(e^eps/(1+e^eps)) (Prop. F4) = 2 sqrt(2) erfinv(tanh(eps/2)) for
    eps <= 2, else -2 ndtri_exp(-log1p(e^eps)).
    Margin 2^-44 relative; ``upper=True`` (default) gives mu >= mu*."""
    owner = "approx_dp_gdp_mu"
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    if delta > 0.0 or eps == math.inf:
        return math.inf
    if eps == 0.0:
        return 0.0
    if eps <= 2.0:
        mu = 2.0 * math.sqrt(2.0) * float(special.erfinv(math.tanh(eps / 2.0)))
    else:  # Phi^-1(1/(1+E)) from its logarithm: no underflow for large eps
        mu = -2.0 * float(special.ndtri_exp(-np.logaddexp(0.0, eps)))
    return mu * (1.0 + _REL) if upper else mu * (1.0 - _REL)


def approx_leq_gdp(eps: float, delta: float, mu: float) -> bool:
    """Sound test of R_{eps,delta} <= G_mu: delta = 0 and mu >= mu*(eps) (Prop. F4)."""
    mu = check_nonnegative("mu", mu, "approx_leq_gdp")
    return mu >= approx_dp_gdp_mu(eps, delta, upper=True)


def gdp_pure_eps(mu: float) -> float:
    """The smallest eps with G_mu <= R_eps: 0 for mu = 0, inf for mu > 0 (Prop. F5)."""
    mu = check_nonnegative("mu", mu, "gdp_pure_eps")
    return 0.0 if mu == 0.0 else math.inf


def gdp_approx_dp_compose_hockey_stick(
    mu: float, eps: float, delta: float, x: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """h(x) of G_mu (+) R_{eps,delta}: delta + (1-delta)(p h_mu(x e^-eps) + q h_mu(x e^eps)),
    p = 1/(1+e^-eps), q = 1/(1+e^eps) (composition rule h_{L(+)S}(x) = E_L[h_S(x e^-Z)]).
    Margin 2 H_ABS_ERR absolute (y |h'(y)| <= 1 bounds the effect of rounding x e^+-eps)."""
    owner = "gdp_approx_dp_compose_hockey_stick"
    mu = check_nonnegative("mu", mu, owner)
    eps, delta = _eps(eps, owner), _delta(delta, owner)
    xs = _array("x", x, owner, 0.0, math.inf, "an array of floats >= 0")
    if eps == math.inf or delta == 1.0:
        return np.ones_like(xs)
    with np.errstate(invalid="ignore", over="ignore"):
        big = float(np.exp(eps))
        p, q = 1.0 / (1.0 + math.exp(-eps)), 1.0 / (1.0 + big)
        inner = p * gdp_hockey_stick(mu, xs * math.exp(-eps)) + q * gdp_hockey_stick(
            mu, np.where(xs == 0.0, 0.0, xs * big)
        )
    inner = np.where(xs == 0.0, 1.0, np.where(np.isposinf(xs), 0.0, inner))
    return _nudge(delta + (1.0 - delta) * inner, upper, _REL, 2.0 * H_ABS_ERR)


# ----------------------------------------------------------------------------- randomized response
def randomized_response_pld(eps: float, k: int = 2) -> tuple[FloatArray, FloatArray]:
    """Atoms (losses, probabilities) of k-ary randomized response with parameter eps.

    The mechanism reports the true value w.p. e^eps/(e^eps + k - 1), each other value
    w.p. 1/(e^eps + k - 1). For inputs x != y the PLD has atoms +eps, 0, -eps with
    probabilities e^eps, k - 2, 1 over e^eps + k - 1. So it is R_eps exactly only for
    k = 2; for k >= 3 it is the mixture (1 - lam) R_eps + lam Id, lam = (k-2)/(e^eps+k-1),
    which is dominated by R_eps (tight in pure-DP eps) but equals no R_{eps'}.
    Probabilities are rounded to nearest (a few ulp; they need not sum to exactly 1).
    """
    owner = "randomized_response_pld"
    eps = _eps(eps, owner)
    k = check_int("k", k, owner, minimum=2)
    if eps == math.inf:
        return np.array([math.inf]), np.array([1.0])
    if eps == 0.0:
        return np.array([0.0]), np.array([1.0])
    em = math.exp(-eps)
    norm = 1.0 + (k - 1) * em
    if k == 2:
        return np.array([-eps, eps]), np.array([em / norm, 1.0 / norm])
    return np.array([-eps, 0.0, eps]), np.array([em / norm, (k - 2) * em / norm, 1.0 / norm])


def randomized_response_hockey_stick(
    eps: float, k: int, x: npt.ArrayLike, *, upper: bool = True
) -> FloatArray:
    """h(x) of k-ary randomized response: (1 - lam) h_{R_eps}(x) + lam (1 - x)_+, lam as in
    :func:`randomized_response_pld`. Margin: that of h_{R_eps} plus 2^-44 relative."""
    owner = "randomized_response_hockey_stick"
    eps = _eps(eps, owner)
    k = check_int("k", k, owner, minimum=2)
    xs = _array("x", x, owner, 0.0, math.inf, "an array of floats >= 0")
    lam = 0.0 if eps == math.inf else (k - 2) * math.exp(-eps) / (1.0 + (k - 1) * math.exp(-eps))
    h = (1.0 - lam) * approx_dp_hockey_stick(eps, 0.0, xs, upper=upper)
    h = h + lam * np.clip(1.0 - xs, 0.0, None)
    return _nudge(h, upper, _REL) if lam > 0.0 else h


def randomized_response_epsilon(noise_parameter: float, k: int = 2, *, upper: bool = True) -> float:
    """eps of k-ary randomized response in dp_accounting's parametrisation (w.p.
    ``noise_parameter`` report a uniform value, else the truth): eps = log1p(k(1-p)/p).
    Margin 2^-44 relative (``upper=True`` default: at or above the exact eps)."""
    owner = "randomized_response_epsilon"
    p = check_in_closed("noise_parameter", noise_parameter, 0.0, 1.0, owner)
    if not (p > 0.0):
        raise fail("noise_parameter", owner, "a float in (0, 1]", noise_parameter)
    k = check_int("k", k, owner, minimum=2)
    e = math.log1p(k * (1.0 - p) / p)
    return e * (1.0 + _REL) if upper else e * (1.0 - _REL)
