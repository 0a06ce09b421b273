"""The mixed filter's delta part (docs/proofs/mixed.md §6): B = R_a (+) G_mu (+) R_{0,d}
admits (eps, delta) queries, such as DP key selection's charge, soundly; budgets that have
no mass at +inf (pure, zCDP, RDP, GDP) refuse them and say why."""

from __future__ import annotations

import json
import math
from fractions import Fraction
from typing import Any

import mpmath
import pytest
from filters_oracle import h_gauss_mp
from hypothesis import given, settings
from hypothesis import strategies as st

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
from dpsieve.filters.mixed import choose_split_parts, default_delta_part, mixed_budget

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
    """A split declared for queries without a delta (typical=, pure=), or a first-query
    state stored before such splits kept a delta part (the field absent): refused, the
    state byte for byte, and the reason says how to get one."""
    old = MixedFilter(4.0, 1e-5)
    assert old.try_spend(PureDP(0.5)).admitted
    stored = json.loads(old.to_json())
    del stored["state"]["dpart"], stored["state"]["split"]["dpart"]  # as stored before
    for f in (MixedFilter(4.0, 1e-5, typical=PureDP(0.5)), MixedFilter(4.0, 1e-5, pure=4),
              filter_from_json(json.dumps(stored))):
        before = f.to_json()
        d = f.try_spend(SEL)
        assert not d.admitted
        assert "no delta part" in d.reason
        assert "typical=ApproxDP" in d.reason
        assert f.to_json() == before
        assert "dpart" not in json.loads(before)["state"]  # old states are unchanged


def test_declared_pure_workloads_choose_the_same_split_as_before() -> None:
    """A declared typical workload gets its split as before (issue 15's capacity: no
    delta part for a pure workload); the split chosen at a first query keeps delta/10."""
    assert choose_split_parts(2.0, 1e-6, [PureDP(0.5)]) == (Fraction(2), Fraction(0))
    dmin = default_delta_part(1e-6)
    assert dmin == Fraction(float(Fraction(1e-6) / 10))  # delta / 10 rounded down to a float
    assert dmin <= Fraction(1e-6) / 10
    a, d = choose_split_parts(2.0, 1e-6, [PureDP(0.5)], min_delta_part=dmin)
    assert (a, d) == (Fraction(2), dmin)
    with pytest.raises(ValidationError, match="min_delta_part"):
        choose_split_parts(2.0, 1e-6, [PureDP(0.5)], min_delta_part=Fraction(1, 10))


@pytest.mark.parametrize("first", [PureDP(0.5), GDP(0.3), PureDP(0.05)])
def test_a_pure_or_gaussian_first_query_leaves_room_for_key_selection(first: object) -> None:
    """Issue 12 gap A: the split chosen at a pure (or Gaussian) first query keeps delta/10,
    so a later selection charge ApproxDP(0.5, 1e-7) is admitted (it was refused forever);
    one whose delta exceeds the part left is refused with the reason and nothing spent."""
    f = MixedFilter(4.0, 1e-5)  # undecided: the first query decides the split
    assert f.try_spend(first).admitted
    split = f.split()
    assert split is not None
    assert split["chosen"] == "first query"
    d0 = Fraction(split["dpart"])
    assert d0 == default_delta_part(1e-5)
    assert _delta_of_budget(Fraction(split["pure"]), split["mu"], d0, 4.0) <= mpmath.mpf(1e-5)
    d = f.try_spend(SEL)
    assert d.admitted, d.reason
    assert d.cost["delta_part_after"] < d.cost["delta_part_before"]
    before = f.to_json()
    big = f.try_spend(ApproxDP(0.1, 2e-6))  # 2e-6 > the 1e-6 - 1e-7 left
    assert not big.admitted
    assert "delta part left" in big.reason
    assert "smaller" in big.reason
    assert "typical=ApproxDP" in big.reason
    assert f.to_json() == before
    n = 1  # selections at 1e-7 paid so far; the composed delta 1 - (1 - dq)^n must fit in
    while f.try_spend(ApproxDP(0.01, 1e-7)).admitted:  # d0 exactly, and rounding the part
        n += 1  # left down may lose at most one of them
    dq = Fraction(1e-7)
    k_max = max(k for k in range(1, 20) if 1 - (1 - dq) ** k <= d0)
    assert k_max == 10
    assert k_max - 1 <= n <= k_max


def test_the_default_part_is_what_a_gaussian_budget_gives_up() -> None:
    """The price of the default delta part: the Gaussian part of an all-Gaussian split is
    mu at (delta - d)/(1 - d) instead of at delta: within 2 % of it (docs/proofs/mixed.md
    §6 states 0.4-2 % for eps in [0.1, 3], delta in [1e-8, 1e-3])."""
    for eps, delta in ((0.1, 1e-3), (1.0, 1e-5), (3.0, 1e-8)):
        _, m_none = mixed_budget(eps, delta, 0, Fraction(0))
        _, m_def = mixed_budget(eps, delta, 0, default_delta_part(delta))
        assert 0.98 * m_none <= m_def < m_none


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


_QUERIES = [PureDP(0.25), PureDP(0.5), PureDP(1.0), GDP(0.1), GDP(0.3),
            ApproxDP(0.25, 1e-8), ApproxDP(0.5, 1e-7), ApproxDP(0.5, 1e-6), ApproxDP(0.0, 3e-7)]


def _composed_delta_with_part(pures: list[float], gauss2: Fraction, dqs: list[float],
                              eps: float) -> mpmath.mpf:
    """delta(eps) of (+)_i R_{e_i} (+) G_g (+)_j R_{0,dq_j}, exactly (40 digits): D + (1 - D)
    h_{(+) R (+) G}(e^eps) with D = 1 - prod (1 - dq_j) (Lemmas 6-8 of
    docs/proofs/mixed.md), the randomized-response sums enumerated (the e_i lie on a 1/4
    grid, so the support stays small)."""
    dist: dict[float, mpmath.mpf] = {0.0: mpmath.mpf(1)}
    for e in pures:
        em = mpmath.mpf(e)
        p, q = 1 / (1 + mpmath.e ** (-em)), 1 / (1 + mpmath.e ** em)
        nxt: dict[float, mpmath.mpf] = {}
        for z, w in dist.items():
            for dz, pw in ((e, p), (-e, q)):
                nxt[z + dz] = nxt.get(z + dz, mpmath.mpf(0)) + w * pw
        dist = nxt
    g = float(mpmath.sqrt(mpmath.mpf(gauss2.numerator) / gauss2.denominator))
    x = mpmath.e ** mpmath.mpf(eps)
    h = mpmath.fsum(w * h_gauss_mp(g, x * mpmath.e ** (-mpmath.mpf(z)))
                    for z, w in dist.items())
    keep = mpmath.mpf(1)
    for dq in dqs:
        keep *= 1 - mpmath.mpf(dq)
    return (1 - keep) + keep * h


@settings(max_examples=40, deadline=None)
@given(eps=st.sampled_from([1.0, 2.0, 4.0]), delta=st.sampled_from([1e-6, 1e-5, 1e-3]),
       typical=st.sampled_from([None, *range(len(_QUERIES))]),
       runs=st.lists(st.tuples(st.integers(0, len(_QUERIES) - 1), st.integers(1, 40)),
                     min_size=1, max_size=6))
def test_law_the_total_charged_never_exceeds_the_budget(eps: float, delta: float,
                                                         typical: int | None,
                                                         runs: list[tuple[int, int]]) -> None:
    """Over random sequences of pure, Gaussian and (eps, delta) queries (selection charges),
    declared or undecided, with the default delta part: the exact composition of everything
    admitted is (eps, delta)-DP, and every refusal leaves the state byte for byte. Queries
    come in runs of up to 40 alike, then a greedy analyst spends exactly what the filter
    reports left (mu, delta part, pure part), so the law is tight: a filter that forgot to
    leave room for its delta part (inner_delta returning delta) fails it in a few
    examples (checked by that mutation)."""
    seq: list[Any] = [_QUERIES[i] for i, n in runs for _ in range(n)]
    f = (MixedFilter(eps, delta) if typical is None
         else MixedFilter(eps, delta, typical=_QUERIES[typical]))
    pures: list[float] = []
    gauss2 = Fraction(0)
    dqs: list[float] = []

    def spend(q: Any) -> None:
        nonlocal gauss2
        before = f.to_json()
        if not f.try_spend(q).admitted:
            assert f.to_json() == before
            return
        if isinstance(q, GDP):
            gauss2 += Fraction(q.mu) ** 2
        else:
            pures.append(float(q.eps))
            if isinstance(q, ApproxDP):
                dqs.append(float(q.delta))

    for q in seq:
        spend(q)
    rem = f.remaining()
    if "split" not in rem:  # then spend what is left, exactly, as a greedy analyst would
        if rem["mu"] > 0:
            spend(GDP(rem["mu"]))
        if rem.get("delta_part", 0.0) > 0:
            spend(ApproxDP(0.0, rem["delta_part"]))
        if rem["pure_eps"] > 0:
            spend(PureDP(rem["pure_eps"]))
    assert _composed_delta_with_part(pures, gauss2, dqs, eps) <= mpmath.mpf(delta)
