"""The ledger on every backend: check-and-spend, idempotency, audit log, concurrency."""

from __future__ import annotations

import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from service_harness import race
from system_doubles import FakePureFilter, fake_loads

from dpsieve.accounting.events import GDP, PureDP
from dpsieve.errors import LedgerError, UnsupportedError
from dpsieve.ledger import BudgetNotFoundError, IdempotencyKeyReuseError


def _store(make_store: Any, budget: str = "1") -> Any:
    s = make_store(loads=fake_loads)
    s.create_budget("b", FakePureFilter(Fraction(budget)))
    return s


def test_spend_admits_then_refuses_and_refusal_changes_nothing(make_store: Any) -> None:
    s = _store(make_store)
    out = s.spend("b", PureDP(0.75), key="k1", principal="ana")
    assert out.decision.admitted
    assert not out.replayed
    before = s.load_filter("b").to_json()
    out2 = s.spend("b", PureDP(0.5), key="k2", principal="ana")
    assert not out2.decision.admitted
    assert s.load_filter("b").to_json() == before
    assert s.load_filter("b").remaining() == {"eps": str(1 - Fraction(0.75))}
    assert [r.key for r in s.history("b")] == ["k1"]
    assert s.initial_filter("b").remaining() == {"eps": "1"}


def test_replay_is_not_charged_twice(make_store: Any) -> None:
    s = _store(make_store)
    a = s.spend("b", PureDP(0.25), key="same", request={"q": "count"})
    b = s.spend("b", PureDP(0.25), key="same", request={"q": "count"})
    assert a.decision.admitted
    assert b.replayed
    assert b.decision == a.decision
    assert s.load_filter("b").remaining() == {"eps": "3/4"}
    assert b.answer is None
    stored = s.record_answer("b", "same", {"value": 1.5})
    assert stored == {"value": 1.5}
    # first writer wins: a second answer for the same spend is never released
    assert s.record_answer("b", "same", {"value": 9.0}) == {"value": 1.5}
    c = s.spend("b", PureDP(0.25), key="same", request={"q": "count"})
    assert c.replayed
    assert c.answer == {"value": 1.5}
    assert s.history("b")[0].answered


def test_key_reuse_for_another_request_is_refused_and_writes_nothing(make_store: Any) -> None:
    s = _store(make_store)
    s.spend("b", PureDP(0.25), key="k", request={"q": "count"})
    n = len(s.audit("b"))
    with pytest.raises(IdempotencyKeyReuseError, match="'k'"):
        s.spend("b", PureDP(0.25), key="k", request={"q": "sum"})
    assert len(s.audit("b")) == n
    assert s.load_filter("b").remaining() == {"eps": "3/4"}


def test_filter_error_rolls_back(make_store: Any) -> None:
    s = _store(make_store)
    n = len(s.audit("b"))
    with pytest.raises(UnsupportedError):
        s.spend("b", GDP(0.1), key="k")
    assert len(s.audit("b")) == n
    assert s.history("b") == []


def test_audit_log_records_request_decision_answer(make_store: Any) -> None:
    s = _store(make_store)
    s.spend("b", PureDP(0.5), key="k1", principal="ana", request={"q": 1})
    s.record_answer("b", "k1", {"v": 0})
    s.spend("b", PureDP(0.75), key="k2", principal="ana", request={"q": 2})
    events = [(e.event, e.key) for e in s.audit("b")]
    assert events == [
        ("budget_set", ""),
        ("request", "k1"), ("decision", "k1"), ("answer", "k1"),
        ("request", "k2"), ("decision", "k2"),
    ]
    decisions = [e.payload for e in s.audit("b") if e.event == "decision"]
    assert [d["admitted"] for d in decisions] == [True, False]
    assert decisions[0]["cost"] == {"eps": "1/2"}
    seqs = [e.seq for e in s.audit()]
    assert seqs == sorted(seqs)


def test_unknown_budget_and_replace_rules(make_store: Any) -> None:
    s = _store(make_store)
    with pytest.raises(BudgetNotFoundError, match="'nope'"):
        s.spend("nope", PureDP(0.1), key="k")
    with pytest.raises(LedgerError, match="already exists"):
        s.create_budget("b", FakePureFilter(Fraction(2)))
    s.create_budget("b", FakePureFilter(Fraction(2)), replace=True)  # no spend yet: allowed
    s.spend("b", PureDP(0.1), key="k")
    with pytest.raises(LedgerError, match="cannot be replaced"):
        s.create_budget("b", FakePureFilter(Fraction(5)), replace=True)
    assert s.initial_filter("b").remaining() == {"eps": "2"}


def test_has_budget_and_load_filters_agree_with_the_single_reads(make_store: Any) -> None:
    from dpsieve.ledger.base import has_budget, load_filters

    s = _store(make_store)
    assert s.has_budget("b")
    assert has_budget(s, "b")
    assert not s.has_budget("nope")
    assert not has_budget(s, "nope")
    s.spend("b", PureDP(0.25), key="k")
    current, initial = s.load_filters("b")
    assert current.to_json() == s.load_filter("b").to_json()
    assert initial.to_json() == s.initial_filter("b").to_json()
    assert current.remaining() == {"eps": "3/4"}
    assert initial.remaining() == {"eps": "1"}
    assert [f.to_json() for f in load_filters(s, "b")] == [current.to_json(),
                                                           initial.to_json()]
    with pytest.raises(BudgetNotFoundError, match="'nope'"):
        s.load_filters("nope")


def test_summaries_see_every_write_from_another_ledger_connection(make_store: Any) -> None:
    # the initial filter is parsed once per exact stored text and the budget's total eps
    # remembered by it: a spend or a replaced budget written through another connection
    # (another server on the same database) shows in the next summary, never a stale one
    from dpsieve._budget_view import after_query, store_summary
    from dpsieve.filters import PureDPFilter
    from dpsieve.ledger.base import load_filters

    a, b = make_store(), make_store()
    a.create_budget("b", PureDPFilter(1.0))
    s1 = after_query(a, "b", PureDP(0.125))
    assert (s1["eps_total"], s1["more"]) == (1.0, {"count": 8, "at_least": False})
    assert b.spend("b", PureDP(0.25), key="k").decision.admitted
    s2 = after_query(a, "b", PureDP(0.125))
    assert (s2["eps_left"], s2["more"]["count"]) == (0.75, 6)
    assert load_filters(a, "b")[1] is load_filters(a, "b")[1]  # one parse of the initial
    c = make_store()
    c.create_budget("c", PureDPFilter(2.0))
    assert store_summary(a, "c").eps_total == 2.0
    c.create_budget("c", PureDPFilter(4.0), replace=True)  # no spend yet: replaceable
    s3 = store_summary(a, "c", like=PureDP(0.5), cap=100)
    assert (s3.eps_total, s3.eps_left, s3.more.count) == (4.0, 4.0, 8)
    assert load_filters(a, "c")[1].to_json() == PureDPFilter(4.0).to_json()


def test_registry(make_store: Any) -> None:
    s = make_store(loads=fake_loads)
    s.add_principal("ana", "analyst", "h1")
    s.add_principal("ana", "analyst", "h2")
    assert s.principal_for_key("h2").name == "ana"
    assert s.principal_for_key("zz") is None
    with pytest.raises(LedgerError, match="role"):
        s.add_principal("ana", "owner", "h3")
    s.register_dataset("d", {"path": "/x.csv", "format": "csv"})
    assert s.dataset("d") == {"path": "/x.csv", "format": "csv"}
    assert s.dataset("e") is None
    s.grant("ana", "d")
    s.grant("ana", "d")
    assert s.grants("ana") == ["d"]
    with pytest.raises(BudgetNotFoundError):
        s.grant("bob", "d")


def test_sqlite_state_survives_reopen(tmp_path: Any) -> None:
    from dpsieve.ledger import SQLiteStore

    s = SQLiteStore(tmp_path / "l.db", loads=fake_loads)
    s.create_budget("b", FakePureFilter(Fraction(1)))
    s.spend("b", PureDP(0.5), key="k")
    s.close()
    t = SQLiteStore(tmp_path / "l.db", loads=fake_loads)
    assert t.load_filter("b").remaining() == {"eps": "1/2"}
    assert t.spend("b", PureDP(0.5), key="k").replayed
    t.close()


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True
)
def test_audit_log_is_append_only_in_sql(backend: str, make_store: Any) -> None:
    """Even a direct SQL connection (bypassing the API) cannot rewrite the audit log."""
    s = _store(make_store)
    for stmt in ("UPDATE audit SET event = 'x'", "DELETE FROM audit"):
        if backend == "sqlite":
            import sqlite3

            con = sqlite3.connect(s.path)
            with pytest.raises(sqlite3.DatabaseError, match="append-only"):
                con.execute(stmt)
            con.close()
        else:
            import psycopg

            with psycopg.connect(s.url, options=f"-c search_path={s.schema}") as con, \
                    pytest.raises(psycopg.Error, match="append-only"):
                con.execute(stmt)
    assert len(s.audit("b")) == 1


N_CLIENTS = 50


def test_concurrent_spends_never_overspend(make_store: Any) -> None:
    """50 clients, each with its own connections, race for one budget of eps = 1.

    Each asks eps = 0.03 four times: 200 requests for room of exactly 33 (0.03 is not a
    binary fraction; the exact sum of 33 of them is below 1 and of 34 above).
    """
    s0 = _store(make_store)
    cost = Fraction(0.03)
    fits = int(Fraction(1) / cost)
    assert fits == 33
    stores = [make_store(loads=fake_loads) for _ in range(N_CLIENTS)]
    admitted: list[str] = []
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        start()
        for j in range(4):
            out = stores[i].spend("b", PureDP(0.03), key=f"c{i}-{j}", principal=f"c{i}")
            if out.decision.admitted:
                with lock:
                    admitted.append(out.key)

    race(client, N_CLIENTS)  # every client's error surfaced
    hist = s0.history("b")
    assert sorted(r.key for r in hist) == sorted(admitted)
    total = sum(Fraction(r.cost["eps"]) for r in hist)
    assert total <= 1
    assert len(hist) == fits  # and the filter admitted all that fit
    assert Fraction(s0.load_filter("b").remaining()["eps"]) == 1 - total


def test_spend_rows_are_the_canonical_json_of_their_values(make_store: Any) -> None:
    # the SQL ledger renders each JSON text once per spend; every row must still be
    # canonical_json(_json_safe(value)) byte for byte (audit payloads, spend columns),
    # with the fingerprint binding the key to exactly that request
    import hashlib

    from dpsieve.ledger.base import _json_safe, canonical_json, fingerprint

    s = make_store()
    from dpsieve.filters import PureDPFilter

    s.create_budget("j", PureDPFilter(1.0))
    request = {"type": "count", "z": [1, (2.5, float("inf"))], 3: "é\\u2028\"",
               "privacy": {"eps": 0.25, "nan": float("nan")}, "a": None}
    s.spend("j", PureDP(0.25), key="k", request=request)
    s.spend("j", PureDP(0.25), key="k", request=request)  # a replay
    safe = _json_safe(request)
    rows = s.audit("j")
    by_event = {e.event: e for e in rows}
    assert by_event["request"].payload == {"request": safe}
    # a replay is bounded: the request is logged once, with its admission
    assert by_event["replay"].payload == {"request_sha256": fingerprint(safe)}
    if not hasattr(s, "_tx"):
        return  # the memory store keeps values, not texts
    with s._tx(write=False) as cur:
        texts = {str(r[0]): str(r[1]) for r in cur.run(
            "SELECT event, payload FROM audit WHERE budget_id = ?", ("j",)).all()}
        fp, dec, req = cur.run("SELECT fingerprint, decision, request FROM spends"
                               " WHERE budget_id = ? AND key = ?", ("j", "k")).one()
    assert texts["request"] == canonical_json({"request": safe})
    assert texts["replay"] == canonical_json({"request_sha256": fingerprint(safe)})
    assert texts["decision"] == canonical_json(_json_safe(by_event["decision"].payload))
    assert dec == texts["decision"]
    assert req == canonical_json(safe)
    assert fp == fingerprint(safe) == hashlib.sha256(req.encode()).hexdigest()
