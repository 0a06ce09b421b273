"""Per-record contributions whose charged norm dominates what is actually added.

A per-record filter charges record i for the norm c_i of what it contributes to the noisy
sum. In a training loop the contribution is computed in floating point (float32 in most
models): clipping ``g_i * min(1, C / ||g_i||)`` with a float32 norm and a float32 product
can give a vector whose exact norm exceeds the charged ``min(||g_i||_f32, C)`` (by up to
5e-7 relative, in half of all record-steps of a small MLP), and a float32 sum of the
contributions is not their exact sum. :func:`clip_contributions` makes both exact:

1. the per-record gradients are widened to float64 (exact), their norms computed and each
   row scaled by ``min(1, cap (1 - 2^-30) / norm)`` (the margin 2^-30 absorbs the norm's and
   the product's rounding, so a clipped row stays within its cap);
2. every coordinate is truncated toward zero onto the lattice 2^-L, with L the largest
   exponent for which n rows of norm <= max cap sum exactly in float64
   (n max_cap 2^L <= 2^52): truncation only shrinks each coordinate, so each row's norm
   only falls, and the float64 sum of the rows (any order) is then the exact sum;
3. the charged norm of each row is its norm computed in lattice units (integer squares: no
   underflow) rounded up by (d + 4) u relative (a sum of d squares, a square root and one
   product: relative error < (d/2 + 3) u), so it dominates the exact norm of the row added.

Direction: charges err upward (never below the norm added); contributions err toward zero
(less signal, never more). Noise is then added to the exact sum (in float64) and the
result may be rounded to the model's dtype: post-processing.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpsieve._rounding import next_up_array
from dpsieve._validation import fail

__all__ = ["clip_contributions"]

U = 2.0**-53
#: Relative margin of the clip: the clipped row's computed norm is at most cap (1 - 2^-30).
CLIP_MARGIN = 2.0**-30


def clip_contributions(
    grads: npt.ArrayLike, caps: npt.ArrayLike
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(contributions, charged norms) for per-record gradients ``grads`` (n x d, any float
    dtype) clipped to per-record ``caps`` (scalar or length n, finite, >= 0).

    ``contributions`` (float64, n x d) sum exactly in float64 in any order; ``charged[i]``
    >= the exact Euclidean norm of ``contributions[i]``, and <= ``caps[i]`` for d < 2^20.
    A row of zeros (or a cap of 0) is charged 0.
    """
    g = np.asarray(grads)
    if g.ndim != 2 or not np.issubdtype(g.dtype, np.floating):
        raise fail("grads", "clip_contributions", "an n x d array of floats", g.shape)
    g = g.astype(np.float64)
    n, d = g.shape
    c = np.broadcast_to(np.asarray(caps, dtype=np.float64), (n,))
    if not (np.all(np.isfinite(c)) and np.all(c >= 0.0)):
        raise fail("caps", "clip_contributions", "finite caps >= 0", caps)
    if not np.all(np.isfinite(g)):
        raise fail("grads", "clip_contributions", "finite gradients", "non-finite entries")
    norms = np.sqrt(np.einsum("ij,ij->i", g, g))
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > 0.0, np.minimum(1.0, c * (1.0 - CLIP_MARGIN) / norms), 0.0)
    rows = g * scale[:, None]
    top = float(np.max(c)) if n else 0.0
    # n rows of norm <= top: every partial sum of a coordinate is below n top in magnitude;
    # on the lattice 2^-L with n top 2^L <= 2^52 each is an integer below 2^52: exact
    exp = 52 - math.ceil(math.log2(max(n * top, 2.0**-900)))
    lattice = np.trunc(np.ldexp(rows, exp))  # integers below 2^52 / n in magnitude
    out: npt.NDArray[np.float64] = np.ldexp(lattice, -exp)
    # the norm in lattice units (integer squares below 2^104: no underflow), rounded up,
    # then scaled back (exact unless subnormal, where the next float up covers the rounding)
    units = np.sqrt(np.einsum("ij,ij->i", lattice, lattice)) * (1.0 + (d + 4) * U)
    charged: npt.NDArray[np.float64] = np.ldexp(units, -exp)
    tiny = (charged < 2.0**-1020) & (units > 0.0)
    charged[tiny] = next_up_array(charged[tiny])
    return out, charged
