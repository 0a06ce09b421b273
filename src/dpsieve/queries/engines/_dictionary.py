"""Dictionary-encoded string columns and a sort-free ``np.unique`` for dense integers.

The numpy core (:mod:`dpsieve.queries.engines._numpy`) groups, matches and hashes values
column by column. On Python strings every one of those steps sorts or hashes objects row
by row; a string column is therefore encoded once (:func:`string_col`): int64 codes into
a :class:`Dictionary` of its distinct strings in sorted order. Code order is string order,
so grouping the codes orders groups as grouping the strings does, and a step that needs a
string's value (a predicate, a category, the sampling mixer's word) computes it once per
distinct string and takes it by code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpsieve.queries._mix import encode

__all__ = ["Dictionary", "coded_strings", "string_codes", "unique_inverse"]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]


class Dictionary:
    """The distinct strings of a column, sorted (Python's order of ``str``, the order
    ``np.unique`` sorts them in), and their ``_mix.encode`` words, computed on first use
    and kept (shared by every row subset of the column: the service's kept copy of a file
    hashes each distinct string once, not once per query). Read-only."""

    __slots__ = ("_words", "strings")

    def __init__(self, strings: tuple[str, ...]) -> None:
        self.strings = strings
        self._words: U64 | None = None

    def __len__(self) -> int:
        return len(self.strings)

    def words(self) -> U64:
        """``encode(s)`` of every string, in dictionary order (read-only)."""
        w = self._words
        if w is None:  # two threads may both compute it: the same array either way
            w = np.asarray([encode(s) for s in self.strings], dtype=np.uint64).reshape(-1)
            w.flags.writeable = False
            self._words = w
        return w


def string_codes(values: Any) -> tuple[I64, Dictionary]:
    """(codes, dictionary) of a sequence of ``str``: each value looked up in a dict as it
    is read; only the distinct values are sorted."""
    table: dict[str, int] = {}
    raw = np.fromiter((table.setdefault(v, len(table)) for v in values), dtype=np.int64,
                      count=len(values))
    return coded_strings(raw, list(table))


def coded_strings(codes: I64, seen: Sequence[str]) -> tuple[I64, Dictionary]:
    """(codes, dictionary) from codes into ``seen`` (strings in any order, repeats
    allowed: e.g. a filled "" beside a real empty string), recoded into the sorted
    dictionary of the distinct strings."""
    table: dict[str, int] = {}
    first = np.asarray([table.setdefault(v, len(table)) for v in seen], dtype=np.int64)
    distinct = list(table)
    order = sorted(range(len(distinct)), key=distinct.__getitem__)
    remap = np.empty(len(distinct), dtype=np.int64)
    remap[order] = np.arange(len(distinct), dtype=np.int64)
    out = remap[first][codes] if codes.shape[0] else np.zeros(0, dtype=np.int64)
    return np.asarray(out, dtype=np.int64), Dictionary(tuple(distinct[k] for k in order))


def unique_inverse(x: npt.NDArray[Any]) -> tuple[npt.NDArray[Any], I64]:
    """``np.unique(x, return_inverse=True)`` (the inverse as a flat int64 array). Integers
    in ``[0, R)`` with ``R`` at most ``4 len(x) + 65536`` (dictionary codes, group codes)
    are counted instead of sorted: ``O(len(x) + R)``, the same sorted uniques and inverse."""
    n = x.shape[0]
    if n and x.dtype == np.int64:
        lo, hi = int(x.min()), int(x.max())
        if lo >= 0 and hi < 4 * n + 65536:
            present = np.bincount(x, minlength=hi + 1) > 0
            uniq = np.nonzero(present)[0].astype(np.int64)
            rank = np.cumsum(present, dtype=np.int64) - 1
            return uniq, rank[x]
    uniq, inv = np.unique(x, return_inverse=True)
    return uniq, inv.reshape(-1).astype(np.int64)
