"""A small thread-safe LRU memo for pure functions of public values.

Used where the service recomputes the same immutable object from the same input on every
request (a registered data set's :class:`~dpsieve.queries.schema.Schema`, a budget's
initial filter). The key must determine the value completely -- it is the input itself
(or an exact rendering of it), never a name or a version that could go stale -- so a hit
is the value a fresh computation would give, in any process, whatever other servers
sharing the ledger did. Values must be immutable or used read-only; errors are not cached.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["Memo"]

_V = TypeVar("_V")


class Memo(Generic[_V]):
    """At most ``size`` values by key, least recently used dropped first."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[Hashable, _V] = OrderedDict()

    def get(self, key: Hashable, make: Callable[[], _V]) -> _V:
        """The value for ``key``: remembered, or ``make()`` (then remembered)."""
        with self._lock:
            hit = self._items.get(key, _MISSING)
            if hit is not _MISSING:
                self._items.move_to_end(key)
                return hit  # type: ignore[return-value]
        value = make()  # outside the lock: may be slow; a race computes it twice
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_MISSING = object()
