"""zCDP -> (eps, delta)-DP budgets: the Canonne-Kamath-Steinke conversion, certified.

Independent references: the CKS delta bound evaluated in mpmath (60 digits) and minimised
over the order there; the exact curve of the Gaussian mechanism (a rho-zCDP mechanism whose
eps(delta) is below every zCDP conversion's)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath as mp
import pytest

from dpsieve.accounting.gdp import gdp_delta
from dpsieve.filters import ZCDPFilter, zcdp_rho_for
from dpsieve.filters._zcdp_target import _bun_steinke_rho, cks_rho_at


@pytest.fixture(autouse=True)
def _precision() -> Iterator[None]:
    """60 digits inside this module only (a global setting would leak into other modules)."""
    with mp.workdps(60):
        yield
TARGETS = [(1.0, 1e-9), (1.0, 1e-5), (0.1, 1e-6), (8.0, 1e-10), (3.0, 0.1), (0.0, 1e-5)]


def _log_cks_delta(rho: float, eps: float, alpha: mp.mpf) -> mp.mpf:
    """log of e^{(a-1)(a rho - eps)} (1 - 1/a)^{a-1} / a (CKS 2020, Prop. 12, tau = a rho)."""
    a = alpha
    return (a - 1) * (a * mp.mpf(rho) - mp.mpf(eps)) + (a - 1) * mp.log(1 - 1 / a) - mp.log(a)


def _min_log_delta(rho: float, eps: float) -> mp.mpf:
    """min over a > 1 of the CKS bound (convex in a; golden section on log(a - 1) in mpmath)."""
    lo, hi = mp.mpf(-40), mp.mpf(40)
    g = (mp.sqrt(5) - 1) / 2
    for _ in range(300):
        x1, x2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if _log_cks_delta(rho, eps, 1 + mp.e**x1) <= _log_cks_delta(rho, eps, 1 + mp.e**x2):
            hi = x2
        else:
            lo = x1
    return _log_cks_delta(rho, eps, 1 + mp.e ** ((lo + hi) / 2))


@pytest.mark.parametrize(("eps", "delta"), TARGETS)
def test_budget_converts_to_target_and_is_tight(eps: float, delta: float) -> None:
    rho = zcdp_rho_for(eps, delta)
    assert rho > 0
    # sound: some order certifies (eps, delta) at this rho (mpmath, not the code's floats)
    assert _min_log_delta(rho, eps) <= mp.log(delta)
    # tight: 1e-9 more rho is not certified by any order
    assert _min_log_delta(rho * (1 + 1e-9), eps) > mp.log(delta)
    # never below Bun-Steinke
    assert rho >= _bun_steinke_rho(eps, delta)


@pytest.mark.parametrize(("eps", "delta"), TARGETS)
def test_gaussian_at_the_budget_meets_the_target(eps: float, delta: float) -> None:
    # the Gaussian mechanism with mu = sqrt(2 rho) is rho-zCDP: its exact delta(eps) must
    # be <= the target (lower <= exact <= the conversion's bound)
    rho = zcdp_rho_for(eps, delta)
    assert gdp_delta(math.sqrt(2 * rho), eps) <= delta


def test_cks_beats_bun_steinke_where_the_issue_measured() -> None:
    assert zcdp_rho_for(1.0, 1e-9) / _bun_steinke_rho(1.0, 1e-9) > 1.25
    assert ZCDPFilter.for_target(1.0, 1e-9).remaining()["rho"] == zcdp_rho_for(1.0, 1e-9)


@pytest.mark.parametrize("alpha", [1.0 + 1e-9, 1.5, 30.0, 1e6])
def test_cks_rho_at_is_a_lower_bound_of_the_exact_formula(alpha: float) -> None:
    eps, delta = 1.0, 1e-6
    a = mp.mpf(alpha)
    exact = (eps + mp.log(a / (a - 1)) + (mp.log(delta) + mp.log(a)) / (a - 1)) / a
    got = cks_rho_at(eps, delta, alpha)
    assert got <= max(exact, 0)
    assert got >= max(exact, 0) - mp.mpf("1e-14") * (1 + abs(exact))
