"""Samplers with known privacy (see docs/mechanisms.md).

Every sampler takes ``rng: numpy.random.Generator | None = None``; ``None`` means the
operating system's cryptographically secure generator. Noise for releases is exact
integer noise (Canonne, Kamath, Steinke 2020), on a power-of-two lattice for real values.
"""

from __future__ import annotations

from dpsieve.mechanisms._random import RNG
from dpsieve.mechanisms.noise import (
    default_granularity,
    discrete_gaussian,
    discrete_laplace,
    gaussian_noise,
    laplace_noise,
    sampled_sigma2,
    snap_to_lattice,
)
from dpsieve.mechanisms.select import (
    above_threshold,
    exponential_mechanism,
    permute_and_flip,
    report_noisy_max,
)

__all__ = [
    "RNG",
    "above_threshold",
    "default_granularity",
    "discrete_gaussian",
    "discrete_laplace",
    "exponential_mechanism",
    "gaussian_noise",
    "laplace_noise",
    "permute_and_flip",
    "report_noisy_max",
    "sampled_sigma2",
    "snap_to_lattice",
]
