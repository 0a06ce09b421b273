"""(eps, delta) plans on every kind of budget (docs/proofs/queries.md §8): only the
candidates whose charge the budget's kind can take are considered, the Gaussian is charged
in the budget's own currency where it can take it (zCDP, RDP, approximate zCDP: the ZCDP
plan's own rho), and a plan no candidate of which fits is refused before the spend naming
``privacy`` and the budget. On those zCDP/RDP budgets the candidates are compared at
equal charge (Laplace at eps_L, eps_L^2/2 <= rho). The charge is checked in the ledger,
against the noise drawn."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve._rounding import next_up
from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
)
from dpsieve.errors import ValidationError
from dpsieve.queries import Schema
from dpsieve.queries.approx import gaussian_rho, laplace_eps_for
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import prepare
from dpsieve.queries.source import BudgetKind

AR = Neighbouring.ADD_REMOVE
EPS, DELTA, SEL = 1.0, 1e-6, 1e-7
RHO = gaussian_rho(ApproxDP(EPS, DELTA))
ORDERS = (2.0, 8.0, 32.0)
SCHEMA = Schema.of([("pid", "integer"), ("g", "integer"), ("x", "float")], "pid")


def _frame(n: int = 2000) -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame({"pid": rng.integers(0, 300, n), "g": rng.integers(0, 20, n),
                         "x": rng.uniform(0, 10, n)})


def _plan(k: int, select: bool, eps: float = EPS, delta: float = DELTA) -> dict[str, Any]:
    """A unit count per group, each unit in at most ``k`` groups: at eps 1, delta 1e-6
    Laplace at pure eps 1 is less noisy with k = 1 and the Gaussian with k = 14 (the
    variance ratio, computed independently in tests/queries/test_approx_plans.py); at
    equal charge (zCDP, RDP, approximate zCDP budgets) the Gaussian is with both
    (:func:`test_at_equal_charge_the_gaussian_wins_at_k_1_and_14`)."""
    p: dict[str, Any] = {"type": "query",
                         "privacy": {"type": "approx", "eps": eps, "delta": delta},
                         "aggregations": [{"type": "count", "per": "unit"}],
                         "group_by": ["g"], "contribution": {"max_groups": k}}
    if select:
        p["select"] = {"delta": SEL}
    else:
        p["keys"] = [[i] for i in range(20)]
    return p


#: (budget, k, select) -> (mechanism, charge) or None (refused before the spend). The
#: pure plan's charge is PureDP(eps) (ApproxDP(eps, delta_sel) with key selection), the
#: zCDP plan's ZCDP(rho) (ApproxZCDP(rho, delta_sel)), the (eps, delta) one ApproxDP(eps,
#: delta) (ApproxDP(eps, delta + delta_sel)). On zCDP, RDP and approximate zCDP budgets
#: Laplace is at eps_L (equal charge) and loses at k = 1 too.
PURE, ZC, AX = PureDP(EPS, AR), ZCDP(RHO, AR), ApproxDP(EPS, DELTA, AR)
PURE_S, ZC_S = ApproxDP(EPS, SEL, AR), ApproxZCDP(RHO, SEL, AR)
AX_S = ApproxDP(EPS, 1.1e-6, AR)
EXPECTED: dict[tuple[str, int, bool], tuple[str, PrivacyDescription] | None] = {
    ("pure", 1, False): ("laplace", PURE), ("pure", 14, False): ("laplace", PURE),
    ("pure", 1, True): None, ("pure", 14, True): None,
    ("zcdp", 1, False): ("gaussian", ZC), ("zcdp", 14, False): ("gaussian", ZC),
    ("zcdp", 1, True): None, ("zcdp", 14, True): None,
    ("rdp", 1, False): ("gaussian", ZC), ("rdp", 14, False): ("gaussian", ZC),
    ("rdp", 1, True): None, ("rdp", 14, True): None,
    ("gdp", 1, False): ("laplace", PURE), ("gdp", 14, False): ("laplace", PURE),
    ("gdp", 1, True): None, ("gdp", 14, True): None,
    ("approx", 1, False): ("laplace", PURE), ("approx", 14, False): ("gaussian", AX),
    ("approx", 1, True): ("laplace", PURE_S), ("approx", 14, True): ("gaussian", AX_S),
    ("approx-nodelta", 1, False): ("laplace", PURE),
    ("approx-nodelta", 14, False): ("laplace", PURE),
    ("approx-nodelta", 1, True): None, ("approx-nodelta", 14, True): None,
    ("approx_zcdp", 1, False): ("gaussian", ZC), ("approx_zcdp", 14, False): ("gaussian", ZC),
    ("approx_zcdp", 1, True): ("gaussian", ZC_S),
    ("approx_zcdp", 14, True): ("gaussian", ZC_S),
}


def _budgets() -> dict[str, tuple[PrivacyDescription, dict[str, Any]]]:
    return {"pure": (PureDP(5.0), {}), "zcdp": (ZCDP(1.0), {}),
            "rdp": (RDP(ORDERS, (2.0, 8.0, 32.0)), {}), "gdp": (GDP(3.0), {}),
            # the mixed filter: declared for the workload (a pure part and a delta part)
            "approx": (ApproxDP(8.0, 1e-5), {"typical": [PureDP(EPS), AX_S]}),
            # an (eps, delta) budget declared for pure queries: its split has no delta part
            "approx-nodelta": (ApproxDP(5.0, 1e-5), {"typical": PureDP(1.0)}),
            "approx_zcdp": (ApproxZCDP(1.0, 1e-5), {})}


def _session(name: str) -> Session:
    budget, extra = _budgets()[name]
    return Session(_frame(), budget=budget, privacy_unit="pid", **extra)


@pytest.mark.parametrize(("k", "select"), [(1, False), (14, False), (1, True), (14, True)])
@pytest.mark.parametrize("name", sorted(_budgets()))
def test_each_budget_kind_runs_the_candidate_it_can_take(name: str, k: int,
                                                         select: bool) -> None:
    """Which mechanism runs, the charge the ledger records (and the preview states), the
    noise the answer says it drew; a refusal names ``privacy`` and the budget and spends
    nothing."""
    s = _session(name)
    before = (s.remaining(), len(s.store.history(s.budget_id)))
    want = EXPECTED[(name, k, select)]
    plan = _plan(k, select)
    if want is None:
        for attempt in (s.preview, s.query):
            with pytest.raises(ValidationError) as e:
                attempt(plan)
            assert e.value.parameter == "privacy"
            assert "budget" in str(e.value)
            assert "nothing was spent" in str(e.value)
        assert (s.remaining(), len(s.store.history(s.budget_id))) == before
        return
    mech, charge = want
    p = s.preview(plan)
    assert p["admitted"], p["reason"]
    assert p["calibration"]["mechanism"] == mech
    assert p["calibration"]["budget"] == s.store.load_filter(s.budget_id).kind
    assert p["charge"] == charge.to_dict()
    r = s.query(plan)
    (rec,) = s.store.history(s.budget_id)[before[1]:]
    assert rec.cost["query"] == charge.to_dict()
    assert r.cost.to_dict()["query"] == charge.to_dict()
    for parts in r.noise.values():
        for n in parts.values():
            assert n["mechanism"] == "discrete_" + mech
            assert n["std"] == p["noise"]["count"]["a0.count"]["std"]


def _parts_rho(plan: dict[str, Any]) -> tuple[Fraction, Fraction]:
    """(sum of the Gaussian parts' own rho, exact; the least rho their noise supports:
    sum of L2^2 / (2 s^2) over parts, s^2 the sampler's exact parameter, L2^2 from the
    plan's bounds: an oracle independent of the shares)."""
    z = prepare(from_spec({**plan, "privacy": {"type": "zcdp", "rho": RHO}}), SCHEMA, AR)
    own = sum((Fraction(c.charge.rho) for c in z.charge.parts  # type: ignore[union-attr]
               ), Fraction(0))
    noise = sum((Fraction(c.sens.l2sq) / (2 * Fraction(c.mechanism.sampled_sigma2))  # type: ignore[union-attr]
                 for c in z.charge.parts), Fraction(0))
    return own, noise


@pytest.mark.parametrize("budget", [ZCDP(1.0), RDP(ORDERS, (2.0, 8.0, 32.0)),
                                    ApproxZCDP(1.0, 1e-5)])
def test_the_rho_charged_is_the_plans_sum_of_per_part_rho(budget: PrivacyDescription
                                                          ) -> None:
    """Oracle: on zCDP, RDP and approximate-zCDP budgets the Gaussian is charged rho =
    zcdp_rho_for(eps, delta) exactly (the ledger's exact rational; RDP at each order
    alpha * rho, exactly), which equals the sum of the plan's per-part rho (a count and a
    mean: three parts at shares 1/2, 1/4, 1/4, each rounded down: the sum at most rho,
    within 1e-15 of it) and is at least what the noise drawn supports (L2^2 / 2 s^2
    summed)."""
    plan = {**_plan(14, False), "aggregations": [
        {"type": "count", "per": "unit"},
        {"type": "mean", "column": "x", "lower": 0, "upper": 10}],
        "contribution": {"max_groups": 14, "max_rows": 4}}
    s = Session(_frame(), budget=budget, privacy_unit="pid")
    p = s.preview(plan)
    assert p["calibration"]["mechanism"] == "gaussian"
    s.query(plan)
    (rec,) = s.store.history(s.budget_id)
    own, noise = _parts_rho(plan)
    rho = Fraction(RHO)
    assert noise <= own <= rho
    assert own >= rho * (1 - Fraction(1, 10**15))
    exact = rec.cost["exact"]
    if isinstance(budget, RDP):
        assert [Fraction(e) for e in exact] == [Fraction(a) * rho for a in ORDERS]
    elif isinstance(budget, ApproxZCDP):
        assert (Fraction(exact["rho"]), Fraction(exact["delta"])) == (rho, 0)
    else:
        assert Fraction(exact) == rho
    # a single part: its share is the whole rho, so the sum is exact
    single, single_noise = _parts_rho(_plan(14, False))
    assert single == rho
    assert single_noise <= rho


def test_the_choice_reads_the_kind_not_the_amount_left() -> None:
    """The choice is a function of public values: the budget's kind. A zCDP budget with
    almost nothing left states the same choice and charge in its preview (and refuses it
    as exceeded, nothing spent); an exhausted pure budget the Laplace one."""
    for budget, mech in ((ZCDP(1e-6), "gaussian"), (PureDP(1e-6), "laplace")):
        s = Session(_frame(), budget=budget, privacy_unit="pid")
        p = s.preview(_plan(14, False))
        assert p["calibration"]["mechanism"] == mech
        assert not p["admitted"]
        big = Session(_frame(), budget=type(budget)(1e6), privacy_unit="pid")
        q = big.preview(_plan(14, False))
        assert (q["calibration"], q["charge"]) == (p["calibration"], p["charge"])


def test_without_a_budget_kind_the_gaussian_is_charged_eps_delta() -> None:
    """A plan prepared outside a session (no budget kind) keeps the earlier rule: both
    candidates, the Gaussian charged ApproxDP(eps, delta)."""
    q = from_spec(_plan(14, False))
    assert prepare(q, SCHEMA, AR).charge.description == AX
    kind = BudgetKind("zcdp", "a zCDP budget", lambda c: isinstance(c, ZCDP))
    assert prepare(q, SCHEMA, AR, kind).charge.description == ZC
    only_pure = BudgetKind("pure_dp", "a pure eps budget", lambda c: isinstance(c, PureDP))
    p = prepare(q, SCHEMA, AR, only_pure)
    assert p.charge.description == PURE
    assert p.calibration is not None
    assert p.calibration["variance_ratio"] is None
    assert "gaussian" in p.calibration["other_refused"]
    assert "a pure eps budget" in p.calibration["other_refused"]
    nothing = BudgetKind("x", "a budget of kind x", lambda c: False)
    with pytest.raises(ValidationError) as e:
        prepare(q, SCHEMA, AR, nothing)
    assert e.value.parameter == "privacy"
    assert "a budget of kind x" in str(e.value)


def test_a_huge_eps_on_a_zcdp_budget_is_decided_before_the_spend() -> None:
    """eps 1e300: both stds 0.0 (a tie: Laplace, charged PureDP: rho = eps^2/2, past what
    any budget holds): refused as exceeded with nothing spent, never a crash."""
    s = Session(_frame(300), budget=ZCDP(1e6), privacy_unit="pid")
    p = s.preview(_plan(14, False, eps=1e300))
    assert p["calibration"]["mechanism"] == "laplace"
    assert not p["admitted"]
    assert math.isfinite(p["calibration"]["rho"])


@pytest.mark.parametrize(("budget", "quota", "want"), [
    ({"type": "zcdp", "rho": 1.0}, None, ZC),
    ({"type": "pure", "eps": 5.0}, None, PURE),
    # a zCDP block with a pure quota: only Laplace fits both
    ({"type": "zcdp", "rho": 1.0}, {"type": "pure", "eps": 5.0}, PURE),
    ({"type": "zcdp", "rho": 1.0}, {"type": "zcdp", "rho": 1.0}, ZC)])
def test_a_data_set_with_blocks_reads_its_blocks_and_quotas_kinds(
        budget: dict[str, Any], quota: dict[str, Any] | None,
        want: PrivacyDescription) -> None:
    """Blocks: the charge must fit a block's budget and every quota of the analyst."""
    from dpsieve.ledger import MemoryStore
    from dpsieve.session.blocks import BlockSession

    store = MemoryStore()
    store.add_principal("ana", "analyst", "h1")
    df = _frame().assign(day=lambda d: (d["pid"] % 3).astype("int64"))
    kw: dict[str, Any] = {"privacy_unit": "pid"}
    owner = BlockSession(df, dataset="d", store=store, blocks={
        "column": "day", "budget": budget}, **kw)
    for day in (0, 1, 2):
        owner.add_block(day)
    if quota is not None:
        owner.set_quota("analyst", "ana", quota)
    s = BlockSession(df, dataset="d", store=store, principal="ana", **kw)
    r = s.query(_plan(14, False))
    assert r.cost.to_dict()["query"] == want.to_dict()
    with pytest.raises(ValidationError) as e:  # every selection has a delta
        s.query(_plan(14, True))
    assert e.value.parameter == "privacy"


# -- equal charge on zCDP, approximate zCDP and RDP budgets --------------------------------

def test_laplace_eps_for_is_the_largest_float_within_rho_and_eps() -> None:
    """eps_L <= eps and eps_L^2/2 <= rho, exactly in rationals, and the next float up
    breaks one of them (the largest: rounded down, never up); eps itself when the request
    already costs at most rho (a large delta); 0.0 without a rho; a subnormal rho still
    gives an eps_L > 0."""
    for eps, delta in ((1.0, 1e-6), (0.1, 1e-10), (20.0, 1e-6), (1e6, 1e-6),
                       (1e-12, 1e-6), (0.1, 0.9)):
        rho = Fraction(gaussian_rho(ApproxDP(eps, delta)))
        e = laplace_eps_for(eps, float(rho))
        assert 0 < e <= eps
        assert Fraction(e) ** 2 / 2 <= rho
        up = next_up(e)
        assert up > eps or Fraction(up) ** 2 / 2 > rho
    rho_big = gaussian_rho(ApproxDP(0.1, 0.9))  # 2.18 > 0.1^2/2: the request fits
    assert Fraction(0.1) ** 2 / 2 <= Fraction(rho_big)
    assert laplace_eps_for(0.1, rho_big) == 0.1
    assert laplace_eps_for(1.0, 0.0) == 0.0
    tiny = laplace_eps_for(1.0, 5e-324)
    assert tiny > 0
    assert Fraction(tiny) ** 2 / 2 <= Fraction(5e-324)


def test_equal_charge_reads_every_filter_of_the_budget() -> None:
    """The budget's currency is zCDP or RDP only when every filter's kind is (a block's
    and a quota's joined by '+'); a zCDP block with a pure quota keeps Laplace at eps."""
    from dpsieve.queries.approx import equal_charge

    def kind(k: str) -> BudgetKind:
        return BudgetKind(k, k, lambda _: True)

    assert all(equal_charge(kind(k)) for k in ("zcdp", "rdp", "approx_zcdp", "zcdp+rdp"))
    assert not any(equal_charge(kind(k)) for k in ("pure_dp", "mixed", "gdp_residue",
                                                   "zcdp+pure_dp"))
    assert not equal_charge(None)


@pytest.mark.parametrize("budget", [ZCDP(100.0), RDP(ORDERS, (200.0, 800.0, 3200.0)),
                                    ApproxZCDP(100.0, 1e-5)])
@pytest.mark.parametrize(("eps", "k", "mech"), [(1.0, 1, "gaussian"), (1.0, 14, "gaussian"),
                                                (20.0, 1, "laplace")])
def test_on_zcdp_and_rdp_budgets_an_approx_plan_costs_at_most_rho(
        budget: PrivacyDescription, eps: float, k: int, mech: str) -> None:
    """Whichever candidate runs, the ledger's exact charge is at most rho =
    zcdp_rho_for(eps, delta) (RDP: alpha * rho at each order). Before equal charge the
    (1, 1e-6) plan with max_groups 1 ran Laplace at pure eps 1: eps^2/2 = 0.5, 20.5 x rho.
    At eps 20, k = 1 Laplace wins at equal charge (rho 4.79, eps_L 3.09: its discrete
    noise is below the Gaussian's, ratio ~1.05) and is charged PureDP(eps_L), eps_L <= eps
    and eps_L^2/2 <= rho (what the RDP filter charges a pure plan, min(eps_L,
    alpha eps_L^2/2, R_eps's RDP) rounded up, is then at most alpha * rho too)."""
    s = Session(_frame(), budget=budget, privacy_unit="pid")
    plan = _plan(k, False, eps)
    rho = Fraction(gaussian_rho(ApproxDP(eps, DELTA)))
    p = s.preview(plan)
    cal = p["calibration"]
    assert cal["mechanism"] == mech
    eps_l = cal["laplace_eps"]
    assert eps_l <= eps
    assert Fraction(eps_l) ** 2 / 2 <= rho
    want = (PureDP(eps_l, AR) if mech == "laplace" else ZCDP(float(rho), AR)).to_dict()
    assert p["charge"] == want
    s.query(plan)
    (rec,) = s.store.history(s.budget_id)
    assert rec.cost["query"] == want
    exact = rec.cost["exact"]
    if isinstance(budget, RDP):
        assert all(Fraction(e) <= Fraction(a) * rho
                   for e, a in zip(exact, ORDERS, strict=True))
    elif isinstance(budget, ApproxZCDP):
        assert Fraction(exact["rho"]) <= rho
        assert Fraction(exact["delta"]) == 0
    else:
        assert Fraction(exact) <= rho


@pytest.mark.parametrize("k", [1, 14])
def test_at_equal_charge_the_gaussian_wins_at_k_1_and_14(k: int) -> None:
    """(1, 1e-6) on a zCDP budget: rho = zcdp_rho_for(1, 1e-6) = 0.0243560, eps_L =
    sqrt(2 rho) rounded down = 0.220708. A unit count, each unit in k groups: L1 = k,
    L2^2 = k. Laplace at eps_L: q = exp(-eps_L / k), std sqrt(2q)/(1-q) = 6.39 (k = 1),
    89.7 (k = 14); the Gaussian sqrt(k / (2 rho)) = 4.53, 16.95; variance ratios 0.502
    and 0.0357 (continuous limit 1/(2k)): the Gaussian both times. Before, at k = 1
    Laplace at pure eps 1 ran (std sqrt(2/e)/(1-1/e) = 1.36) for eps^2/2 = 0.5 of the
    budget. On the (eps, delta) budget nothing changed: Laplace at eps 1 at k = 1."""
    s = Session(_frame(), budget=ZCDP(1.0), privacy_unit="pid")
    p = s.preview(_plan(k, False))
    cal = p["calibration"]
    eps_l = math.sqrt(2 * RHO)
    assert cal["laplace_eps"] == pytest.approx(eps_l, rel=1e-15)
    q = math.exp(-eps_l / k)
    lap = math.sqrt(2 * q) / (1 - q)
    gauss = math.sqrt(k / (2 * RHO))
    assert cal["variance_ratio"] == pytest.approx((gauss / lap) ** 2, rel=1e-3)
    assert (gauss / lap) ** 2 < 1
    assert cal["mechanism"] == "gaussian"
    assert p["noise"]["count"]["a0.count"]["std"] == pytest.approx(gauss, rel=1e-3)
    assert p["charge"] == ZC.to_dict()
    mixed = _session("approx").preview(_plan(k, False))["calibration"]
    assert mixed["laplace_eps"] == EPS
    assert mixed["mechanism"] == ("laplace" if k == 1 else "gaussian")
