"""Goodness of fit of the exact samplers against their pmfs (fast subset; more in test_slow)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from mech_stats import P_MIN, chi2_pvalue, dgauss_pmf, dlap_pmf, freq_pvalue

from dpsieve.errors import ValidationError
from dpsieve.mechanisms import (
    _exact,
    _scalar,
    discrete_gaussian,
    discrete_laplace,
    gaussian_noise,
    geometric,
    laplace_noise,
    sampled_sigma2,
    snap_to_lattice,
)
from dpsieve.mechanisms._random import RandomSource

N = 40_000


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


@pytest.mark.parametrize("scale", [0.3, 1.0, 1.3, 7.25])
def test_discrete_laplace_fits_pmf(scale: float) -> None:
    z = discrete_laplace(scale, N, _rng(11))
    sup = np.arange(-60 * math.ceil(scale), 60 * math.ceil(scale) + 1)
    assert chi2_pvalue(z, sup, dlap_pmf(scale, sup)) > P_MIN


@pytest.mark.parametrize("sigma", [0.5, 1.0, 3.7, 40.0])
def test_discrete_gaussian_fits_pmf(sigma: float) -> None:
    z = discrete_gaussian(sigma, N, _rng(12))
    s2 = float(sampled_sigma2(sigma))
    lim = int(12 * sigma) + 5
    sup = np.arange(-lim, lim + 1)
    assert chi2_pvalue(z, sup, dgauss_pmf(s2, sup)) > P_MIN


def test_geometric_fits_pmf() -> None:
    scale = 2.5
    y = geometric(scale, N, _rng(13))
    a = math.exp(-1 / scale)
    sup = np.arange(0, 80)
    assert y.min() >= 0
    assert chi2_pvalue(y, sup, (1 - a) * a**sup) > P_MIN


def test_bernoulli_exp_matches_exp() -> None:
    src = RandomSource(_rng(14))
    for num, den in [(0, 1), (1, 3), (1, 1), (7, 3), (25, 4)]:
        a = np.full(N, num, dtype=np.uint64)
        b = np.full(N, den, dtype=np.uint64)
        hits = _exact.bern_exp(a, b, src).sum()
        p = math.exp(-num / den)
        if num == 0:
            assert hits == N
        else:
            assert freq_pvalue([1] * int(hits) + [0] * (N - int(hits)), [1 - p, p]) > P_MIN


def test_scalar_fallback_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shrink the uint64 headroom so most elements take the Python-int continuation."""
    monkeypatch.setattr(_exact, "_TWO63", 2**12)
    src = RandomSource(_rng(15))
    a = np.full(4000, 5, dtype=np.uint64)
    b = np.full(4000, 7, dtype=np.uint64)
    hits = int(_exact.bern_exp_le1(a, b, src).sum())
    p = math.exp(-5 / 7)
    assert freq_pvalue([1] * hits + [0] * (4000 - hits), [1 - p, p]) > P_MIN
    y = _exact.geom(1000, 0, 4000, src)  # vmax = (2^12 - 1000) // 1000 = 3: big V -> scalar
    q = math.exp(-500 / 1000)  # floor(Y / 500) is geometric with ratio e^-1/2
    sup = np.arange(0, 40)
    assert chi2_pvalue(y // 500, sup, (1 - q) * q**sup) > P_MIN


def test_scalar_reference_matches_vectorized() -> None:
    src = RandomSource(_rng(16))
    ref = np.array([_scalar.dgauss(37, 10, src) for _ in range(3000)])
    sup = np.arange(-12, 13)
    assert chi2_pvalue(ref, sup, dgauss_pmf(3.7, sup)) > P_MIN
    ref2 = np.array([_scalar.dlap(13, 10, src) for _ in range(3000)])
    assert chi2_pvalue(ref2, sup, dlap_pmf(1.3, sup)) > P_MIN


def test_sampled_sigma2_rounds_up_slightly() -> None:
    for s in [1e-3, 0.5, 1.0, 3.7, 1234.5, 2.0**26]:
        s2 = sampled_sigma2(s)
        assert s2 >= Fraction(s) ** 2
        bits = 24 + min(0, math.frexp(s)[1] - 1)
        assert s2 <= Fraction(s) ** 2 * (1 + Fraction(1, 2**bits))


def test_lattice_noise_is_on_the_lattice() -> None:
    g = 2.0**-7
    x = laplace_noise(3.0, 1000, _rng(17), granularity=g)
    assert np.all(x / g == np.round(x / g))
    y = gaussian_noise(3.0, 1000, _rng(18), granularity=g)
    assert np.all(y / g == np.round(y / g))
    assert isinstance(laplace_noise(1.0, rng=_rng(1)), float)
    assert isinstance(discrete_gaussian(1.0, rng=_rng(1)), int)


def test_lattice_noise_scale() -> None:
    x = laplace_noise(2.0, N, _rng(19))
    assert abs(x.std() / (2.0 * math.sqrt(2)) - 1) < 0.03
    y = gaussian_noise(2.0, N, _rng(20))
    assert abs(y.std() / 2.0 - 1) < 0.03


def test_snap_is_monotone_and_shift_equivariant() -> None:
    a = np.array([0.5, 1.5, 2.5, -0.5, -1.49, 3.999])
    assert snap_to_lattice(a, 1.0).tolist() == [1, 2, 3, 0, -1, 4]
    r = _rng(21).normal(size=1000) * 100
    s = snap_to_lattice(r, 0.25)
    order = np.argsort(r)
    assert np.all(np.diff(s[order]) >= 0)
    assert np.array_equal(snap_to_lattice(r + 3.0, 0.25), s + 12)


def test_secure_default_and_seeded_reproducibility() -> None:
    a = discrete_laplace(10.0, 50)
    b = discrete_laplace(10.0, 50)
    assert not np.array_equal(a, b)
    assert np.array_equal(discrete_gaussian(5.0, 50, _rng(3)), discrete_gaussian(5.0, 50, _rng(3)))


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "1", None, 2.0**60])
def test_bad_scale_rejected(bad: object) -> None:
    with pytest.raises(ValidationError, match="'scale'"):
        discrete_laplace(bad)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="'sigma'"):
        discrete_gaussian(bad)  # type: ignore[arg-type]


def test_other_bad_parameters() -> None:
    with pytest.raises(ValidationError, match="'size'"):
        discrete_laplace(1.0, -1)
    with pytest.raises(ValidationError, match="'rng'"):
        discrete_laplace(1.0, 3, rng=42)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="'granularity'"):
        laplace_noise(1.0, granularity=0.3)
    with pytest.raises(ValidationError, match="'value'"):
        snap_to_lattice([float("nan")], 1.0)


def test_small_sizes_use_the_scalar_path_with_the_same_law() -> None:
    rng = _rng(22)
    g = np.array([discrete_gaussian(2.5, rng=rng) for _ in range(4000)])
    sup = np.arange(-15, 16)
    assert chi2_pvalue(g, sup, dgauss_pmf(float(sampled_sigma2(2.5)), sup)) > P_MIN
    lap = np.concatenate([discrete_laplace(1.7, 4, rng) for _ in range(1000)])
    assert chi2_pvalue(lap, sup, dlap_pmf(1.7, sup)) > P_MIN
    geo = np.concatenate([geometric(0.9, 2, rng) for _ in range(2000)])
    a = math.exp(-1 / 0.9)
    sup0 = np.arange(0, 30)
    assert chi2_pvalue(geo, sup0, (1 - a) * a**sup0) > P_MIN
