"""AnyOrderRDPFilter: admits while the budget holds at one order at least (DPack's and
PrivateKube's blocks), budgets with delta split over the orders (docs/proofs/filters.md)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from dpsieve.accounting.events import GDP, RDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ValidationError
from dpsieve.filters import AnyOrderRDPFilter, RDPFilter, filter_from_json
from dpsieve.filters.summary import epsilon_left

ORDERS = (3.0, 4.0, 5.0, 6.0, 8.0, 16.0, 32.0, 64.0)


def test_budgets_invert_the_union_bound_conversion() -> None:
    f = AnyOrderRDPFilter.for_target(10.0, 1e-7, ORDERS)
    rem = f.remaining()
    assert rem["orders"] == list(ORDERS)  # all positive at (10, 1e-7)
    for a, b in zip(rem["orders"], rem["rdp"], strict=True):
        want = 10.0 - math.log(len(ORDERS) / 1e-7) / (a - 1)
        assert b <= want
        assert b == pytest.approx(want, rel=1e-12)
    with pytest.raises(ValidationError, match="orders"):
        AnyOrderRDPFilter.for_target(0.1, 1e-7, (2.0, 3.0))


def test_an_exceeded_order_is_dropped_and_the_last_one_decides() -> None:
    f = AnyOrderRDPFilter((2.0, 8.0), (1.0, 4.0))
    # RDP charges: (2: 0.9, 8: 0.5) then (2: 0.2, 8: 0.5): order 2 drops out, 8 holds
    assert f.try_spend(RDP((2.0, 8.0), (0.9, 0.5))).admitted
    assert f.try_spend(RDP((2.0, 8.0), (0.2, 0.5))).admitted
    assert f.remaining()["rdp"] == [0.0, 3.0]
    every = RDPFilter((2.0, 8.0), (1.0, 4.0))
    assert every.try_spend(RDP((2.0, 8.0), (0.9, 0.5))).admitted
    assert not every.try_spend(RDP((2.0, 8.0), (0.2, 0.5))).admitted
    d = f.try_spend(RDP((2.0, 8.0), (0.0, 3.5)))
    assert not d.admitted
    assert "every order" in d.reason
    again = filter_from_json(f.to_json())
    assert again.remaining() == f.remaining()
    st = json.loads(f.to_json())
    st["state"]["spent"] = [{"num": 2, "den": 1}, {"num": 5, "den": 1}]
    with pytest.raises(ValidationError):  # no order within its budget
        filter_from_json(json.dumps(st))


def _gaussian_delta(mu: float, eps: float) -> float:
    """The exact delta(eps) of the Gaussian pair G_mu (Balle & Wang 2018), independent of
    the library's GDP code."""
    return float(stats.norm.cdf(-eps / mu + mu / 2) - math.exp(eps) *
                 stats.norm.cdf(-eps / mu - mu / 2))


@pytest.mark.parametrize("mu", [0.05, 0.2, 0.4])
def test_what_it_admits_is_within_the_target_gaussians(mu: float) -> None:
    # non-adaptive Gaussian tasks: the k admitted compose to G_{sqrt(k) mu} exactly
    eps, delta = 4.0, 1e-6
    f = AnyOrderRDPFilter.for_target(eps, delta, ORDERS)
    k = 0
    while f.try_spend(GDP(mu)).admitted:
        k += 1
    assert k >= 1
    assert _gaussian_delta(math.sqrt(k) * mu, eps) <= delta
    # and the filter is not vacuous: at least half the exact capacity (RDP at a few
    # orders with delta split is looser than the exact Gaussian: about 0.6 here)
    cap = 0
    while _gaussian_delta(math.sqrt(cap + 1) * mu, eps) <= delta:
        cap += 1
    assert k >= 0.5 * cap


def test_what_it_admits_is_within_the_target_laplace() -> None:
    eps, delta = 3.0, 1e-6
    f = AnyOrderRDPFilter.for_target(eps, delta, ORDERS)
    k = 0
    while f.try_spend(PureDP(0.25)).admitted:
        k += 1
    lap = PLD.randomized_response(0.25)  # the pure pair dominating every 0.25-DP query
    total = lap.compose(lap) if k == 2 else lap
    for _ in range(k - 1):
        total = total.compose(lap)
    assert float(np.asarray(total.delta(eps))) <= delta


def test_eps_left_summary_is_monotone_and_zero_when_spent() -> None:
    f = AnyOrderRDPFilter.for_target(10.0, 1e-7, ORDERS)
    left = [epsilon_left(f, 1e-7)[0]]
    while f.try_spend(GDP(0.8)).admitted:
        left.append(epsilon_left(f, 1e-7)[0])
    assert left[0] == pytest.approx(10.0, rel=1e-9)
    assert all(a >= b for a, b in itertools.pairwise(left))


def test_capacity_closed_form_agrees_with_running_the_filter() -> None:
    from dpsieve.filters.capacity import count_admitted

    for q in (GDP(0.3), RDP(ORDERS, tuple(0.01 * a for a in ORDERS)), PureDP(0.5)):
        f = AnyOrderRDPFilter.for_target(10.0, 1e-7, ORDERS)
        f.try_spend(RDP(ORDERS, tuple(2.0 if a < 8 else 0.1 for a in ORDERS)))
        closed = count_admitted(f, q)
        n = 0
        while f.try_spend(q).admitted:
            n += 1
        assert closed.count == n
