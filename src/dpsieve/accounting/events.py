"""Privacy descriptions: the closed-form ways a query's privacy cost can be stated.

Each is an immutable, validated value object. A filter accepts either a :class:`PLD`
(see :mod:`dpsieve.accounting.pld`) or one of these. ``to_dict``/``description_from_dict``
give an exact JSON round trip (floats are written with ``repr`` precision by ``json``).

The neighbouring relation is part of every description: mixing add/remove and replace-one
costs without an explicit conversion is an error (:class:`NeighbourRelationError`).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias

from dpsieve._validation import (
    check_in_closed,
    check_nonnegative,
    check_positive,
    fail,
)
from dpsieve.errors import NeighbourRelationError, ValidationError

__all__ = [
    "GDP",
    "RDP",
    "ZCDP",
    "ApproxDP",
    "ApproxZCDP",
    "Neighbouring",
    "PrivacyDescription",
    "PureDP",
    "check_same_relation",
    "description_from_dict",
    "description_from_json",
]


class Neighbouring(StrEnum):
    """Which datasets are neighbours. Replace-one costs can be up to twice add/remove ones."""

    ADD_REMOVE = "add_remove"
    REPLACE_ONE = "replace_one"


@dataclass(frozen=True, slots=True)
class PureDP:
    """eps-DP: PLD dominated by R_{eps,0}."""

    eps: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_nonnegative("eps", self.eps, "PureDP", allow_inf=True)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "pure", "eps": self.eps, "neighbouring": self.neighbouring.value}


@dataclass(frozen=True, slots=True)
class ApproxDP:
    """(eps, delta)-DP: PLD dominated by R_{eps,delta}."""

    eps: float
    delta: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_nonnegative("eps", self.eps, "ApproxDP", allow_inf=True)
        check_in_closed("delta", self.delta, 0.0, 1.0, "ApproxDP")

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "approx",
            "eps": self.eps,
            "delta": self.delta,
            "neighbouring": self.neighbouring.value,
        }


@dataclass(frozen=True, slots=True)
class ZCDP:
    """rho-zCDP: E[e^{(a-1)Z}] <= e^{(a-1) a rho} for all a > 1 (Bun & Steinke 2016)."""

    rho: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_nonnegative("rho", self.rho, "ZCDP", allow_inf=True)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "zcdp", "rho": self.rho, "neighbouring": self.neighbouring.value}


@dataclass(frozen=True, slots=True)
class ApproxZCDP:
    """delta-approximate rho-zCDP (Bun & Steinke 2016, Def. 1.9)."""

    rho: float
    delta: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_nonnegative("rho", self.rho, "ApproxZCDP", allow_inf=True)
        check_in_closed("delta", self.delta, 0.0, 1.0, "ApproxZCDP")

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "approx_zcdp",
            "rho": self.rho,
            "delta": self.delta,
            "neighbouring": self.neighbouring.value,
        }


@dataclass(frozen=True, slots=True)
class GDP:
    """mu-GDP: PLD dominated by G_mu (Dong, Roth, Su 2022)."""

    mu: float
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        check_nonnegative("mu", self.mu, "GDP", allow_inf=True)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "gdp", "mu": self.mu, "neighbouring": self.neighbouring.value}


@dataclass(frozen=True, slots=True)
class RDP:
    """An RDP curve: (orders[i], values[i])-RDP for each i (Mironov 2017). Orders > 1."""

    orders: tuple[float, ...]
    values: tuple[float, ...]
    neighbouring: Neighbouring = field(default=Neighbouring.ADD_REMOVE)

    def __post_init__(self) -> None:
        if len(self.orders) == 0 or len(self.orders) != len(self.values):
            raise fail("orders", "RDP", "a non-empty tuple as long as 'values'", self.orders)
        for a in self.orders:
            check_positive("orders", a, "RDP")
            if not (a > 1) or not math.isfinite(a):
                raise fail("orders", "RDP", "finite floats > 1", self.orders)
        for v in self.values:
            check_nonnegative("values", v, "RDP", allow_inf=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "rdp",
            "orders": list(self.orders),
            "values": list(self.values),
            "neighbouring": self.neighbouring.value,
        }


PrivacyDescription: TypeAlias = PureDP | ApproxDP | ZCDP | ApproxZCDP | GDP | RDP


def _number(d: dict[str, Any], key: str, owner: str) -> float:
    """``d[key]`` as a float: a real number, never a bool or a string (JSON ``true`` was
    read as 1.0 and ``"0.5"`` as 0.5: a request's type error became a charge). A missing
    key raises KeyError, which :func:`description_from_json` names (e.g. 'budget')."""
    return _real(d[key], key, owner)


def _real(v: Any, key: str, owner: str) -> float:
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise fail(key, owner, "a number (not a boolean or a string)", v)
    try:
        return float(v)
    except OverflowError:
        raise fail(key, owner, "a number within the float range", v) from None


def _reals(d: dict[str, Any], key: str, owner: str) -> tuple[float, ...]:
    v = d.get(key)
    if not isinstance(v, list | tuple):
        raise fail(key, owner, "a list of numbers", v)
    return tuple(_real(x, key, owner) for x in v)


def description_from_dict(d: dict[str, Any]) -> PrivacyDescription:
    """Inverse of ``to_dict`` for every description type. Values must be numbers (a bool
    or a string is refused naming its key)."""
    if not isinstance(d, dict) or "type" not in d:
        raise fail("d", "description_from_dict", "a dict with a 'type' key", d)
    nb = Neighbouring(d.get("neighbouring", Neighbouring.ADD_REMOVE.value))
    t = d["type"]
    if t == "pure":
        return PureDP(_number(d, "eps", "PureDP"), nb)
    if t == "approx":
        return ApproxDP(_number(d, "eps", "ApproxDP"), _number(d, "delta", "ApproxDP"), nb)
    if t == "zcdp":
        return ZCDP(_number(d, "rho", "ZCDP"), nb)
    if t == "approx_zcdp":
        return ApproxZCDP(_number(d, "rho", "ApproxZCDP"), _number(d, "delta", "ApproxZCDP"),
                          nb)
    if t == "gdp":
        return GDP(_number(d, "mu", "GDP"), nb)
    if t == "rdp":
        return RDP(_reals(d, "orders", "RDP"), _reals(d, "values", "RDP"), nb)
    raise fail(
        "type", "description_from_dict", "one of pure, approx, zcdp, approx_zcdp, gdp, rdp", t
    )


def description_from_json(d: Any, neighbouring: str | None = None, name: str = "privacy"
                          ) -> PrivacyDescription:
    """The one mapping of a privacy description's JSON, where it enters (service, CLI, a
    Session's dict): ``d`` a dict (under ``neighbouring`` unless it names its relation), or a
    description, kept as it is. Every failure is a ValidationError naming ``name``."""
    if isinstance(d, PureDP | ApproxDP | ZCDP | ApproxZCDP | GDP | RDP):
        return d
    if isinstance(d, Mapping) and neighbouring is not None and "neighbouring" not in d:
        d = {**d, "neighbouring": neighbouring}
    try:
        return description_from_dict(dict(d) if isinstance(d, Mapping) else d)
    except ValidationError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise fail(name, "query", f"a complete privacy description (missing or bad {e})",
                   d) from None


def check_same_relation(*relations: Neighbouring) -> Neighbouring:
    """Return the common neighbouring relation or raise :class:`NeighbourRelationError`."""
    rels = set(relations)
    if len(rels) > 1:
        raise NeighbourRelationError(
            "Privacy events under different neighbouring relations cannot be composed "
            f"without conversion; got {sorted(r.value for r in rels)}."
        )
    return next(iter(rels)) if rels else Neighbouring.ADD_REMOVE
