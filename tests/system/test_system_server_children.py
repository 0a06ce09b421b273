"""Children over the real server (a subprocess), many clients at once, on SQLite and
PostgreSQL: 50 clients over 5 children and plain queries never overspend the budget nor
any child's positives, every answer is stored once, and a SIGKILL mid-burst loses nothing
a retry with the same keys cannot recover (issue 28, "Many parties at once")."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_harness import Server, race, write_csv

from conftest import PG_URL, pg_available, unique_schema

OWNER = "dps_test-owner-key_Ch7RmZ2vK9pLw4sN8bYc3FhJ6t"
OWN = {"Authorization": f"Bearer {OWNER}"}
N_CLIENTS = 50
N_CHILDREN = 5
POSITIVES = 3
#: The limits of one analyst's requests lifted: 50 clients share two keys.
ENV = {"DPSIEVE_REFUSALS_PER_WINDOW": "100000", "DPSIEVE_ANALYST_REQUEST_BURST": "100000",
       "DPSIEVE_ANALYST_REQUESTS_PER_SECOND": "100000"}
PLAIN = {"type": "count", "privacy": {"type": "pure", "eps": 0.03}}
QUESTION = {"question": {"type": "count"}, "threshold": -1e9}  # always above


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, Any]]:
    """(url, schema, open the ledger directly)."""
    from dpsieve.ledger import PostgresStore, SQLiteStore

    if request.param == "sqlite":
        path = tmp_path / "ledger.db"
        yield f"sqlite:///{path}", "dpsieve", lambda: SQLiteStore(path)
        return
    reason = pg_available()
    if reason:
        pytest.skip(reason)
    schema = unique_schema()
    yield PG_URL, schema, lambda: PostgresStore(PG_URL, schema=schema)
    s = PostgresStore(PG_URL, schema=schema)
    s.drop_schema()
    s.close()


def _setup(base: str, csv: Path) -> dict[str, dict[str, str]]:
    keys = {}
    with httpx.Client(base_url=base, headers=OWN, timeout=60) as c:
        r = c.post("/v1/datasets", json={"name": "d", "path": str(csv), "infer_types": True,
                                         "budget": {"type": "pure", "eps": 1.0}})
        assert r.status_code == 201, r.text
        for name in ("ana", "bob"):
            keys[name] = {"Authorization": "Bearer " + c.post(
                "/v1/analysts", json={"name": name}).json()["api_key"]}
            assert c.post("/v1/datasets/d/grants", json={"analyst": name}).status_code == 201
    return keys


class Burst:
    """50 clients: the first 10 race (two per child, distinct keys) to open the 5 children
    (eps 0.1, 3 positives) as ana; once each has its answer, all 50 go at once: the
    openers grant their children to bob, every client sends ``per`` plain queries (eps
    0.03) and ``per`` always-above questions, alternating children.
    Each request and its outcome (status and body, or the transport error) is kept by its
    idempotency key."""

    def __init__(self, keys: dict[str, dict[str, str]], per: int) -> None:
        self.keys, self.per = keys, per
        self.sent: dict[str, tuple[str, str, Any]] = {}  # key -> (who, path, body)
        self.got: dict[str, Any] = {}  # key -> response or exception
        self.lock = threading.Lock()

    def send(self, c: httpx.Client, who: str, path: str, body: Any, key: str) -> Any:
        with self.lock:
            self.sent[key] = (who, path, body)
        try:
            r: Any = c.post(path, json=body, headers={**self.keys[who],
                                                      "Idempotency-Key": key})
        except httpx.HTTPError as e:
            r = e
        with self.lock:
            self.got[key] = r
        return r

    def run(self, base: str, during: Callable[[], object] | None = None) -> None:
        """The burst (``during``: run by the caller while it goes on, as
        :func:`service_harness.race`)."""
        opening = threading.Barrier(2 * N_CHILDREN + 1)  # the openers' first answers
        opened = threading.Event()

        def client(i: int, start: Callable[[], object]) -> None:
            who = "ana" if i % 2 == 0 else "bob"
            with httpx.Client(base_url=base, timeout=120) as c:
                start()
                if i < 2 * N_CHILDREN:
                    child = f"sv{i % N_CHILDREN}"
                    r = self.send(c, "ana", "/v1/datasets/d/children", {
                        "child": child, "kind": "sparse_vector",
                        "spec": {"eps": 0.1, "positives": POSITIVES}}, f"open-{i}")
                    opening.wait()
                    if isinstance(r, httpx.Response) and r.status_code == 201:
                        self.send(c, "ana", f"/v1/datasets/d/children/{child}/grants",
                                  {"analyst": "bob"}, f"grant-{i}")
                elif i == 2 * N_CHILDREN:
                    opening.wait()  # the opens race each other; then everything at once
                    opened.set()
                else:
                    opened.wait()
                for j in range(self.per):
                    self.send(c, who, "/v1/datasets/d/queries", PLAIN, f"p-{i}-{j}")
                    child = f"sv{(i + j) % N_CHILDREN}"
                    self.send(c, who, f"/v1/datasets/d/children/{child}/questions",
                              QUESTION, f"q-{i}-{j}")

        race(client, N_CLIENTS, during)

    def statuses(self) -> dict[str, int]:
        return {k: (r.status_code if isinstance(r, httpx.Response) else -1)
                for k, r in self.got.items()}

    def retry(self, base: str) -> None:
        """Every request without an answer sent again with its key (a client's retry)."""
        with httpx.Client(base_url=base, timeout=120) as c:
            for key, r in sorted(self.got.items()):
                if not isinstance(r, httpx.Response) or r.status_code >= 500:
                    who, path, body = self.sent[key]
                    self.send(c, who, path, body, key)


def _check(burst: Burst, store: Any) -> dict[str, int]:
    """No overspend, each key charged once, every answered question stored once and counted
    in its child, each child's positives at most declared, the chain verifies."""
    try:
        status = burst.statuses()
        assert all(s in (200, 201, 404, 409) for s in status.values()), sorted(
            set(status.values()))
        hist = store.history("d")
        assert sum(Fraction(r.cost["eps"]) for r in hist) <= 1
        keys = [r.key for r in hist]
        assert len(keys) == len(set(keys))  # no key charged twice
        charged = {k.split("/", 1)[1].replace("child/", "") for k in keys}
        answered = {k for k, s in status.items()
                    if s in (200, 201) and k.startswith(("open-", "p-"))}
        assert answered == charged  # the keys answered are exactly the keys charged
        kids = {c.child_id: c for c in store.children("d")}
        opened = sorted({burst.sent[k][2]["child"] for k, s in status.items()
                         if k.startswith("open-") and s == 201})
        assert sorted(kids) == opened
        ups: dict[str, int] = {}
        for k, s in status.items():
            if k.startswith("q-") and s == 200:
                child = burst.sent[k][1].split("/")[-2]
                ups[child] = ups.get(child, 0) + 1
                assert burst.got[k].json()["above"] is True
        stored = [e for e in store.audit("d") if e.event == "child_answer"]
        assert len(stored) == sum(ups.values())
        for cid in kids:
            state = store.child_state("d", cid)
            assert state["positives_used"] == ups.get(cid, 0) <= POSITIVES
            assert state["questions"] == state["positives_used"]
        assert all(not c.problems for c in store.verify("d"))
        return {"charges": len(hist), "children": len(kids),
                "answers": sum(ups.values())}
    finally:
        store.close()


def test_fifty_clients_over_five_children_and_plain_queries(
        db: tuple[str, str, Any], tmp_path: Path) -> None:
    url, schema, open_store = db
    csv = write_csv(tmp_path / "d.csv")
    burst = Burst({}, per=1)
    with Server(url, OWNER, schema=schema, env=ENV) as srv:
        burst.keys = _setup(srv.base, csv)
        burst.run(srv.base)
    got = _check(burst, open_store())
    assert got["children"] == N_CHILDREN


@pytest.mark.slow
def test_fifty_clients_heavy_and_a_sigkill_mid_burst(
        db: tuple[str, str, Any], tmp_path: Path) -> None:
    """The same with 8 plain queries and 8 questions per client, the server SIGKILLed once
    it answered 150 requests; a new server on the same ledger gets every unanswered request
    again with its key. No overspend, no key charged twice, the children's positives and
    stored answers agree, the chain verifies."""
    url, schema, open_store = db
    csv = write_csv(tmp_path / "d.csv")
    burst = Burst({}, per=8)
    srv = Server(url, OWNER, schema=schema, env=ENV)
    try:
        burst.keys = _setup(srv.base, csv)
        def kill_after_150() -> None:
            deadline = time.monotonic() + 120  # the burst sends over 800 requests
            while time.monotonic() < deadline:
                with burst.lock:
                    done = sum(isinstance(r, httpx.Response) for r in burst.got.values())
                if done >= 150:
                    srv.kill()
                    return
                time.sleep(0.01)

        burst.run(srv.base, during=kill_after_150)
    finally:
        srv.stop()
    lost = sum(not isinstance(r, httpx.Response) for r in burst.got.values())
    with Server(url, OWNER, schema=schema, env=ENV) as srv2:
        burst.retry(srv2.base)
    got = _check(burst, open_store())
    print(f"children under a SIGKILL ({url.split(':')[0]}): {got}, {lost} requests lost "
          "to the kill and retried")
    assert got["children"] == N_CHILDREN
