"""The ledger's pass planner (dpsieve.ledger.passes.plan_pass) proposes what the scheduler
(dpsieve.blocks.scheduler.schedule) admits on the same inputs, DPack's re-ranking within a
pass (``recompute``) included; the data set's declaration carries ``recompute``."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.blocks import Pending, schedule
from dpsieve.blocks.spec import block_spec_from_dict
from dpsieve.errors import ValidationError
from dpsieve.ledger.blockset import PendingRecord
from dpsieve.ledger.passes import plan_pass

T0 = 1_800_000_000.0


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).isoformat()


def _state(spent: Fraction, budget: Fraction = Fraction(1)) -> str:
    return json.dumps({"kind": "pure_dp", "state": {"spent": str(spent),
                                                    "budget": str(budget)}})


def _rec(key: str, budgets: list[str], demands: list[float], t: float) -> PendingRecord:
    return PendingRecord("d", key, "ana", {}, tuple(budgets), tuple(demands), "waiting",
                         "queued", None, _iso(t), _iso(t + 1e6))


def _expected(policy: str, recs: list[PendingRecord], used: dict[str, Fraction],
              recompute: int) -> tuple[list[str], dict[str, int]]:
    """What schedule() admits and leaves waiting (by key), on the same demands and what
    is left of each budget (every budget fully unlocked)."""
    budgets = sorted({b for r in recs for b in r.budgets})
    index = {b: i for i, b in enumerate(budgets)}
    avail = np.array([1.0 - float(used[b]) for b in budgets])
    fits = [r for r in recs if all(d <= avail[index[b]] + 1e-12
                                   for b, d in zip(r.budgets, r.demands, strict=True))]
    pend = [Pending(np.array([index[b] for b in r.budgets], dtype=np.int64),
                    np.array(r.demands), datetime.fromisoformat(r.created_at).timestamp())
            for r in fits]
    s = schedule(policy, pend, avail, recompute=recompute)
    return [fits[i].key for i in s.admitted], {fits[i].key: p for i, p in s.position.items()}


def test_plan_pass_re_ranks_as_schedule_does() -> None:
    # X takes half of block a; Y then costs all that is left of a, W1 and W2 half each:
    # ranked once DPack proposes X and Y; re-ranked after each admission X, W1, W2
    recs = [_rec("X", ["a"], [0.5], T0), _rec("Y", ["a", "b"], [0.5, 0.04], T0 + 1),
            _rec("W1", ["a", "c"], [0.25, 0.3], T0 + 2),
            _rec("W2", ["a", "c"], [0.25, 0.3], T0 + 3)]
    states = {b: (_state(Fraction(0)), _state(Fraction(0))) for b in "abc"}
    once = plan_pass("dpack", recs, states, {}, T0 + 10)
    again = plan_pass("dpack", recs, states, {}, T0 + 10, recompute=1)
    assert once.attempt == ["X", "Y"]
    assert again.attempt == ["X", "W1", "W2"]
    assert list(again.waiting) == ["Y"]
    assert "position 1 of 1" in again.waiting["Y"][1]
    used = dict.fromkeys("abc", Fraction(0))
    for k, plan in ((0, once), (1, again), (2, plan_pass("dpack", recs, states, {}, T0 + 10,
                                                         recompute=2))):
        attempt, position = _expected("dpack", recs, used, k)
        assert plan.attempt == attempt
        assert {key: pos for key, (pos, _) in plan.waiting.items()} == position


_req = st.tuples(st.lists(st.integers(0, 4), min_size=1, max_size=3, unique=True),
                 st.floats(0.01, 0.7), st.integers(0, 20))


@settings(max_examples=120, deadline=None)
@given(st.lists(_req, max_size=9), st.lists(st.integers(0, 9), min_size=5, max_size=5),
       st.sampled_from(["dpack", "dpf", "fcfs"]), st.integers(0, 4))
def test_plan_pass_proposes_what_schedule_admits(
        reqs: list[tuple[list[int], float, int]], tenths: list[int], policy: str,
        recompute: int) -> None:
    """Random queues over 5 blocks, partly used: plan_pass's proposals and positions are
    schedule(policy, ..., recompute=k)'s on the same demands and fractions left."""
    recompute = recompute if policy == "dpack" else 0
    used = {f"b{j}": Fraction(t, 10) for j, t in enumerate(tenths)}
    recs = [_rec(f"r{i}", [f"b{j}" for j in dims], [x * (1 + k) / 3 for k in range(len(dims))],
                 T0 + t) for i, (dims, x, t) in enumerate(reqs)]
    states = {b: (_state(u), _state(Fraction(0))) for b, u in used.items()}
    plan = plan_pass(policy, recs, states, {}, T0 + 100, recompute=recompute)
    attempt, position = _expected(policy, recs, used, recompute)
    assert plan.attempt == attempt
    assert {key: pos for key, (pos, _) in plan.waiting.items()} == position
    assert set(plan.attempt) | set(plan.waiting) | set(plan.never) == {r.key for r in recs}


def test_the_declaration_carries_recompute_for_dpack_only() -> None:
    base = {"column": "day", "budget": {"type": "pure", "eps": 1}}
    spec = block_spec_from_dict({**base, "scheduler": "dpack", "recompute": 50})
    assert spec.recompute == 50
    assert spec.to_dict()["recompute"] == 50
    assert block_spec_from_dict(spec.to_dict()) == spec
    plain = block_spec_from_dict({**base, "scheduler": "dpack"})
    assert plain.recompute == 0
    assert "recompute" not in plain.to_dict()  # a declaration without it reads as before
    for bad, why in (({"scheduler": "dpf", "recompute": 5}, "unless the scheduler"),
                     ({"scheduler": "dpack", "recompute": -1}, ">= 0"),
                     ({"scheduler": "dpack", "recompute": 1.5}, ">= 0"),
                     ({"scheduler": "dpack", "recompute": True}, ">= 0")):
        with pytest.raises(ValidationError, match="recompute") as e:
            block_spec_from_dict({**base, **bad})
        assert why in str(e.value)
