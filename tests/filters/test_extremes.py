"""Every filter, random adaptive sequences with tiny, huge and subnormal costs: what it
admitted, composed exactly by an independent oracle, never exceeds its budget (issue 17).

The analyst is adaptive: each next query is drawn after seeing the previous decision
(after a refusal it tends to ask for less, after an admission for as much or more). Costs
range over subnormal (5e-324), tiny (1e-300 ... 1e-9), ordinary, huge (50 ... 1e308) and
infinite values, and integers (a JSON ``1`` is an int). Budgets include 0 (exhausted),
subnormal-adjacent and tiny ones. The oracle (tests/filters/exact_oracle.py) composes the
admitted queries' exact privacy in the notion each filter promises.

A new filter kind joins by adding a ``Case`` to ``CASES`` (its builder and its oracle
check), or, for filters of other query types (training steps), a case in
tests/filters/test_extremes_training.py; ``test_every_registered_kind_has_an_extremes_case``
makes forgetting impossible.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import exact_oracle as oracle
import mpmath
import pytest
import test_extremes_training as training_extremes
from exact_oracle import Truth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpsieve.accounting.events import GDP, RDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.accounting.pld import PLD
from dpsieve.filters import (
    AdditiveProfileFilter,
    AnyOrderRDPFilter,
    ApproxGDPResidueFilter,
    ApproxZCDPFilter,
    GDPResidueFilter,
    MixedFilter,
    NaiveGDPFilter,
    NaturalApproxFilter,
    NaturalGDPFilter,
    NaturalZeroDeltaFilter,
    PureDPFilter,
    RDPFilter,
    ResidueFilter,
    ZCDPFilter,
)
from dpsieve.filters._common import registered_kinds

SUBNORMAL = [5e-324, 1e-310]
TINY = [1e-300, 1e-160, 9.85e-10, 1e-9]
SMALL = [1e-3, 0.02, 0.05, 0.1]
ORDINARY = [0.1, 0.5, 1, 2.0]
HUGE = [50.0, 700.0, 800.0, 1e308, math.inf]
LEVELS = [SUBNORMAL, TINY, SMALL, ORDINARY, HUGE]
DELTAS = [0.0, 5e-324, 1e-300, 1e-9, 1e-3, 0.5]
ORDERS = (1.01, 2.0, 64.0)

Check = Callable[[Any, list[Truth]], None]
#: The decisions of the admitted queries, in order (for checks that need the charges).
COSTS: list[dict[str, Any]] = []


@dataclass(frozen=True)
class Case:
    """A filter to build, the oracle check of what it admitted, and the query kinds its
    analyst asks (those it can admit; others are only ever refused)."""

    build: Callable[[], Any]
    check: Check
    kinds: tuple[str, ...] = ()


# -- the queries --------------------------------------------------------------------------


def _query(kind: str, v: float, d: float) -> tuple[Any, Truth] | None:
    """(query object, its exact truth) for a kind and magnitudes."""
    if kind == "pure":
        return PureDP(v), Truth("rr", eps=v)
    if kind == "approx":
        return ApproxDP(v, d), Truth("rr", eps=v, delta=d)
    if kind == "gdp":
        return GDP(v), Truth("gauss", mu=v)
    if kind == "zcdp":
        return ZCDP(v), Truth("zcdp", rho=v)
    if kind == "azcdp":
        return ApproxZCDP(v, d), Truth("zcdp", rho=v, delta=d)
    if kind == "rdp":
        vals = tuple(float(v) * a for a in ORDERS)  # a valid non-decreasing curve
        if not all(math.isfinite(x) for x in vals):
            return None
        return RDP(ORDERS, vals), Truth("rdp", orders=ORDERS, values=vals)
    if kind == "zero_delta":
        return (ApproxDP(0.0, v), Truth("rr", eps=0.0, delta=v)) if v <= 1.0 else None
    if kind == "pld_rr":
        # a PLD query: the accounting layer's pessimistic discretization of R_v
        if not (1e-12 <= v <= 60.0):
            return None
        return PLD.randomized_response(float(v)), Truth("rr", eps=float(v))
    raise AssertionError(kind)


KINDS = ("pure", "approx", "gdp", "zcdp", "azcdp", "rdp", "pld_rr", "zero_delta")
PURE = ("pure", "pld_rr", "approx")
GAUSS = ("pure", "gdp", "pld_rr", "approx")


@st.composite
def adaptive_run(draw: st.DrawFn, case: Case) -> tuple[Any, list[Truth]]:
    """Run an adaptive analyst against the case's filter; return it and what it admitted."""
    f = case.build()
    admitted: list[Truth] = []
    COSTS.clear()
    level = draw(st.integers(0, len(LEVELS) - 1))
    n = draw(st.integers(1, 9))
    for _ in range(n):
        # mostly what the filter can take, sometimes anything
        kind = draw(st.sampled_from(case.kinds or KINDS) | st.sampled_from(KINDS))
        v = draw(st.sampled_from(LEVELS[level]))
        d = draw(st.sampled_from(DELTAS))
        made = _query(kind, v, d)
        if made is None:
            continue
        q, truth = made
        before = f.to_json()
        decision = f.try_spend(q)
        if decision.admitted:
            admitted.append(truth)
            COSTS.append(decision.cost)
            # adaptivity: after an admission ask for as much or more
            level = draw(st.integers(level, len(LEVELS) - 1))
        else:
            assert f.to_json() == before
            level = draw(st.integers(0, level))
    return f, admitted


# -- the checks -----------------------------------------------------------------------------


def _pure_sum(budget: float) -> Check:
    def check(_f: Any, adm: list[Truth]) -> None:
        total = Fraction(0)
        for t in adm:
            e = oracle.pure_eps(t)
            assert e is not None, t
            total += e
        assert total <= Fraction(budget), (total, budget)

    return check


def _rdp_sums(orders: tuple[float, ...], budgets: tuple[float, ...]) -> Check:
    def check(_f: Any, adm: list[Truth]) -> None:
        with mpmath.workdps(oracle.DPS):
            for a, b in zip(orders, budgets, strict=True):
                vals = [oracle.rdp(t, a) for t in adm]
                assert all(v is not None for v in vals), adm
                total = mpmath.fsum(vals)
                assert total <= oracle.mpq(b), (a, total, b)

    return check


def _rdp_some_sum(orders: tuple[float, ...], budgets: tuple[float, ...]) -> Check:
    """At one order at least, the exact RDP of what was admitted is within its budget
    (AnyOrderRDPFilter's invariant; docs/proofs/filters.md §12)."""
    def check(_f: Any, adm: list[Truth]) -> None:
        with mpmath.workdps(oracle.DPS):
            ok = []
            for a, b in zip(orders, budgets, strict=True):
                vals = [oracle.rdp(t, a) for t in adm]
                assert all(v is not None for v in vals), adm
                ok.append(mpmath.fsum(vals) <= oracle.mpq(b))
            assert any(ok), adm

    return check


def _zcdp_sums(rho: float, delta: float | None) -> Check:
    """sum rho_i <= rho (each truth's exact zCDP bound), sum delta_i <= delta, and the
    Renyi form at a few orders: sum D_alpha(L_i) <= alpha rho."""

    def check(_f: Any, adm: list[Truth]) -> None:
        srho, sdel = Fraction(0), Fraction(0)
        for t in adm:
            r = oracle.zcdp_rho(t)
            assert r is not None, t
            srho, sdel = srho + r[0], sdel + r[1]
        assert srho <= Fraction(rho)
        assert sdel <= Fraction(delta if delta is not None else 0.0)
        with mpmath.workdps(oracle.DPS):
            for a in (1.01, 2.0, 50.0):
                total = mpmath.fsum(
                    oracle.rdp(Truth(t.kind, t.eps, 0.0, t.mu, t.rho), a) for t in adm
                )
                assert total <= oracle.mpq(a) * oracle.mpq(rho)

    return check


def _gdp_composition(mu: float, delta: float = 0.0) -> Check:
    def check(_f: Any, adm: list[Truth]) -> None:
        assert all(t.kind in ("rr", "gauss") for t in adm), adm
        ok, gap = oracle.leq_gdp_budget(oracle.compose(adm), mu, delta)
        assert ok, (mu, delta, gap, adm)

    return check


def _natural_gdp(mu: float) -> Check:
    def check(_f: Any, adm: list[Truth]) -> None:
        assert all(t.kind == "gauss" for t in adm)
        assert sum((Fraction(t.mu) ** 2 for t in adm), Fraction(0)) <= Fraction(mu) ** 2

    return check


def _zero_delta(delta: float) -> Check:
    def check(_f: Any, adm: list[Truth]) -> None:
        keep = Fraction(1)
        for t in adm:
            assert t.kind == "rr", t
            assert t.eps == 0.0, t
            keep *= 1 - Fraction(t.delta)
        assert 1 - keep <= Fraction(delta)

    return check


def _within_target(eps: float, delta: float) -> Check:
    """The exact composition has delta(eps) <= delta (a mixed budget lies inside its target)."""

    def check(_f: Any, adm: list[Truth]) -> None:
        assert all(t.kind in ("rr", "gauss") for t in adm), adm
        assert oracle.delta_at(oracle.compose(adm), eps) <= oracle.mpq(delta)

    return check


def _natural_approx(eps: float, delta: float, rounds: int) -> Check:
    def check(_f: Any, adm: list[Truth]) -> None:
        assert len(adm) <= rounds
        assert all(t.kind == "rr" for t in adm)
        assert oracle.delta_at(oracle.compose(adm), eps) <= oracle.mpq(delta)

    return check


def _profile(eps: float, delta: float, k: int) -> Check:
    """At most k queries; the charged profiles c_t sum to within every bucket budget; and
    each admitted query's exact PLD is below RR_{v_t, eps}, v_t = c_t / max(1, sum c_t)
    (what Theorem 15 needs), checked in mpmath on x >= 1 (both symmetric): at x = 1 and at
    every e^{eps_i} (where h of RR_v bends) and on a grid in between."""

    def check(f: Any, adm: list[Truth]) -> None:
        assert len(adm) <= k
        t9 = f.constants
        n = t9.n
        charged = [[Fraction(x) for x in c["exact"]] for c in COSTS]
        assert len(charged) == len(adm)
        for i in range(n):
            assert sum((c[i] for c in charged), Fraction(0)) <= Fraction(t9.ell[i])
        for t, c in zip(adm, charged, strict=True):
            scale = max(Fraction(1), sum(c, Fraction(0)))
            ok, gap = oracle.leq_generalized_rr(t, [x / scale for x in c], t9.eps_grid)
            assert ok, (t, [float(x) for x in c], gap)

    return check


GDP_BUDGETS = [0.0, 1e-300, 1e-9, 0.5, 3.0]

CASES: dict[str, list[Case]] = {
    "pure_dp": [Case(lambda b=b: PureDPFilter(b), _pure_sum(b), PURE) for b in (0.0, 1e-300, 1.0)],
    "zcdp": [
        Case(lambda b=b: ZCDPFilter(b), _zcdp_sums(b, None), (*GAUSS, "zcdp"))
        for b in (0.0, 1e-300, 1.0)
    ],
    "approx_zcdp": [
        Case(lambda b=b: ApproxZCDPFilter(b, 1e-3), _zcdp_sums(b, 1e-3), (*GAUSS, "azcdp"))
        for b in (0.0, 1.0)
    ],
    "rdp": [
        Case(lambda b=b: RDPFilter(ORDERS, b), _rdp_sums(ORDERS, b), (*GAUSS, "zcdp", "rdp"))
        for b in ((0.0, 0.0, 0.0), (1e-300, 1e-300, 1e-300), (1.0, 1.0, 1.0))
    ]
    + [Case(lambda: RDPFilter((1.01,), (1.0,)), _rdp_sums((1.01,), (1.0,)), GAUSS)],
    "rdp_any": [
        Case(lambda b=b: AnyOrderRDPFilter(ORDERS, b), _rdp_some_sum(ORDERS, b),
             (*GAUSS, "zcdp", "rdp"))
        for b in ((0.0, 0.0, 0.0), (1e-300, 1e-300, 1e-300), (1.0, 1.0, 1.0), (0.2, 1.0, 30.0))
    ],
    "gdp_naive": [
        Case(lambda b=b: NaiveGDPFilter(b), _gdp_composition(b), GAUSS) for b in GDP_BUDGETS
    ],
    "gdp_residue": [
        Case(lambda b=b: GDPResidueFilter(b), _gdp_composition(b), GAUSS) for b in GDP_BUDGETS
    ],
    "approx_gdp_residue": [
        Case(lambda b=b, d=d: ApproxGDPResidueFilter(b, d), _gdp_composition(b, d), GAUSS)
        for b, d in ((0.0, 0.0), (1e-9, 1e-300), (1.0, 1e-3), (3.0, 0.5))
    ],
    "natural_gdp": [
        Case(lambda b=b: NaturalGDPFilter(b), _natural_gdp(b), ("gdp",)) for b in GDP_BUDGETS
    ],
    "natural_zero_delta": [
        Case(lambda b=b: NaturalZeroDeltaFilter(b), _zero_delta(b), ("zero_delta",))
        for b in (0.0, 1e-300, 0.1)
    ],
    "natural_approx": [
        Case(
            lambda: NaturalApproxFilter(1.0, 1e-3, 5, allow_general=True),
            _natural_approx(1.0, 1e-3, 5),
            ("pure", "approx"),
        )
    ],
    "additive_profile": [
        Case(lambda: AdditiveProfileFilter(1.0, 1e-3, 4), _profile(1.0, 1e-3, 4), GAUSS),
    ],
    "mixed": [
        Case(lambda: MixedFilter(2.0, 1e-5), _within_target(2.0, 1e-5), GAUSS),
        Case(lambda: MixedFilter(2.0, 1e-5, pure=1.0), _within_target(2.0, 1e-5), GAUSS),
        Case(lambda: MixedFilter(0.5, 1e-9, pure=0.0), _within_target(0.5, 1e-9), GAUSS),
    ],
    "residue": [
        Case(lambda: ResidueFilter(PureDP(1.0), "pure_dp"), _pure_sum(1.0), PURE),
        Case(lambda: ResidueFilter(GDP(1.0), "gdp_naive"), _gdp_composition(1.0), GAUSS),
        Case(lambda: ResidueFilter(GDP(1.0), "gdp_residue"), _gdp_composition(1.0), GAUSS),
    ],
}

#: Kinds whose queries are not the ones above (DP-SGD steps, per-record steps): their cases
#: are in tests/filters/test_extremes_training.py, with their own runs and oracles.
ELSEWHERE: set[str] = set(training_extremes.RECORD_CASES) | set(training_extremes.TRAINING_CASES)

ALL = [(kind, i) for kind, cases in CASES.items() for i in range(len(cases))]


def test_every_registered_kind_has_an_extremes_case() -> None:
    missing = set(registered_kinds()) - set(CASES) - ELSEWHERE
    assert not missing, f"filters without an extremes case (add one to CASES): {missing}"


@pytest.mark.parametrize(("kind", "i"), ALL, ids=[f"{k}-{i}" for k, i in ALL])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_admitted_never_exceed_the_budget(kind: str, i: int, data: st.DataObject) -> None:
    case = CASES[kind][i]
    f, admitted = data.draw(adaptive_run(case))
    case.check(f, admitted)


def test_each_case_admits_something_somewhere() -> None:
    """The suite is not vacuous: every non-exhausted case admits an ordinary query."""
    for kind, cases in CASES.items():
        for case in cases:
            f = case.build()
            if any(f.try_spend(q).admitted for q in _ordinary_probe(kind)):
                break
        else:
            raise AssertionError(f"no case of {kind!r} admits anything")


def _ordinary_probe(kind: str) -> list[Any]:
    return [PureDP(0.01), GDP(0.01), ApproxDP(0.0, 1e-6), ZCDP(1e-4), ApproxDP(0.01, 1e-6)]


@pytest.mark.slow
@pytest.mark.parametrize(("kind", "i"), ALL, ids=[f"{k}-{i}" for k, i in ALL])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_admitted_never_exceed_the_budget_long(kind: str, i: int, data: st.DataObject) -> None:
    """The same property with more adaptive runs per case (the slow suite)."""
    case = CASES[kind][i]
    f, admitted = data.draw(adaptive_run(case))
    case.check(f, admitted)


# -- long runs: thousands of small queries until the budget refuses -------------------------

def _most(cost: Fraction) -> int:
    """How many queries of this exact cost a budget of 1 holds."""
    return math.floor(1 / cost)


_G = Fraction(0.014) ** 2  # GDP(0.014): mu^2 adds up
LONG_RUNS: list[tuple[str, Callable[[], Any], Any, Truth, Check, int]] = [
    # (name, filter, query, its truth, the oracle check, the most an exact filter admits)
    ("pure_dp", lambda: PureDPFilter(1.0), PureDP(2e-4), Truth("rr", eps=2e-4), _pure_sum(1.0),
     _most(Fraction(2e-4))),
    ("zcdp", lambda: ZCDPFilter(1.0), ZCDP(2e-4), Truth("zcdp", rho=2e-4), _zcdp_sums(1.0, None),
     _most(Fraction(2e-4))),
    ("rdp", lambda: RDPFilter(ORDERS, (1.0, 1.0, 1.0)), GDP(0.005), Truth("gauss", mu=0.005),
     _rdp_sums(ORDERS, (1.0, 1.0, 1.0)), _most(Fraction(64) * Fraction(0.005) ** 2 / 2)),
    ("gdp_naive", lambda: NaiveGDPFilter(1.0), GDP(0.014), Truth("gauss", mu=0.014),
     _gdp_composition(1.0), _most(_G)),
    ("gdp_residue", lambda: GDPResidueFilter(1.0), GDP(0.014), Truth("gauss", mu=0.014),
     _gdp_composition(1.0), _most(_G)),
    ("natural_gdp", lambda: NaturalGDPFilter(1.0), GDP(0.014), Truth("gauss", mu=0.014),
     _natural_gdp(1.0), _most(_G)),
]


@pytest.mark.parametrize("run", LONG_RUNS, ids=[r[0] for r in LONG_RUNS])
def test_long_runs_never_exceed_the_budget_and_use_it(run: tuple[Any, ...]) -> None:
    """Thousands of admissions in a row: rounding never accumulates past the budget (exact
    oracle), and it does not strand the budget either (at least 99.9 % of what exact
    arithmetic admits, ``most``, computed in Fraction; RDP: order 64 binds)."""
    _, build, query, truth, check, most = run
    f = build()
    admitted: list[Truth] = []
    while f.try_spend(query).admitted:
        admitted.append(truth)
        assert len(admitted) <= most, "admitted more than exact arithmetic allows"
    check(f, admitted)
    assert len(admitted) >= most * 0.999, (len(admitted), most)


def _gdp_exceeds(eps: float, mu: float) -> Callable[[int], bool]:
    return lambda n: not oracle.leq_gdp_budget(oracle.compose([Truth("rr", eps=eps)] * n), mu)[0]


def _target_exceeds(eps: float, e: float, d: float) -> Callable[[int], bool]:
    return lambda n: oracle.delta_at(oracle.compose([Truth("rr", eps=eps)] * n), e) > d


RESIDUE_RUNS: list[tuple[str, Callable[[], Any], Any, float, Check, Callable[[int], bool]]] = [
    # (name, filter, query, the eps of its truth R_eps, oracle check, "n copies exceed")
    ("gdp_residue", lambda: GDPResidueFilter(1.0), PureDP(0.1), 0.1, _gdp_composition(1.0),
     _gdp_exceeds(0.1, 1.0)),
    ("gdp_residue_pld", lambda: GDPResidueFilter(1.0), PLD.randomized_response(0.1), 0.1,
     _gdp_composition(1.0), _gdp_exceeds(0.1, 1.0)),
    ("approx_gdp_residue", lambda: ApproxGDPResidueFilter(1.0, 1e-3), PureDP(0.1), 0.1,
     _gdp_composition(1.0, 1e-3), _gdp_exceeds(0.1, 1.0)),
    ("mixed", lambda: MixedFilter(2.0, 1e-5), PureDP(0.05), 0.05, _within_target(2.0, 1e-5),
     _target_exceeds(0.05, 2.0, 1e-5)),
]


@pytest.mark.parametrize("run", RESIDUE_RUNS, ids=[r[0] for r in RESIDUE_RUNS])
def test_residue_runs_to_exhaustion(run: tuple[Any, ...]) -> None:
    """Randomized-response queries until refusal (about 100, each charged through the
    residue): the exact composition of all of them is within the budget, and the filter
    admits at least 95 % of the most that any filter could (the largest n whose exact
    composition fits, found by the oracle)."""
    _, build, query, eps, check, exceeds = run
    f = build()
    n = 0
    while n < 10_000 and f.try_spend(query).admitted:
        n += 1
    check(f, [Truth("rr", eps=eps)] * n)
    most = n
    while not exceeds(most + 1):
        most += 1
    assert n >= 0.95 * most, (n, most)
