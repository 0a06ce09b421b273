"""Children in the ledger on every backend: opened with their charge in one transaction,
questioned durably, state surviving a restart, access by owner and grants, idempotent
steps, and no overspend of the budget or of a child's positives under 50 clients."""

from __future__ import annotations

import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from service_harness import race

from dpsieve.accounting.events import PureDP
from dpsieve.errors import LedgerError
from dpsieve.filters import PureDPFilter
from dpsieve.interactive import (
    ChildExhaustedError,
    ContinualCounter,
    CounterSpec,
    LaplaceSVT,
    SparseVector,
)
from dpsieve.interactive.store import ask_child, open_child
from dpsieve.ledger.base import IdempotencyKeyReuseError
from dpsieve.ledger.children import ChildAccessError


def _svt(eps: float = 0.3, c: int = 2) -> SparseVector:
    return SparseVector.open(LaplaceSVT(eps, positives=c), rng=np.random.default_rng(0))


def test_open_charges_once_and_refusal_creates_nothing(make_store: Any) -> None:
    s = make_store()
    s.create_budget("b", PureDPFilter(1.0))
    out = open_child(s, "b", "sv1", _svt(0.6), key="o1", principal="ana")
    assert out.decision.admitted
    again = open_child(s, "b", "sv1", _svt(0.6), key="o1", principal="ana")
    assert again.replayed  # a retried open is charged once
    refused = open_child(s, "b", "sv2", _svt(0.6), key="o2", principal="ana")
    assert not refused.decision.admitted
    assert [c.child_id for c in s.children("b")] == ["sv1"]
    assert Fraction(s.load_filter("b").remaining()["eps"]) == Fraction(1.0) - Fraction(0.6)
    with pytest.raises(LedgerError, match="exists"):
        open_child(s, "b", "sv1", _svt(0.1), key="o3", principal="ana")
    assert Fraction(s.load_filter("b").remaining()["eps"]) == Fraction(1.0) - Fraction(0.6)
    events = [e.event for e in s.audit("b")]
    assert events.count("child_open") == 1
    if hasattr(s, "verify"):
        assert all(not c.problems for c in s.verify("b"))


def test_answers_are_stored_state_survives_a_restart(make_store: Any) -> None:
    s = make_store()
    s.create_budget("b", PureDPFilter(1.0))
    open_child(s, "b", "sv", _svt(0.5, 2), key="o", principal="ana")
    ask = {"op": "ask", "threshold": 0.0}
    a1 = ask_child(s, "b", "sv", ask, 100.0, key="q1", principal="ana")
    assert a1["above"] is True
    s2 = make_store()  # a new process: reads the stored state
    secret = s2.child_state("b", "sv")["threshold_noise"]
    assert secret == s.child_state("b", "sv")["threshold_noise"]
    a2 = ask_child(s2, "b", "sv", ask, 100.0, key="q2", principal="ana")
    assert a2["positives_left"] == 0
    with pytest.raises(ChildExhaustedError):
        ask_child(s2, "b", "sv", ask, 100.0, key="q3", principal="ana")
    assert ask_child(s2, "b", "sv", ask, 100.0, key="q2", principal="ana") == a2
    with pytest.raises(IdempotencyKeyReuseError):
        ask_child(s2, "b", "sv", {"op": "ask", "threshold": 5.0}, 1.0, key="q2",
                  principal="ana")
    answers = [e for e in s2.audit("b") if e.event == "child_answer"]
    assert len(answers) == 2
    assert "threshold_noise" not in str(answers) + str(s2.children("b"))


def test_owner_and_grants(make_store: Any) -> None:
    s = make_store()
    s.create_budget("b", PureDPFilter(1.0))
    open_child(s, "b", "sv", _svt(), key="o", principal="ana")
    with pytest.raises(ChildAccessError):
        ask_child(s, "b", "sv", {"op": "ask", "threshold": 0.0}, 1.0, key="x", principal="bob")
    assert s.children("b", "bob") == []
    with pytest.raises(ChildAccessError):
        s.grant_child("b", "sv", "bob", by="eve")
    s.grant_child("b", "sv", "bob", by="ana")
    ask_child(s, "b", "sv", {"op": "ask", "threshold": 0.0}, -1e9, key="x", principal="bob")
    assert [c.child_id for c in s.children("b", "bob")] == ["sv"]


def test_counter_steps_are_idempotent(make_store: Any) -> None:
    s = make_store()
    s.create_budget("b", PureDPFilter(10.0))
    from dpsieve.filters import GDPResidueFilter

    s.create_budget("g", GDPResidueFilter(2.0))
    counter = ContinualCounter(CounterSpec.for_mu(1.0), np.random.default_rng(1))
    assert open_child(s, "g", "ctr", counter, key="o").decision.admitted
    step = {"op": "step"}
    first = ask_child(s, "g", "ctr", step, 5, key="s1")
    assert ask_child(s, "g", "ctr", step, 5, key="s1") == first  # a retry: not appended
    ask_child(s, "g", "ctr", step, 2, key="s2")
    assert s.child_state("g", "ctr")["total"] == 7
    assert s.child_state("g", "ctr")["steps"] == 2


N_CLIENTS = 50


def test_fifty_clients_over_five_children_and_plain_queries(make_store: Any) -> None:
    """50 clients, each with its own connections: they open 5 sparse vector children (eps
    0.1 each, 3 positives) and spend plain queries (eps 0.03) on one budget of eps 1, and
    ask the children questions that are always above. No overspend: the admitted charges
    sum to at most 1, each child answered at most 3 positives, the chain verifies."""
    s0 = make_store()
    s0.create_budget("b", PureDPFilter(1.0))
    stores = [make_store() for _ in range(N_CLIENTS)]
    ups: list[str] = []
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        st = stores[i]
        start()
        if i < 10:  # two clients race to open each child
            sv = SparseVector.open(LaplaceSVT(0.1, positives=3),
                                   rng=np.random.default_rng(i))
            try:
                open_child(st, "b", f"sv{i % 5}", sv, key=f"open{i % 5}-{i // 5}",
                           principal="")
            except LedgerError as e:  # the other opener won: this client stops here
                if "exists" not in str(e):
                    raise
                return
        for j in range(4):
            st.spend("b", PureDP(0.03), key=f"p{i}-{j}", principal=f"c{i}")
            try:
                a = ask_child(st, "b", f"sv{(i + j) % 5}", {"op": "ask", "threshold": 0.0},
                              1e9, key=f"q{i}-{j}")
                if a["above"]:
                    with lock:
                        ups.append(f"sv{(i + j) % 5}")
            except (ChildExhaustedError, KeyError):
                pass  # exhausted, or not opened yet (a public refusal)

    race(client, N_CLIENTS)  # any other error of any client surfaced
    hist = s0.history("b")
    total = sum(Fraction(r.cost["eps"]) for r in hist)
    assert total <= 1
    kids = s0.children("b")
    for c in kids:
        state = s0.child_state("b", c.child_id)
        assert state["positives_used"] <= 3
        assert ups.count(c.child_id) == state["positives_used"]
    if hasattr(s0, "verify"):
        assert all(not c.problems for c in s0.verify("b"))
