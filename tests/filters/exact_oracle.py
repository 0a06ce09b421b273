"""The exact privacy of what a filter admitted, computed independently (mpmath, Fraction).

Each query in the extremes suite carries its *truth*: the exact PLD family it belongs to
(R_{eps,delta}, G_mu) or the exact guarantee it states (zCDP rho, RDP curve). The oracle
composes the admitted truths exactly, in the notion each filter promises, without any of
the filters' code: Fraction sums for additive notions, mpmath (50 digits, more where a
result is tiny) for Renyi divergences, Gaussian tails and hockey-stick curves.

Used by tests/filters/test_extremes.py; a new filter joins by adding a checker there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import mpmath

DPS = 50


@dataclass(frozen=True)
class Truth:
    """The exact privacy of one query.

    ``kind``: "rr" (R_{eps,delta}), "gauss" (G_mu), "zcdp" (rho-zCDP, delta-approximate
    when delta > 0), "rdp" (the stated RDP curve at ``orders``).
    """

    kind: str
    eps: float = 0.0
    delta: float = 0.0
    mu: float = 0.0
    rho: float = 0.0
    orders: tuple[float, ...] = ()
    values: tuple[float, ...] = ()


def mpq(x: Fraction | float | int) -> mpmath.mpf:
    """An exact rational as an mpf (at the working precision)."""
    f = Fraction(x)
    return mpmath.mpf(f.numerator) / f.denominator


# -- additive notions --------------------------------------------------------------------


def pure_eps(t: Truth) -> Fraction | None:
    """Exact eps of a pure-DP truth (``None`` if the truth is not pure DP)."""
    if t.kind == "rr" and t.delta == 0.0 and math.isfinite(t.eps):
        return Fraction(t.eps)
    if t.kind == "gauss" and t.mu == 0.0:
        return Fraction(0)
    if t.kind == "zcdp" and t.rho == 0.0 and t.delta == 0.0:
        return Fraction(0)
    return None


def rdp(t: Truth, alpha: float) -> mpmath.mpf | None:
    """D_alpha of the truth (exact, mpmath); ``None`` if it has none (delta > 0)."""
    if t.kind == "rr":
        if t.delta > 0.0 or not math.isfinite(t.eps):
            return None
        return rr_rdp(t.eps, alpha)
    if t.kind == "gauss":
        return mpq(alpha) * mpq(t.mu) ** 2 / 2
    if t.kind == "zcdp":
        return None if t.delta > 0.0 else mpq(alpha) * mpq(t.rho)
    if t.kind == "rdp":
        above = [(a, v) for a, v in zip(t.orders, t.values, strict=True) if a >= alpha]
        return mpq(min(above)[1]) if above else None
    raise AssertionError(t.kind)


def rr_rdp(eps: float, alpha: float) -> mpmath.mpf:
    """D_alpha(R_eps) = log(p e^{x eps} + q e^{-x eps}) / x, x = alpha - 1, in mpmath with
    enough digits to resolve its tiny values (the log's argument is 1 + O(x alpha eps^2))."""
    if eps == 0.0:
        return mpmath.mpf(0)
    lost = max(0.0, -2.0 * math.log10(eps) - math.log10(alpha * (alpha - 1.0)))
    with mpmath.workdps(DPS + int(lost) + 10):
        e, x = mpq(eps), mpq(alpha) - 1
        p = 1 / (1 + mpmath.exp(-e))
        val = mpmath.log(p * mpmath.exp(x * e) + (1 - p) * mpmath.exp(-x * e)) / x
    return +val


def zcdp_rho(t: Truth) -> tuple[Fraction, Fraction] | None:
    """A valid (rho, delta) for the truth: the sup over alpha of D_alpha / alpha is at most
    eps^2/2 for R_eps (Bun & Steinke, Prop. 1.4), exactly mu^2/2 for G_mu."""
    if t.kind == "rr":
        if not math.isfinite(t.eps):
            return None
        return Fraction(t.eps) ** 2 / 2, Fraction(t.delta)
    if t.kind == "gauss":
        return Fraction(t.mu) ** 2 / 2, Fraction(0)
    if t.kind == "zcdp":
        return Fraction(t.rho), Fraction(t.delta)
    return None


# -- composition of PLD truths (R_{eps,delta} and G_mu) ---------------------------------


@dataclass
class Composition:
    """R_{e_1,d_1} (+) ... (+) G_s: atoms (exact loss -> mass), mass at +inf, s^2."""

    atoms: dict[Fraction, mpmath.mpf]
    inf_mass: mpmath.mpf
    s2: Fraction


def compose(truths: list[Truth]) -> Composition:
    with mpmath.workdps(DPS):
        atoms: dict[Fraction, mpmath.mpf] = {Fraction(0): mpmath.mpf(1)}
        keep = mpmath.mpf(1)
        s2 = Fraction(0)
        for t in truths:
            if t.kind == "gauss":
                s2 += Fraction(t.mu) ** 2
                continue
            assert t.kind == "rr", t
            keep *= 1 - mpq(t.delta)
            if t.eps == 0.0:
                continue
            e = Fraction(t.eps)
            p = 1 / (1 + mpmath.exp(-mpq(e)))
            nxt: dict[Fraction, mpmath.mpf] = {}
            for z, w in atoms.items():
                nxt[z + e] = nxt.get(z + e, mpmath.mpf(0)) + w * p
                nxt[z - e] = nxt.get(z - e, mpmath.mpf(0)) + w * (1 - p)
            atoms = nxt
        atoms = {z: w * keep for z, w in atoms.items()}
        return Composition(atoms, 1 - keep, s2)


def h_gauss(s: mpmath.mpf, x: mpmath.mpf) -> mpmath.mpf:
    """h_{G_s}(x) (Dong, Roth, Su): Phi(-log x / s + s/2) - x Phi(-log x / s - s/2)."""
    if s == 0:
        return max(mpmath.mpf(0), 1 - x)
    lx = mpmath.log(x)
    return _ncdf(-lx / s + s / 2) - x * _ncdf(-lx / s - s / 2)


def _ncdf(a: mpmath.mpf) -> mpmath.mpf:
    """Phi(a); beyond |a| = 1e4 the tail (< e^{-5e7}) is below any precision used here."""
    if a > 10**4:  # +inf included
        return mpmath.mpf(1)
    if a < -(10**4):
        return mpmath.mpf(0)
    return mpmath.ncdf(a)


def h_composition(c: Composition, x: mpmath.mpf) -> mpmath.mpf:
    with mpmath.workdps(DPS):
        s = mpmath.sqrt(mpq(c.s2))
        total = c.inf_mass
        for z, w in c.atoms.items():
            total += w * h_gauss(s, x * mpmath.exp(-mpq(z)))
        return total


def x_grid(c: Composition, t_end: float = 12.0, n: int = 40) -> list[mpmath.mpf]:
    """Points x >= 1 (symmetric pairs: enough, paper Lemma 8) where curves are compared:
    a uniform grid in log x plus every kink e^z of the discrete part."""
    ts = {Fraction(i * t_end / n) for i in range(n + 1)}
    ts |= {z for z in c.atoms if 0 < z < 700}
    with mpmath.workdps(DPS):
        return [mpmath.exp(mpq(t)) for t in sorted(ts)]


def leq_gdp_budget(c: Composition, mu: float, delta: float = 0.0) -> tuple[bool, float]:
    """(composition <= R_{0,delta} (+) G_mu on the grid, largest gap) in mpmath."""
    worst = -math.inf
    with mpmath.workdps(DPS):
        m, d = mpq(mu), mpq(delta)
        for x in x_grid(c):
            gap = h_composition(c, x) - (d + (1 - d) * h_gauss(m, x))
            worst = max(worst, float(gap))
    return worst <= 0.0, worst


def delta_at(c: Composition, eps: float) -> mpmath.mpf:
    """h of the composition at e^eps (its delta at eps)."""
    with mpmath.workdps(DPS):
        return h_composition(c, mpmath.exp(mpq(eps)))


def profile(t: Truth, grid: tuple[float, ...]) -> list[mpmath.mpf]:
    """Exact discretized privacy-loss profile (paper, Sec. 7.1) of a symmetric truth."""
    n = len(grid) - 1
    out = [mpmath.mpf(0)] * n

    def bucket(v: float) -> int:
        for i in range(n - 1):
            if grid[i] <= v < grid[i + 1]:
                return i
        return n - 1

    with mpmath.workdps(DPS):
        if t.kind == "rr":
            out[bucket(t.eps)] += 1 - mpq(t.delta)
            out[n - 1] += mpq(t.delta)
            return out
        assert t.kind == "gauss", t
        if t.mu == 0.0:
            out[0] = mpmath.mpf(1)
            return out
        m = mpq(t.mu)
        mean = m * m / 2
        for i in range(n):
            lo = mpq(grid[i])
            hi = mpq(grid[i + 1]) if i < n - 1 else mpmath.inf
            # |Z| in [lo, hi): Z in [lo, hi) or Z in (-hi, -lo]
            pos = _ncdf((hi - mean) / m) - _ncdf((lo - mean) / m)
            neg = _ncdf((-lo - mean) / m) - _ncdf((-hi - mean) / m)
            out[i] = pos + neg
        return out


def h_truth(t: Truth, x: mpmath.mpf) -> mpmath.mpf:
    """h of a single R_{eps,delta} or G_mu truth at x."""
    return h_composition(compose([t]), x)


def leq_generalized_rr(
    t: Truth | list[Truth], v: list[Fraction], grid: tuple[float, ...]
) -> tuple[bool, float]:
    """(L <= RR_{v,eps} on x >= 1, largest gap): h_RR = sum_{i<n} v_i (e^{eps_i} - x)_+ /
    (1 + e^{eps_i}) + v_n, compared at x = 1, every e^{eps_i} and 40 points in between."""
    n = len(grid) - 1
    worst = -math.inf
    comp = compose(t if isinstance(t, list) else [t])
    with mpmath.workdps(DPS):
        edges = [mpq(e) for e in grid[1:n]]
        ts = {mpmath.mpf(0), *edges}
        top = max([mpmath.mpf(1), *edges])
        ts |= {top * j / 40 for j in range(41)}
        for tt in sorted(ts):
            x = mpmath.exp(tt)
            h_rr = mpq(v[n - 1]) + mpmath.fsum(
                mpq(v[i]) * max(0, mpmath.exp(edges[i]) - x) / (1 + mpmath.exp(edges[i]))
                for i in range(n - 1)
            )
            worst = max(worst, float(h_composition(comp, x) - h_rr))
    return worst <= 0.0, worst
