"""dpsieve.filters: residue and natural privacy filters, and the filter auditor.

Which filter to use, and the theorem behind each: docs/filters.md.
"""

from __future__ import annotations

import json
from typing import Any

from dpsieve._validation import fail
from dpsieve.filters._common import FilterBase, registered_kinds
from dpsieve.filters.additive import ApproxZCDPFilter, PureDPFilter, RDPFilter, ZCDPFilter
from dpsieve.filters.base import Decision, PrivacyFilter
from dpsieve.filters.gdp import (
    ApproxGDPResidueFilter,
    GDPResidueFilter,
    NaiveGDPFilter,
    gdp_residue_update,
    naive_gdp_cost,
)

__all__ = [
    "ApproxGDPResidueFilter",
    "ApproxZCDPFilter",
    "Decision",
    "FilterBase",
    "GDPResidueFilter",
    "NaiveGDPFilter",
    "PrivacyFilter",
    "PureDPFilter",
    "RDPFilter",
    "ZCDPFilter",
    "filter_from_json",
    "gdp_residue_update",
    "naive_gdp_cost",
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
    return kinds[d["kind"]].from_state(d["state"])
