"""Privacy of the Gaussian sparse vector on the integer lattice (docs/proofs/interactive.md §2).

Lattice units: queries and thresholds snapped to ``g Z`` move by at most ``k = ceil(Delta/g)``
between neighbours; the threshold noise is ``N_Z(0, s1^2)``, each question's noise
``N_Z(0, s2^2)``; at most ``K`` questions and ``c`` positives. An outcome with ``m``
positives is bounded through a pair of discrete Gaussian products shifted by ``k`` on the
threshold and by ``2k`` (``k`` if monotone) on each of the ``m`` positive questions, so

    exp((a - 1) D_a) <= sum_{m=0}^{c} C(K, m) exp((a - 1) a (A + m B) / 2),

``A = k^2/s1^2``, ``B = (2k)^2/s2^2`` (``k^2/s2^2`` monotone): the Renyi divergence of every
order ``a > 1`` (:func:`svt_rdp`). (eps, delta) follows by Mironov 2017, Prop. 3:
``eps = D_a + log(1/delta)/(a - 1)``, minimised over a fixed grid of orders
(:func:`svt_epsilon`).

Rounding: every value is an upper bound. The sum is formed in log space in floats (each
term's exponent is a product of floats; the relative error of the whole is below 1e-13),
then widened by 1e-12 relative and 1e-300 absolute; ``log C(K, m)`` comes from the exact
integer ``math.comb`` (``math.log`` of an int is correctly rounded to within an ulp).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpsieve._rounding import rel_up

__all__ = ["ORDERS", "svt_epsilon", "svt_rdp"]

#: Orders tried by :func:`svt_epsilon` (any order gives a valid bound; the grid only
#: decides how close to the best one the reported eps is).
ORDERS: tuple[float, ...] = tuple(float(a) for a in np.unique(np.concatenate([
    1.0 + np.geomspace(1e-3, 1.0, 60), np.geomspace(2.0, 4096.0, 140)])))


def _shift_terms(k: int, s1_sq: Fraction, s2_sq: Fraction, monotonic: bool
                 ) -> tuple[float, float]:
    """(A, B) of the module docstring, rounded up (variances as given are lower bounds of
    the sampled ones, so A and B are upper bounds)."""
    a = Fraction(k * k) / s1_sq
    b = Fraction((k if monotonic else 2 * k) ** 2) / s2_sq
    return rel_up(float(a), 1e-15), rel_up(float(b), 1e-15)


def svt_rdp(alpha: float, *, k: int, s1_sq: Fraction, s2_sq: Fraction, questions: int,
            positives: int, monotonic: bool) -> float:
    """An upper bound on the Renyi divergence of order ``alpha > 1`` (module docstring)."""
    big_a, big_b = _shift_terms(k, s1_sq, s2_sq, monotonic)
    am1 = alpha - 1.0
    top = min(positives, questions)
    logs = [math.log(math.comb(questions, m)) + am1 * alpha * (big_a + m * big_b) / 2.0
            for m in range(top + 1)]
    hi = max(logs)
    lse = hi + math.log(math.fsum(math.exp(v - hi) for v in logs))
    return rel_up(lse / am1, 1e-12, 1e-300)


def svt_epsilon(delta: float, *, k: int, s1_sq: Fraction, s2_sq: Fraction, questions: int,
                positives: int, monotonic: bool, orders: Sequence[float] = ORDERS) -> float:
    """The smallest eps over ``orders`` with (eps, delta)-DP by Mironov's conversion
    (rounded up; ``delta`` in (0, 1))."""
    log_inv = -math.log(delta)
    best = math.inf
    for a in orders:
        d = svt_rdp(a, k=k, s1_sq=s1_sq, s2_sq=s2_sq, questions=questions,
                    positives=positives, monotonic=monotonic)
        best = min(best, d + log_inv / (a - 1.0))
    return rel_up(best, 1e-12, 1e-300)
