"""API keys: random tokens shown once, stored as SHA-256 hashes.

Keys carry 256 bits of entropy from :mod:`secrets`, so an unsalted SHA-256 is a sound
storage form (no dictionary to attack); the lookup is by hash, so no secret is compared
byte by byte.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import threading
import time
from collections import Counter, deque

__all__ = ["FailedAuthLimiter", "hash_key", "key_id", "new_key", "owner_key_problem"]


def new_key() -> str:
    """A fresh API key (``dps_`` + 43 URL-safe characters)."""
    return "dps_" + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_id(key_hash: str) -> str:
    """A key's public identifier: the first 16 hex digits of its hash (reveals nothing
    usable about a 256-bit key; used to list and revoke keys)."""
    return key_hash[:16]


#: An owner key must carry at least this many bits by the estimate of :func:`owner_key_problem`.
MIN_OWNER_BITS = 128


def owner_key_problem(key: str) -> str | None:
    """Why ``key`` is too weak to be the owner key, or None (issue 11: long and random).

    At least 32 characters and at least 128 bits by the empirical Shannon entropy of its
    characters times its length: an estimate that errs high for structured keys, so it
    refuses only keys that are certainly weak ("owner-kkkk...", a word repeated); use
    ``dpsieve serve`` without --owner-key, or ``python -c "import secrets;
    print(secrets.token_urlsafe(32))"``, for a key that passes by far."""
    if len(key) < 32:
        return f"it has {len(key)} characters (at least 32 are needed)"
    counts = Counter(key)
    bits = max(0.0, -sum(c * math.log2(c / len(key)) for c in counts.values()))  # no "-0"
    if bits < MIN_OWNER_BITS:
        return (f"it carries about {bits:.0f} bits by its character frequencies (at least "
                f"{MIN_OWNER_BITS} are needed)")
    return None


class FailedAuthLimiter:
    """At most ``limit`` failed authentications per client address in ``window`` seconds;
    beyond that the address is refused (429) until its oldest failure leaves the window,
    before any key is looked up."""

    def __init__(self, limit: int, window: float = 60.0) -> None:
        self.limit, self.window = limit, window
        self._fails: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _prune(self, addr: str, now: float) -> deque[float]:
        q = self._fails.setdefault(addr, deque())
        while q and q[0] <= now - self.window:
            q.popleft()
        return q

    def retry_after(self, addr: str) -> float | None:
        """Seconds until ``addr`` may try again, or None if it may now."""
        now = time.monotonic()
        with self._lock:
            q = self._prune(addr, now)
            if len(q) < self.limit:
                if not q:
                    self._fails.pop(addr, None)
                return None
            return max(0.0, q[0] + self.window - now)

    def failed(self, addr: str) -> None:
        now = time.monotonic()
        with self._lock:
            self._prune(addr, now).append(now)
