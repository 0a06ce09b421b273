"""dpsieve.filters: residue and natural privacy filters, and the filter auditor.

Which filter to use, and the theorem behind each: docs/filters.md.
"""

from __future__ import annotations

import json
from typing import Any

from dpsieve._validation import fail
from dpsieve.filters._common import FilterBase, registered_kinds
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
from dpsieve.filters.profile import AdditiveProfileFilter, discretized_profile
from dpsieve.filters.residue import ResidueFilter, register_rule
from dpsieve.filters.theorem9 import Theorem9, certified_epsilon, theorem9

__all__ = [
    "AdditiveProfileFilter",
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
    "PrivacyFilter",
    "PureDPFilter",
    "RDPFilter",
    "ResidueFilter",
    "Theorem9",
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
    """Rebuild any dpsieve filter from its ``to_json()`` (exact round trip)."""
    try:
        d: Any = json.loads(s)
    except (TypeError, ValueError):
        raise fail("s", "filter_from_json", "a JSON string from a filter's to_json()", s) from None
    if not isinstance(d, dict) or "kind" not in d or "state" not in d:
        raise fail("s", "filter_from_json", "a JSON object with 'kind' and 'state'", s)
    kinds = registered_kinds()
    if d["kind"] not in kinds:
        raise fail("kind", "filter_from_json", f"one of {sorted(kinds)}", d["kind"])
    rel = d.get("neighbouring")
    if rel not in (None, "add_remove", "replace_one"):
        raise fail("neighbouring", "filter_from_json", "'add_remove' or 'replace_one'", rel)
    return kinds[d["kind"]].from_state(d["state"], rel)
