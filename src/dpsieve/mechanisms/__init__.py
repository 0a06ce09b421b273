"""Samplers with known privacy (see docs/mechanisms.md).

Every sampler takes ``rng: numpy.random.Generator | None = None``; ``None`` means the
operating system's cryptographically secure generator. Noise for releases is exact
integer noise (Canonne, Kamath, Steinke 2020), on a power-of-two lattice for real values.

Mechanism objects (:class:`LaplaceMechanism`, ...) separate the description (sensitivity,
neighbouring relation, noise) from the sampler (``release``/``sample``) and expose their
privacy (``pld()``, ``privacy()``, ``pure_eps()``, ``gdp_mu()``, ``zcdp_rho()``, ``rdp()``).
"""

from __future__ import annotations

from dpsieve.mechanisms._random import RNG, RandomSource, as_source
from dpsieve.mechanisms.additive import GaussianMechanism, LaplaceMechanism
from dpsieve.mechanisms.base import Mechanism, compose_plds, convert_sensitivity, privacy_of
from dpsieve.mechanisms.calibrate import (
    analytic_gaussian_sigma,
    discrete_gaussian_sigma_for_zcdp,
    gaussian_mechanism_for,
    gaussian_sigma_for_gdp,
    gaussian_sigma_for_zcdp,
    laplace_scale,
)
from dpsieve.mechanisms.discrete import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    RandomizedResponse,
    randomized_response,
)
from dpsieve.mechanisms.noise import (
    add_noise_exact,
    default_granularity,
    discrete_gaussian,
    discrete_laplace,
    gaussian_noise,
    geometric,
    laplace_noise,
    lattice_to_float,
    sampled_sigma2,
    snap_exact,
    snap_to_lattice,
)
from dpsieve.mechanisms.select import (
    above_threshold,
    exponential_mechanism,
    permute_and_flip,
    report_noisy_max,
)
from dpsieve.mechanisms.selection import (
    AboveThreshold,
    ExponentialMechanism,
    PermuteAndFlip,
    ReportNoisyMax,
)
from dpsieve.mechanisms.subsampled import (
    DPSGDStep,
    PoissonSubsampledGaussian,
    poisson_sample,
    subsampled_gaussian_pld,
)

__all__ = [
    "RNG",
    "AboveThreshold",
    "DPSGDStep",
    "DiscreteGaussianMechanism",
    "DiscreteLaplaceMechanism",
    "ExponentialMechanism",
    "GaussianMechanism",
    "LaplaceMechanism",
    "Mechanism",
    "PermuteAndFlip",
    "PoissonSubsampledGaussian",
    "RandomSource",
    "RandomizedResponse",
    "ReportNoisyMax",
    "above_threshold",
    "add_noise_exact",
    "analytic_gaussian_sigma",
    "as_source",
    "compose_plds",
    "convert_sensitivity",
    "default_granularity",
    "discrete_gaussian",
    "discrete_gaussian_sigma_for_zcdp",
    "discrete_laplace",
    "exponential_mechanism",
    "gaussian_mechanism_for",
    "gaussian_noise",
    "gaussian_sigma_for_gdp",
    "gaussian_sigma_for_zcdp",
    "geometric",
    "laplace_noise",
    "laplace_scale",
    "lattice_to_float",
    "permute_and_flip",
    "poisson_sample",
    "privacy_of",
    "randomized_response",
    "report_noisy_max",
    "sampled_sigma2",
    "snap_exact",
    "snap_to_lattice",
    "subsampled_gaussian_pld",
]
