"""Which key hashes the ledger holds, kept in the process, so that a wrong key is refused
without a ledger lookup (a flood of wrong keys then costs a hash and a set lookup, not a
database round trip).

The held set answers only "no": a key whose hash is not in it is refused; a key whose
hash is in it is still looked up in the ledger on every request, so a revoked key stops
working at once (the set may still hold its hash: that only costs the lookup). The set is
read again when it is older than ``ttl`` seconds, from a read started after that age was
reached, so a key committed at time t is in every set read after t: **a key made by
another process (``dpsieve keys``, another worker) is refused for at most ``ttl``
seconds** (``DPSIEVE_KNOWN_KEYS_SECONDS``, default 1; 0 looks every key up). A key made
through this process's routes is added at once (:meth:`KnownKeys.added`). A store without
``key_hashes`` has every key looked up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from dpsieve.ledger.base import Principal

__all__ = ["KnownKeys"]


class KnownKeys:
    """The ledger's key hashes, read at most once per ``ttl`` seconds (module docstring)."""

    def __init__(self, store: Any, ttl: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._store, self._clock = store, clock
        self.ttl = ttl if callable(getattr(store, "key_hashes", None)) else 0.0
        self._hashes: frozenset[str] = frozenset()
        self._at: float | None = None  # when the read of _hashes started
        self._lock = threading.Lock()

    def absent(self, key_hash: str) -> bool:
        """Whether ``key_hash`` is known, without a read, to be no ledger key."""
        at = self._at
        return (self.ttl > 0 and at is not None and self._clock() - at < self.ttl
                and key_hash not in self._hashes)

    def principal_for_key(self, key_hash: str) -> Principal | None:
        """The ledger's principal for ``key_hash``; None without a lookup if the held set
        (read again first if older than ``ttl``) does not have it."""
        if self.ttl > 0 and key_hash not in self._current():
            return None
        p: Principal | None = self._store.principal_for_key(key_hash)
        return p

    def added(self, key_hash: str) -> None:
        """A key this process has just committed: admitted from now on."""
        with self._lock:
            self._hashes = self._hashes | {key_hash}

    def _current(self) -> frozenset[str]:
        with self._lock:
            now = self._clock()
            if self._at is None or now - self._at >= self.ttl:
                self._at = None  # a failed read keeps nothing
                self._hashes = frozenset(self._store.key_hashes())
                self._at = now  # the read started after now: conservative
            return self._hashes
