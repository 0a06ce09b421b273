"""API keys: random tokens shown once, stored as SHA-256 hashes.

Keys carry 256 bits of entropy from :mod:`secrets`, so an unsalted SHA-256 is a sound
storage form (no dictionary to attack); the lookup is by hash, so no secret is compared
byte by byte.
"""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["hash_key", "new_key"]


def new_key() -> str:
    """A fresh API key (``dps_`` + 43 URL-safe characters)."""
    return "dps_" + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    """The stored form of a key."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()
