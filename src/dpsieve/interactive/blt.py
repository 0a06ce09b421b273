"""Buffered linear Toeplitz (BLT) factorizations of the prefix-sum matrix.

The continual counter releases ``A x + B z`` with ``A`` the lower-triangular all-ones
matrix (prefix sums), ``A = B C`` and ``z ~ N(0, sigma^2 I)``: the post-processing ``B`` of
the Gaussian mechanism ``C x + z``. Here ``C`` is lower-triangular Toeplitz with
coefficients (Dvijotham, McMahan, Pillutla, Steinke, Thakurta, "Efficient and near-optimal
noise generation for streaming differential privacy", FOCS 2024)::

    c_0 = 1,   c_k = sum_i omega_i theta_i^(k-1)   (k >= 1),   0 < theta_i < 1.

* **Sensitivity** (one event changes ``x`` by one in one coordinate; column ``j`` of ``C`` is
  ``(c_0, c_1, ...)`` shifted, so every column has the same norm on an unbounded stream)::

      ||c||^2 = 1 + sum_{i,j} omega_i omega_j / (1 - theta_i theta_j),

  computed exactly in rationals from the stored floats (:meth:`BLT.sensitivity_sq`): the
  privacy does not depend on the horizon, on how the parameters were fitted, or on any
  floating-point evaluation.
* **Noise** ``B z = A C^{-1} z`` in O(d) per step with d buffers: ``u = C^{-1} z`` solves
  ``u_t = z_t - sum_i omega_i S_i``, ``S_i <- theta_i S_i + u_t``, and ``B z`` is the running
  sum of ``u``. Memory is independent of the number of steps.
* **Error** at step t: ``sigma ||b_{0..t}||`` with ``b`` the running sums of the
  coefficients of ``1/c(x)``; :meth:`BLT.max_std_per_mu` is the largest over ``t < n`` per
  unit of GDP mu (``||c|| ||b_{0..n-1}||``). Reference points at ``n = 2^16``: the
  square-root factorization (Fichtenberger, Henzinger, Upadhyay 2023) 4.596, the binary tree
  16.49 (17 levels: sqrt(17) x 4).

:data:`DEFAULT_BLT` was fitted for ``n = 2^16`` by :func:`fit_blt` (numbers in
benchmarks/results/interactive.md). The inverse filter must be stable (the generating
function ``c(x)`` has no zero in the closed unit disk), or the noise would grow without bound
(the privacy would still hold): :class:`BLT` refuses such parameters.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt
from numpy.polynomial import polynomial as npoly

from dpsieve._rounding import sqrt_up
from dpsieve._validation import check_int, fail

__all__ = ["BLT", "DEFAULT_BLT", "fit_blt", "sqrt_factorization_max_std"]

F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class BLT:
    """A BLT matrix ``C`` by its decays ``theta`` and output weights ``omega`` (module doc)."""

    theta: tuple[float, ...]
    omega: tuple[float, ...]

    def __post_init__(self) -> None:
        owner = "BLT"
        th = tuple(float(t) for t in self.theta)
        om = tuple(float(w) for w in self.omega)
        if not 1 <= len(th) <= 16 or len(th) != len(om):
            raise fail("theta", owner, "1 to 16 decays, as many as 'omega'", self.theta)
        if not all(0.0 < t < 1.0 for t in th):
            raise fail("theta", owner, "floats in (0, 1)", self.theta)
        if not all(math.isfinite(w) for w in om):
            raise fail("omega", owner, "finite floats", self.omega)
        object.__setattr__(self, "theta", th)
        object.__setattr__(self, "omega", om)
        p, _ = self.polynomials()
        roots = npoly.polyroots(p) if len(p) > 1 else np.array([])
        if roots.size and not np.all(np.abs(roots) > 1.0 + 1e-9):
            raise fail("omega", owner, "weights whose inverse filter is stable (1/c(x) has "
                       "no pole in the closed unit disk)", self.omega)

    def polynomials(self) -> tuple[F64, F64]:
        """(P, Q), ascending coefficients, with ``c(x) = P(x) / Q(x)``."""
        q = np.array([1.0])
        for t in self.theta:
            q = np.asarray(npoly.polymul(q, [1.0, -t]), dtype=np.float64)
        p = q.copy()
        for i, w in enumerate(self.omega):
            r = np.array([0.0, w])
            for j, t in enumerate(self.theta):
                if j != i:
                    r = np.asarray(npoly.polymul(r, [1.0, -t]), dtype=np.float64)
            p = np.asarray(npoly.polyadd(p, r), dtype=np.float64)
        return p, q

    def sensitivity_sq(self) -> Fraction:
        """``||c||^2`` over an unbounded stream, exact (rationals of the stored floats)."""
        th = [Fraction(t) for t in self.theta]
        om = [Fraction(w) for w in self.omega]
        total = Fraction(1)
        for ti, wi in zip(th, om, strict=True):
            for tj, wj in zip(th, om, strict=True):
                total += wi * wj / (1 - ti * tj)
        return total

    def sensitivity(self) -> float:
        """``||c||``, rounded up."""
        return sqrt_up(self.sensitivity_sq())

    def coefficients(self, n: int) -> F64:
        """``c_0 .. c_{n-1}`` in floats (for tests and plots; privacy uses the exact sum)."""
        k = np.arange(1, n, dtype=np.float64)
        out = np.ones(n)
        out[1:] = sum(w * np.power(t, k - 1.0) for t, w in zip(self.theta, self.omega,
                                                                strict=True))
        return out

    def inverse_coefficients(self, n: int) -> F64:
        """The first ``n`` coefficients of ``1/c(x)`` (the noise filter ``C^{-1}``)."""
        from scipy.signal import lfilter

        p, q = self.polynomials()
        imp = np.zeros(n)
        imp[0] = 1.0
        out: F64 = lfilter(q, p, imp)
        return out

    def max_std_per_mu(self, n: int) -> float:
        """Largest noise standard deviation over steps ``0..n-1`` per unit of GDP mu:
        ``||c|| ||b_{0..n-1}||`` (``b`` the running sums of ``1/c``; it grows with t)."""
        b = np.cumsum(self.inverse_coefficients(check_int("n", n, "max_std_per_mu",
                                                           minimum=1)))
        return math.sqrt(float(self.sensitivity_sq())) * float(np.sqrt(np.sum(b * b)))

    def to_dict(self) -> dict[str, Any]:
        return {"theta": list(self.theta), "omega": list(self.omega)}


#: Six buffers fitted by :func:`fit_blt` for ``n = 2^16``: max std per unit mu 4.4806 there
#: (the square-root factorization: 4.5964).
DEFAULT_BLT = BLT(
    (0.9999923705784612, 0.9999272851042986, 0.999422128134796, 0.9933947888646756,
     0.937046695337339, 0.39999936585896306),
    (0.003383237031650346, 0.005363031430797171, 0.019445878287713856, 0.05766833478912639,
     0.17630016973653231, 0.2698756596729259),
)


def sqrt_factorization_max_std(n: int) -> float:
    """The square-root factorization's max std per unit mu at horizon ``n``:
    ``sum_{k<n} r_k^2`` with ``r_k = C(2k, k) / 4^k`` (its C and B both have coefficients r)."""
    r = np.ones(check_int("n", n, "sqrt_factorization_max_std", minimum=1))
    if n > 1:
        k = np.arange(1, n, dtype=np.float64)
        r[1:] = np.cumprod((2 * k - 1) / (2 * k))
    return float(np.sum(r * r))


def fit_blt(n: int, buffers: int = 5, *, starts: int = 4, seed: int = 0) -> BLT:
    """BLT parameters minimising :meth:`BLT.max_std_per_mu` at horizon ``n`` (numerical
    optimisation from several starts; slow: seconds to minutes). Any result is private:
    the fit only decides the error, never the privacy."""
    from scipy.optimize import minimize

    d = check_int("buffers", buffers, "fit_blt", minimum=1)
    n = check_int("n", n, "fit_blt", minimum=2)

    def unpack(x: F64) -> BLT | None:
        try:
            return BLT(tuple(1.0 / (1.0 + np.exp(-x[:d]))), tuple(np.exp(x[d:])))
        except ValueError:
            return None

    def objective(x: F64) -> float:
        blt = unpack(x)
        if blt is None:
            return 1e9
        v = blt.max_std_per_mu(n)
        return math.log(v) if math.isfinite(v) else 1e9

    rng = np.random.default_rng(seed)
    best: tuple[float, F64] | None = None
    for _ in range(starts):
        th = np.clip(1.0 - np.geomspace(1.0 / n, 0.5, d) * rng.uniform(0.5, 2.0, d),
                     1e-3, 1.0 - 1e-9)
        x0 = np.concatenate([np.log(th / (1.0 - th)), np.log(rng.uniform(0.5, 2.0, d) / d)])
        res = minimize(objective, x0, method="Nelder-Mead",
                       options={"maxiter": 4000 * d, "xatol": 1e-9, "fatol": 1e-12})
        res = minimize(objective, res.x, method="BFGS")
        if best is None or res.fun < best[0]:
            best = (float(res.fun), res.x)
    assert best is not None
    out = unpack(best[1])
    if out is None:  # pragma: no cover - the optimiser only keeps valid points
        raise fail("n", "fit_blt", "a horizon for which a stable BLT was found", n)
    return out
