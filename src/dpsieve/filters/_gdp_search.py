"""The GDP residue update: the largest certified m with G_m (+) L <= G_mu (paper, Def. 7).

:func:`residue_mu` locates the largest m approximately (safeguarded Newton in m on a
coarse grid, not certified), then certifies m (1 - eta) for growing eta with
:func:`dpsieve.filters._gdp_core.gdp_leq_mixture`, so the returned value is at or below the
true largest m. :func:`smallest_gdp_mu_atoms` bisects on the certified m = 0 check for the
naive GDP cost (rounded up). Proofs: docs/proofs/filters.md, Sec. 1.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special

from dpsieve.filters._gdp_core import (
    Atoms,
    FloatArray,
    _grid,
    _logsumexp_rows,
    _quiet,
    _tail_start,
    gdp_leq_mixture,
    log_h,
)

__all__ = [
    "residue_mu",
    "smallest_gdp_mu_atoms",
]

#: Coarse grid and bisection steps of the (uncertified) search.
DT_MIN_SEARCH = 0.05
DT_REL_SEARCH = 0.08
SEARCH_STEPS = 40
SEARCH_TOL = 1e-10


@_quiet
def _global_search(
    atoms: Atoms, mu: float, t: FloatArray, lo: float, hi: float, *, from_hi: bool = False
) -> tuple[float, int]:
    """Approximately the largest m in [lo, hi] with f_m(t_i) <= g(t_i) at every node.

    Safeguarded Newton on G(m) = max_i [log f_m(t_i) - log g(t_i)] (increasing in m), with
    the derivative of the maximising node: d/dm log f = sum_j p_j phi(a_j) / f_m
    (d h_{G_m}(x)/dm = phi(-log x/m + m/2)). It stops once a feasible m is within
    SEARCH_TOL (relative) of Newton's next step or of an infeasible one. Returns (m, index
    of the binding node). Uncertified: it only chooses the value that is then certified.
    """
    lg, _ = log_h(mu, t)
    logp = np.log(atoms.p)[None, :]
    s = t[:, None] - atoms.z[None, :]
    half_log_2pi = 0.5 * math.log(2.0 * math.pi)
    # start from the known feasible value when there is one: from the cap, the far-tail
    # constraints (steep in m) bind first and Newton walks down them one by one
    m = hi if from_hi or lo <= 0.0 else lo
    best_i = 0
    tol = SEARCH_TOL * hi
    for _ in range(SEARCH_STEPS):
        a = -s / m + m / 2.0
        la = special.log_ndtr(a)
        lh = la + np.log(-np.expm1(np.minimum(s + special.log_ndtr(a - m) - la, -1e-300)))
        lf = _logsumexp_rows(logp + lh)
        gap = lf - lg
        i = int(np.argmax(gap))
        feasible = bool(gap[i] <= 0.0)
        if feasible:
            lo, best_i = m, i
            if m >= hi * (1.0 - 1e-15):
                return m, i
        else:
            hi, best_i = m, i
        if hi - lo <= tol:
            break
        dlf = math.exp(float(np.logaddexp.reduce(logp[0] - 0.5 * a[i] ** 2 - half_log_2pi)) - lf[i])
        step = m - float(gap[i]) / dlf if dlf > 0 else math.nan
        if feasible and step - m <= tol:
            return m, i  # feasible, and Newton asks for (almost) no increase
        m = step if lo < step < hi else 0.5 * (lo + hi)
    return lo, best_i


def _search(atoms: Atoms, mu: float, lo: float) -> float:
    """Approximate largest m (uncertified): coarse global search, then a fine one around
    the binding node. Constraints beyond T*(cap) hold for every m <= cap, so the grid stops
    there; the cap is raised towards mu only if the answer reaches it.
    """
    best = lo
    for k in (4, 8, 12):
        cap = mu * (1.0 - 10.0**-k)
        if cap <= lo:
            continue  # the certified lower value already exceeds this cap
        t = _grid(_tail_start(atoms, cap, mu), DT_MIN_SEARCH, DT_REL_SEARCH)
        best, i = _global_search(atoms, mu, t, lo, cap)
        fine = np.linspace(t[max(i - 2, 0)], t[min(i + 2, t.size - 1)], 33)
        best = min(best, _global_search(atoms, mu, fine, lo, best, from_hi=True)[0])
        if best < cap * (1.0 - 1e-12):
            return best
    return best


@_quiet
def _clearly_not_leq(atoms: Atoms, mu: float) -> bool:
    """True if h_L(e^t) > h_mu(e^t) at some node by more than the float error (so not L <= G_mu)."""
    t = _grid(max(float(atoms.z.max()), 0.0), DT_MIN_SEARCH, DT_REL_SEARCH)
    lf, _ = log_h(0.0, t[:, None] - atoms.z[None, :])
    lhs = _logsumexp_rows(np.log(atoms.p)[None, :] + lf)
    lg, _ = log_h(mu, t)
    return bool(np.any(lhs > lg + 1e-6))


@_quiet
def residue_mu(atoms: Atoms, mu: float, *, lower: float = 0.0) -> float:
    """Largest certified m in [0, mu] with G_m (+) L <= G_mu; -1.0 if even m = 0 fails.

    ``lower`` is a value already known to be certified; the search never returns less.
    The result is at or below the true largest m. The estimate is lowered by the smaller of
    a relative step in m (1e-5, 1e-4, ...) and one in the charge mu^2 - m^2 (0.6%, 2%, ...)
    until the check certifies it.
    """
    if atoms.is_identity:
        return mu
    if atoms.p_inf > 0.0 or mu == 0.0:
        return -1.0
    if lower <= 0.0 and _clearly_not_leq(atoms, mu):
        return -1.0  # refusing needs no certificate
    m_hat = _search(atoms, mu, max(lower, 0.0))
    c_hat = max(mu * mu - m_hat * m_hat, 0.0)  # the charge mu^2 - mu'^2
    for eta_m, eta_c in ((1e-5, 6e-3), (1e-4, 2e-2), (1e-3, 6e-2), (1e-2, 0.2), (0.1, 1.0)):
        # back off by the smaller of a relative step in m and one in the charge
        cand = max(m_hat * (1.0 - eta_m), math.sqrt(max(mu * mu - c_hat * (1.0 + eta_c), 0.0)))
        if cand <= lower:
            break
        if gdp_leq_mixture(atoms, cand, mu):
            return cand
    if lower > 0.0:
        return lower
    return 0.0 if gdp_leq_mixture(atoms, 0.0, mu) else -1.0


def smallest_gdp_mu_atoms(atoms: Atoms, *, mu_max: float = 1e3) -> float:
    """A certified upper bound on the smallest nu with L <= G_nu (``inf`` if none found)."""
    if atoms.is_identity:
        return 0.0
    if atoms.p_inf > 0.0:
        return math.inf
    hi = 1.0
    while not gdp_leq_mixture(atoms, 0.0, hi):
        hi *= 2.0
        if hi > mu_max:
            return math.inf
    lo = 0.0
    for _ in range(60):
        if hi - lo <= 1e-10 * hi:
            break
        mid = 0.5 * (lo + hi)
        if gdp_leq_mixture(atoms, 0.0, mid):
            hi = mid
        else:
            lo = mid
    return hi
