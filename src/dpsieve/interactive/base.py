"""What every interactive child shares: a declared privacy, a public view and a stored state.

A *child* is an interactive mechanism opened under a data set's budget: its whole privacy
is declared when it is created (``declared()``, a privacy description, and ``pld()``, a PLD
that dominates it), charged once, and every later answer comes from the child's own state.
The guarantee holds against an analyst who chooses each question after seeing every
earlier answer (of this child and of anything else): docs/proofs/interactive.md.

State. ``to_state()`` is the whole state as JSON-ready values, *including secrets* (a
sparse vector's noisy threshold, a counter's running sum and noise buffers);
``child_from_state`` rebuilds the child from it, so it survives a restart. ``public()`` is
the part an analyst may see: parameters, counters that are functions of the transcript,
never a secret. The secrets are independent of the data (noise) or are the data itself
(a counter's running sum); either way whoever reads ``to_state()`` must be trusted like the
steward (docs/interactive.md, "What the state reveals").
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from dpsieve._validation import fail
from dpsieve.accounting.events import PrivacyDescription
from dpsieve.accounting.pld import PLD
from dpsieve.errors import DPError

__all__ = [
    "STATE_VERSION",
    "Child",
    "ChildExhaustedError",
    "child_from_state",
    "register_child",
]

#: Version written into every stored state; a state of another version is refused.
STATE_VERSION = 1


class ChildExhaustedError(DPError):
    """A child has answered all it may (its positives, questions or updates are used up).

    The refusal depends on the public transcript only (how many answers of each kind were
    released), so it reveals nothing beyond what was already released and costs nothing.
    """


@runtime_checkable
class Child(Protocol):
    """Structural type of an interactive child (module docstring)."""

    @property
    def kind(self) -> str: ...

    def declared(self) -> PrivacyDescription: ...

    def pld(self) -> PLD: ...

    def public(self) -> dict[str, Any]: ...

    def to_state(self) -> dict[str, Any]: ...


_BUILDERS: dict[str, Callable[[dict[str, Any], Any], Child]] = {}


def register_child(kind: str, build: Callable[[dict[str, Any], Any], Child]) -> None:
    """Register how a stored state of ``kind`` is rebuilt (each child module calls it)."""
    _BUILDERS[kind] = build


def child_from_state(state: dict[str, Any], rng: Any = None) -> Child:
    """Rebuild a child from ``to_state()`` (``rng``: None for the secure source, or a seeded
    numpy Generator for simulations). Unknown kinds and versions are refused."""
    owner = "child_from_state"
    if not isinstance(state, dict):
        raise fail("state", owner, "a dict made by a child's to_state()", type(state).__name__)
    if state.get("version") != STATE_VERSION:
        raise fail("version", owner, f"{STATE_VERSION}", state.get("version"))
    kind = state.get("kind")
    build = _BUILDERS.get(kind) if isinstance(kind, str) else None
    if build is None:
        raise fail("kind", owner, f"one of {sorted(_BUILDERS)}", kind)
    return build(state, rng)
