"""Mechanism objects: privacy parameters, neighbouring relations, validation, releases."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from dpsieve.accounting.events import ZCDP, Neighbouring, PureDP
from dpsieve.errors import NeighbourRelationError, UnsupportedError, ValidationError
from dpsieve.mechanisms import (
    AboveThreshold,
    DiscreteGaussianMechanism,
    DiscreteLaplaceMechanism,
    ExponentialMechanism,
    GaussianMechanism,
    LaplaceMechanism,
    Mechanism,
    PermuteAndFlip,
    PoissonSubsampledGaussian,
    RandomizedResponse,
    ReportNoisyMax,
    compose_plds,
    convert_sensitivity,
    privacy_of,
)

AR, RO = Neighbouring.ADD_REMOVE, Neighbouring.REPLACE_ONE

ALL = [
    LaplaceMechanism(2.0),
    GaussianMechanism(3.0),
    DiscreteLaplaceMechanism(2.0),
    DiscreteGaussianMechanism(3.0),
    RandomizedResponse(1.0, 3),
    ExponentialMechanism(1.0),
    PermuteAndFlip(1.0),
    ReportNoisyMax(1.0),
    AboveThreshold(1.0),
    PoissonSubsampledGaussian(1.0, 0.1),
]


@pytest.mark.parametrize("m", ALL, ids=lambda m: type(m).__name__)
def test_protocol_and_dict(m: Mechanism) -> None:
    assert isinstance(m, Mechanism)
    d = m.to_dict()
    assert d["neighbouring"] == m.neighbouring.value
    with pytest.raises((AttributeError, TypeError)):
        m.neighbouring = RO  # type: ignore[misc]


def test_laplace_eps_is_exact_on_power_of_two_sensitivity() -> None:
    m = LaplaceMechanism(2.0, 1.0)
    assert m.lattice_sensitivity == 1024
    assert m.pure_eps() == 0.5
    assert m.privacy() == PureDP(0.5, AR)
    # a non-dyadic sensitivity pays at most one lattice step
    m3 = LaplaceMechanism(2.0, 3.0)
    assert 1.5 <= m3.pure_eps() <= (3.0 + m3.step) / 2.0
    # vectors: one extra step per further coordinate
    mv = LaplaceMechanism(2.0, 1.0, dimension=5)
    assert mv.lattice_sensitivity == 1024 + 4
    assert mv.pure_eps() == pytest.approx((1.0 + 4 * mv.step) / 2.0)


def test_for_epsilon_meets_target() -> None:
    for eps, sens in [(0.5, 1.0), (0.3, 3.0), (1.7, 0.1)]:
        m = LaplaceMechanism.for_epsilon(eps, sens)
        assert m.pure_eps() <= eps
        assert m.pure_eps() >= eps * (1 - 1e-12)
        d = DiscreteLaplaceMechanism.for_epsilon(eps, 2)
        assert d.pure_eps() <= eps


def test_gaussian_zcdp_and_rdp() -> None:
    g = GaussianMechanism(2.0, 1.0)
    assert g.zcdp_rho() <= 1.0 / 8
    assert g.zcdp_rho() >= 1.0 / 8 * (1 - 2.0**-23)
    assert g.privacy() == ZCDP(g.zcdp_rho(), AR)
    r = g.rdp([2.0, 4.0])
    assert r is not None
    assert r.values == (2.0 * g.zcdp_rho(), 4.0 * g.zcdp_rho())
    assert g.gdp_mu() is None
    dg = DiscreteGaussianMechanism(2.0, 1)
    assert Fraction(dg.zcdp_rho()) >= 1 / (2 * dg.sampled_sigma2)
    gv = GaussianMechanism(2.0, 1.0, dimension=4)
    k = 1024 + 2  # Delta/g + sqrt(4)
    assert gv.zcdp_rho() >= k**2 / (2 * float(gv.lattice_sigma2))
    with pytest.raises(UnsupportedError):
        gv.pld()


def test_relation_conversion() -> None:
    m = LaplaceMechanism(2.0, 1.0)
    r = m.under(RO)
    assert r.neighbouring == RO
    assert r.sensitivity == 2.0
    assert r.step == m.step  # same sampler
    assert r.pure_eps() == 2 * m.pure_eps()
    assert privacy_of(m, RO) == PureDP(1.0, RO)
    with pytest.raises(UnsupportedError, match="replace-one sensitivity"):
        r.under(AR)
    assert convert_sensitivity(1.5, AR, RO) == 3.0
    e = ExponentialMechanism(1.0, 1.0).under(RO)
    assert (e.eps, e.sensitivity) == (2.0, 2.0)


def test_mixing_relations_is_an_error() -> None:
    with pytest.raises(NeighbourRelationError):
        compose_plds([LaplaceMechanism(2.0), RandomizedResponse(1.0)])
    with pytest.raises(UnsupportedError):
        RandomizedResponse(1.0, neighbouring=AR)
    with pytest.raises(UnsupportedError):
        PoissonSubsampledGaussian(1.0, 0.1, neighbouring=RO)


def test_releases() -> None:
    rng = np.random.default_rng(41)
    m = LaplaceMechanism(1.0, dimension=3)
    out = m.release([1.0, 2.0, 3.0], rng)
    assert isinstance(out, np.ndarray)
    assert out.shape == (3,)
    assert np.all(out / m.step == np.round(out / m.step))
    assert isinstance(GaussianMechanism(1.0).release(0.25, rng), float)
    assert isinstance(DiscreteLaplaceMechanism(1.0).release(3, rng), int)
    assert DiscreteGaussianMechanism(1.0, dimension=2).release([1, 2], rng).dtype == np.int64
    with pytest.raises(ValidationError, match="'value'"):
        m.release([1.0, 2.0], rng)
    with pytest.raises(ValidationError, match="'value'"):
        DiscreteLaplaceMechanism(1.0).release(0.5, rng)
    ps = PoissonSubsampledGaussian(0.001, 1.0, 1.0)
    total = ps.release(np.full(100, 0.5), rng)
    assert abs(total - 50.0) < 0.05  # rate 1, tiny noise


@pytest.mark.parametrize(
    ("ctor", "bad"),
    [
        (lambda v: LaplaceMechanism(v), "scale"),
        (lambda v: GaussianMechanism(v), "sigma"),
        (lambda v: DiscreteLaplaceMechanism(v), "scale"),
        (lambda v: DiscreteGaussianMechanism(v), "sigma"),
        (lambda v: ExponentialMechanism(v), "eps"),
        (lambda v: RandomizedResponse(v), "eps"),
        (lambda v: PoissonSubsampledGaussian(v, 0.1), "sigma"),
        (lambda v: PoissonSubsampledGaussian(1.0, v), "rate"),
        (lambda v: LaplaceMechanism(1.0, v), "sensitivity"),
    ],
)
@pytest.mark.parametrize("value", [0.0, -1.0, float("nan"), float("inf")])
def test_bad_parameters(ctor, bad: str, value: float) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValidationError, match=f"'{bad}'"):
        ctor(value)


def test_more_bad_parameters() -> None:
    with pytest.raises(ValidationError, match="'dimension'"):
        LaplaceMechanism(1.0, dimension=0)
    with pytest.raises(ValidationError, match="'granularity'"):
        LaplaceMechanism(1.0, granularity=0.1)
    with pytest.raises(ValidationError, match="'sensitivity'"):
        DiscreteLaplaceMechanism(1.0, sensitivity=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="'neighbouring'"):
        LaplaceMechanism(1.0, neighbouring="bogus")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="'rate'"):
        PoissonSubsampledGaussian(1.0, 1.5)
    assert math.isfinite(LaplaceMechanism(1.0).pure_eps())
