"""Baselines that PFR is measured against (benchmarks/robust_utility.py, docs/robust.md).

All are pure ``eps``-DP (Analyze Gauss: ``(eps, delta)`` via zCDP) under replace-one
neighbours with ``n`` public:

* :func:`clipped_mean`: clip every coordinate to the public ``[-bound, bound]``, Laplace
  noise for L1 sensitivity ``2 d bound / n`` (what diffprivlib / Tumult do with bounds).
* :func:`adaptive_clipped_mean`: a private ``level``-quantile ``tau`` of ``max_j |x_ij|``
  (exponential mechanism, ``split eps``) on a public geometric grid up to ``bound``, then
  clipping to ``[-tau, tau]`` and Laplace for L1 sensitivity ``2 d tau / n``.
* :func:`analyze_gauss_pca`: rows scaled to L2 norm ``<= row_bound``, ``A^T A`` plus
  symmetric Gaussian noise (Dwork, Talwar, Thakurta, Zhang 2014), Frobenius sensitivity
  ``sqrt(2) row_bound^2`` under replace-one, zCDP converted by Bun & Steinke 2016, Prop. 1.3.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_in_open, check_positive
from dpsieve.accounting.events import ApproxDP, Neighbouring
from dpsieve.mechanisms.additive import GaussianMechanism
from dpsieve.robust._noise import exact_column_means, laplace_release
from dpsieve.robust.pipeline import check_records
from dpsieve.robust.propose import geometric_radii
from dpsieve.robust.variant_b import private_quantile

__all__ = ["adaptive_clipped_mean", "analyze_gauss_pca", "clipped_mean"]


def _laplace_mean(x: npt.NDArray[np.float64], half_width: float, eps: float,
                  rng: np.random.Generator | None) -> npt.NDArray[np.float64]:
    c = np.clip(x.reshape(len(x), -1), -half_width, half_width)
    sens = 2.0 * half_width * c.shape[1] / len(c) * (1.0 + 1e-12)
    return laplace_release(exact_column_means(c), sens, eps, rng)


def clipped_mean(data: npt.ArrayLike, bound: float, eps: float,
                 rng: np.random.Generator | None = None) -> float | npt.NDArray[np.float64]:
    """Worst-case clipping to ``[-bound, bound]`` per coordinate + Laplace (eps-DP)."""
    x = check_records(data, "clipped_mean")
    out = _laplace_mean(x, check_positive("bound", bound, "clipped_mean"),
                        check_positive("eps", eps, "clipped_mean"), rng)
    return float(out[0]) if x.ndim == 1 else out


def adaptive_clipped_mean(
    data: npt.ArrayLike, bound: float, eps: float, *, level: float = 0.9, split: float = 0.3,
    rng: np.random.Generator | None = None,
) -> float | npt.NDArray[np.float64]:
    """Clip to a private quantile of ``max_j |x_ij|``, then Laplace (eps-DP in total)."""
    x = check_records(data, "adaptive_clipped_mean")
    bound = check_positive("bound", bound, "adaptive_clipped_mean")
    eps = check_positive("eps", eps, "adaptive_clipped_mean")
    f = check_in_open("split", split, 0.0, 1.0, "adaptive_clipped_mean")
    norms = np.abs(x.reshape(len(x), -1)).max(axis=1)
    tau = private_quantile(norms, level, geometric_radii(bound * 1e-6, bound, 128), f * eps, rng)
    out = _laplace_mean(x, tau, (1.0 - f) * eps, rng)
    return float(out[0]) if x.ndim == 1 else out


def _rho_for(eps: float, delta: float) -> float:
    """Largest rho with rho + 2 sqrt(rho log(1/delta)) <= eps (rounded down)."""
    lg = math.log(1.0 / delta)
    return (math.sqrt(lg + eps) - math.sqrt(lg)) ** 2 * (1.0 - 1e-9)


def analyze_gauss_pca(
    data: npt.ArrayLike, k: int, eps: float, delta: float, row_bound: float,
    rng: np.random.Generator | None = None,
) -> tuple[npt.NDArray[np.float64], ApproxDP]:
    """Top-``k`` eigenvectors of a noisy ``A^T A`` (rows clipped to ``row_bound``)."""
    a = check_records(data, "analyze_gauss_pca")
    b = check_positive("row_bound", row_bound, "analyze_gauss_pca")
    norms = np.linalg.norm(a, axis=1, keepdims=True)
    a = a * np.minimum(1.0, b / np.maximum(norms, 1e-300))
    d = a.shape[1]
    iu = np.triu_indices(d)
    scale = np.where(iu[0] == iu[1], 1.0, math.sqrt(2.0))  # isometric coordinates
    rho = _rho_for(eps, delta)
    sens = math.sqrt(2.0) * b * b
    sigma = sens / math.sqrt(2.0 * rho)
    mech = GaussianMechanism(sigma, sens, Neighbouring.REPLACE_ONE, dimension=len(iu[0]))
    while mech.zcdp_rho() > rho:
        sigma *= 1.0 + 2.0**-10
        mech = GaussianMechanism(sigma, sens, Neighbouring.REPLACE_ONE, dimension=len(iu[0]))
    v = (a.T @ a)[iu] * scale
    noisy = np.asarray(mech.release(v, rng)) / scale
    m = np.zeros((d, d))
    m[iu] = noisy
    m = m + np.triu(m, 1).T
    w, vec = np.linalg.eigh(m)
    r = mech.zcdp_rho()
    eps_used = r + 2.0 * math.sqrt(r * math.log(1.0 / delta))
    return vec[:, np.argsort(w)[::-1][:k]], ApproxDP(eps_used, delta, Neighbouring.REPLACE_ONE)


