"""PLDs of the mechanisms against dp_accounting 0.6.0 (an independent oracle).

Each dpsieve PLD is pessimistic, so its delta(eps) must be at least dp_accounting's
*optimistic* estimate, and close to its pessimistic one.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.mechanisms import (
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    PoissonSubsampledGaussian,
    RandomizedResponse,
)

pld_lib = pytest.importorskip("dp_accounting.pld.privacy_loss_distribution")
common = pytest.importorskip("dp_accounting.pld.common")

EPSS = [0.0, 0.1, 0.5, 1.0, 2.0]


def _bracket(ours: object, lo_ref: object, hi_ref: object, slack: float) -> None:
    for e in EPSS:
        d = float(ours.delta(e))  # type: ignore[attr-defined]
        lo = lo_ref.get_delta_for_epsilon(e)  # type: ignore[attr-defined]
        hi = hi_ref.get_delta_for_epsilon(e)  # type: ignore[attr-defined]
        assert d >= lo - 1e-12, (e, d, lo)
        assert d <= hi + slack, (e, d, hi)


@pytest.mark.parametrize(("scale", "k"), [(1.0, 1), (2.5, 2), (0.7, 3)])
def test_discrete_laplace(scale: float, k: int) -> None:
    m = DiscreteLaplaceMechanism(scale, k)
    mk = pld_lib.from_discrete_laplace_mechanism
    _bracket(
        m.pld(),
        mk(1 / scale, k, pessimistic_estimate=False),
        mk(1 / scale, k, pessimistic_estimate=True),
        1e-6,
    )


@pytest.mark.parametrize(("sigma", "k"), [(1.0, 1), (3.0, 2), (10.0, 1)])
def test_discrete_gaussian(sigma: float, k: int) -> None:
    m = DiscreteGaussianMechanism(sigma, k)
    mk = pld_lib.from_discrete_gaussian_mechanism
    # our sigma is the sampled one (at most 2^-24 larger than requested): the pessimistic
    # reference uses the requested sigma, the optimistic one a sigma 1e-6 larger
    _bracket(
        m.pld(),
        mk(sigma * (1 + 1e-6), k, pessimistic_estimate=False),
        mk(sigma, k, pessimistic_estimate=True),
        1e-4,
    )


@pytest.mark.parametrize(("eps", "k"), [(0.5, 2), (1.0, 3), (2.0, 10)])
def test_randomized_response(eps: float, k: int) -> None:
    p = k / (math.exp(eps) + k - 1)  # dp_accounting: random bucket with probability p
    mk = pld_lib.from_randomized_response
    _bracket(
        RandomizedResponse(eps, k).pld(),
        mk(p, k, pessimistic_estimate=False),
        mk(p, k, pessimistic_estimate=True),
        1e-6,
    )


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0])
def test_lattice_laplace_close_to_continuous(scale: float) -> None:
    """With 1024 lattice steps per unit of sensitivity the discrete Laplace is within a
    hair of the continuous one (it is *not* required to be below it)."""
    ours = LaplaceMechanism(scale).pld()
    ref = pld_lib.from_laplace_mechanism(scale)
    for e in EPSS:
        assert abs(float(ours.delta(e)) - ref.get_delta_for_epsilon(e)) < 1e-5


@pytest.mark.parametrize("sigma", [0.8, 2.0, 5.0])
def test_lattice_gaussian_close_to_continuous(sigma: float) -> None:
    ours = GaussianMechanism(sigma).pld()
    ref = pld_lib.from_gaussian_mechanism(sigma)
    for e in EPSS:
        assert abs(float(ours.delta(e)) - ref.get_delta_for_epsilon(e)) < 1e-5


def test_selection_is_dominated_by_pure_dp() -> None:
    ours = ExponentialMechanism(1.0).pld()
    ref = pld_lib.from_privacy_parameters(common.DifferentialPrivacyParameters(1.0, 0.0))
    for e in EPSS:
        assert float(ours.delta(e)) >= ref.get_delta_for_epsilon(e) - 1e-12
        assert float(ours.delta(e)) <= ref.get_delta_for_epsilon(e) + 1e-3


@pytest.mark.parametrize(("sigma", "q"), [(1.0, 0.01), (0.8, 0.1), (2.0, 0.5)])
def test_poisson_subsampled_gaussian(sigma: float, q: float) -> None:
    """Against dp_accounting's subsampled *discrete* Gaussian with the same lattice sigma
    and integer sensitivity (the same mechanism): at least its optimistic estimate and at
    most its pessimistic one plus the ~1e-10 of +inf mass our supremum adds."""
    m = PoissonSubsampledGaussian(sigma, q)
    ours = m.pld()
    s = math.sqrt(float(m.lattice_sigma2))
    mk = pld_lib.from_discrete_gaussian_mechanism
    k = m.lattice_sensitivity
    lo = mk(s, k, sampling_prob=q, pessimistic_estimate=False)
    hi = mk(s, k, sampling_prob=q)
    for e in EPSS:
        d = float(ours.delta(e))
        assert d >= lo.get_delta_for_epsilon(e) - 1e-12
        assert d <= hi.get_delta_for_epsilon(e) * 1.001 + 1e-9


def test_poisson_subsampled_pair_is_a_pair_of_distributions() -> None:
    m, p = PoissonSubsampledGaussian(1.0, 0.2).pair()
    assert abs(m.sum() - 1) < 1e-12
    assert abs(p.sum() - 1) < 1e-12
    assert m[-2] > 0
    assert p[-1] > 0
    assert m[-1] == 0
    assert p[-2] == 0


def test_discrete_gaussian_is_not_gdp_so_none_is_claimed() -> None:
    """Why gdp_mu() is None: for sigma = 0.5 the discrete Gaussian's delta(eps) exceeds
    G_{1/sigma}'s (checked on the exact pmf, not only the discretized PLD)."""
    from dpsieve.accounting.gdp import gdp_delta

    m = DiscreteGaussianMechanism(0.5, 1)
    assert m.gdp_mu() is None
    z = np.arange(-60, 62)
    p = np.exp(-(z**2) / (2 * 0.25))
    q = np.exp(-((z - 1) ** 2) / (2 * 0.25))
    p, q = p / p.sum(), q / q.sum()
    exact = float(np.maximum(p - math.exp(1.0) * q, 0).sum())
    assert exact > float(gdp_delta(2.0, 1.0)) + 0.05
    assert float(m.pld().delta(1.0)) >= exact - 1e-9


def test_compose_plds_matches_pairwise_compose() -> None:
    from dpsieve.mechanisms import compose_plds

    a, b = (
        DiscreteLaplaceMechanism(2.0),
        RandomizedResponse(1.0).under(RandomizedResponse(1.0).neighbouring),
    )
    assert a.neighbouring != b.neighbouring
    c = compose_plds([a, DiscreteLaplaceMechanism(3.0)])
    direct = a.pld().compose(DiscreteLaplaceMechanism(3.0).pld())
    for e in EPSS:
        assert float(c.delta(e)) == pytest.approx(float(direct.delta(e)), abs=1e-12)
