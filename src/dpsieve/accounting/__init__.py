"""Privacy accounting: PLDs, hockey-stick and tradeoff curves, Blackwell order, families."""

from __future__ import annotations

from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
    description_from_dict,
)
from dpsieve.accounting.gdp import (
    gdp_compose,
    gdp_delta,
    gdp_epsilon,
    gdp_hockey_stick,
    gdp_mu_for,
    gdp_tradeoff,
)

__all__ = [
    "GDP",
    "RDP",
    "ZCDP",
    "ApproxDP",
    "ApproxZCDP",
    "Neighbouring",
    "PrivacyDescription",
    "PureDP",
    "description_from_dict",
    "gdp_compose",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_hockey_stick",
    "gdp_mu_for",
    "gdp_tradeoff",
]
