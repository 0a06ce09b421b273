"""The one parser of ``kind:key=value,...`` specs used by every CLI command.

Strict, because a spec states a privacy cost: a typo must not silently change it
(``gaussian:sigma=2,sensitivty=10`` read leniently would charge a query 100x too little).
Refused, each with the list of accepted keys: an unknown kind, an unknown key, a key given
twice, a missing required key, a value that is not a finite number (or not an integer
where one is required), an empty item or an item without ``=``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["SpecError", "SpecKind", "accepted", "parse_spec"]


class SpecError(ValueError):
    """A spec that does not parse (the message names the spec and the accepted keys)."""


@dataclass(frozen=True, slots=True)
class SpecKind:
    """The keys one kind of spec takes: ``required``, ``optional``, and which of them
    must be integers (``integers``)."""

    required: tuple[str, ...]
    optional: tuple[str, ...] = ()
    integers: tuple[str, ...] = ()

    def describe(self, kind: str) -> str:
        keys = [f"{k}=..." for k in self.required] + [f"[{k}=...]" for k in self.optional]
        return f"{kind}:{','.join(keys)}"


def accepted(kinds: Mapping[str, SpecKind]) -> str:
    """All accepted forms, e.g. ``gaussian:sigma=...,[sensitivity=...]; pure:eps=...``."""
    return "; ".join(kinds[k].describe(k) for k in sorted(kinds))


def parse_spec(spec: str, kinds: Mapping[str, SpecKind], what: str = "spec"
               ) -> tuple[str, dict[str, float]]:
    """``"kind:a=1,b=2"`` -> ``("kind", {"a": 1.0, "b": 2.0})``, or :class:`SpecError`.

    ``what`` names the thing parsed in messages (``"mechanism"``, ``"budget"``, ...).
    Integer keys are returned as floats with integral values (the caller converts).
    """
    if not isinstance(spec, str):
        raise SpecError(f"{what} {spec!r} must be a string kind:key=value,...")
    kind, _, rest = spec.partition(":")
    kind = kind.strip().lower()
    if kind not in kinds:
        raise SpecError(f"unknown {what} kind {kind!r} in {spec!r}; accepted: "
                        f"{accepted(kinds)}")
    form = kinds[kind]
    allowed = form.required + form.optional
    takes = f"{what} {kind!r} takes {form.describe(kind)}"
    params: dict[str, float] = {}
    items = [s.strip() for s in rest.split(",")] if rest.strip() else []
    for item in items:
        key, eq, val = (x.strip() for x in item.partition("="))
        if not item or not eq or not key:
            raise SpecError(f"bad item {item!r} in {spec!r} (expected key=value); {takes}")
        if key not in allowed:
            raise SpecError(f"unknown key {key!r} in {spec!r}; {takes}")
        if key in params:
            raise SpecError(f"key {key!r} given twice in {spec!r}; {takes}")
        try:
            x = float(val)
        except ValueError:
            raise SpecError(f"{key!r} in {spec!r} must be a number, got {val!r}; "
                            f"{takes}") from None
        if not math.isfinite(x):
            raise SpecError(f"{key!r} in {spec!r} must be a finite number, got {val!r}")
        if key in form.integers and not x.is_integer():
            raise SpecError(f"{key!r} in {spec!r} must be an integer, got {val!r}")
        params[key] = x
    missing = [k for k in form.required if k not in params]
    if missing:
        raise SpecError(f"{spec!r} is missing {', '.join(map(repr, missing))}; {takes}")
    return kind, params
