"""Soundness of the training filter's certified comparisons and stored states.

Closed forms and exact rational sums bracket the bounds of ``_sgm_powers``; the order
checks are compared with ``order.leq``; tampered states must be refused naming the field.
The end-to-end and randomized checks against PRV's certified lower bound are in
``test_training_prv.py`` (slow).
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from dpsieve.accounting import order
from dpsieve.accounting.pld import PLD
from dpsieve.errors import ValidationError
from dpsieve.filters import _sgm_powers as sp
from dpsieve.filters import filter_from_json
from dpsieve.filters.training import TrainingFilter

EPS, DELTA = 1.0, 1e-5


# ---------------------------------------------------------------- one grid per comparison
def test_a_comparison_across_grids_is_made_on_one_grid() -> None:
    """RR(1.0) on grid 0.002 is not below RR(0.8) on grid 0.001 (delta(0.8) = 0.1325
    against 0): read on the left grid, the right side's losses doubled and it passed."""
    a = PLD.randomized_response(1.0, grid=0.002)
    b = PLD.randomized_response(0.8, grid=0.001)
    assert float(a.delta(0.8)) > 0.13
    assert float(b.delta(0.8)) == 0.0
    assert not order.leq(a, b)
    assert not sp.leq_x_ge_1(a, b)
    # the true order still passes across grids (both ways round)
    assert sp.leq_x_ge_1(PLD.randomized_response(0.8, grid=0.002),
                         PLD.randomized_response(1.0, grid=0.001))
    assert sp.leq_x_ge_1(PLD.randomized_response(0.8, grid=0.001),
                         PLD.randomized_response(1.0, grid=0.002))


def test_one_grid_helpers_refuse_two_grids() -> None:
    a = PLD.randomized_response(1.0, grid=0.002)
    b = PLD.randomized_response(0.8, grid=0.001)
    with pytest.raises(ValueError, match="different grids"):
        order._pl_vs_pl(a, b)
    lo = sp.lower_power(2.0, 0.01, 1e-3, 3)
    with pytest.raises(ValueError, match="different grids"):
        sp._lower_compose(lo, sp.lower_power(2.0, 0.01, 2e-3, 3))


def test_one_grid_moves_each_side_in_its_safe_direction() -> None:
    """The left (an upper bound) is split pessimistically, the right (a lower bound) rounded
    down and restored: h only rises on the left and only falls on the right."""
    up = sp.upper_power(1.0, 0.02, 1e-3, 40)
    lo = sp.lower_power(1.0, 0.02, 1e-3, 40)
    xs = np.exp(np.linspace(0.0, 3.0, 31))
    for g in (2e-3, 5e-3):
        coarse_up = PLD.randomized_response(0.1, grid=g)
        left, right = sp.one_grid(up, coarse_up)
        assert left.grid == g
        assert right is coarse_up
        assert np.all(left.hockey_stick(xs) >= up.hockey_stick(xs) - 1e-15)
        left2, right2 = sp.one_grid(coarse_up, lo)
        assert left2 is coarse_up
        assert right2.grid == g
        assert np.all(right2.hockey_stick(xs) <= lo.hockey_stick(xs) + 1e-15)


# ---------------------------------------------------------------- grid objects of mass > 1
def _exact_total(p: PLD) -> Fraction:
    return sum((Fraction(float(x)) for x in p.probs), Fraction(p.inf_mass))


def _exact_bottom_b_mass(p: PLD, eta: Fraction) -> Fraction:
    """sum e^{-z} m over the lowest eta of p's mass, with e^{-z} rounded up generously."""
    out, left = Fraction(0), eta
    for z, m in zip(p.losses.tolist(), p.probs.tolist(), strict=True):
        if left <= 0:
            break
        take = min(Fraction(m), left)
        out += take * Fraction(math.exp(-z) * (1 + 1e-15))
        left -= take
    return out


@pytest.mark.parametrize(("sigma", "rate"), [(1.0, 0.01), (2.0, 0.001), (0.7, 0.3), (50.0, 1e-3)])
def test_step_excess_and_its_dual_mass_are_bounded(sigma: float, rate: float) -> None:
    """L^ totals 1 + eta (its masses are upper bounds); excess() bounds eta from above,
    excess_b_mass() the e^{-z}-mass of the lowest eta, both against exact rational sums."""
    p = sp.step_remove(sigma, rate, 1e-3)
    eta = _exact_total(p) - 1
    assert eta > 0  # the situation Lemma 1.4 is about
    assert Fraction(sp.excess(p)) >= eta
    assert sp.excess(p) < 1e-9
    assert Fraction(sp.excess_b_mass(p)) >= _exact_bottom_b_mass(p, eta) * (1 - Fraction(1, 10**12))
    d = sp.dual_upper(p)
    assert d is not None
    assert d.inf_mass >= p.dual().inf_mass + float(_exact_bottom_b_mass(p, eta)) * (1 - 1e-12)


@pytest.mark.parametrize(("sigma", "rate"), [(1.0, 0.01), (0.7, 0.3)])
def test_the_lower_bounds_start_below_the_budget_step(sigma: float, rate: float) -> None:
    """The removal lower bound of one step lies below L° = L^ without its lowest eta: its
    curve is at most h_{L^} - (what the lowest eta contributes), and its mass at most 1."""
    p = sp.step_remove(sigma, rate, 1e-3)
    lo = sp.lower_power(sigma, rate, 1e-3, 1)
    assert _exact_total(lo) <= 1
    eta = _exact_total(p) - 1
    xs = np.exp(np.linspace(-0.5, 2.0, 26))
    # h of the lowest eta of p at x (exact masses, generous rounding of the weights)
    bottom = np.zeros_like(xs)
    left = eta
    for z, m in zip(p.losses.tolist(), p.probs.tolist(), strict=True):
        if left <= 0:
            break
        take = float(min(Fraction(m), left))
        bottom += take * np.clip(1.0 - xs * math.exp(-z), 0.0, None)
        left -= Fraction(take)
    h_budget = p.hockey_stick(xs) - bottom
    assert np.all(lo.hockey_stick(xs) <= h_budget + 1e-15)
    lo_add = sp.lower_power(sigma, rate, 1e-3, 1, add=True)
    assert _exact_total(lo_add) <= 1


# ---------------------------------------------------------------- stored states
@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    f = TrainingFilter(EPS, DELTA, sigma=1.0, rate=0.01)
    assert f.try_step(1.0, 0.01).admitted
    return json.loads(f.to_json())  # type: ignore[no-any-return]


def _refused(d: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as e:
        filter_from_json(json.dumps(d))
    assert e.value.parameter == field or str(e.value.parameter).startswith(field), (
        e.value.parameter, str(e.value))


def _old_form(d: dict[str, Any]) -> dict[str, Any]:
    st = {k: v for k, v in d["state"].items() if k not in ("keep", "mixed", "cert")}
    return {**d, "state": st}


def test_six_tampered_states_are_refused_naming_the_field(base: dict[str, Any]) -> None:
    """Each passes the local checks (types, ranges, kinds dominated by the reference) and
    lies outside the target: 10^6 reference units admitted 2,000 of 2,000 steps at
    (1, 0.01) where (1, 1e-5) allows 253."""
    st = base["state"]
    n0 = st["n0"]
    ref = st["reference"]
    many = {"n0": 10**6, "units": [[*ref, 10**6]]}
    # 1. more units than the certified envelope
    _refused({**base, "state": {**st, **many}}, "units")
    # 2. ... and the envelope rewritten to match
    cert = {"units": [[*ref, 10**6]], "reserve": st["reserve"]}
    _refused({**base, "state": {**st, **many, "cert": cert}}, "cert")
    # 3. a state in the form stored before the envelope existed (certified directly)
    _refused(_old_form({**base, "state": {**st, **many}}), "units")
    # 4. the reserve raised to 90 % of delta (the units alone still fit the target)
    big = str(Fraction(DELTA) * Fraction(9, 10))
    _refused(_old_form({**base, "state": {**st, "reserve0": big, "reserve": big}}), "reserve")
    # 5. a second kind added to the units and to the envelope
    two = [[*ref, n0], [2.0, 0.01, 500]]
    _refused({**base, "state": {**st, "units": two,
                                "cert": {"units": two, "reserve": st["reserve"]}}}, "cert")
    # 6. the reference made dearer, units relabelled with it
    dear = [[0.5, 0.01, n0]]
    _refused({**base, "state": {**st, "reference": [0.5, 0.01], "units": dear,
                                "cert": {"units": dear, "reserve": st["reserve"]}}}, "cert")


def test_honest_states_load_after_exchanges(base: dict[str, Any]) -> None:
    f = filter_from_json(json.dumps(base))
    for s in [2.0] * 150 + [1.5] * 50 + [1.0] * 5:
        assert f.try_step(s, 0.01).admitted  # type: ignore[attr-defined]
    st = json.loads(f.to_json())["state"]
    assert st["exchanges"] >= 2
    assert filter_from_json(f.to_json()).to_json() == f.to_json()
    assert filter_from_json(json.dumps(_old_form(json.loads(f.to_json()))))


def test_a_missing_envelope_with_the_range_fields_is_refused(base: dict[str, Any]) -> None:
    st = {k: v for k, v in base["state"].items() if k != "cert"}
    _refused({**base, "state": st}, "cert")
