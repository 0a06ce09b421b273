"""Effective resistances under edge-level DP: **not available** (pfr.md §6.4).

The natural per-edge score (the leverage ``w_e R_e``) depends on every other edge, so
neither the friend-count filter (Lemmas 1-3) nor a row-wise Variant B filter applies, and
deleting edges raises the leverage of the kept ones. dpsieve knows no proof of privacy
for a PFR release of effective resistances and therefore ships none: the function below
always raises :class:`UnsupportedError` (it never returns a number).
"""

from __future__ import annotations

from typing import Any, NoReturn

from dpsieve.errors import UnsupportedError

__all__ = ["REASON", "pfr_effective_resistance"]

REASON = (
    "PFR effective resistances are not available: the leverage score of an edge depends on "
    "all other edges and rises when edges are filtered out, so no filter with a proven "
    "privacy guarantee is known (docs/proofs/pfr.md section 6.4)."
)


def pfr_effective_resistance(*args: Any, **kwargs: Any) -> NoReturn:
    """Always raises :class:`UnsupportedError` with :data:`REASON`."""
    raise UnsupportedError(REASON)
