"""Limits a client cannot steer: failed authentications, request quotas, refusals.

Every table here is bounded and pruned on every call, and none ever stands between a
valid key and the service:

* :class:`FailureLimiter` counts failed authentications per presented key hash and per
  connection address (the socket's peer: proxy headers are read only from proxies the
  owner configured, ``dpsieve serve --trusted-proxy``). A key hash past its limit is
  refused without being looked up again (a 256-bit key that failed cannot become valid);
  an address past its limit has wrong keys answered 429 instead of 401, but every key it
  sends is still looked up, so a valid key behind a busy NAT or proxy is always admitted.
* :class:`TokenBuckets`: each analyst's request quota (``rate`` per second, ``burst``
  at once); past it, 429 with ``Retry-After`` before any work.
* :class:`ReadyCache`: while the ledger is ready, the readiness probe asks it (a read:
  health routes never write) at most once a second, however many probes arrive.
* :class:`WindowCounter` (refusals): each analyst's refused queries per window; past the
  cap, the analyst's queries are refused (429) before the ledger is touched, so the
  refusals an analyst can write to the append-only log are bounded.

The tables live in the process: with several worker processes each has its own (an
address gets ``workers`` times the limit). Times come from :func:`time.monotonic`.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["FailureLimiter", "ReadyCache", "TokenBuckets", "WindowCounter", "retry_after_header"]


def retry_after_header(wait: float) -> dict[str, str]:
    """``Retry-After`` in whole seconds (at least 1)."""
    return {"Retry-After": str(max(1, math.ceil(wait)))}


class WindowCounter:
    """At most ``limit`` events per key in fixed windows of ``window`` seconds; at most
    ``max_keys`` keys kept (least recently counted dropped first, and every expired
    window dropped on each call)."""

    def __init__(self, limit: int, window: float, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limit, self.window, self.max_keys = limit, window, max_keys
        self._clock = clock
        self._t: OrderedDict[str, tuple[float, int]] = OrderedDict()  # key -> (start, n)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._t)

    def _prune(self, now: float) -> None:
        t = self._t  # oldest update first: every expired window sits at the front
        while t:
            k, (start, _) = next(iter(t.items()))
            if now - start < self.window and len(t) <= self.max_keys:
                return
            del t[k]

    def retry_after(self, key: str) -> float | None:
        """Seconds until ``key`` may act again, or None if it may now."""
        if self.limit <= 0:
            return None
        now = self._clock()
        with self._lock:
            self._prune(now)
            hit = self._t.get(key)
            if hit is None or hit[1] < self.limit or now - hit[0] >= self.window:
                return None
            return max(0.0, hit[0] + self.window - now)

    def count(self, key: str) -> None:
        """Count one event of ``key``."""
        if self.limit <= 0:
            return
        now = self._clock()
        with self._lock:
            hit = self._t.pop(key, None)
            start, n = hit if hit is not None and now - hit[0] < self.window else (now, 0)
            self._t[key] = (start, n + 1)
            self._prune(now)


class FailureLimiter:
    """Failed authentications per key hash and per address (see module docstring)."""

    def __init__(self, limit: int, window: float = 60.0, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.by_key = WindowCounter(limit, window, max_keys, clock)
        self.by_addr = WindowCounter(limit, window, max_keys, clock)

    def key_blocked(self, key_hash: str | None) -> float | None:
        """Seconds until this key hash may be tried again (it failed too often)."""
        return None if key_hash is None else self.by_key.retry_after(key_hash)

    def failed(self, key_hash: str | None, addr: str) -> float | None:
        """Count a failure; the seconds to wait if the key or the address had already
        used up its limit (answer 429), else None (answer 401)."""
        waits = [w for w in (self.key_blocked(key_hash), self.by_addr.retry_after(addr))
                 if w is not None]
        if key_hash is not None:
            self.by_key.count(key_hash)
        self.by_addr.count(addr)
        return max(waits) if waits else None

    def __len__(self) -> int:
        return len(self.by_key) + len(self.by_addr)


class TokenBuckets:
    """A token bucket per key: ``rate`` tokens a second up to ``burst``; ``rate <= 0``
    admits everything. At most ``max_keys`` buckets (full ones are dropped first: a
    full bucket is the same as none)."""

    def __init__(self, rate: float, burst: float, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.max_keys = rate, max(1.0, burst), max_keys
        self._clock = clock
        self._b: OrderedDict[str, tuple[float, float]] = OrderedDict()  # key -> (t, tokens)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._b)

    def take(self, key: str) -> float | None:
        """Take one token for ``key``: None if there was one, else the seconds until there
        is (nothing taken)."""
        if self.rate <= 0:
            return None
        now = self._clock()
        with self._lock:
            t0, tokens = self._b.pop(key, (now, self.burst))
            tokens = min(self.burst, tokens + (now - t0) * self.rate)
            self._prune(now)
            if tokens >= 1.0:
                self._b[key] = (now, tokens - 1.0)
                return None
            self._b[key] = (now, tokens)
            return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        full_after = self.burst / self.rate  # seconds for any bucket to refill
        b = self._b
        while b:
            k, (t, _) = next(iter(b.items()))
            if now - t < full_after and len(b) < self.max_keys:
                return
            del b[k]


class ReadyCache:
    """The ledger's readiness (its ``check_ready``: reads only). A ready verdict is kept
    ``ttl`` seconds (probes in between cost nothing) unless a ledger fault is seen first
    (:meth:`invalidate`, called by the service's error handlers); a not-ready one is not
    kept, so recovery shows at the next probe."""

    def __init__(self, store: Any, ttl: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._check = getattr(store, "check_ready", None)
        self.ttl, self._clock = ttl, clock
        self._at: float | None = None
        self._lock = threading.Lock()

    def check(self) -> None:
        """Raise the ledger's error if it is not ready."""
        if not callable(self._check):
            return
        with self._lock:
            now = self._clock()
            if self._at is not None and now - self._at < self.ttl:
                return
            self._at = None
            self._check()  # raises when not ready: nothing kept
            self._at = self._clock()

    def fresh(self) -> bool:
        """Whether a "ready" verdict is held (no probe needed)."""
        at = self._at
        return at is not None and self._clock() - at < self.ttl

    def invalidate(self) -> None:
        """Forget the ready verdict (a ledger fault was seen)."""
        self._at = None
