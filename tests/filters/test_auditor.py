"""The auditor reproduces the claims of Sections 5-6 of the paper.

Every "not free" verdict is a certified overspend, and is re-checked here by building
the adaptive strategy's two-round output distributions explicitly (an independent
computation of the interaction's tradeoff curve).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.accounting.tradeoff import PiecewiseLinearTradeoff as PL  # noqa: N814
from dpsieve.errors import ValidationError
from dpsieve.filters import GaussianBudget, audit_gdp_family, audit_natural
from dpsieve.filters._budgets import approx_curve, pl_leq_budget, pl_supremum


def _atoms(c: PL) -> list[tuple[Fraction, Fraction]]:
    """(P-mass, Q-mass) of each outcome of a pair realising c; Q's extra mass separately."""
    out = [(w, w * m) for w, m in c.segments]
    q_missing = 1 - sum(q for _, q in out)
    return [*out, (Fraction(0), q_missing)] if q_missing > 0 else out


def _two_round_curve(first: PL, second: dict[int, PL]) -> PL:
    """Tradeoff curve of the adaptive pair: play ``first``, then second[i] after outcome i."""
    p, q = [], []
    for i, (p1, q1) in enumerate(_atoms(first)):
        for p2, q2 in _atoms(second.get(i, PL.identity())):
            p.append(p1 * p2)
            q.append(q1 * q2)
    return PL.from_distributions([float(x) for x in p], [float(x) for x in q])


def test_paper_witness_eps_delta_queries_two_rounds() -> None:
    """L1 = R(1,0), L2 = R(0.1,0.05), B = sup{L1+L1, L1+L2}: overspend 0.01345 on (0.0708,
    1.9292) (test_first_witness_overspend_range), so on [0.17, 1.9] at least."""
    l1, l2 = approx_curve(1.0), approx_curve(0.1, 0.05)
    budget = pl_supremum([l1.compose(l1), l1.compose(l2)])
    r = audit_natural({"L1": l1, "L2": l2}, budget, 2)
    assert not r.free
    assert r.max_gap == pytest.approx(0.013447, abs=2e-6)
    assert r.eps_range is not None
    assert r.eps_range[0] < 0.17
    assert r.eps_range[1] > 1.9
    assert r.strategy["query"] == "L1"
    # independent check of the strategy: L1, then L2 after the -1 outcome, L1 after +1
    nxt = {
        name: {"L1": l1, "L2": l2, "Id": PL.identity()}[step["query"]]
        for name, step in r.strategy["then"].items()
    }
    order = [f"loss={-math.log(float(m)):.6g}" for _, m in l1.segments]
    curve = _two_round_curve(l1, {i: nxt[k] for i, k in enumerate(order) if k in nxt})
    x = math.exp(r.eps_at_max)
    gap = float(curve.hockey_stick_exact(Fraction(x)) - budget.hockey_stick_exact(Fraction(x)))
    assert gap == pytest.approx(r.max_gap, rel=1e-6)


def test_eps_delta_queries_not_free_even_with_eps_delta_budget() -> None:
    l1, l2, l3 = approx_curve(0.5), approx_curve(0.1, 0.05), approx_curve(0.0, 0.1)
    eps_b = 0.5
    db = max(float(c.delta(eps_b)[()]) for c in (l1.compose(l2), l1.compose(l3), l1.compose(l1)))
    budget = approx_curve(eps_b, db)
    assert pl_leq_budget(l1.compose(l2), budget)
    assert pl_leq_budget(l1.compose(l3), budget)
    r = audit_natural({"L1": l1, "L2": l2, "L3": l3}, budget, 2)
    assert not r.free
    assert r.max_gap > 0.03


@settings(max_examples=15, deadline=None)
@given(
    effs=st.lists(st.sampled_from([0.1, 0.25, 0.5, 1.0, 1.5, 2.0]), min_size=1, max_size=3),
    seqs=st.lists(
        st.tuples(st.sampled_from([0.1, 0.5, 1.0, 2.0]), st.sampled_from([0.1, 0.5, 1.0, 2.0])),
        min_size=1,
        max_size=3,
    ),
)
def test_pure_queries_free_at_two_rounds(
    effs: list[float], seqs: list[tuple[float, float]]
) -> None:
    """Pure-DP queries: universally free for k = 2 (any budget; here random suprema)."""
    fam = {f"R{e}": approx_curve(e) for e in effs}
    budget = pl_supremum([approx_curve(a).compose(approx_curve(b)) for a, b in seqs])
    assert audit_natural(fam, budget, 2).free


def test_pure_queries_not_free_at_three_rounds() -> None:
    """A witness for k = 3 (found by the auditor over a small grid): budget
    sup{R1.5 + R0.5 + R0.5, R1.5 + R1}, family {R0.5, R1, R1.5}."""
    r = {e: approx_curve(e) for e in (0.5, 1.0, 1.5)}
    budget = pl_supremum([r[1.5].compose(r[0.5]).compose(r[0.5]), r[1.5].compose(r[1.0])])
    fam = {"R0.5": r[0.5], "R1": r[1.0], "R1.5": r[1.5]}
    assert audit_natural(fam, budget, 2).free
    res = audit_natural(fam, budget, 3)
    assert not res.free
    assert res.max_gap > 5e-3
    assert res.strategy["query"] in fam


def test_zero_delta_queries_free() -> None:
    fam = {f"R0,{d}": approx_curve(0.0, d) for d in (0.01, 0.05, 0.2)}
    for budget in (
        approx_curve(1.0, 0.1),
        pl_supremum([approx_curve(0.5, 0.06), approx_curve(2.0)]),
    ):
        for k in (2, 3):
            assert audit_natural(fam, budget, k).free


def test_gdp_queries_free() -> None:
    for budget in (GaussianBudget(1.0), (1.0, 1e-3)):
        for k in (2, 3, 4):
            res = audit_gdp_family([0.3, 0.5, 0.8], budget, k)
            assert res.free


def test_general_queries_not_free_with_gdp_budget() -> None:
    """L1 = R_1, L2 = (index revealed) half RR_0.5 / half RR_3, L3 = R_1.75, B = G_mu with mu
    the smallest admitting L1+L2 and L1+L3."""

    def rr(e: float) -> list[float]:
        return [math.exp(e) / (1 + math.exp(e)), 1 / (1 + math.exp(e))]

    p = [0.5 * x for x in rr(0.5)] + [0.5 * x for x in rr(3.0)]
    q = [0.5 * x for x in rr(0.5)[::-1]] + [0.5 * x for x in rr(3.0)[::-1]]
    l1, l2, l3 = approx_curve(1.0), PL.from_distributions(p, q), approx_curve(1.75)
    lo, hi = 0.0, 10.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        ok = all(pl_leq_budget(c, GaussianBudget(mid)) for c in (l1.compose(l2), l1.compose(l3)))
        lo, hi = (lo, mid) if ok else (mid, hi)
    res = audit_natural({"L1": l1, "L2": l2, "L3": l3}, GaussianBudget(hi), 2)
    assert not res.free
    assert res.max_gap > 0.04


def test_eps_delta_queries_not_free_with_approx_gdp_budget() -> None:
    l1, l2 = approx_curve(0.5), approx_curve(0.1, 0.05)
    delta = 0.05
    lo, hi = 0.0, 10.0
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        b = GaussianBudget(mid, delta)
        ok = all(pl_leq_budget(c, b) for c in (l1.compose(l1), l1.compose(l2)))
        lo, hi = (lo, mid) if ok else (mid, hi)
    res = audit_natural({"L1": l1, "L2": l2}, GaussianBudget(hi, delta), 2)
    assert not res.free
    assert res.max_gap > 0.01


def test_pld_family_members() -> None:
    from dpsieve.accounting.pld import PLD

    fam = {"RR1": PLD.randomized_response(1.0), "RR0.1": PLD.randomized_response(0.1)}
    assert audit_natural(fam, approx_curve(3.0, 0.1), 2).free  # pure family, k = 2
    with pytest.raises(ValidationError):
        audit_natural({"G": PLD.gdp(1.0)}, approx_curve(1.0), 2)


def test_issue18_free_verdict_must_be_certified() -> None:
    """Issue 18.4: at mu = 0.6649917799953612 the approximate-GDP witness is admissible
    within the float margin and overspends by 0.0189; ``audit_natural`` said free."""
    l1, l2 = approx_curve(0.5), approx_curve(0.1, 0.05)
    r = audit_natural({"L1": l1, "L2": l2}, GaussianBudget(0.6649917799953612, 0.05), 2)
    assert not r.free
    assert r.verdict == "not shown not free"
    assert r.margin == 1e-12
    assert r.max_gap == pytest.approx(0.0189, abs=1e-4)
    assert r.to_dict()["verdict"] == "not shown not free"
    # a little more budget certifies the overspend, a little less certifies freeness
    assert audit_natural({"L1": l1, "L2": l2}, GaussianBudget(0.665, 0.05), 2).verdict == (
        "not free"
    )
    assert audit_natural({"L1": l1, "L2": l2}, GaussianBudget(0.6649, 0.05), 2).free


def _gdp_witness() -> tuple[PL, PL, PL]:
    def rr(e: float) -> list[float]:
        return [math.exp(e) / (1 + math.exp(e)), 1 / (1 + math.exp(e))]

    p = [0.5 * x for x in rr(0.5)] + [0.5 * x for x in rr(3.0)]
    q = [0.5 * x for x in rr(0.5)[::-1]] + [0.5 * x for x in rr(3.0)[::-1]]
    return approx_curve(1.0), PL.from_distributions(p, q), approx_curve(1.75)


def test_gdp_witness_needs_mu_2_100342() -> None:
    """The docs' witness G_2.1003 is free: the witness needs mu >= 2.1003420893753153..."""
    l1, l2, l3 = _gdp_witness()
    fam = {"L1": l1, "L2": l2, "L3": l3}
    assert audit_natural(fam, GaussianBudget(2.1003), 2).free
    assert not pl_leq_budget(l1.compose(l2), GaussianBudget(2.10034208937))
    res = audit_natural(fam, GaussianBudget(2.1003421), 2)  # mu* + 1e-8: certified
    assert res.verdict == "not free"
    assert res.max_gap == pytest.approx(0.05203, abs=1e-4)


def test_first_witness_overspend_range() -> None:
    """Witness 1 overspends exactly on (0.0708, 1.9292) (kinks of the curves); the default
    grid (step 0.005) reports [0.075, 1.925]."""
    l1, l2 = approx_curve(1.0), approx_curve(0.1, 0.05)
    budget = pl_supremum([l1.compose(l1), l1.compose(l2)])
    r = audit_natural({"L1": l1, "L2": l2}, budget, 2)
    assert r.eps_range == (0.075, 1.925)

    def gap(t: float) -> Fraction:
        x = Fraction(math.exp(t))
        return r.worst.hockey_stick_exact(x) - budget.hockey_stick_exact(x)

    assert gap(0.0708) <= 0 < gap(0.0709)
    assert gap(1.9291) > 0 >= gap(1.9292)


def test_gdp_family_admissibility_uses_a_certified_error_bound() -> None:
    """Regression (issue 18.4, GDP families): admissibility against an (eps, delta) target
    used gdp_delta +- 1e-12, but at mu = 1e5, eps = 5e9 the float delta is 2.95e-12 above
    the truth (mpmath), so with delta 1e-12 above the truth the single (admissible) move G_mu
    was called certainly inadmissible and the worst case reported as G_0, 'free'."""
    mu, eps = 1e5, 5e9
    with mpmath.workdps(60):
        m, e = mpmath.mpf(mu), mpmath.mpf(eps)
        truth = mpmath.ncdf(-e / m + m / 2) - mpmath.exp(e) * mpmath.ncdf(-e / m - m / 2)
        delta = float(truth + mpmath.mpf(1e-12))
        assert truth <= delta  # G_mu is admissible
    res = audit_gdp_family([mu], (eps, delta), 1)
    assert res.worst["gdp_mu"] == mu  # the admissible move is in the worst case
    assert res.verdict == "not shown not free"  # within the certified error bound
    assert 2e-12 < res.margin < 1e-10
