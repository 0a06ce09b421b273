"""The mixed filter's delta part (docs/proofs/mixed.md §6): B = R_a (+) G_mu (+) R_{0,d}
admits (eps, delta) queries, such as DP key selection's charge, soundly; budgets that have
no mass at +inf (pure, zCDP, RDP, GDP) refuse them and say why."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import mpmath
import pytest
from filters_oracle import h_gauss_mp

from dpsieve.accounting.events import GDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.errors import ValidationError
from dpsieve.filters import (
    GDPResidueFilter,
    MixedFilter,
    NaiveGDPFilter,
    PureDPFilter,
    RDPFilter,
    ResidueFilter,
    ZCDPFilter,
    filter_from_json,
)
from dpsieve.filters.mixed import choose_split_parts

mpmath.mp.dps = 40
SEL = ApproxDP(0.5, 1e-7)  # what a PureDP(0.5) plan with select={"delta": 1e-7} is charged


def _delta_of_budget(a: Fraction, mu: float, d: Fraction, eps: float) -> mpmath.mpf:
    """delta(eps) of R_a (+) G_mu (+) R_{0,d} in mpmath: d + (1 - d) h_{R_a (+) G_mu}(e^eps),
    h_{R_a (+) G}(x) = p h_G(x e^-a) + q h_G(x e^a) (filters paper, Prop. 2)."""
    am = mpmath.mpf(a.numerator) / a.denominator
    p, q = 1 / (1 + mpmath.e ** (-am)), 1 / (1 + mpmath.e ** am)
    x = mpmath.e ** mpmath.mpf(eps)
    h = p * h_gauss_mp(mu, x * mpmath.e ** (-am)) + q * h_gauss_mp(mu, x * mpmath.e ** am)
    dm = mpmath.mpf(d.numerator) / d.denominator
    return dm + (1 - dm) * h


def test_an_undecided_budget_admits_selection_charges_until_eps_or_delta_runs_out() -> None:
    f = MixedFilter(4.0, 1e-5)
    assert f.dry_run(SEL).admitted
    n = 0
    while f.try_spend(SEL).admitted:
        n += 1
    assert n == 8  # eps 4 / 0.5 (the delta part chosen holds the 8 deltas)
    split = f.split()
    assert split is not None
    a0, mu0, d0 = Fraction(split["pure"]), split["mu"], Fraction(split["dpart"])
    # the split is inside the target (independent mpmath closed form)
    assert _delta_of_budget(a0, mu0, d0, 4.0) <= mpmath.mpf(1e-5)
    # and 8 selections fit in it: 1 - (1 - 1e-7)^8 <= d0
    assert 1 - (1 - Fraction(1e-7)) ** 8 <= d0
    assert not f.try_spend(SEL).admitted


def test_the_residue_condition_holds_exactly_at_each_admission() -> None:
    f = MixedFilter(3.0, 1e-5, pure=Fraction(2), delta_part=Fraction(4e-6))
    for q in (SEL, ApproxDP(0.25, 3e-7), PureDP(0.5), ApproxDP(0.0, 1e-6)):
        before = json.loads(f.to_json())["state"]
        d = f.try_spend(q)
        assert d.admitted, d.reason
        after = json.loads(f.to_json())["state"]
        dq = Fraction(getattr(q, "delta", 0.0))
        d_before, d_after = Fraction(before["dpart"]), Fraction(after["dpart"])
        # U (+) L <= B: R_{0,d'} (+) R_{0,dq} = R_{0, 1-(1-d')(1-dq)} and R_e from a or mu
        assert 1 - (1 - d_after) * (1 - dq) <= d_before
        if d.cost["route"] == "pure":
            assert Fraction(after["pure"]) + Fraction(q.eps) == Fraction(before["pure"])
        assert Fraction(after["mu2"]) <= Fraction(before["mu2"])
    assert f.remaining()["delta_part"] < 4e-6


def test_state_round_trips_and_tampered_delta_parts_are_refused() -> None:
    f = MixedFilter(2.0, 1e-5, typical=SEL)
    split = f.split()
    assert split is not None
    assert "dpart" in split
    assert f.try_spend(SEL).admitted
    s = f.to_json()
    assert filter_from_json(s).to_json() == s
    d = json.loads(s)
    d["state"]["dpart"] = "1/1"  # more than the split's delta part
    with pytest.raises(ValidationError, match="dpart"):
        filter_from_json(json.dumps(d))
    d = json.loads(s)
    d["state"]["split"]["dpart"] = "1/1000"  # delta part > delta: not inside the target
    with pytest.raises(ValidationError, match="dpart"):
        filter_from_json(json.dumps(d))
    g = json.loads(MixedFilter(2.0, 1e-5, pure=1).to_json())
    g["state"]["dpart"] = "0/1"  # no delta part in the split: none in the state
    with pytest.raises(ValidationError, match="dpart"):
        filter_from_json(json.dumps(g))


def test_a_split_without_delta_part_refuses_and_changes_nothing() -> None:
    f = MixedFilter(4.0, 1e-5, typical=PureDP(0.5))
    before = f.to_json()
    d = f.try_spend(SEL)
    assert not d.admitted
    assert "no delta part" in d.reason
    assert f.to_json() == before
    assert "dpart" not in json.loads(before)["state"]  # old states are unchanged


def test_pure_workloads_choose_the_same_split_as_before() -> None:
    assert choose_split_parts(2.0, 1e-6, [PureDP(0.5)]) == (Fraction(2), Fraction(0))


@pytest.mark.parametrize(("f", "budget"), [
    (PureDPFilter(5.0), "pure-DP"), (ZCDPFilter(5.0), "zCDP"),
    (RDPFilter([2.0, 8.0], [5.0, 5.0]), "Renyi-DP"), (GDPResidueFilter(5.0), "GDP"),
    (NaiveGDPFilter(5.0), "GDP"), (ResidueFilter(PureDP(5.0), "pure_dp"), "pure-DP"),
    (ResidueFilter(GDP(5.0), "gdp_residue"), "GDP"),
])
def test_budgets_without_mass_at_infinity_refuse_and_say_why(f: object, budget: str) -> None:
    for q in (SEL, ApproxZCDP(0.1, 1e-7)):
        d = f.dry_run(q)  # type: ignore[attr-defined]
        assert not d.admitted
        assert f"delta {q.delta:.4g} > 0" in d.reason
        assert f"a {budget} budget has no delta" in d.reason
    assert f.dry_run(PureDP(0.1)).admitted  # type: ignore[attr-defined]  # the same eps, no delta


def test_subnormal_eps_and_delta_in_the_split_search() -> None:
    """floor(eps / 5e-324) is an int beyond float range: the split search raised
    OverflowError (hypothesis, tests/filters/test_extremes.py, clean-clone run on 1dd5d15)."""
    f = MixedFilter(2.0, 1e-5)
    d = f.try_spend(ApproxDP(5e-324, 5e-324))
    assert d.admitted


def test_an_infinite_eps_query_with_a_delta_is_refused_not_raised() -> None:
    """ApproxDP(inf, dq) reached the split search's k = floor(eps / e) with e = inf
    (OverflowError: Fraction(inf), found by the slow extremes suite on a68be7c); it is a
    valid query that no split admits: refused, the split still undecided, nothing spent."""
    f = MixedFilter(2.0, 1e-5)
    d = f.try_spend(ApproxDP(math.inf, 1e-6))
    assert not d.admitted
    assert f.remaining()["split"] == "undecided"
    assert f.try_spend(ApproxDP(1.0, 1e-6)).admitted
