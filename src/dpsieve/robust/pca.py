"""PFR principal subspace of rank k (pfr.md §6.3): average of per-block projections.

A public ``seed`` permutes the ``n`` row indices and cuts them into ``m = n // block_size``
blocks (leftover rows dropped), so replacing one row changes at most one block. Each block
``B`` gives the projection ``P_B`` onto the top-``k`` right singular vectors of its rows
(the uncentred second moment: centre the data with *public* information first). PFR mean
(Theorem 2, L1 metric on the upper-triangular entries ``vec_u(P_B)``, Laplace release) runs
on the ``m`` block records, so the run is ``(eps, delta)``-DP for replacing one block, hence
one row. Output: the top-``k`` eigenvectors of the released symmetric matrix
(post-processing), as a ``(d, k)`` array with orthonormal columns.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, fail
from dpsieve.robust.mean import pfr_mean
from dpsieve.robust.pipeline import check_records
from dpsieve.robust.propose import geometric_radii
from dpsieve.robust.results import Refusal, RobustResult

__all__ = ["block_projections", "pfr_pca", "top_k_subspace"]


def top_k_subspace(m: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
    """Orthonormal ``(d, k)`` basis of the top-``k`` eigenvectors of a symmetric matrix."""
    w, v = np.linalg.eigh((m + m.T) / 2.0)
    out: npt.NDArray[np.float64] = v[:, np.argsort(w)[::-1][:k]]
    return out


def block_projections(a: npt.NDArray[np.float64], k: int, block_size: int,
                      seed: int) -> npt.NDArray[np.float64]:
    """``vec_u(P_B)`` for each public block (rows of the result)."""
    n, d = a.shape
    perm = np.random.default_rng(seed).permutation(n)  # public: depends on n and seed only
    m = n // block_size
    iu = np.triu_indices(d)
    out = np.empty((m, len(iu[0])))
    for b in range(m):
        rows = a[perm[b * block_size : (b + 1) * block_size]]
        _, _, vt = np.linalg.svd(rows, full_matrices=False)
        v = vt[:k].T
        out[b] = (v @ v.T)[iu]
    return out


def pfr_pca(
    data: Any, k: int, eps: float, delta: float, *, block_size: int = 20, seed: int = 0,
    rng: np.random.Generator | None = None, **pfr_kwargs: Any,
) -> RobustResult | Refusal:
    """``(eps, delta)``-DP rank-``k`` principal subspace (replace-one rows, ``n`` public)."""
    a = check_records(data, "pfr_pca", min_rows=1)
    if a.ndim != 2:
        raise fail("data", "pfr_pca", "a 2-D array (rows x features)", a.shape)
    d = a.shape[1]
    check_int("k", k, "pfr_pca", minimum=1)
    if k > d:
        raise fail("k", "pfr_pca", f"an int in [1, {d}]", k)
    check_int("block_size", block_size, "pfr_pca", minimum=k)
    check_int("seed", seed, "pfr_pca", minimum=0)
    vecs = block_projections(a, k, block_size, seed)
    top = 2.0 * d * (d + 1) / 2  # L1 diameter bound of vec_u of projections (entries in [-1,1])
    out = pfr_mean(vecs, eps, delta, radii=geometric_radii(top * 1e-4, top, 48), rng=rng,
                   method="friendly", **pfr_kwargs)
    if isinstance(out, Refusal):
        return out
    mat = np.zeros((d, d))
    mat[np.triu_indices(d)] = np.asarray(out.value)
    mat = mat + np.triu(mat, 1).T
    return RobustResult(top_k_subspace(mat, k), out.privacy,
                        {**out.details, "blocks": len(vecs), "block_size": block_size})
