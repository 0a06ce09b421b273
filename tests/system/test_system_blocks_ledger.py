"""Blocks, quotas, unlocking and the queue in the ledger, on every backend: all or
nothing, nothing charged for a refused, locked or timed-out request, replays, and (SQL)
the chain's replay of gates and of multi-budget transactions."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import pytest

from dpsieve.accounting.events import PureDP
from dpsieve.blocks import Unlock, unlock_from_dict
from dpsieve.errors import LedgerError
from dpsieve.filters import PureDPFilter
from dpsieve.ledger import IdempotencyKeyReuseError

SPEC = {"column": "day", "budget": {"type": "pure", "eps": 1.0}, "scheduler": "dpf"}


def _blocks(s: Any, eps: dict[str, float], unlock: Unlock | None = None,
            spec: dict[str, Any] | None = None) -> dict[str, str]:
    s.declare_blocks("d", spec or SPEC)
    return {v: s.add_block("d", v, PureDPFilter(e), unlock or Unlock()).budget_id
            for v, e in eps.items()}


def _state(s: Any, b: str) -> str:
    return str(s.load_filter(b).to_json())


def _left(s: Any, b: str) -> Fraction:
    return Fraction(s.load_filter(b).remaining().to_dict()["exact"])


def test_a_charge_is_all_or_nothing(make_store: Any) -> None:
    s = make_store()
    ids = _blocks(s, {"a": 1.0, "b": 0.3})
    before = {b: _state(s, b) for b in ids.values()}
    out = s.spend_all("d", [ids["a"], ids["b"]], PureDP(0.5), key="k1", principal="ana")
    assert not out.admitted
    assert out.why == "budget"
    assert out.refused_by == ids["b"]
    assert {b: _state(s, b) for b in ids.values()} == before  # nothing charged anywhere
    assert s.history(ids["a"]) == []
    assert [e.event for e in s.audit(ids["a"])] == ["budget_set"]  # refusal on b only
    assert [e.event for e in s.audit(ids["b"])][-2:] == ["request", "decision"]
    ok = s.spend_all("d", [ids["a"], ids["b"]], PureDP(0.25), key="k2", principal="ana",
                     request={"q": 1})
    assert ok.admitted
    assert ok.budgets == (ids["a"], ids["b"])
    # b is the binding one (the most used after the charge)
    assert Fraction(ok.decision.remaining.to_dict()["exact"]) == Fraction(0.3) - Fraction(0.25)
    assert [r.key for r in s.history(ids["a"])] == ["k2"]
    assert [r.key for r in s.history(ids["b"])] == ["k2"]
    # a retry: nothing charged again, the same budgets even after a block arrived
    s.add_block("d", "c", PureDPFilter(1.0), Unlock())
    again = s.spend_all("d", [ids["a"], ids["b"], "d/block:\"c\""], PureDP(0.25), key="k2",
                        principal="ana", request={"q": 1})
    assert again.replayed
    assert again.budgets == ok.budgets
    assert len(s.history(ids["a"])) == 1
    assert s.record_txn_answer("d", "k2", {"value": 1}) == {"value": 1}
    assert s.record_txn_answer("d", "k2", {"value": 2}) == {"value": 1}  # first wins
    assert s.spend_all("d", [ids["a"]], PureDP(0.25), key="k2", principal="ana",
                       request={"q": 1}).answer == {"value": 1}
    with pytest.raises(IdempotencyKeyReuseError):
        s.spend_all("d", [ids["a"]], PureDP(0.25), key="k2", request={"q": 2})


def test_quotas_are_charged_in_the_same_transaction(make_store: Any) -> None:
    s = make_store()
    s.add_principal("ana", "analyst", "h1")
    s.add_principal("bob", "analyst", "h2")
    ids = _blocks(s, {"a": 10.0})
    qa = s.set_quota("d", "analyst", "ana", PureDPFilter(0.5)).budget_id
    qg = s.set_quota("d", "group", "team", PureDPFilter(0.6)).budget_id
    s.set_group("team", ["ana", "bob"])
    assert s.quota_budgets("d", "ana") == sorted([qa, qg])
    assert s.quota_budgets("d", "bob") == [qg]
    assert s.groups() == {"team": ["ana", "bob"]}
    assert s.spend_all("d", [ids["a"], *s.quota_budgets("d", "ana")], PureDP(0.4),
                       key="1", principal="ana").admitted
    block = _state(s, ids["a"])
    out = s.spend_all("d", [ids["a"], *s.quota_budgets("d", "bob")], PureDP(0.4),
                      key="2", principal="bob")
    assert not out.admitted
    assert out.refused_by == qg  # the group's quota: 0.4 + 0.4 > 0.6
    assert _state(s, ids["a"]) == block
    with pytest.raises(LedgerError):  # a quota that has counted spends is not replaced
        s.set_quota("d", "analyst", "ana", PureDPFilter(5.0))


def test_unlocking_per_arriving_analyst_refuses_what_is_locked(make_store: Any) -> None:
    s = make_store()
    ids = _blocks(s, {"a": 1.0}, unlock_from_dict({"type": "arrivals", "n": 4}))
    b = ids["a"]
    out = s.spend_all("d", [b], PureDP(0.3), key="1", principal="ana")
    assert not out.admitted
    assert out.why == "locked"
    assert "25 %" in out.decision.reason
    assert s.history(b) == []
    assert s.blocks("d")[0].arrivals == 1
    assert s.spend_all("d", [b], PureDP(0.25), key="2", principal="ana").admitted
    assert s.blocks("d")[0].arrivals == 1  # the same analyst counts once
    assert not s.spend_all("d", [b], PureDP(0.2), key="3", principal="ana").admitted
    assert s.spend_all("d", [b], PureDP(0.2), key="4", principal="bob").admitted  # 50 %
    assert s.blocks("d")[0].arrivals == 2


def test_periodic_unlocking_follows_the_clock(make_store: Any) -> None:
    s = make_store()
    ids = _blocks(s, {"a": 1.0}, unlock_from_dict(
        {"type": "periodic", "fraction": 0.5, "period": 100}))
    t0 = time.time()
    assert not s.spend_all("d", [ids["a"]], PureDP(0.75), key="1", now=t0).admitted
    assert s.spend_all("d", [ids["a"]], PureDP(0.75), key="2", now=t0 + 150).admitted
    assert s.blocks("d")[0].unlocked(t0 + 150) == 1


def test_the_queue_admits_by_policy_times_out_and_refuses_what_never_fits(
        make_store: Any) -> None:
    s = make_store()
    ids = _blocks(s, {"a": 1.0, "b": 1.0}, unlock_from_dict(
        {"type": "periodic", "fraction": 0.25, "period": 100}))
    a, b = ids["a"], ids["b"]
    t0 = time.time()
    # a wide request first, then two narrow ones; DPF: dominant shares 0.2, 0.2, 0.1
    s.enqueue("d", "wide", PureDP(0.2), [a, b], [0.2, 0.2], principal="ana", wait=1000,
              now=t0)
    s.enqueue("d", "n1", PureDP(0.2), [a], [0.2], principal="bob", wait=1000, now=t0 + 1)
    s.enqueue("d", "n2", PureDP(0.1), [b], [0.1], principal="bob", wait=50, now=t0 + 2)
    s.enqueue("d", "big", PureDP(2.0), [a], [2.0], principal="bob", wait=1000, now=t0 + 3)
    with pytest.raises(IdempotencyKeyReuseError):
        s.enqueue("d", "n1", PureDP(0.3), [a], [0.3], principal="bob", now=t0 + 4)
    changed = s.schedule_pass("d", now=t0 + 5)
    # n2 first (dominant share 0.1) leaves b 0.15 of its 0.25 unlocked: 'wide' (0.2 on b)
    # waits, n1 (0.2 on a) fits; 'big' needs more than the whole block
    assert changed == {"n2": "admitted", "n1": "admitted", "big": "refused"}
    wide = s.pending("d", "wide")
    assert wide.status == "waiting"
    assert wide.position == 1
    assert 'block "b" has 25 % of its budget unlocked and 10 % used' in wide.reason, wide
    assert "needs 20 %" in wide.reason
    assert _left(s, a) == 1 - Fraction(0.2)
    assert s.history(b)[0].key == "n2"
    # an admitted request's spend replays (nothing charged twice)
    assert s.spend_all("d", [a], PureDP(0.2), key="n1", principal="bob",
                       request={"query": PureDP(0.2).to_dict()}).replayed
    assert s.schedule_pass("d", now=t0 + 6) == {}
    # the next period unlocks 50 %: 'wide' fits
    assert s.schedule_pass("d", now=t0 + 105) == {"wide": "admitted"}
    s.enqueue("d", "late", PureDP(0.5), [b], [0.5], principal="ana", wait=10, now=t0 + 106)
    assert s.schedule_pass("d", now=t0 + 117) == {"late": "timed_out"}
    assert _left(s, b) == 1 - Fraction(0.2) - Fraction(0.1)  # nothing for 'late'
    assert [r.key for r in s.queue("d")][:1] == ["late"]


def test_sql_verify_replays_gates_and_transactions(make_store: Any, backend: str) -> None:
    if backend == "memory":
        pytest.skip("the memory ledger keeps no chain")
    s = make_store()
    ids = _blocks(s, {"a": 1.0, "b": 1.0},
                  unlock_from_dict({"type": "arrivals", "n": 2, "by": "analyst"}))
    assert s.spend_all("d", [ids["a"], ids["b"]], PureDP(0.5), key="1",
                       principal="ana").admitted
    s.enqueue("d", "q", PureDP(0.25), [ids["a"]], [0.25], principal="bob", wait=60)
    assert s.schedule_pass("d") == {"q": "admitted"}
    assert all(c.ok for c in s.verify()), [c.problems for c in s.verify() if not c.ok]

    from dpsieve.ledger.blocks import Held, charge_all, request_texts

    # a writer that ignores unlocking (gates left out): the replay finds it
    with s._tx(write=True) as cur:
        held = Held(s, cur)
        held.lock([ids["b"]])
        req, text, fp = request_texts(PureDP(0.5), None)
        assert charge_all(held, "d", [ids["b"]], PureDP(0.5), key="x", principal="eve",
                          req=req, req_text=text, fp=fp, gate_of={},
                          now=time.time()).admitted
    bad = {c.budget_id: c.problems for c in s.verify() if not c.ok}
    assert list(bad) == [ids["b"]]
    assert "beyond what its block had unlocked" in bad[ids["b"]][0]


def test_sql_verify_finds_a_transaction_admitted_in_one_budget_only(
        make_store: Any, backend: str) -> None:
    if backend == "memory":
        pytest.skip("the memory ledger keeps no chain")

    from dpsieve.ledger.base import canonical_json
    from dpsieve.ledger.blocks import Held
    from dpsieve.ledger.chain import encode_charge, state_sha

    s = make_store()
    ids = _blocks(s, {"a": 1.0, "b": 1.0})
    with s._tx(write=True) as cur:  # a writer that charges a alone, naming a and b
        held = Held(s, cur)
        held.lock([ids["a"]])
        flt = s._loads(held.rows[ids["a"]].state)
        d = flt.try_spend(PureDP(0.5))
        new = flt.to_json()
        held.write(ids["a"], "eve", "request", "x", '{"request":{}}')
        held.write(ids["a"], "eve", "decision", "x", canonical_json(d.to_dict()),
                   canonical_json({"charge": encode_charge(PureDP(0.5)),
                                   "state_sha256": state_sha(new),
                                   "txn": {"at": time.time(), "budgets": [ids["a"], ids["b"]],
                                           "scope": "d"}}))
        cur.run("UPDATE budgets SET state = ?, n_spends = n_spends + 1 WHERE budget_id = ?",
                (new, ids["a"]))
        cur.run("INSERT INTO spends VALUES (?, 'x', ?, 'eve', 'f', ?, '{}', NULL, 't', NULL)",
                (ids["a"], held.rows[ids["a"]].head.seq, canonical_json(d.to_dict())))
    bad = {c.budget_id: c.problems for c in s.verify() if not c.ok}
    assert list(bad) == [ids["a"]], bad
    assert "not all or nothing" in bad[ids["a"]][0]


def test_a_queued_key_charged_meanwhile_is_never_charged_twice(make_store: Any,
                                                                backend: str) -> None:
    """A waiting request whose idempotency key is then charged by a direct spend: the pass
    settles it (admitted if it was the same request, charged once; refused otherwise)
    instead of charging the key again or failing the whole pass; a key already charged for
    another request cannot be queued."""
    s = make_store()
    ids = _blocks(s, {"a": 1.0}, unlock_from_dict(
        {"type": "periodic", "fraction": 0.25, "period": 1e9}))
    a = ids["a"]
    t0 = time.time()
    same = {"query": PureDP(0.2).to_dict()}
    s.enqueue("d", "k", PureDP(0.2), [a], [0.2], principal="ana", request=same, wait=600,
              now=t0)
    s.enqueue("d", "j", PureDP(0.1), [a], [0.1], principal="ana", request={"q": "j"},
              wait=600, now=t0)
    # the same request under k, and another under j, charged directly meanwhile
    assert s.spend_all("d", [a], PureDP(0.2), key="k", principal="ana", request=same,
                       now=t0).admitted
    assert s.spend_all("d", [a], PureDP(0.01), key="j", principal="ana",
                       request={"q": "other"}, now=t0).admitted
    changed = s.schedule_pass("d", now=t0 + 1)
    assert changed == {"k": "admitted", "j": "refused"}
    assert "not charged again" in s.pending("d", "k").reason
    assert "used for another request" in s.pending("d", "j").reason
    assert sorted(r.key for r in s.history(a)) == ["j", "k"]  # each key charged once
    assert _left(s, a) == 1 - Fraction(0.2) - Fraction(0.01)
    # a key charged for another request cannot be queued (nothing written)
    assert s.spend_all("d", [a], PureDP(0.01), key="new", principal="ana",
                       request={"q": "y"}, now=t0).admitted
    with pytest.raises(IdempotencyKeyReuseError):
        s.enqueue("d", "new", PureDP(0.1), [a], [0.1], principal="ana", request={"q": "x"},
                  wait=600)
    assert s.pending("d", "new") is None
    with pytest.raises(IdempotencyKeyReuseError):
        s.enqueue("d", "k", PureDP(0.3), [a], [0.3], principal="ana", request={"q": "z"},
                  wait=600)
    if backend != "memory":
        assert all(c.ok for c in s.verify()), [c.problems for c in s.verify() if not c.ok]


def test_a_pass_re_ranks_as_the_declaration_says(make_store: Any) -> None:
    """DPack's re-ranking within a pass (``recompute`` in the declaration) reaches the
    ledger's pass: the same queue on two data sets, ranked once (X, Y admitted) and
    re-ranked after every admission (X, W1, W2), each admission by the real filters."""
    s = make_store()
    eps = {"a": 1.0, "b": 12.5, "c": 0.25 / 0.3}  # Y: 0.5 of a, 0.04 of b; W: 0.25, 0.3
    asks = [("X", 0.5, "a"), ("Y", 0.5, "b"), ("W1", 0.25, "c"), ("W2", 0.25, "c")]
    t0 = time.time()
    out = {}
    for name, recompute in (("once", 0), ("again", 1)):
        spec = {**SPEC, "scheduler": "dpack", **({"recompute": 1} if recompute else {})}
        s.declare_blocks(name, spec)
        ids = {v: s.add_block(name, v, PureDPFilter(e), Unlock()).budget_id
               for v, e in eps.items()}
        for i, (key, e, other) in enumerate(asks):
            budgets = [ids["a"]] if key == "X" else [ids["a"], ids[other]]
            s.enqueue(name, key, PureDP(e), budgets, [e / eps[b.rsplit(":", 1)[1].strip('"')]
                                                      for b in budgets],
                      principal="ana", wait=1000, now=t0 + i)
        out[name] = s.schedule_pass(name, now=t0 + 10)
    assert out["once"] == {"X": "admitted", "Y": "admitted"}
    assert out["again"] == {"X": "admitted", "W1": "admitted", "W2": "admitted"}
    assert s.pending("again", "Y").status == "waiting"
    assert s.pending("again", "Y").position == 1
    assert _left(s, 'again/block:"c"') == Fraction(0.25 / 0.3) - 2 * Fraction(0.25)


def test_unit_in_one_block_is_frozen_once_a_block_exists(make_store: Any) -> None:
    """``unit_in_one_block`` decides the guarantee stated for the charges made (parallel
    composition needs each unit's rows in one block): like the column and the budget it
    may change until a block exists, never after; a refusal names it and its stored value
    and leaves the declaration as it was. Unlocking, the scheduler and ``recompute`` may
    still change, and declaring the same value again passes."""
    s = make_store()
    s.declare_blocks("d", {**SPEC, "unit_in_one_block": True})
    s.declare_blocks("d", {**SPEC, "unit_in_one_block": False})  # no block yet: it may
    s.declare_blocks("d", {**SPEC, "unit_in_one_block": True})
    bid = s.add_block("d", "a", PureDPFilter(1.0), Unlock()).budget_id
    s.spend_all("d", [bid], PureDP(0.25), key="k1", principal="ana")
    stored = s.block_spec("d")
    assert stored["unit_in_one_block"] is True
    for changed in ({**SPEC, "unit_in_one_block": False},
                    dict(SPEC),  # absent: the default, false
                    {**SPEC, "scheduler": "dpack", "unit_in_one_block": False}):
        with pytest.raises(LedgerError) as e:
            s.declare_blocks("d", changed)
        msg = str(e.value)
        assert "'unit_in_one_block'" in msg, msg
        assert "cannot change" in msg, msg
        assert "It is true" in msg, msg
        assert s.block_spec("d") == stored
    with pytest.raises(LedgerError, match="column and budget cannot change"):
        s.declare_blocks("d", {**SPEC, "column": "month", "unit_in_one_block": True})
    assert s.block_spec("d") == stored
    same = {**SPEC, "scheduler": "dpack", "recompute": 2, "unit_in_one_block": True}
    s.declare_blocks("d", same)  # the same value: passes, the scheduler changes
    assert s.block_spec("d") == same
    s.declare_blocks("d", same)  # again, unchanged
    assert s.block_spec("d") == same
    # stored false (the default) cannot become true either
    s.declare_blocks("e", SPEC)
    s.add_block("e", 1, PureDPFilter(1.0), Unlock())
    with pytest.raises(LedgerError, match=r"'unit_in_one_block'.*It is false; got true"):
        s.declare_blocks("e", {**SPEC, "unit_in_one_block": True})
    assert s.block_spec("e") == SPEC
