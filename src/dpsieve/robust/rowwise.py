"""Means after a private centre and scale: clipping (the strong baseline) and trimming
(PFR in row-wise form). Proofs: docs/proofs/robust_mean.md.

Both estimators first *propose* a centre ``m~`` (per coordinate, the private median of
:mod:`dpsieve.robust.quantile` on ``[-bound, bound]``) and a scale ``s~`` (the private median
of ``|x - m~|``, i.e. the MAD, on a geometric grid), and set the window half-width
``R = min(width * 1.4826 * s~, 2 bound)`` (``1.4826 MAD`` estimates a Gaussian standard
deviation, so the default ``width = 3`` is "three robust standard deviations"). Then:

* :func:`mad_clipped_mean` clips every record to ``m~ +- R`` and releases the mean with
  Laplace noise (``n`` public): the textbook pure-eps baseline.
* :func:`rowwise_pfr_mean` keeps only the records inside the window (the filter is a
  row-wise map of already released values, PFR Variant B, docs/proofs/pfr.md §7) and
  releases their centred sum and their count with Laplace noise. On contaminated data it
  drops the outliers instead of moving them to the window's edge.

Every release works on integers, so no floating-point rounding touches a privacy claim:
each record's centred, clipped (or kept) value is snapped *on its own* to the lattice
``g Z`` (``g`` a power of two ``~ R 2^-20``), the integer sum has the exact replace-one
L1 sensitivity ``k = snap(R/g) - snap(-R/g)`` per coordinate, and exact discrete Laplace
noise of scale ``t >= K / eps`` (``K`` the sum over coordinates) is added. Values never
exceed ``2^21`` in lattice units, so nothing can overflow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import div_up, toward_zero
from dpsieve._validation import check_int, check_positive, fail
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.mechanisms import RNG
from dpsieve.mechanisms.noise import MAX_DISCRETE_SCALE, discrete_laplace
from dpsieve.robust.pipeline import check_records
from dpsieve.robust.quantile import (
    DEFAULT_GRID_POINTS,
    SCALE_GRID_POINTS,
    GeometricGrid,
    LinearGrid,
    private_quantile_fine,
)
from dpsieve.robust.results import Refusal, RobustResult

__all__ = [
    "MAD_TO_SD",
    "CentreScale",
    "RowwisePlan",
    "centre_scale_grids",
    "lattice",
    "mad_clipped_mean",
    "noise_scale",
    "propose_centre_scale",
    "rowwise_pfr_mean",
    "rowwise_plan",
    "snap",
    "window_radius",
]

#: 1 / Phi^{-1}(3/4): MAD * 1.4826 estimates the standard deviation of Gaussian data.
MAD_TO_SD = 1.4826
#: Lower end of the scale grid, relative to ``bound``.
SCALE_FLOOR = 2.0**-30
#: Lattice bits below the window half-width (values are at most 2^LATTICE_BITS + 1 in units).
LATTICE_BITS = 20
#: Default budget splits: (centre, scale, sum, count) and (centre, scale, mean).
TRIM_SPLIT = (0.2, 0.1, 0.65, 0.05)
CLIP_SPLIT = (0.2, 0.1, 0.7)
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CentreScale:
    """Released per-coordinate centres ``m~``, MADs ``s~`` and window half-widths ``R``."""

    centre: F64
    scale: F64
    radius: F64


def _split(eps: float, fractions: tuple[float, ...], owner: str) -> list[float]:
    """Positive parts of ``eps`` whose float sum is at most ``eps`` (the last is shrunk)."""
    if not all(f > 0 for f in fractions) or not math.isclose(sum(fractions), 1.0):
        raise fail("split", owner, f"{len(fractions)} positive fractions summing to 1",
                   fractions)
    parts = [f * eps for f in fractions]
    while sum(parts) > eps:
        parts[-1] = toward_zero(parts[-1])
    return parts


def _check_bound(bound: float, owner: str) -> float:
    b = check_positive("bound", bound, owner)
    if not (1e-100 <= b <= 1e100):
        raise fail("bound", owner, "a float in [1e-100, 1e100]", bound)
    return b


def propose_centre_scale(x: F64, eps_centre: float, eps_scale: float, bound: float,
                         width: float, rng: RNG = None, *,
                         grid_points: int = DEFAULT_GRID_POINTS) -> CentreScale:
    """Per coordinate ``j`` of the ``(n, d)`` records: ``m~_j`` = private median on the linear
    grid over ``[-bound, bound]`` (``eps_centre / d``), ``s~_j`` = private median of
    ``|x_ij - m~_j|`` on the geometric grid ``[bound 2^-30, 2 bound]`` (``eps_scale / d``),
    ``R_j = min(width * 1.4826 * s~_j, 2 bound)``. Pure ``(eps_centre + eps_scale)``-DP, replace-one
    (basic composition of 2d exponential mechanisms; docs/proofs/robust_mean.md §1)."""
    d = x.shape[1]
    lin, geo = centre_scale_grids(bound, grid_points)
    m = np.empty(d)
    s = np.empty(d)
    for j in range(d):
        m[j] = private_quantile_fine(x[:, j], 0.5, lin, eps_centre / d, rng)
        with np.errstate(over="ignore", invalid="ignore"):
            dev = np.abs(x[:, j] - m[j])
        s[j] = private_quantile_fine(dev, 0.5, geo, eps_scale / d, rng)
    return CentreScale(m, s, np.array([window_radius(float(v), width, bound) for v in s]))


def window_radius(scale: float, width: float, bound: float) -> float:
    """``R = min(width * 1.4826 * scale, 2 bound)``: a public function of the released scale.
    The cap keeps a window centred anywhere in ``[-bound, bound]`` from growing past what
    covers that whole range, so a failed centre or scale costs at most about twice the noise
    of worst-case clipping instead of growing with ``width * 2 bound``."""
    return min(width * MAD_TO_SD * scale, 2.0 * bound)


def centre_scale_grids(bound: float, grid_points: int = DEFAULT_GRID_POINTS
                       ) -> tuple[LinearGrid, GeometricGrid]:
    """The public grids: ``grid_points`` points on ``[-bound, bound]`` (centre) and
    ``min(grid_points, 2^16 + 1)`` points geometrically on ``[bound 2^-30, 2 bound]``
    (scale; see :data:`~dpsieve.robust.quantile.SCALE_GRID_POINTS`)."""
    return (LinearGrid(-bound, bound, grid_points),
            GeometricGrid(bound * SCALE_FLOOR, 2.0 * bound, min(grid_points, SCALE_GRID_POINTS)))


def lattice(radius: float) -> tuple[float, int]:
    """``(g, k)``: the power of two ``g = 2^(floor(log2 R) - 20)`` and the exact integer
    sensitivity ``k = snap(R/g) - snap(-R/g)`` of one snapped value in ``[-R, R]``."""
    g = math.ldexp(1.0, math.frexp(radius)[1] - 1 - LATTICE_BITS)
    a = Fraction(radius) / Fraction(g)
    hi = math.floor(a + Fraction(1, 2))
    lo = math.floor(-a + Fraction(1, 2))
    return g, hi - lo


def snap(c: F64, g: float) -> npt.NDArray[np.int64]:
    """``floor(c / g + 1/2)`` per entry (``c / g`` is exact: ``g`` is a power of two)."""
    a = c / g
    fl = np.floor(a)
    out: npt.NDArray[np.int64] = (fl + (a - fl >= 0.5)).astype(np.int64)
    return out


def noise_scale(sensitivity: int, eps: float) -> float:
    """The smallest float ``t >= sensitivity / eps`` (:func:`dpsieve._rounding.div_up`,
    exact); ``inf`` when that is above the largest float (a subnormal eps), which the
    plans refuse as a scale above ``MAX_DISCRETE_SCALE``."""
    return div_up(sensitivity, eps)


def _noisy_sums(values: F64, radius: F64, eps: float, rng: RNG) -> F64:
    """``sum_i values_i`` per coordinate plus Laplace noise, eps-DP for any change of one row
    within ``[-R_j, R_j]`` per coordinate (or its addition or removal): each entry snapped
    to ``g_j Z``, integer sums, discrete Laplace of scale ``t >= (sum_j k_j) / eps``."""
    d = values.shape[1]
    lat = [lattice(float(r)) for r in radius]
    total_k = sum(k for _, k in lat)
    t = noise_scale(total_k, eps)
    z = np.asarray(discrete_laplace(t, d, rng), dtype=np.int64)
    out = np.empty(d)
    for j, (g, _) in enumerate(lat):
        s = int(snap(values[:, j], g).sum())  # |entries| <= 2^21 + 1: no overflow
        out[j] = (s + int(z[j])) * g
    return out


@dataclass(frozen=True, slots=True)
class RowwisePlan:
    """The public part of a row-wise mean (:func:`rowwise_plan`): every parameter checked,
    the budget parts fixed, before the data are read."""

    n: int
    columns: int
    eps: float
    bound: float
    width: float
    parts: tuple[float, ...]
    n_min: int
    trim: bool

    @property
    def privacy(self) -> ApproxDP:
        """What any run states, as ``ApproxDP(eps, 0)`` (the run itself states the
        equivalent ``PureDP(eps)``) for callers that compare (eps, delta) pairs."""
        return ApproxDP(self.eps, 0.0, Neighbouring.REPLACE_ONE)


#: Largest lattice sensitivity per coordinate: snap(R/g) - snap(-R/g) <= 2^(bits+2) + 1.
_MAX_K = 2 ** (LATTICE_BITS + 2) + 1


def rowwise_plan(n: int, columns: int, eps: float, *, bound: float, width: float = 3.0,
                 split: tuple[float, ...] | None = None, n_min: int = 2,
                 trim: bool = True) -> RowwisePlan:
    """Check every public parameter of :func:`rowwise_pfr_mean` (``trim=True``) or
    :func:`mad_clipped_mean` (``trim=False``) from public values only, so that no
    parameter error can follow a charge: ``n``, ``columns``, ``eps`` (finite, and large enough
    that every noise scale is at most ``MAX_DISCRETE_SCALE``), ``bound``, ``width``, ``split``
    (positive parts summing to 1), ``n_min``."""
    owner = "rowwise_pfr_mean" if trim else "mad_clipped_mean"
    check_int("n", n, owner, minimum=1)
    d = check_int("columns", columns, owner, minimum=1)
    e = check_positive("eps", eps, owner)
    if not math.isfinite(e):
        raise fail("eps", owner, "a finite float > 0", eps)
    b = _check_bound(bound, owner)
    w = check_positive("width", width, owner)
    if not math.isfinite(w):
        raise fail("width", owner, "a finite float > 0", width)
    check_int("n_min", n_min, owner, minimum=1)
    fr = split if split is not None else (TRIM_SPLIT if trim else CLIP_SPLIT)
    if len(fr) != (4 if trim else 3):
        raise fail("split", owner, f"{4 if trim else 3} positive fractions summing to 1", fr)
    parts = _split(e, tuple(fr), owner)
    for name, v in zip(("eps_centre", "eps_scale", "eps_sum", "eps_count"), parts, strict=False):
        check_positive(name, v / d if name in ("eps_centre", "eps_scale") else v, owner)
    too_small = noise_scale(d * _MAX_K, parts[2]) > MAX_DISCRETE_SCALE or (
        trim and noise_scale(1, parts[3]) > MAX_DISCRETE_SCALE)
    if too_small:
        raise fail("eps", owner, "large enough that every noise scale is at most "
                   f"{MAX_DISCRETE_SCALE}", eps)
    return RowwisePlan(n, d, e, b, w, tuple(parts), n_min, trim)


def _setup(data: Any, eps: float, bound: float, width: float, split: tuple[float, ...],
           n_min: int, trim: bool, owner: str) -> tuple[F64, bool, RowwisePlan]:
    x = check_records(data, owner)
    scalar = x.ndim == 1
    rows = x.reshape(len(x), -1)
    plan = rowwise_plan(len(rows), rows.shape[1], eps, bound=bound, width=width, split=split,
                        n_min=n_min, trim=trim)
    return rows, scalar, plan


def _result(value: F64, scalar: bool) -> Any:
    return float(value[0]) if scalar else value


def mad_clipped_mean(data: Any, eps: float, *, bound: float, width: float = 3.0,
                     split: tuple[float, float, float] = CLIP_SPLIT,
                     rng: RNG = None, grid_points: int = DEFAULT_GRID_POINTS) -> RobustResult:
    """Pure eps-DP mean (replace-one, ``n`` public): private median and MAD, clip to
    ``m~ +- width * 1.4826 * MAD~``, Laplace mean. ``split`` = (centre, scale, mean).

    ``bound`` is a public scale: the centre is searched in ``[-bound, bound]`` (data outside
    still count, at the ends), the scale in ``[bound 2^-30, 2 bound]``; unlike worst-case
    clipping, the noise does not grow with ``bound`` (only the chance of a bad centre does,
    logarithmically). Clipping biases the mean of skewed data, and moves outliers to the
    window's edge rather than dropping them. docs/proofs/robust_mean.md §2.
    """
    x, scalar, plan = _setup(data, eps, bound, width, split, 1, False, "mad_clipped_mean")
    ec, es, em = plan.parts
    e = plan.eps
    cs = propose_centre_scale(x, ec, es, plan.bound, plan.width, rng, grid_points=grid_points)
    with np.errstate(over="ignore", invalid="ignore"):
        centred = np.clip(x - cs.centre, -cs.radius, cs.radius)
    noisy = _noisy_sums(centred, cs.radius, em, rng)
    value = cs.centre + noisy / len(x)
    return RobustResult(_result(value, scalar), PureDP(e, Neighbouring.REPLACE_ONE),
                        {"centre": _result(cs.centre, scalar), "scale": _result(cs.scale, scalar),
                         "radius": _result(cs.radius, scalar), "method": "mad_clip"})


def rowwise_pfr_mean(data: Any, eps: float, *, bound: float, width: float = 3.0,
                     split: tuple[float, float, float, float] = TRIM_SPLIT,
                     n_min: int = 2, rng: RNG = None,
                     grid_points: int = DEFAULT_GRID_POINTS) -> RobustResult | Refusal:
    """Pure eps-DP mean of the records inside a private window (PFR, row-wise form).

    Propose ``m~``, ``R`` (as :func:`mad_clipped_mean`); Filter: keep the records with
    ``|x_ij - m~_j| <= R_j`` for every coordinate (a row-wise map of released values);
    Release: the kept records' centred sum (Laplace, L1 sensitivity ``2R`` per coordinate)
    and their count (discrete Laplace, sensitivity 1), value ``m~ + sum~ / count~``.
    ``split`` = (centre, scale, sum, count). A noisy count below ``n_min`` is a
    :class:`Refusal` (charged). docs/proofs/robust_mean.md §3.

    It estimates the mean of the records within about three robust SDs of the median: on
    contaminated data, the inlier mean; on skewed data, a trimmed mean (biased).
    """
    x, scalar, plan = _setup(data, eps, bound, width, split, n_min, True, "rowwise_pfr_mean")
    ec, es, esum, ecount = plan.parts
    privacy = PureDP(plan.eps, Neighbouring.REPLACE_ONE)
    cs = propose_centre_scale(x, ec, es, plan.bound, plan.width, rng, grid_points=grid_points)
    with np.errstate(over="ignore", invalid="ignore"):
        dev = x - cs.centre
        keep = np.all(np.abs(dev) <= cs.radius, axis=1)
    kept = dev[keep]
    noisy = _noisy_sums(kept, cs.radius, esum, rng)
    count = int(keep.sum()) + int(discrete_laplace(noise_scale(1, ecount), None, rng))
    details = {"centre": _result(cs.centre, scalar), "scale": _result(cs.scale, scalar),
               "radius": _result(cs.radius, scalar), "noisy_core_size": count,
               "method": "rowwise"}
    if count < n_min:
        return Refusal("release", f"noisy count {count} < n_min = {n_min}", privacy, details)
    return RobustResult(_result(cs.centre + noisy / count, scalar), privacy, details)
