"""The keyed 64-bit mixer behind contribution bounding: one definition for every engine.

Contribution bounding keeps, for each privacy unit, a uniformly random subset of its groups
(L0) and of its rows in a group (L-infinity). Engines must agree *exactly* on which rows
are kept for a given sampling key, and the choice must not depend on the order of rows in
a file or on how an engine partitions them. Both follow from computing each row's
*priority* as a pure function of (key, the unit's value, the group, the row's rank among
the unit's rows of that group sorted by content) with the integer mixer below, which every
engine can evaluate with 64-bit wrapping arithmetic (numpy ``uint64``, polars ``UInt64``,
DuckDB ``UHUGEINT`` masked to 64 bits, Spark ``LongType``):

    mix(x) = x ^= x >> 27; x *= C1; x ^= x >> 33; x *= C2; x ^= x >> 27   (mod 2^64)

(the "moremur" constants of P. Evensen, both below 2^63 so that DuckDB's 128-bit product
of a 64-bit word and a constant never overflows). ``mix`` is a bijection of 64-bit words.

Encodings of values (:func:`encode`): an integer is its two's-complement 64-bit word, a
boolean 0 or 1, a string the low 64 bits of its MD5 digest of UTF-8 (DuckDB's
``md5_number_lower``: bytes 8..15 of the digest, little-endian; a lone surrogate, which
only a pandas ``object`` column can hold, as its own three bytes (``surrogatepass``): the
encoding is total, and UTF-8's on every valid string), a missing value
:data:`NULL_CODE`. Priorities (docs/queries-engines.md):

* group choice (L0):  ``p0(u, g) = mix(mix(k0 ^ enc(u)) ^ h(g))``, keep the L0 smallest,
  ties broken by ``h(g)``;
* row choice (L-inf): ``p1(u, g, i) = mix(mix(mix(k1 ^ enc(u)) ^ h(g)) ^ i)``, keep the
  L-inf smallest, ties broken by ``i``;

with ``k0 = mix(seed ^ SALT0)``, ``k1 = mix(seed ^ SALT1)``, ``h(g)`` the index of the group
in the public key list, or for observed keys the fold ``h = mix(h ^ enc(v))`` over the key
values starting from 0. Privacy never depends on the quality of this mixer (each unit's
choice is a function of the key and that unit's own rows only; docs/proofs/queries.md §2);
uniformity does, and is tested statistically.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = [
    "C1",
    "C2",
    "MASK64",
    "NULL_CODE",
    "SALT0",
    "SALT1",
    "encode",
    "fold",
    "mix",
    "mix_array",
    "sampling_keys",
]

MASK64 = (1 << 64) - 1
C1 = 0x3C79AC492BA7B653
C2 = 0x1C69B3F74AC4AE35
#: The encoding of a missing key value (an observed group whose key is NULL).
NULL_CODE = 0x9E3779B97F4A7C15
SALT0 = 0x243F6A8885A308D3
SALT1 = 0x13198A2E03707344

U64 = npt.NDArray[np.uint64]


def mix(x: int) -> int:
    """The mixer on one Python int in [0, 2^64)."""
    x &= MASK64
    x ^= x >> 27
    x = (x * C1) & MASK64
    x ^= x >> 33
    x = (x * C2) & MASK64
    x ^= x >> 27
    return x


def mix_array(x: U64) -> U64:
    """The mixer on a ``uint64`` array (numpy multiplication wraps modulo 2^64)."""
    x = np.asarray(x, dtype=np.uint64)
    with np.errstate(over="ignore"):
        x = x ^ (x >> np.uint64(27))
        x = x * np.uint64(C1)
        x = x ^ (x >> np.uint64(33))
        x = x * np.uint64(C2)
        x = x ^ (x >> np.uint64(27))
    return x


def encode(value: object) -> int:
    """The 64-bit word of one unit or key value (module docstring)."""
    if value is None:
        return NULL_CODE
    if isinstance(value, bool | np.bool_):
        return int(bool(value))
    if isinstance(value, int | np.integer):
        return int(value) & MASK64
    if isinstance(value, str):
        # total: a lone surrogate in a row must not fail the query after its charge
        data = value.encode("utf-8", "surrogatepass")
        digest = hashlib.md5(data, usedforsecurity=False).digest()
        return int.from_bytes(digest[8:16], "little")
    raise TypeError(f"no sampling encoding for values of type {type(value).__name__}")


def fold(values: Sequence[object]) -> int:
    """``h(g)`` of an observed group: ``h = mix(h ^ encode(v))`` over its key values."""
    h = 0
    for v in values:
        h = mix(h ^ encode(v))
    return h


def sampling_keys(seed: int) -> tuple[int, int]:
    """(k0, k1): the group-choice and row-choice keys derived from a 64-bit ``seed``."""
    return mix((seed & MASK64) ^ SALT0), mix((seed & MASK64) ^ SALT1)
