"""zCDP budgets for an (eps, delta) target: the largest certified rho (private).

Re-exported by :mod:`dpsieve.filters.additive` (``zcdp_rho_for``, ``cks_rho_at``); proof in
docs/proofs/filters.md, section 11.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpsieve._rounding import log_down, next_up, toward_zero
from dpsieve._validation import check_in_open, check_nonnegative
from dpsieve.filters._common import float_down

__all__ = ["cks_rho_at", "zcdp_rho_for"]


def _bun_steinke_rho(eps: float, delta: float) -> float:
    """Largest float rho with rho + 2 sqrt(rho log(1/delta)) <= eps (Bun & Steinke 2016,
    Prop. 1.3), certified in ``Fraction`` with L = -log_down(delta) >= log(1/delta): rho + 2
    sqrt(rho L) <= eps iff rho <= eps and 4 rho L <= (eps - rho)^2. The closed form
    (eps / (sqrt(L + eps) + sqrt(L)))^2 is only the starting point."""
    ld = -math.log(delta)
    big_l = Fraction(-log_down(delta))  # >= log(1/delta)
    e = Fraction(eps)

    def ok(r: float) -> bool:
        if not math.isfinite(r):  # the ulp walk up from eps near the float range's top
            return False
        fr = Fraction(r)
        return fr <= e and 4 * fr * big_l <= (e - fr) ** 2

    s = math.sqrt(ld + eps) + math.sqrt(ld)
    # = (sqrt(L + eps) - sqrt(L))^2 = (eps / s)^2, as eps * ((eps / s) / s): no
    # intermediate past the float range at eps near its top ((eps / s)^2 overflowed)
    rho = eps * ((eps / s) / s)
    if ok(rho):
        for _ in range(64):  # the closed form may sit a few ulp below the largest
            nxt = next_up(rho)
            if not ok(nxt):
                break
            rho = nxt
        return rho
    while rho > 0.0 and not ok(rho):
        rho = toward_zero(rho)
    return rho


def cks_rho_at(eps: float, delta: float, alpha: float) -> float:
    """A float at or below rho_alpha = (eps + log(alpha / (alpha - 1)) + (log delta +
    log alpha) / (alpha - 1)) / alpha, the largest rho for which rho-zCDP gives
    (eps, delta)-DP through order ``alpha`` (Canonne, Kamath & Steinke 2020, Prop. 12 with
    tau = alpha rho; docs/proofs/filters.md, Z1). Each logarithm is bounded below
    (``log_down``: libm's log moved down two ulp; alpha / (alpha - 1) rounded down before it),
    the sum and quotients are exact (``Fraction``), the result rounded down: the budget never
    exceeds what the target allows (0.0 if rho_alpha <= 0)."""
    fa = Fraction(alpha)
    t1 = Fraction(log_down(float_down(fa / (fa - 1))))
    t2 = (Fraction(log_down(delta)) + Fraction(log_down(alpha))) / (fa - 1)
    r = (Fraction(eps) + t1 + t2) / fa
    return max(float_down(r), 0.0) if r > 0 else 0.0


def zcdp_rho_for(eps: float, delta: float) -> float:
    """The largest rho (a float, rounded down) that this library certifies rho-zCDP ->
    (eps, delta)-DP for: the better of Canonne, Kamath & Steinke's conversion (2020,
    Cor. 13: (eps, delta) with delta = inf_alpha e^{(alpha - 1)(alpha rho - eps)}
    (1 - 1/alpha)^{alpha - 1} / alpha) and Bun & Steinke's (2016, Prop. 1.3: rho + 2
    sqrt(rho log(1/delta)) <= eps). CKS gives 27 % more rho at (1, 1e-9): 0.0149731 against
    0.0117812.

    Direction: a budget is optimistic -- rho is never above what the target allows. The
    order alpha is found by a golden-section search on the float formula (a heuristic:
    any alpha > 1 gives a valid rho), then rho is certified at that alpha by
    :func:`cks_rho_at` (logs bounded below, exact arithmetic, rounded down; proof in
    docs/proofs/filters.md, Z1). The Bun-Steinke value is certified in ``Fraction``.
    """
    eps = check_nonnegative("eps", eps, "zcdp_rho_for")
    delta = check_in_open("delta", delta, 0.0, 1.0, "zcdp_rho_for")
    ld, le = math.log(delta), eps

    def f(u: float) -> float:  # rho_alpha at alpha = 1 + e^u, in floats (search only)
        a = 1.0 + math.exp(u)
        return (le - math.log1p(-1.0 / a) + (ld + math.log(a)) / (a - 1.0)) / a

    lo, hi = -30.0, 30.0
    g = (math.sqrt(5.0) - 1.0) / 2.0
    x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
    f1, f2 = f(x1), f(x2)
    for _ in range(120):
        if f1 >= f2:
            hi, x2, f2 = x2, x1, f1
            x1 = hi - g * (hi - lo)
            f1 = f(x1)
        else:
            lo, x1, f1 = x1, x2, f2
            x2 = lo + g * (hi - lo)
            f2 = f(x2)
    alpha = 1.0 + math.exp(0.5 * (lo + hi))
    cks = cks_rho_at(eps, delta, alpha) if alpha > 1.0 else 0.0
    return max(cks, _bun_steinke_rho(eps, delta))
