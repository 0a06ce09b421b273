"""Private median/MAD windows: the strong baseline (clip) and PFR in row-wise form (trim).

Exact audits (docs/proofs/robust_mean.md §4): on small public grids the whole output law is
listed, and the realised pure loss of every neighbouring pair tried stays below the claim.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import ValidationError
from dpsieve.robust import (
    Refusal,
    RobustResult,
    mad_clipped_mean,
    pfr_mean,
    private_median,
    rowwise_pfr_mean,
)
from dpsieve.robust.audit import grid_quantile_logpmf, rowwise_mean_realised_epsilon
from dpsieve.robust.quantile import GeometricGrid, LinearGrid, grid_quantile
from dpsieve.robust.rowwise import lattice, noise_scale, snap

TRIM_SPLIT = (0.2, 0.1, 0.65, 0.05)
CLIP_SPLIT = (0.2, 0.1, 0.7)


def _pairs(rng: np.random.Generator, count: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Random and adversarial replace-one neighbours of small data sets."""
    out = []
    for _ in range(count):
        n = int(rng.integers(4, 12))
        x = np.round(rng.normal(float(rng.uniform(-3, 3)), float(rng.uniform(0.2, 2)), n), 2)
        y = x.copy()
        k = int(rng.integers(n))
        kind = rng.integers(3)
        y[k] = (float(rng.uniform(-10, 10)) if kind == 0 else
                float(x[k] + rng.choice([-1, 1]) * rng.uniform(3, 8)) if kind == 1 else
                float(np.median(x) + rng.choice([-1, 1]) * 3 * 1.4826 *
                      np.median(np.abs(x - np.median(x)))))  # at the window's edge
        out.append((x, y))
    return out


@pytest.mark.parametrize(("trim", "split"), [(True, TRIM_SPLIT), (False, CLIP_SPLIT)])
@pytest.mark.parametrize("eps", [0.5, 2.0])
def test_exact_audit_rowwise_means(trim: bool, split: tuple[float, ...], eps: float) -> None:
    rng = np.random.default_rng(11 if trim else 12)
    worst = 0.0
    parts = [f * eps for f in split]
    for x, y in _pairs(rng, 12):
        loss = rowwise_mean_realised_epsilon(x, y, bound=10.0, grid_points=21, split=parts,
                                             trim=trim)
        assert loss <= eps * (1 + 1e-9)
        worst = max(worst, loss / eps)
    assert worst > 0.3  # not vacuous: some pairs leak a good part of the budget


def test_audit_catches_a_window_from_the_raw_data() -> None:
    """The snippet's flaw, at our scale: noise calibrated to a window computed from the data
    (not released privately) is not DP. The lattice sums of two neighbours under their own
    windows are integer laws with different scales, so the log-ratio is unbounded."""
    x = np.array([0.0, 0.1, -0.1, 0.2, -0.2, 0.05])
    y = x.copy()
    y[0] = 5.0
    rx = 3 * 1.4826 * float(np.median(np.abs(x - np.median(x))))
    ry = 3 * 1.4826 * float(np.median(np.abs(y - np.median(y))))
    (_, kx), (_, ky) = lattice(rx), lattice(ry)
    assert noise_scale(kx, 1.0) != noise_scale(ky, 1.0)  # different scales: no eps bounds it


@pytest.mark.parametrize("level", [0.1, 0.5, 0.9])
def test_grid_quantile_exact_law_is_eps_dp_and_sampled_correctly(level: float) -> None:
    rng = np.random.default_rng(13)
    G = 17
    worst = 0.0
    for _ in range(40):
        a = rng.integers(0, G + 1, int(rng.integers(1, 9)))
        b = a.copy()
        b[int(rng.integers(a.size))] = int(rng.integers(0, G + 1))
        la, lb = grid_quantile_logpmf(a, G, level, 1.0), grid_quantile_logpmf(b, G, level, 1.0)
        worst = max(worst, float(np.abs(la - lb).max()))
    assert worst <= 1.0 + 1e-12
    assert worst > 0.4
    # the segment sampler draws from exactly this law (chi-square, 4000 draws)
    a = np.array([2, 3, 3, 9, 12, 16])
    p = np.exp(grid_quantile_logpmf(a, G, level, 1.0))
    draws = np.array([grid_quantile(a, G, level, 1.0, rng) for _ in range(4000)])
    obs = np.bincount(draws, minlength=G)
    keep = p * 4000 >= 5
    exp_ = p[keep] * 4000
    chi = float(((obs[keep] - exp_) ** 2 / exp_).sum())
    assert chi < stats.chi2.ppf(0.999, int(keep.sum()) - 1) + 10 * (obs[~keep].sum() > 60)


def test_grid_index_maps_agree_with_the_grid() -> None:
    lin = LinearGrid(-4.0, 4.0, 9)
    assert list(lin.index(np.array([-5.0, -4.0, -3.5, 0.0, 3.9, 4.0, 7.0]))) == [0, 0, 1, 4, 8,
                                                                                   8, 9]
    geo = GeometricGrid(1.0, 16.0, 5)
    assert list(geo.index(np.array([0.0, 1.0, 1.5, 2.0, 16.0, 17.0]))) == [0, 0, 1, 1, 4, 5]
    assert geo.value(2) == pytest.approx(4.0)


def test_snapped_values_never_exceed_the_lattice_sensitivity() -> None:
    for r in [1e-9, 0.37, 3.0, 1e6]:
        g, k = lattice(r)
        v = snap(np.array([-r, -r / 3, 0.0, r / 2, r]), g)
        assert int(v.max() - v.min()) <= k
        assert k <= 2 * (r / g) + 1
        assert abs(v[-1] * g - r) <= g


def test_pure_privacy_and_details() -> None:
    rng = np.random.default_rng(14)
    x = rng.normal(5, 1, 1000)
    for fn in (mad_clipped_mean, rowwise_pfr_mean):
        out = fn(x, 1.0, bound=1e4, rng=rng)
        assert isinstance(out, RobustResult)
        assert out.privacy == PureDP(1.0, Neighbouring.REPLACE_ONE)
        assert abs(out.value - x.mean()) < 0.1
        assert 1.5 < out.details["radius"] < 5.0
    assert abs(private_median(x, 1.0, bound=1e4, rng=rng) - np.median(x)) < 0.2


def test_clip_vs_trim_under_contamination() -> None:
    """10 % at 5e3: trimming drops the outliers, clipping moves them to the window edge
    (bias about 0.1 * 3 SDs)."""
    rng = np.random.default_rng(15)
    x = rng.normal(5, 1, 2000)
    x[:200] = 5e3
    inl = x[200:].mean()
    t = rowwise_pfr_mean(x, 1.0, bound=1e4, rng=rng)
    c = mad_clipped_mean(x, 1.0, bound=1e4, rng=rng)
    assert isinstance(t, RobustResult)
    assert abs(t.value - inl) < 0.06
    assert 0.2 < c.value - inl < 0.6


def test_vectors_and_bad_input() -> None:
    rng = np.random.default_rng(16)
    x = rng.normal([1.0, -2.0, 30.0], [1.0, 0.1, 5.0], (3000, 3))
    for fn in (mad_clipped_mean, rowwise_pfr_mean):
        out = fn(x, 2.0, bound=100.0, rng=rng)
        assert isinstance(out, RobustResult)
        assert np.allclose(out.value, x.mean(axis=0), atol=[0.1, 0.02, 0.5])
    with pytest.raises(ValidationError, match="'split'"):
        mad_clipped_mean(x, 1.0, bound=1.0, split=(0.5, 0.5, 0.5))
    with pytest.raises(ValidationError, match="'bound'"):
        rowwise_pfr_mean(x, 1.0, bound=0.0)
    with pytest.raises(ValidationError, match="'width'"):
        rowwise_pfr_mean(x, 1.0, bound=1.0, width=-1.0)
    with pytest.raises(ValidationError, match="'data'"):
        mad_clipped_mean([1.0, math.nan], 1.0, bound=1.0)


def test_refusal_when_the_noisy_count_is_too_small() -> None:
    rng = np.random.default_rng(17)
    outs = [rowwise_pfr_mean(np.array([0.0, 1.0, 2.0]), 0.05, bound=10.0, n_min=3, rng=rng)
            for _ in range(50)]
    ref = [o for o in outs if isinstance(o, Refusal)]
    assert ref
    assert all(r.stage == "release" and r.privacy.eps == 0.05 for r in ref)


def test_huge_values_do_not_overflow() -> None:
    """Values are centred and clipped before snapping, so magnitudes far above the bound
    (or n in the millions) cannot overflow the integer lattice."""
    rng = np.random.default_rng(18)
    x = rng.normal(2e9, 1.0, 20_000)
    x[:10] = 1e300
    for fn in (mad_clipped_mean, rowwise_pfr_mean):
        out = fn(x, 1.0, bound=4e9, rng=rng)
        assert isinstance(out, RobustResult)
        assert math.isfinite(out.value)


def test_default_pfr_at_n500_never_releases_far_off() -> None:
    """Issue 16: near the public threshold (n = 500) the friendly PFR refused about half the
    runs and its released runs had errors up to ~150 SDs (one proposed radius 5,818 for
    N(5,1) data). The default row-wise PFR: no refusal and no error above 10 SDs, no window
    above 10 SDs, in 150 seeded runs."""
    rng = np.random.default_rng(19)
    for _ in range(150):
        x = rng.normal(5, 1, 500)
        out = pfr_mean(x, 1.0, 1e-6, bound=1e4, rng=rng)
        assert isinstance(out, RobustResult)
        assert abs(out.value - x.mean()) < 10
        assert out.details["radius"] < 10
