"""The 95 % half-widths an answer reports, at every noise scale the exact samplers allow.

The discrete Laplace half-width was stepped in floats from its closed form; at a lattice
scale t >~ 1e16 q = e^(-1/t) rounds to 1 and the stepping never ended (a request with
eps = 1e-12 on a count hung after its spend), and from t ~ 1e8 float powers made it drift.
Checked here against mpmath at 50 digits: the half-width holds the noise with probability
at least 95 % (never narrow) and is the least such integer up to t = 2^20, within a relative
1e-8 above beyond. A privacy so small that sigma^2 overflows a double is refused naming
``privacy`` before any spend (it raised OverflowError)."""

from __future__ import annotations

from typing import Any

import mpmath
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ZCDP, PureDP
from dpsieve.errors import ValidationError
from dpsieve.queries.result import dlap_halfwidth

mpmath.mp.dps = 50


def _tail(m: float, t: float) -> mpmath.mpf:
    """P[|Z| > m] for the discrete Laplace of scale t: 2 q^(m+1) / (1 + q)."""
    q = mpmath.exp(-1 / mpmath.mpf(t))
    return 2 * q ** (mpmath.mpf(m) + 1) / (1 + q)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("t", [1e-300, 0.3, 1.0, 7.5, 1e3, 2.0**20, 2.0**20 + 1, 1e9, 1e12,
                               1e16, 2.0**50])
@pytest.mark.parametrize("level", [0.95, 0.975])
def test_laplace_halfwidth_holds_the_level_and_is_near_least(t: float, level: float) -> None:
    m = dlap_halfwidth(t, level)
    tail = 1 - mpmath.mpf(level)
    assert _tail(m, t) <= tail + mpmath.mpf(1e-16), (t, m)
    if t <= 2.0**20:
        assert m == 0 or _tail(m - 1, t) > tail, (t, m)  # the least
    else:
        least = mpmath.ceil(t * mpmath.log(2 / (tail * (1 + mpmath.exp(-1 / mpmath.mpf(t)))))
                            - 1)
        assert least <= m <= least * (1 + 1e-8) + 2, (t, m, least)


@pytest.mark.timeout(120)
def test_a_tiny_eps_is_answered_and_a_tiny_rho_refused_unspent() -> None:
    df = pd.DataFrame({"x": [1.0, 2.0]})
    s = Session(df, budget=PureDP(1e12))
    r = s.run({"type": "count", "privacy": {"type": "pure", "eps": 1e-12}})
    assert r.noise["ci95"] >= 2.99e12
    z = Session(df, budget=ZCDP(1e12))
    before = z.remaining()
    with pytest.raises(ValidationError, match="'privacy'"):
        z.run({"type": "sum", "column": "x", "lower": -1e300, "upper": 1e300,
               "privacy": {"type": "zcdp", "rho": 1e-300}})
    assert z.remaining() == before


@pytest.mark.parametrize("spec", [
    {"type": "mean", "column": "x", "lower": 0, "upper": 1,
     "privacy": {"type": "zcdp", "rho": 5e-324}},
    {"type": "query", "privacy": {"type": "zcdp", "rho": 5e-324},
     "aggregations": [{"type": "variance", "column": "x", "lower": 0, "upper": 1},
                      {"type": "quantile", "column": "x", "lower": 0, "upper": 1}]},
    {"type": "query", "privacy": {"type": "pure", "eps": 5e-324},
     "aggregations": [{"type": "mean", "column": "x", "lower": 0, "upper": 1},
                      {"type": "count"}]},
])
def test_a_subnormal_privacy_split_between_parts_is_refused_unspent(
        spec: dict[str, Any]) -> None:
    """Each part's share of a subnormal eps or rho underflows to 0.0 (it raised
    ZeroDivisionError choosing the lattice: a crash before the spend, a 5xx)."""
    s = Session(pd.DataFrame({"x": [1.0, 2.0]}),
                budget=ZCDP(1e12) if spec["privacy"]["type"] == "zcdp" else PureDP(1e12))
    before = s.remaining()
    with pytest.raises(ValidationError, match="'privacy'"):
        s.run(spec)
    assert s.remaining() == before
