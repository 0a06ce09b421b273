"""What a filter and a ledger are charged: the typed :data:`Charge`, and its JSON edge.

A charge is a privacy description (:mod:`dpsieve.accounting.events`), a
:class:`~dpsieve.accounting.pld.PLD`, or a training step (:class:`DPSGDStep` for the
training filter, :class:`~dpsieve.filters.per_record.RecordStep` for the per-record
filters). Filters (``try_spend``/``dry_run``) and ledgers (``BudgetStore.spend``) take
typed charges only: :func:`check_charge` refuses anything else, a dict included, with
:class:`~dpsieve.errors.ChargeTypeError` naming the parameter, before any state is read.

JSON becomes a charge once, at an edge (the service's request models, the CLI, a
``Session`` entry point that takes a dict), with :func:`charge_from_dict`;
:func:`charge_to_dict` is the JSON-ready description written into decisions and audit
logs (a PLD is described as ``{"type": "pld"}``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, TypeGuard

from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    PrivacyDescription,
    PureDP,
    description_from_dict,
)
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ChargeTypeError
from dpsieve.filters._record_step import RecordStep
from dpsieve.mechanisms.subsampled import DPSGDStep

__all__ = [
    "Charge",
    "PrivacyCharge",
    "Workload",
    "charge_from_dict",
    "charge_to_dict",
    "check_charge",
    "is_privacy_charge",
]

#: A privacy cost stated in closed form or as a PLD: what every budget filter is charged.
PrivacyCharge: TypeAlias = PrivacyDescription | PLD
#: Everything a filter or a ledger may be charged (training steps for the training filters).
Charge: TypeAlias = PrivacyDescription | PLD | DPSGDStep | RecordStep
#: One privacy charge or several, offered cyclically (a workload; a mixed budget's typical).
Workload: TypeAlias = PrivacyCharge | Sequence[PrivacyCharge]

_DESCRIPTIONS = (PureDP, ApproxDP, ZCDP, ApproxZCDP, GDP, RDP)
_CHARGES = (*_DESCRIPTIONS, PLD, DPSGDStep, RecordStep)
_WHAT = ("a typed charge: a privacy description (PureDP, ApproxDP, ZCDP, ApproxZCDP, GDP, "
         "RDP), a PLD, or a training step (DPSGDStep, RecordStep)")


def is_privacy_charge(q: object) -> TypeGuard[PrivacyCharge]:
    """Whether ``q`` is a privacy description or a PLD."""
    return isinstance(q, (*_DESCRIPTIONS, PLD))


def check_charge(query: object, name: str = "query", owner: str = "") -> Charge:
    """``query`` itself if it is a typed :data:`Charge`; else :class:`ChargeTypeError`
    naming ``name`` (a dict is told where JSON is mapped: at the edge, once)."""
    if isinstance(query, _CHARGES):
        return query
    where = f" of {owner}()" if owner else ""
    if isinstance(query, Mapping):
        raise ChargeTypeError(
            f"The '{name}' parameter{where} must be {_WHAT}, not a dict: JSON is mapped to "
            "a typed charge once, at the service, the CLI or a Session entry point "
            f"(dpsieve.filters.charge.charge_from_dict). Got {_short(query)} instead.",
            parameter=name, constraint=_WHAT, value=query)
    raise ChargeTypeError(
        f"The '{name}' parameter{where} must be {_WHAT}. Got {_short(query)} instead.",
        parameter=name, constraint=_WHAT, value=query)


def charge_from_dict(d: Mapping[str, Any]) -> PrivacyCharge:
    """A description dict (``description_from_dict``) or a PLD dict (``{"type": "pld",
    ...}`` or ``{"pld": {...}}``, :meth:`PLD.from_dict`) as its typed charge: the one place
    a filter query's JSON becomes a typed value."""
    if not isinstance(d, Mapping):
        raise ChargeTypeError(
            f"The 'd' parameter of charge_from_dict() must be a JSON object. Got {_short(d)} "
            "instead.", parameter="d", constraint="a JSON object", value=d)
    if d.get("type") == "pld" or "pld" in d:
        return PLD.from_dict(d.get("pld", d))
    return description_from_dict(dict(d))


def charge_to_dict(q: Charge) -> dict[str, Any]:
    """The JSON-ready description of a charge written into decisions and audit logs (a PLD
    is ``{"type": "pld"}``: its content is not repeated)."""
    if isinstance(q, PLD):
        return {"type": "pld"}
    return q.to_dict()


def _short(v: object) -> str:
    text = repr(v)
    return text if len(text) <= 200 else text[:200] + "..."
