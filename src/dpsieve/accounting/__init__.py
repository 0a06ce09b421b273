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
from dpsieve.accounting.order import (
    compose_with_supremum,
    leq,
    leq_approx,
    leq_gdp,
    smallest_gdp_mu,
    smallest_pure_eps,
    supremum,
)
from dpsieve.accounting.pld import PLD

__all__ = [
    "GDP",
    "PLD",
    "RDP",
    "ZCDP",
    "ApproxDP",
    "ApproxZCDP",
    "Neighbouring",
    "PrivacyDescription",
    "PureDP",
    "compose_with_supremum",
    "description_from_dict",
    "gdp_compose",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_hockey_stick",
    "gdp_mu_for",
    "gdp_tradeoff",
    "leq",
    "leq_approx",
    "leq_gdp",
    "smallest_gdp_mu",
    "smallest_pure_eps",
    "supremum",
]
