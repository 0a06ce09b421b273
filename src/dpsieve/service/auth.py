"""API keys: random tokens shown once, stored as SHA-256 hashes.

Keys carry 256 bits of entropy from :mod:`secrets`, so an unsalted SHA-256 is a sound
storage form (no dictionary to attack); the lookup is by hash, so no secret is compared
byte by byte.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import string
from collections import Counter

__all__ = ["hash_key", "key_id", "new_key", "owner_key_problem"]


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
#: The character sets a random key is drawn from, smallest first: a key's bits are its
#: length times log2 of the size of the first set holding all its characters.
_ALPHABETS = (
    ("hexadecimal", frozenset("0123456789abcdef")),
    ("hexadecimal", frozenset("0123456789ABCDEF")),
    ("base32", frozenset(string.ascii_uppercase + "234567")),
    ("alphanumeric", frozenset(string.ascii_letters + string.digits)),
    ("base64", frozenset(string.ascii_letters + string.digits + "+/-_")),
    ("printable ASCII", frozenset(map(chr, range(33, 127)))),
)
#: A random key's characters are spread out: its empirical entropy per character is at
#: least this share of the most its length and alphabet allow (random keys: >= 0.70 in
#: 10^6 draws of each common form; "passwordpassword...": 0.55, "a1a1...": 0.25).
MIN_SPREAD = 0.6


def owner_key_problem(key: str) -> str | None:
    """Why ``key`` is too weak to be the owner key, or None.

    Judged by length and alphabet: at least 128 bits as its length (without base64
    ``=`` padding) times log2 of the smallest standard alphabet holding its characters
    (hex: 4 bits a character, so ``openssl rand -hex 16`` passes; base64 6, printable
    ASCII 6.6). That estimate is right for random keys and errs high for chosen ones, so
    two checks catch structure: the characters' empirical entropy must reach
    :data:`MIN_SPREAD` of the most possible, and the key may not be a shorter string
    repeated. It refuses keys that are certainly weak, never a random one of 128 bits;
    omit the key to have one generated (``dpsieve serve``)."""
    body = key.rstrip("=")
    n = len(body)
    if n == 0:
        return "it is empty"
    name, size = next(((nm, len(a)) for nm, a in _ALPHABETS if set(body) <= a),
                      ("any characters", 256))
    bits = n * math.log2(size)
    if bits < MIN_OWNER_BITS:
        return (f"{n} {name} characters carry at most {bits:.0f} bits (at least "
                f"{MIN_OWNER_BITS} are needed)")
    counts = Counter(body)
    spread = max(0.0, -sum(c / n * math.log2(c / n) for c in counts.values()))  # no "-0"
    if spread < MIN_SPREAD * min(math.log2(size), math.log2(n)):
        return (f"its characters repeat too much to be random: about {spread * n:.0f} "
                f"bits by their frequencies (at least {MIN_OWNER_BITS} are needed)")
    if any(n % k == 0 and body == body[:k] * (n // k) for k in range(1, n // 2 + 1)):
        return "it is a shorter string repeated"
    return None
