"""The Poisson-subsampled Gaussian mechanism (the DP-SGD step) and its PLD.

Sampler. Each record's scalar contribution is clipped to ``[-Delta, Delta]`` and snapped to
the lattice ``g Z`` (``g`` a power of two, default ``2^(floor(log2 Delta) - 6)``); each record
is kept independently with probability ``q`` (an exact Bernoulli: ``q`` is a dyadic
rational, compared with 128 uniform bits); the kept integers are summed and discrete
Gaussian noise ``N_Z(0, s^2)``, ``s^2 = sampled_sigma2(sigma / g)``, is added; the integer
is scaled by ``g``. Running time is linear in the number of records, which differs by one
between add/remove neighbours: the record count is *not* hidden by the timing (pass a
padded, fixed-size array if that matters).

Privacy (add/remove only). A record moves the integer sum by an integer of absolute value
at most ``k = ceil(Delta / g)``. For the discrete Gaussian base mechanism,
``(P, Q) = (N_Z(0, s^2), N_Z(k, s^2))`` is a dominating pair for every shift ``|v| <= k``
(docs/proofs/mechanisms.md, Lemma 1: monotone likelihood ratio of a log-concave lattice
family). By Zhu, Dong & Wang (AISTATS 2022, Thm. 11) the subsampled mechanism is then
dominated by ``(M, P)`` for removal and ``(P, M)`` for addition, ``M = (1 - q) P + q Q``.
:meth:`PoissonSubsampledGaussian.pld` builds both with ``PLD.from_distributions`` on the
*full* integer support ``[-L, L + k]``, ``L = ceil(12 s) + 1`` (no coarsening, which would
err optimistically), with a bound on the tail masses (about ``e^-72``) kept as two separate
atoms (a pair that dominates the truncated one), discretized pessimistically, and
returns their Blackwell supremum (one step). For k steps compose the directions
separately with :meth:`PoissonSubsampledGaussian.plds` (``plds().self_compose(k)``) and
take the worse at the end: composing the supremum is valid but loose.
Direction of error: pessimistic (losses rounded up onto
the grid by the PLD constructor); the pmfs themselves are float64 evaluations of
``exp(-z^2 / (2 s^2))`` (relative error ~1e-16 per mass), which is not certified.
Replace-one is refused (:class:`UnsupportedError`): its dominating pair is a different
mixture that we have not implemented.

:func:`subsampled_gaussian_pld` is the accounting of the *continuous* Poisson-subsampled
Gaussian (the DP-SGD step of Opacus, TF Privacy, JAX Privacy): both directions on the
grid from closed-form cell masses, pessimistic or optimistic (:mod:`._sgm`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_closed, check_positive, fail, fail_private
from dpsieve.accounting.events import Neighbouring, PrivacyDescription
from dpsieve.errors import UnsupportedError
from dpsieve.mechanisms._families import NoFamilyParameters
from dpsieve.mechanisms._random import RNG, as_source
from dpsieve.mechanisms.base import as_relation
from dpsieve.mechanisms.noise import (
    discrete_gaussian,
    lattice_to_float,
    sampled_sigma2,
    snap_exact,
)

if TYPE_CHECKING:
    from dpsieve.accounting.directed import DirectedPLD
    from dpsieve.accounting.pld import PLD

__all__ = [
    "SAMPLINGS",
    "SUBSAMPLED_LATTICE_BITS",
    "TAIL_SIGMAS",
    "DPSGDStep",
    "PoissonSubsampledGaussian",
    "poisson_sample",
    "step_grid",
    "subsampled_gaussian_pld",
]

#: Default lattice of the subsampled Gaussian: g = 2^(floor(log2 Delta) - 6).
SUBSAMPLED_LATTICE_BITS = 6
_MIN_RATE = 2.0**-60
#: Half-width of the explicit support of the subsampled pair, in standard deviations.
TAIL_SIGMAS = 12.0
#: Sampling schemes a DP-SGD step may declare (fixed-size batches are refused).
SAMPLINGS = ("poisson", "full_batch")


@dataclass(frozen=True, slots=True)
class DPSGDStep:
    """One kind of training step: noise multiplier, sampling rate, sampling scheme."""

    sigma: float
    rate: float
    sampling: str = "poisson"

    def __post_init__(self) -> None:
        o = "DPSGDStep"
        check_positive("sigma", self.sigma, o)
        if self.sampling not in SAMPLINGS:
            if self.sampling in ("fixed_size", "shuffle", "without_replacement"):
                raise UnsupportedError(
                    f"Sampling {self.sampling!r} is not accounted: fixed-size batches are not "
                    "Poisson-subsampled, and no PLD with a proof is implemented for them. "
                    "Use Poisson sampling (Opacus: poisson_sampling=True) or full batches."
                )
            raise fail("sampling", o, f"one of {SAMPLINGS}", self.sampling)
        check_in_closed("rate", self.rate, _MIN_RATE, 1.0, o)
        if self.sampling == "full_batch" and self.rate != 1.0:
            raise fail("rate", o, "1.0 for full-batch steps", self.rate)
        object.__setattr__(self, "sigma", float(self.sigma))
        object.__setattr__(self, "rate", float(self.rate))

    def to_dict(self) -> dict[str, Any]:
        return {"sigma": self.sigma, "rate": self.rate, "sampling": self.sampling}


#: Coarsest grid of the DP-SGD accountant (loss units): the automatic grid never exceeds it.
ACCOUNTANT_GRID = 5e-4
#: Finest automatic grid (cost: the support of a composition grows like 1 / grid).
GRID_MIN = 1e-5
#: The automatic grid is the per-step loss scale divided by this (:func:`step_grid`).
GRID_PER_SCALE = 20.0


def step_grid(sigma: float, rate: float) -> float:
    """The grid (loss units) chosen for steps of this kind: the per-step loss scale
    s = rate * sqrt(e^{1/sigma^2} - 1) (the standard deviation of the removal loss to first
    order in the rate: Z ~ rate (e^{(2x-1)/(2 sigma^2)} - 1)) divided by ``GRID_PER_SCALE``,
    rounded DOWN to 1, 2 or 5 times a power of ten (steps of nearby kinds share a grid and
    its cached PLDs), within [``GRID_MIN``, ``ACCOUNTANT_GRID``]; ``ACCOUNTANT_GRID`` for full
    batches (the Gaussian is composed in closed form).

    Any grid gives a certified upper bound (the discretization is pessimistic); the grid only
    sets how tight it is. A fixed grid is too coarse where the steps' losses are small: at
    sigma 2, rate 0.001 (s = 5.3e-4) the grid 5e-4 over-stated eps(1e-5) after 10^4 steps by
    7 % (0.18626 against 0.17385 from dp_accounting at 1e-5); s / 20 gives 0.17336.
    The 1 % table over sigma x rate x steps x delta is benchmarks/accounting_grid.py.
    """
    if rate >= 1.0:
        return ACCOUNTANT_GRID
    v = 1.0 / (sigma * sigma)
    scale = rate * math.sqrt(math.expm1(v)) if v < 700.0 else math.inf
    g = min(ACCOUNTANT_GRID, max(GRID_MIN, scale / GRID_PER_SCALE))
    e = math.floor(math.log10(g))
    snapped = next((m * 10.0**e for m in (5.0, 2.0, 1.0) if m * 10.0**e <= g), 10.0**e)
    return max(GRID_MIN, min(ACCOUNTANT_GRID, snapped))


def poisson_sample(n: int, rate: float, rng: RNG = None) -> npt.NDArray[np.bool_]:
    """``n`` independent exact Bernoulli(rate) draws (rate a float in [2^-60, 1]).

    rate = a / 2^j exactly with j <= 113; a draw is [U < a 2^(128-j)] for U uniform on
    128 bits (two words compared lexicographically), so P[True] = rate exactly.
    """
    o = "poisson_sample"
    rate = check_in_closed("rate", rate, _MIN_RATE, 1.0, o)
    src = as_source(rng, o)
    fr = Fraction(rate)
    thr = fr.numerator << (128 - (fr.denominator.bit_length() - 1))
    if thr >= 2**128:
        return np.ones(n, dtype=bool)
    hi, lo = np.uint64(thr >> 64), np.uint64(thr & (2**64 - 1))
    u1, u2 = src.words(n), src.words(n)
    out: npt.NDArray[np.bool_] = (u1 < hi) | ((u1 == hi) & (u2 < lo))
    return out


@dataclass(frozen=True, slots=True)
class PoissonSubsampledGaussian(NoFamilyParameters):
    """Poisson subsampling at ``rate`` followed by a lattice Gaussian sum (module doc)."""

    sigma: float
    rate: float
    sensitivity: float = 1.0
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    granularity: float | None = None

    def __post_init__(self) -> None:
        o = "PoissonSubsampledGaussian"
        check_positive("sigma", self.sigma, o)
        check_in_closed("rate", self.rate, _MIN_RATE, 1.0, o)
        check_positive("sensitivity", self.sensitivity, o)
        nb = as_relation(self.neighbouring, o)
        if nb != Neighbouring.ADD_REMOVE:
            raise UnsupportedError(
                "PoissonSubsampledGaussian is implemented for add/remove neighbours only."
            )
        object.__setattr__(self, "neighbouring", nb)
        g = self.granularity
        if g is None:
            g = math.ldexp(1.0, math.frexp(self.sensitivity)[1] - 1 - SUBSAMPLED_LATTICE_BITS)
        elif math.frexp(check_positive("granularity", g, o))[0] != 0.5:
            raise fail("granularity", o, "a power of two", g)
        object.__setattr__(self, "granularity", g)
        sampled_sigma2(self.sigma / g, o)

    @property
    def step(self) -> float:
        return cast(float, self.granularity)  # resolved in __post_init__

    @property
    def lattice_sensitivity(self) -> int:
        """k = ceil(Delta / g)."""
        return math.ceil(Fraction(self.sensitivity) / Fraction(self.step))

    @property
    def lattice_sigma2(self) -> Fraction:
        return sampled_sigma2(self.sigma / self.step, "PoissonSubsampledGaussian")

    def privacy(self) -> PrivacyDescription:
        raise UnsupportedError(
            "The subsampled Gaussian has no exact closed-form family parameter; use pld()."
        )

    def pair(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """The removal dominating pair (M, P) on ``[-L, L + k]`` plus two tail atoms.

        ``L = ceil(TAIL_SIGMAS * s) + 1``. Outside the window each of P and M has mass at
        most ``2 T`` with ``T = s sqrt(pi/2) erfc(L / (s sqrt 2))`` (the sum of the
        decreasing weights beyond L is below their integral, and the normaliser is >= 1);
        that bound is put on an atom of its own for each distribution (a pair dominating
        the truncated one), so it shows up as +inf loss mass in each direction.
        """
        s2 = float(self.lattice_sigma2)
        s = math.sqrt(s2)
        k = self.lattice_sensitivity
        lim = math.ceil(TAIL_SIGMAS * s) + 1
        z = np.arange(-lim - k, lim + 2 * k + 1, dtype=np.float64)
        w = np.exp(-(z * z) / (2.0 * s2))
        norm = max(1.0, math.fsum(w.tolist()))
        pz = w[k : z.size - k] / norm  # P on [-lim, lim + k]
        qz = w[: z.size - 2 * k] / norm  # Q = P shifted by +k on the same points
        m = (1.0 - self.rate) * pz + self.rate * qz
        tail = 4.0 * s * math.sqrt(math.pi / 2.0) * math.erfc(lim / (s * math.sqrt(2.0)))
        tm = max(tail, 1.0 - math.fsum(m.tolist()))
        tp = max(tail, 1.0 - math.fsum(pz.tolist()))
        return np.concatenate([m, [tm, 0.0]]), np.concatenate([pz, [0.0, tp]])

    def pld(self, *, grid: float | None = None) -> PLD:
        """Pessimistic PLD dominating both directions (module docstring)."""
        from dpsieve.accounting.order import supremum
        from dpsieve.accounting.pld import DEFAULT_GRID, PLD

        m, p = self.pair()
        gr = DEFAULT_GRID if grid is None else grid
        remove = PLD.from_distributions(m, p, grid=gr)
        add = PLD.from_distributions(p, m, grid=gr)
        return supremum([remove, add])

    def plds(self, *, grid: float | None = None) -> DirectedPLD:
        """Both directions, pessimistic: compose these separately (module docstring)."""
        from dpsieve.accounting.directed import DirectedPLD
        from dpsieve.accounting.pld import DEFAULT_GRID, PLD

        m, p = self.pair()
        gr = DEFAULT_GRID if grid is None else grid
        return DirectedPLD(
            PLD.from_distributions(m, p, grid=gr), PLD.from_distributions(p, m, grid=gr)
        )

    def under(self, neighbouring: Neighbouring) -> PoissonSubsampledGaussian:
        if as_relation(neighbouring, "under") != Neighbouring.ADD_REMOVE:
            raise UnsupportedError("PoissonSubsampledGaussian: replace-one is not implemented.")
        return self

    def release(self, contributions: npt.ArrayLike, rng: RNG = None) -> float:
        """``g (sum over a Poisson sample of snap(clip(x_i)) + Z)``."""
        x = np.asarray(contributions, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(x)):
            raise fail_private("contributions", "release", "finite floats", contributions)
        gen = as_source(rng, "release").gen
        keep = poisson_sample(x.size, self.rate, gen)
        clipped = np.clip(x[keep], -self.sensitivity, self.sensitivity)
        total = sum(snap_exact(clipped, self.step, "release").tolist()) if clipped.size else 0
        noise = discrete_gaussian(self.sigma / self.step, rng=gen)
        return float(lattice_to_float([total + noise], self.step)[0])

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": "poisson_subsampled_gaussian",
            "sigma": self.sigma,
            "rate": self.rate,
            "sensitivity": self.sensitivity,
            "neighbouring": self.neighbouring.value,
            "granularity": self.step,
        }


def subsampled_gaussian_pld(
    sigma: float, rate: float, *, grid: float | None = None, pessimistic: bool = True
) -> DirectedPLD:
    """PLDs (remove, add) of one Poisson-subsampled continuous Gaussian step.

    ``sigma`` is the noise multiplier (noise std / clipping norm), ``rate`` the Poisson
    sampling probability; add/remove neighbours (Zhu, Dong & Wang 2022, Thm. 11: (M, P) for
    removal, (P, M) for addition, M = (1 - rate) N(0, sigma^2) + rate N(1, sigma^2)).
    ``pessimistic=True`` dominates the truth in each direction (for accounting queries);
    ``False`` is dominated by it (for budgets). rate = 1 is the Gaussian G_{1/sigma}, exact.
    Errs as stated in :mod:`dpsieve.mechanisms._sgm`.
    """
    from dpsieve.accounting.directed import DirectedPLD
    from dpsieve.accounting.pld import DEFAULT_GRID, PLD
    from dpsieve.mechanisms._sgm import directed_parts

    o = "subsampled_gaussian_pld"
    sigma = check_positive("sigma", sigma, o)
    rate = check_in_closed("rate", rate, _MIN_RATE, 1.0, o)
    g = DEFAULT_GRID if grid is None else check_positive("grid", grid, o)
    if not sigma >= 1e-3:
        raise fail("sigma", o, "a float >= 0.001 (below it the grid cannot resolve a step)", sigma)
    if rate == 1.0:
        gp = PLD.gaussian(sigma, pessimistic=pessimistic, grid=g)
        return DirectedPLD(gp, gp)
    d = "pessimistic" if pessimistic else "optimistic"
    parts = [directed_parts(sigma, rate, g, rm, pessimistic) for rm in (True, False)]
    rem, add = (PLD(g, off, pr, inf, 0.0, d, False) for off, pr, inf in parts)
    return DirectedPLD(rem, add)
