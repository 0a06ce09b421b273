"""AnyOrderRDPFilter audited (docs/proofs/filters.md §12): budgets rounded down against
mpmath at 50 digits over extreme targets; admitted Gaussian sequences against
dp_accounting's RDP accountant (an independent oracle: its RDP values never exceed the
filter's costs, and the admitted sequence is within the target by the union-bound
conversion at some order, hence by dp_accounting's own conversion); state through JSON
without loss."""

from __future__ import annotations

import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest

from dpsieve.accounting.events import GDP, RDP
from dpsieve.errors import ValidationError
from dpsieve.filters import AnyOrderRDPFilter, filter_from_json

dp_accounting = pytest.importorskip("dp_accounting")

ORDERS = (1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 16.0, 32.0, 64.0, 256.0)


def test_budgets_are_rounded_down_over_extreme_targets() -> None:
    rng = np.random.default_rng(3)
    with mpmath.workdps(50):
        for _ in range(400):
            eps = float(10 ** rng.uniform(-3, 3))
            delta = float(10 ** rng.uniform(-300, -0.4))
            orders = tuple(sorted({float(1.011 + 10 ** rng.uniform(-3, 6))
                                   for _ in range(int(rng.integers(1, 12)))}))
            try:
                f = AnyOrderRDPFilter.for_target(eps, delta, orders)
            except ValidationError:  # no positive budget: refused, checked below
                assert all(mpmath.mpf(eps) - mpmath.log(len(orders) / mpmath.mpf(delta))
                           / (mpmath.mpf(a) - 1) <= mpmath.mpf(eps) * 1e-12 for a in orders)
                continue
            rem = f.remaining()
            for a, b in zip(rem["orders"], rem["rdp"], strict=True):
                exact = mpmath.mpf(eps) - mpmath.log(mpmath.mpf(len(orders)) / mpmath.mpf(
                    delta)) / (mpmath.mpf(a) - 1)
                assert mpmath.mpf(b) <= exact, (eps, delta, a, b)
                assert mpmath.mpf(b) >= exact - mpmath.mpf(eps) * 1e-12 - 1e-300


def _dp_accounting_eps(sigmas: list[float], delta: float) -> tuple[float, list[float]]:
    acc = dp_accounting.rdp.RdpAccountant(list(ORDERS))
    for s in sigmas:
        acc.compose(dp_accounting.GaussianDpEvent(s))
    eps = acc.get_epsilon(delta)
    return eps, [float(x) for x in acc._rdp]  # the oracle's per-order RDP


@pytest.mark.parametrize(("eps", "delta"), [(1.0, 1e-6), (4.0, 1e-9), (10.0, 1e-7),
                                            (0.3, 1e-5)])
def test_admitted_gaussians_are_within_the_target_by_dp_accounting(eps: float, delta: float
                                                                   ) -> None:
    rng = np.random.default_rng(int(eps * 100))
    for _trial in range(6):
        f = AnyOrderRDPFilter.for_target(eps, delta, ORDERS)
        kept = f.remaining()["orders"]
        n = len(ORDERS)  # the union bound is over the orders given
        sigmas: list[float] = []
        refused = 0
        while refused < 5:  # adaptive-looking: each sigma drawn after the last decision
            sigma = float(rng.choice([0.7, 1.0, 2.0, 5.0, 20.0, 80.0]))
            if f.try_spend(GDP(1.0 / sigma)).admitted:
                sigmas.append(sigma)
            else:
                refused += 1
        if not sigmas:
            continue
        got, rdp = _dp_accounting_eps(sigmas, delta)
        assert got <= eps, (sigmas, got)  # dp_accounting's best order: within the target
        spent = [Fraction(x["num"], x["den"]) if isinstance(x, dict) else Fraction(x)
                 for x in json.loads(f.to_json())["state"]["spent"]]
        with mpmath.workdps(40):
            ok = []
            for a, s in zip(kept, spent, strict=True):
                r = rdp[ORDERS.index(a)]
                # the filter's cost at a is never below the oracle's RDP
                assert mpmath.mpf(s.numerator) / s.denominator >= mpmath.mpf(r) * (1 - 1e-12)
                ok.append(mpmath.mpf(r) + mpmath.log(n / mpmath.mpf(delta)) / (a - 1)
                          <= eps * (1 + 1e-12))
            assert any(ok)  # the union-bound conversion at one order at least


def test_state_round_trips_without_loss_after_an_order_drops() -> None:
    f = AnyOrderRDPFilter.for_target(3.0, 1e-6, (2.0, 8.0, 32.0))
    assert f.try_spend(RDP((2.0, 8.0, 32.0), (1 / 3, 0.1, 0.1))).admitted
    while f.try_spend(RDP((2.0, 8.0, 32.0), (0.5, 1e-3, 0.3))).admitted:
        pass
    g = filter_from_json(f.to_json())
    assert g.to_json() == f.to_json()
    assert g.remaining() == f.remaining()
    q = RDP((2.0, 8.0, 32.0), (0.0, 1e-3, 0.0))
    assert g.try_spend(q).admitted == f.try_spend(q).admitted
    assert g.to_json() == f.to_json()
