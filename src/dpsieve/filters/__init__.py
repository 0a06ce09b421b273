"""dpsieve.filters: residue and natural privacy filters, and the filter auditor.

Which filter to use, and the theorem behind each: docs/filters.md.
"""

from __future__ import annotations

import json
from typing import Any

from dpsieve.errors import FilterStateError
from dpsieve.filters._common import FilterBase, StateReader, registered_kinds
from dpsieve.filters.additive import (
    ApproxZCDPFilter,
    PureDPFilter,
    RDPFilter,
    ZCDPFilter,
    zcdp_rho_for,
)
from dpsieve.filters.auditor import AuditResult, GaussianBudget, audit_gdp_family, audit_natural
from dpsieve.filters.base import Decision, PrivacyFilter
from dpsieve.filters.gdp import (
    ApproxGDPResidueFilter,
    GDPResidueFilter,
    NaiveGDPFilter,
    gdp_residue_update,
    naive_gdp_cost,
)
from dpsieve.filters.mixed import MixedFilter, choose_split
from dpsieve.filters.natural import NaturalApproxFilter, NaturalGDPFilter, NaturalZeroDeltaFilter
from dpsieve.filters.per_record import PerRecordGDPFilter, PerRecordRDPFilter, RecordStep
from dpsieve.filters.profile import AdditiveProfileFilter, discretized_profile
from dpsieve.filters.rdp_any import AnyOrderRDPFilter
from dpsieve.filters.residue import ResidueFilter, register_rule
from dpsieve.filters.theorem9 import Theorem9, certified_epsilon, theorem9
from dpsieve.filters.training import TrainingFilter

__all__ = [
    "AdditiveProfileFilter",
    "AnyOrderRDPFilter",
    "ApproxGDPResidueFilter",
    "ApproxZCDPFilter",
    "AuditResult",
    "Decision",
    "FilterBase",
    "GDPResidueFilter",
    "GaussianBudget",
    "MixedFilter",
    "NaiveGDPFilter",
    "NaturalApproxFilter",
    "NaturalGDPFilter",
    "NaturalZeroDeltaFilter",
    "PerRecordGDPFilter",
    "PerRecordRDPFilter",
    "PrivacyFilter",
    "PureDPFilter",
    "RDPFilter",
    "RecordStep",
    "ResidueFilter",
    "StateReader",
    "Theorem9",
    "TrainingFilter",
    "ZCDPFilter",
    "audit_gdp_family",
    "audit_natural",
    "certified_epsilon",
    "choose_split",
    "discretized_profile",
    "filter_from_json",
    "gdp_residue_update",
    "naive_gdp_cost",
    "register_rule",
    "theorem9",
    "zcdp_rho_for",
]


def filter_from_json(s: str) -> FilterBase:
    """Rebuild any dpsieve filter from its ``to_json()`` (exact round trip).

    The stored state is untrusted: every field is type- and range-checked and every
    invariant between fields (spends within budgets, matching lengths, opt-ins) is
    verified. A violation raises :class:`~dpsieve.errors.FilterStateError` (a
    ``ValidationError``) naming the filter kind and the field; nothing is rebuilt.
    """

    def bad(field: str, constraint: str, value: Any, kind: str | None = None) -> FilterStateError:
        return FilterStateError(
            f"The stored filter state is invalid: '{field}' must be {constraint}. "
            f"Got {value!r:.200} instead.",
            kind=kind,
            field=field,
            constraint=constraint,
            value=value,
        )

    def no_constants(name: str) -> Any:
        raise ValueError(name)

    try:
        d: Any = json.loads(s, parse_constant=no_constants)
    except (TypeError, ValueError):
        raise bad("s", "a JSON string from a filter's to_json() (no NaN or Infinity)", s) from None
    if not isinstance(d, dict) or "kind" not in d or "state" not in d:
        raise bad("s", "a JSON object with 'kind' and 'state'", s)
    extra = sorted(set(d) - {"kind", "state", "neighbouring"})
    if extra:
        raise bad(extra[0], "absent (only 'kind', 'state', 'neighbouring' are stored)", d[extra[0]])
    kinds = registered_kinds()
    kind = d["kind"]
    if not isinstance(kind, str) or kind not in kinds:
        raise bad("kind", f"one of {sorted(kinds)}", kind)
    rel = d.get("neighbouring")
    if rel not in (None, "add_remove", "replace_one"):
        raise bad("neighbouring", "'add_remove' or 'replace_one'", rel, kind)
    return kinds[kind].from_state(d["state"], rel)
