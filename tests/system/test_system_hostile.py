"""Hostile and careless clients (issue 25): failed-authentication limits that a client
cannot steer and that never lock out a valid key, per-analyst quotas, bounded refusals,
health routes that never write, and a 503 that tells the truth about the charge and
returns the idempotency key to retry with."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve.errors import ConcurrencyError
from dpsieve.ledger import SQLiteStore
from dpsieve.ledger.base import LedgerUnavailableError, spend_journal
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Zc8TzL2wN4cVb6mRx9Qs3Kd7Jf"
OWN = {"Authorization": f"Bearer {OWNER}"}
Q = {"type": "count", "privacy": {"type": "pure", "eps": 0.1}}
BIG = {"type": "count", "privacy": {"type": "pure", "eps": 50.0}}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    yield from _env(tmp_path, Settings(owner_key=OWNER))


def _env(tmp_path: Path, settings: Settings) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "l.db")
    with TestClient(create_app(settings, store=store), raise_server_exceptions=False) as c:
        r = c.post("/v1/datasets", headers=OWN, json={
            "name": "people", "path": str(write_csv(tmp_path / "people.csv")), "infer_types": True,
            "budget": {"type": "pure", "eps": 10.0}})
        assert r.status_code == 201, r.text
        keys = {}
        for name in ("ana", "bob"):
            keys[name] = {"X-API-Key": c.post("/v1/analysts", headers=OWN,
                                              json={"name": name}).json()["api_key"]}
            c.post("/v1/datasets/people/grants", headers=OWN, json={"analyst": name})
        yield {"client": c, "store": store, **keys}


# -- failed authentications ------------------------------------------------------------
def test_wrong_keys_never_lock_out_a_valid_key_from_the_same_address(env: dict[str, Any]
                                                                     ) -> None:
    """After 30 wrong keys from one address its valid analyst and owner keys got 429 for
    60 s (one client locked out everyone behind its NAT or proxy)."""
    c = env["client"]
    codes = [c.get("/v1/me", headers={"X-API-Key": f"wrong-{i}"}).status_code
             for i in range(60)]
    assert codes[:30] == [401] * 30
    assert set(codes[30:]) == {429}  # the address is past its limit: wrong keys back off
    r = c.get("/v1/me", headers={"X-API-Key": "wrong-x"})
    assert r.json()["error"] == "too_many_failed_authentications"
    assert int(r.headers["Retry-After"]) >= 1
    assert c.get("/v1/me", headers=env["ana"]).status_code == 200
    assert c.get("/v1/me", headers=OWN).status_code == 200
    assert c.post("/v1/datasets/people/queries", headers=env["ana"], json=Q).status_code == 200


def test_a_key_that_failed_too_often_is_not_looked_up_again(env: dict[str, Any],
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    c, store = env["client"], env["store"]
    looked: list[str] = []
    real = store.principal_for_key
    monkeypatch.setattr(store, "principal_for_key",
                        lambda h: looked.append(h) or real(h))
    codes = [c.get("/v1/me", headers={"X-API-Key": "same-wrong"}).status_code
             for _ in range(40)]
    assert codes[:30] == [401] * 30
    assert codes[30:] == [429] * 10
    assert looked == []  # no ledger key has its hash: refused from memory (KnownKeys)
    with_ttl0 = c.app.state.service  # type: ignore[attr-defined]
    with_ttl0.keys.ttl = 0.0  # every key looked up: the failure limit alone
    with_ttl0.failures.by_addr.limit = 10_000
    codes = [c.get("/v1/me", headers={"X-API-Key": "other-wrong"}).status_code
             for _ in range(40)]
    assert codes[:30] == [401] * 30
    assert codes[30:] == [429] * 10
    assert len(looked) == 30  # refused from memory after its limit


def test_a_wrong_key_is_refused_without_a_ledger_lookup(env: dict[str, Any],
                                                       monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    """A flood of wrong keys (each new) costs no ledger lookup: the held set of key
    hashes answers them, read at most once per second; valid keys are still looked up
    every time."""
    c, store = env["client"], env["store"]
    looked: list[str] = []
    reads: list[int] = []
    real, real_hashes = store.principal_for_key, store.key_hashes
    monkeypatch.setattr(store, "principal_for_key", lambda h: looked.append(h) or real(h))
    monkeypatch.setattr(store, "key_hashes", lambda: reads.append(1) or real_hashes())
    svc = c.app.state.service  # type: ignore[attr-defined]
    svc.keys._clock = lambda: 1000.0  # time stands still: the set is read once
    svc.keys._at = None
    codes = [c.get("/v1/me", headers={"X-API-Key": f"new-wrong-{i}"}).status_code
             for i in range(60)]
    assert codes[:30] == [401] * 30
    assert set(codes[30:]) == {429}
    assert looked == []
    assert len(reads) == 1
    assert c.get("/v1/me", headers=env["ana"]).status_code == 200  # busy address, valid key
    assert c.get("/v1/me", headers=env["bob"]).status_code == 200
    assert len(looked) == 2


def test_a_key_made_elsewhere_works_within_the_bound(env: dict[str, Any]) -> None:
    """A key committed by another process (the CLI, another worker) after a wrong key
    filled the held set is refused at most ``known_keys_seconds``; a key made through
    this process's routes works at once; a revoked key is refused at once."""
    from dpsieve.service.auth import hash_key, new_key

    c, store = env["client"], env["store"]
    svc = c.app.state.service  # type: ignore[attr-defined]
    now = [1000.0]
    svc.keys._clock = lambda: now[0]
    svc.keys._at = None
    assert c.get("/v1/me", headers={"X-API-Key": "wrong-first"}).status_code == 401
    key = new_key()
    store.add_principal("ana", "analyst", hash_key(key))  # as `dpsieve keys add` would
    assert c.get("/v1/me", headers={"X-API-Key": key}).status_code == 401  # within 1 s
    now[0] += svc.settings.known_keys_seconds
    r = c.get("/v1/me", headers={"X-API-Key": key})
    assert r.status_code == 200
    assert r.json()["name"] == "ana"
    made = c.post("/v1/analysts/bob/keys", headers=OWN).json()
    assert c.get("/v1/me", headers={"X-API-Key": made["api_key"]}).status_code == 200
    assert c.delete(f"/v1/analysts/bob/keys/{made['key_id']}", headers=OWN
                    ).status_code == 204
    assert c.get("/v1/me", headers={"X-API-Key": made["api_key"]}).status_code == 401
    assert hash_key(made["api_key"]) in svc.keys._hashes  # held, yet refused: looked up


def test_known_keys_off_looks_every_key_up(tmp_path: Path) -> None:
    from dpsieve.service.auth import hash_key, new_key

    gen = _env(tmp_path, Settings(owner_key=OWNER, known_keys_seconds=0))
    e = next(gen)
    c, store = e["client"], e["store"]
    assert c.get("/v1/me", headers={"X-API-Key": "wrong"}).status_code == 401
    key = new_key()
    store.add_principal("ana", "analyst", hash_key(key))
    assert c.get("/v1/me", headers={"X-API-Key": key}).status_code == 200  # at once
    gen.close()


def test_failure_table_is_bounded(tmp_path: Path) -> None:
    gen = _env(tmp_path, Settings(owner_key=OWNER, auth_table_size=50))
    e = next(gen)
    c = e["client"]
    for i in range(400):
        c.get("/v1/me", headers={"X-API-Key": f"k{i}"})
    failures = c.app.state.service.failures  # type: ignore[attr-defined]
    assert len(failures) <= 2 * 50
    gen.close()


def test_the_limiter_prunes_and_bounds_on_every_call() -> None:
    from dpsieve.service.limits import FailureLimiter, TokenBuckets

    now = [0.0]
    lim = FailureLimiter(3, 60.0, max_keys=10, clock=lambda: now[0])
    for i in range(100):
        lim.failed(f"h{i}", f"10.0.0.{i}")
        assert len(lim) <= 20
    now[0] = 61.0
    lim.failed("x", "y")  # every expired window dropped
    assert len(lim) == 2
    for _ in range(3):
        lim.failed("k", "a")
    assert lim.key_blocked("k") is not None
    assert lim.key_blocked("other") is None
    now[0] = 200.0
    assert lim.key_blocked("k") is None
    tb = TokenBuckets(1.0, 2, max_keys=5, clock=lambda: now[0])
    assert [tb.take("a") is None for _ in range(3)] == [True, True, False]
    now[0] += 1.0
    assert tb.take("a") is None
    for i in range(50):
        tb.take(f"n{i}")
        assert len(tb) <= 5


def test_a_valid_key_from_a_busy_address_is_looked_up_once(env: dict[str, Any],
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """From an address past its failure limit the gate looks each key up (off the event
    loop) and hands a valid key's principal to the routes: one lookup per request, as
    from a quiet address; a key revoked since is refused."""
    c, store = env["client"], env["store"]
    for i in range(31):
        c.get("/v1/me", headers={"X-API-Key": f"w{i}"})
    looked: list[str] = []
    real = store.principal_for_key
    monkeypatch.setattr(store, "principal_for_key", lambda h: looked.append(h) or real(h))
    assert c.get("/v1/me", headers=env["ana"]).status_code == 200
    assert c.post("/v1/datasets/people/queries", headers=env["ana"], json=Q
                  ).status_code == 200
    assert len(looked) == 2
    kid = c.get("/v1/analysts/bob/keys", headers=OWN).json()[0]["key_id"]
    assert c.delete(f"/v1/analysts/bob/keys/{kid}", headers=OWN).status_code == 204
    r = c.get("/v1/me", headers=env["bob"])
    assert r.status_code == 429, r.text  # a wrong key now, from a busy address


# -- quotas ----------------------------------------------------------------------------
def test_an_analysts_quota_is_its_own(tmp_path: Path) -> None:
    gen = _env(tmp_path, Settings(owner_key=OWNER, analyst_requests_per_second=0.001,
                                  analyst_request_burst=5))
    e = next(gen)
    c = e["client"]
    codes = [c.get("/v1/me", headers=e["ana"]).status_code for _ in range(5)]
    assert codes == [200] * 5  # the burst
    r = c.post("/v1/datasets/people/queries", headers=e["ana"], json=Q)
    assert r.status_code == 429, r.text
    assert r.json()["error"] == "too_many_requests"
    assert int(r.headers["Retry-After"]) >= 1
    assert e["store"].history("people") == []  # refused before any work
    assert c.get("/v1/me", headers=e["bob"]).status_code == 200  # bob's quota is his
    assert c.get("/v1/me", headers=OWN).status_code == 200  # the owner has none
    gen.close()


# -- refusals --------------------------------------------------------------------------
def test_refusals_are_capped_per_analyst_and_bounded(tmp_path: Path) -> None:
    """~1 MB per refused request, 40 in 7.7 s with the budget exhausted, never deleted."""
    gen = _env(tmp_path, Settings(owner_key=OWNER, refusals_per_window=5,
                                  max_body_bytes=2_000_000))
    e = next(gen)
    c, store = e["client"], e["store"]
    codes = [c.post("/v1/datasets/people/queries", headers=e["ana"], json=BIG).status_code
             for _ in range(8)]
    assert codes[:5] == [409] * 5
    assert codes[5:] == [429] * 3
    r = c.post("/v1/datasets/people/queries", headers=e["ana"], json=Q)
    assert r.json()["error"] == "too_many_refusals"  # until the window ends
    rows = len(store.audit("people"))
    assert c.post("/v1/datasets/people/queries", headers=e["ana"], json=BIG
                  ).status_code == 429
    assert len(store.audit("people")) == rows  # nothing written
    # bob is not affected; the owner's page still lists the five refusals
    assert c.post("/v1/datasets/people/queries", headers=e["bob"], json=Q).status_code == 200
    page = c.get("/v1/datasets/people/budget", headers=OWN).json()
    assert len(page["refusals"]) == 5
    assert page["refusals"][0]["principal"] == "ana"
    gen.close()


def test_a_large_refused_request_leaves_a_bounded_record(env: dict[str, Any]) -> None:
    c, store = env["client"], env["store"]
    body = {"type": "query", "privacy": {"type": "pure", "eps": 50.0},
            "aggregations": [{"type": "count"}], "group_by": ["city"],
            "keys": [[f"k{i:06d}" + "x" * 60] for i in range(10_000)]}
    r = c.post("/v1/datasets/people/queries", headers=env["ana"], json=body)
    assert r.status_code == 409, r.text[:300]
    with store._tx(write=False) as cur:
        biggest = max(len(str(x[0])) for x in cur.run("SELECT payload FROM audit").all())
    assert biggest < 3000  # the request was ~750 kB
    page = c.get("/v1/datasets/people/budget", headers=env["ana"]).json()
    (ref,) = page["refusals"]
    assert "bytes" in ref["description"]


def test_a_refused_or_incompatible_query_writes_exactly_two_rows(tmp_path: Path) -> None:
    """The error table said incompatible_privacy writes nothing; it writes what a
    budget_exceeded refusal writes: a 'request' row (the bounded record) and a 'decision'
    row (not admitted, the filter's reason, the budget left), nothing else, no spend."""
    store = SQLiteStore(tmp_path / "l.db")
    with TestClient(create_app(Settings(owner_key=OWNER), store=store),
                    raise_server_exceptions=False) as c:
        r = c.post("/v1/datasets", headers=OWN, json={
            "name": "g", "path": str(write_csv(tmp_path / "p.csv")), "infer_types": True,
            "budget": {"type": "gdp", "mu": 1.0}})
        assert r.status_code == 201, r.text
        state = store.load_filter("g").to_json()
        for body, status, error in (
                ({"type": "count", "privacy": {"type": "zcdp", "rho": 0.1}}, 422,
                 "incompatible_privacy"),
                ({"type": "count", "privacy": {"type": "pure", "eps": 50.0}}, 409,
                 "budget_exceeded")):
            n = len(store.audit("g"))
            r = c.post("/v1/datasets/g/queries", headers=OWN, json=body)
            assert (r.status_code, r.json()["error"]) == (status, error), r.text
            rows = store.audit("g")[n:]
            assert [e.event for e in rows] == ["request", "decision"]
            req, dec = rows[0].payload, rows[1].payload
            assert req["request"]["privacy"]["type"] == body["privacy"]["type"]
            assert set(req) == {"request", "request_bytes", "request_sha256"}
            assert dec["admitted"] is False
            assert dec["reason"]
            assert "remaining" in dec
            assert rows[0].key == rows[1].key
        assert store.history("g") == []
        assert store.load_filter("g").to_json() == state


# -- health ----------------------------------------------------------------------------
def test_health_routes_never_write(env: dict[str, Any]) -> None:
    c, store = env["client"], env["store"]

    def counts() -> list[int]:
        with store._tx(write=False) as cur:
            return [int(cur.run(f"SELECT count(*) FROM {t}").one()[0])
                    for t in ("audit", "ready", "spends", "budgets")]
    before = counts()
    for _ in range(50):
        assert c.get("/readyz").status_code == 200
        assert c.get("/healthz").status_code == 200
    assert counts() == before


def test_readiness_asks_the_ledger_at_most_once_per_second() -> None:
    from dpsieve.service.limits import ReadyCache

    calls: list[int] = []
    down = [False]
    now = [0.0]

    class Store:
        def check_ready(self) -> None:
            calls.append(1)
            if down[0]:
                raise LedgerUnavailableError("down")

    cache = ReadyCache(Store(), clock=lambda: now[0])
    for _ in range(100):
        cache.check()
    assert len(calls) == 1  # ready: kept for a second
    now[0] = 1.5
    down[0] = True
    for _ in range(3):  # not ready: asked each time, so recovery shows at once
        with pytest.raises(LedgerUnavailableError):
            cache.check()
    assert len(calls) == 4
    down[0] = False
    cache.check()
    cache.check()
    assert len(calls) == 5
    cache.invalidate()  # a ledger fault seen elsewhere
    cache.check()
    assert len(calls) == 6


# -- the 503 after an uncertain commit -------------------------------------------------
def _fault(store: Any, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """Make the next query's ledger fail: before the spend commits ("no"), at its commit
    after it landed ("unknown": the commit's answer lost), or after it ("yes": storing
    the answer)."""
    real_spend, real_answer = store.spend, store.record_answer
    armed = [True]

    def spend(*a: Any, **k: Any) -> Any:
        if armed[0] and where == "no":
            armed[0] = False
            raise LedgerUnavailableError("down")
        if armed[0] and where == "unknown":  # committed, but the commit's answer lost
            armed[0] = False
            token = spend_journal.set(None)
            try:
                real_spend(*a, **k)
            finally:
                spend_journal.reset(token)
            raise LedgerUnavailableError("lost", uncertain=True)
        return real_spend(*a, **k)

    def answer(*a: Any, **k: Any) -> Any:
        if armed[0] and where == "yes":
            armed[0] = False
            raise ConcurrencyError("busy")
        return real_answer(*a, **k)

    monkeypatch.setattr(store, "spend", spend)
    monkeypatch.setattr(store, "record_answer", answer)


@pytest.mark.parametrize(("where", "charged"), [("no", 0), ("unknown", 1), ("yes", 1)])
def test_a_503_says_what_was_charged_and_returns_the_key(
        env: dict[str, Any], monkeypatch: pytest.MonkeyPatch, where: str,
        charged: int) -> None:
    """'503 nothing was spent' came after the spend committed (7/854 on a PostgreSQL stop):
    a client that believed it and retried without a key paid twice."""
    c, store = env["client"], env["store"]
    _fault(store, monkeypatch, where)
    r = c.post("/v1/datasets/people/queries", headers=env["ana"], json=Q)
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["charged"] == where
    key = body["idempotency_key"]
    assert key.startswith("srv-")
    assert r.headers["Idempotency-Key"] == key
    assert ("nothing was spent" in body["message"]) == (where == "no")
    assert f"Idempotency-Key: {key}" in body["message"]
    assert len(store.history("people")) == charged  # what the 503 said is true
    retry = c.post("/v1/datasets/people/queries", headers={**env["ana"],
                                                           "Idempotency-Key": key}, json=Q)
    assert retry.status_code == 200, retry.text
    assert retry.json()["replayed"] is (where != "no")
    assert len(store.history("people")) == 1  # charged once in every case
    again = c.post("/v1/datasets/people/queries", headers={**env["ana"],
                                                           "Idempotency-Key": key}, json=Q)
    assert again.json()["value"] == retry.json()["value"]


def test_every_answer_carries_its_idempotency_key(env: dict[str, Any]) -> None:
    c = env["client"]
    r = c.post("/v1/datasets/people/queries", headers=env["ana"], json=Q)
    assert r.status_code == 200
    key = r.headers["Idempotency-Key"]
    assert key.startswith("srv-")
    assert r.json()["key"] == f"ana/{key}"
    mine = c.post("/v1/datasets/people/queries", headers={**env["ana"],
                                                          "Idempotency-Key": "k-1"}, json=Q)
    assert mine.headers["Idempotency-Key"] == "k-1"


def test_the_gate_answers_floods_before_the_routes(env: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Health probes and refused keys are answered by the gate (service.gate) in the
    routes' own words; a valid key, the owner's included, always reaches the routes, and
    a ledger fault during the gate's lookup is the routes' 503, never a 500."""
    c, store = env["client"], env["store"]
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/readyz").json() == {"status": "ready"}
    for i in range(31):
        c.get("/v1/me", headers={"X-API-Key": f"w{i}"})
    r = c.get("/v1/me", headers={"X-API-Key": "w-next"})  # looked up by the gate
    assert r.status_code == 429
    assert set(r.json()) == {"error", "message", "retry_after"}
    assert c.get("/v1/me", headers=OWN).status_code == 200
    assert c.get("/v1/me", headers=env["ana"]).status_code == 200

    def down(_: str) -> Any:
        raise LedgerUnavailableError("down")

    monkeypatch.setattr(store, "principal_for_key", down)
    r = c.get("/v1/me", headers={"X-API-Key": "w-during-outage"})
    assert r.status_code == 429, r.text  # known to be no key: refused without the ledger
    r = c.get("/v1/me", headers=env["ana"])  # a key: looked up, and the ledger is down
    assert r.status_code == 503, r.text
    assert r.json()["error"] == "ledger_unavailable"


def _blocks_env(c: TestClient) -> dict[str, str]:
    """A data set 'd' with two blocks of pure budget 1 (owner's), granted to 'ana'."""
    r = c.post("/v1/datasets/d/blocks", headers=OWN, json={"block": 1})
    assert r.status_code == 201, r.text
    assert c.post("/v1/datasets/d/blocks", headers=OWN, json={"block": 2}).status_code == 201
    ana = {"X-API-Key": c.post("/v1/analysts", headers=OWN,
                               json={"name": "ana"}).json()["api_key"]}
    c.post("/v1/datasets/d/grants", headers=OWN, json={"analyst": "ana"})
    return ana


def test_queued_requests_that_are_not_admitted_count_as_refusals(tmp_path: Path) -> None:
    """A queued request that times out at once (wait=0) was answered 200 'timed_out',
    its whole request (720 kB here) stored in the queue for good, and counted toward no
    cap: an analyst could grow the ledger without limit, as refused queries could. Now
    each one not admitted counts toward the refusal cap (then 429, nothing written)."""
    import pandas as pd

    store = SQLiteStore(tmp_path / "l.db")
    app = create_app(Settings(owner_key=OWNER, refusals_per_window=3,
                              max_body_bytes=2_000_000), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        path = tmp_path / "d.parquet"
        pd.DataFrame({"day": [1, 2, 1, 2], "city": ["a", "b", "a", "b"]}).to_parquet(path)
        assert c.post("/v1/datasets", headers=OWN, json={
            "name": "d", "path": str(path),
            "blocks": {"column": "day", "budget": {"type": "pure", "eps": 1.0}}}
            ).status_code == 201
        ana = _blocks_env(c)
        r = c.post("/v1/datasets/d/queries", headers=ana, json={
            "type": "query", "privacy": {"type": "pure", "eps": 0.99},
            "aggregations": [{"type": "count"}]})
        assert r.status_code == 200, r.text
        big = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
               "aggregations": [{"type": "count"}], "group_by": ["city"],
               "keys": [[f"k{i:06d}" + "x" * 60] for i in range(10_000)]}
        got = []
        for _ in range(5):
            r = c.post("/v1/datasets/d/queue?wait=0", headers=ana, json=big)
            got.append((r.status_code, r.json().get("status") or r.json().get("error")))
        assert got[:3] == [(200, "timed_out")] * 3
        assert got[3:] == [(429, "too_many_refusals")] * 2
        with store._tx(write=False) as cur:
            assert int(cur.run("SELECT count(*) FROM pending").one()[0]) == 3


def test_queued_requests_are_capped_per_analyst(tmp_path: Path) -> None:
    """Waiting requests store their whole request until a pass decides them: past
    ``queued_per_window`` an analyst's next queued query is 429 before the ledger is
    touched; the query route and the owner are not affected."""
    import pandas as pd

    store = SQLiteStore(tmp_path / "l.db")
    app = create_app(Settings(owner_key=OWNER, queued_per_window=2), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        path = tmp_path / "d.parquet"
        pd.DataFrame({"day": [1, 2, 1, 2]}).to_parquet(path)
        assert c.post("/v1/datasets", headers=OWN, json={
            "name": "d", "path": str(path),
            "blocks": {"column": "day", "budget": {"type": "pure", "eps": 1.0},
                       "unlock": {"type": "periodic", "fraction": 0.1, "period": 86400}}}
            ).status_code == 201
        ana = _blocks_env(c)
        count = {"type": "query", "privacy": {"type": "pure", "eps": 0.3},
                 "aggregations": [{"type": "count"}]}  # waits for its budget to unlock
        got = []
        for _ in range(4):
            r = c.post("/v1/datasets/d/queue?wait=3600", headers=ana, json=count)
            got.append((r.status_code, r.json().get("status") or r.json().get("error")))
        assert got == [(202, "waiting")] * 2 + [(429, "too_many_queued")] * 2
        assert int(r.headers["Retry-After"]) >= 1
        with store._tx(write=False) as cur:
            assert int(cur.run("SELECT count(*) FROM pending").one()[0]) == 2
        small = {**count, "privacy": {"type": "pure", "eps": 0.05}}
        assert c.post("/v1/datasets/d/queries", headers=ana, json=small).status_code == 200
        assert c.post("/v1/datasets/d/queue?wait=3600", headers=OWN, json=count
                      ).status_code == 202  # the owner's own window


def test_the_refusal_cap_holds_on_the_queue_too(tmp_path: Path) -> None:
    """A data set with blocks takes queries on its queue as well: past the cap, a queued
    query is refused (429) before the ledger is touched, as on the query route (was: the
    queue counted its refusals but never checked the cap)."""
    import pandas as pd

    store = SQLiteStore(tmp_path / "l.db")
    app = create_app(Settings(owner_key=OWNER, refusals_per_window=2), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        path = tmp_path / "d.parquet"
        pd.DataFrame({"day": [1, 2, 1, 2], "cost": [1.0, 2.0, 3.0, 4.0]}).to_parquet(path)
        r = c.post("/v1/datasets", headers=OWN, json={
            "name": "d", "path": str(path),
            "blocks": {"column": "day", "budget": {"type": "pure", "eps": 1.0}}})
        assert r.status_code == 201, r.text
        ana = _blocks_env(c)
        big = {"type": "query", "privacy": {"type": "pure", "eps": 5.0},
               "aggregations": [{"type": "count"}]}
        small = {**big, "privacy": {"type": "pure", "eps": 0.1}}
        codes = [c.post("/v1/datasets/d/queue", headers=ana, json=big).status_code
                 for _ in range(2)]
        assert codes == [409, 409]
        rows = len(store.audit())
        for path_ in ("/v1/datasets/d/queue", "/v1/datasets/d/queries"):
            r = c.post(path_, headers=ana, json=small)
            assert r.status_code == 429, (path_, r.text)
            assert r.json()["error"] == "too_many_refusals"
        assert len(store.audit()) == rows  # nothing written


def test_known_keys_bound_and_a_failed_read() -> None:
    """The held set is read again once it is ``ttl`` old: a key committed after a read
    is refused until then and admitted from then on; a failed read keeps nothing (the
    next request reads again)."""
    from dpsieve.ledger.base import Principal
    from dpsieve.service.known_keys import KnownKeys

    class Store:
        keys: dict[str, Principal] = {"a": Principal("ana", "analyst")}  # noqa: RUF012
        down = False

        def key_hashes(self) -> list[str]:
            if self.down:
                raise LedgerUnavailableError("down")
            return list(self.keys)

        def principal_for_key(self, h: str) -> Principal | None:
            return self.keys.get(h)

    now = [0.0]
    st = Store()
    kk = KnownKeys(st, ttl=1.0, clock=lambda: now[0])
    assert kk.principal_for_key("a") == Principal("ana", "analyst")
    st.keys["b"] = Principal("bob", "analyst")  # committed elsewhere
    now[0] = 0.999
    assert kk.absent("b")
    assert kk.principal_for_key("b") is None
    now[0] = 1.0
    assert not kk.absent("b")  # stale: no verdict without a read
    assert kk.principal_for_key("b") == Principal("bob", "analyst")
    del st.keys["a"]  # revoked: still held, refused by the lookup
    assert kk.principal_for_key("a") is None
    now[0] = 2.5
    st.down = True
    with pytest.raises(LedgerUnavailableError):
        kk.principal_for_key("zz")
    assert not kk.absent("zz")  # nothing kept from the failed read
    st.down = False
    assert kk.principal_for_key("b") == Principal("bob", "analyst")
    assert KnownKeys(object(), ttl=1.0).ttl == 0.0  # a store without key_hashes
