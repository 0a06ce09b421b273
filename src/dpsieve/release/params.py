"""Parameters for the envelope: the theorem's choices (Fitzsimons 2026, section 8) and a
practical, data-independent rule.

Theorem 1.1 / section 8: with L_D = log 2T, L_Q = log 2k and tau = sqrt(L_D L_Q / (eps n)),
if 2048 tau <= 1 take alpha = 2048 tau, J = ceil(16 L_D / alpha^2), eta = 128 L_Q / alpha,
gamma = alpha / 4; the envelope then has E||M(x) - F(x)||_inf <= 2^20 e tau. Otherwise the
zero output (error <= 1, 0-DP) is used. So the bound is C min{1, tau}, C = 2^20 e.

Practical rule (no private data): gamma = min(1, 2 sqrt(2 log T / J)),
eta = c eps n / sqrt(J log(T^2 + 1)) with c = 2, and J as large as the compute budget allows
(:func:`auto_rounds`). Tuning (docs/release.md, "Tuning"; ``experiments/release/tune.py``):
the prototype notes found c in 2..8 and a factor 2 on the Hedge step best; on our grid
(J in 4..10, c in 0.5..8, Hedge factor 0.5/1/2, five synthetic Dirichlet databases, exact
expected error) the surface is flat at the top and this rule is within 0.002 of the best.
Synthetic data only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpsieve._validation import check_int, check_positive
from dpsieve.release.transcript import PMWParams

__all__ = [
    "THEOREM_CONSTANT",
    "TheoremParameters",
    "auto_rounds",
    "practical_parameters",
    "smallest_nontrivial_n",
    "theorem_parameters",
]

#: C = 2^20 e of Theorem 1.1 (section 8).
THEOREM_CONSTANT = 2.0**20 * math.e


@dataclass(frozen=True, slots=True)
class TheoremParameters:
    """Section 8 choices. ``nontrivial`` says whether 2048 tau <= 1 (the envelope branch);
    otherwise ``rounds``/``eta``/``gamma`` are None and the theorem outputs zeros.
    ``bound`` = C min{1, tau}; ``envelope_bound`` = C tau (the bound of the envelope branch,
    meaningful only when nontrivial)."""

    tau: float
    nontrivial: bool
    alpha: float | None
    rounds: int | None
    eta: float | None
    gamma: float | None
    bound: float
    envelope_bound: float

    @property
    def bound_below_one(self) -> bool:
        """Whether the guaranteed error C min{1, tau} is informative (< 1)."""
        return self.bound < 1.0


def theorem_parameters(universe_size: int, k: int, n: int, eps: float) -> TheoremParameters:
    """The explicit parameter choices of section 8 and the bound C min{1, tau}."""
    T = check_int("universe_size", universe_size, "theorem_parameters", minimum=1)
    kk = check_int("k", k, "theorem_parameters", minimum=1)
    nn = check_int("n", n, "theorem_parameters", minimum=1)
    e = check_positive("eps", eps, "theorem_parameters")
    LD, LQ = math.log(2 * T), math.log(2 * kk)
    tau = math.sqrt(LD * LQ / (e * nn))
    bound = THEOREM_CONSTANT * min(1.0, tau)
    if 2048.0 * tau <= 1.0:
        alpha = 2048.0 * tau
        return TheoremParameters(tau, True, alpha, math.ceil(16 * LD / alpha**2),
                                 128 * LQ / alpha, alpha / 4, bound, THEOREM_CONSTANT * tau)
    return TheoremParameters(tau, False, None, None, None, None, bound,
                             THEOREM_CONSTANT * tau)


def smallest_nontrivial_n(universe_size: int, k: int, eps: float) -> int:
    """Least n with 2048 tau <= 1, i.e. n >= 2048^2 log(2T) log(2k) / eps."""
    LD, LQ = math.log(2 * universe_size), math.log(2 * k)
    return math.ceil(2048.0**2 * LD * LQ / eps)


def auto_rounds(signed_classes: int, groups: int, max_cost: float, *, cap: int = 64) -> int:
    """Largest J <= cap whose drop-last enumeration (J - 1 selections over ``groups``
    groups) costs at most ``max_cost`` units; public inputs only. At least 1."""
    from dpsieve.release.envelope import enumeration_cost

    rounds = 1  # rounds - 1 selections are known to fit
    while rounds < cap and enumeration_cost(signed_classes, rounds, groups) <= max_cost:
        rounds += 1
    return rounds


def practical_parameters(universe_size: int, n: int, eps: float, rounds: int, *,
                         c: float = 2.0) -> PMWParams:
    """gamma = min(1, 2 sqrt(2 log T / J)), eta = c eps n / sqrt(J log(T^2 + 1)).

    Uses only public quantities (T, n, eps, J); see the module docstring for the tuning.
    """
    T = check_int("universe_size", universe_size, "practical_parameters", minimum=1)
    nn = check_int("n", n, "practical_parameters", minimum=1)
    e = check_positive("eps", eps, "practical_parameters")
    J = check_int("rounds", rounds, "practical_parameters", minimum=1)
    cc = check_positive("c", c, "practical_parameters")
    gamma = min(1.0, 2.0 * math.sqrt(2.0 * math.log(T) / J)) if T > 1 else 1.0
    eta = cc * e * nn / math.sqrt(J * math.log(T * T + 1.0))
    return PMWParams(J, eta, gamma)
