"""The real server in a subprocess: 50 concurrent clients, and a crash between spend and answer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_harness import Server, crash_after_spend, race, write_csv

OWNER = "dps_test-owner-key_Sv7RmZ2vK9pLw4sN8bYc3FhJ6t"
OWN = {"Authorization": f"Bearer {OWNER}"}
N_CLIENTS = 50
PER_CLIENT = 3


def _setup(base: str, csv: Path, budget: dict[str, Any]) -> dict[str, str]:
    with httpx.Client(base_url=base, headers=OWN, timeout=30) as c:
        r = c.post("/v1/datasets", json={"name": "d", "path": str(csv), "infer_types": True,
            "budget": budget})
        assert r.status_code == 201, r.text
        key = c.post("/v1/analysts", json={"name": "ana"}).json()["api_key"]
        assert c.post("/v1/datasets/d/grants", json={"analyst": "ana"}).status_code == 201
    return {"Authorization": f"Bearer {key}"}


def test_fifty_concurrent_clients_never_overspend(ledger_url: tuple[str, str],
                                                  tmp_path: Path) -> None:
    """150 requests of eps = 0.03 race for eps = 1: exactly 33 fit, and no more are admitted."""
    url, schema = ledger_url
    csv = write_csv(tmp_path / "d.csv")
    # 117 refusals by one analyst: past the default refusal cap (100 per 10 min), lifted
    with Server(url, OWNER, schema=schema, env={"DPSIEVE_REFUSALS_PER_WINDOW": "1000"}) as srv:
        ana = _setup(srv.base, csv, {"type": "pure", "eps": 1.0})
        q = {"type": "count", "privacy": {"type": "pure", "eps": 0.03}}
        statuses: list[int] = []
        lock = threading.Lock()

        def client(_: int, start: Callable[[], object]) -> None:
            with httpx.Client(base_url=srv.base, headers=ana, timeout=60) as c:
                start()
                for _ in range(PER_CLIENT):
                    st = c.post("/v1/datasets/d/queries", json=q).status_code
                    with lock:
                        statuses.append(st)

        race(client, N_CLIENTS)  # a client's error (a lost connection) surfaced
        assert sorted(set(statuses)) == [200, 409]
        budget = httpx.get(srv.base + "/v1/datasets/d/budget", headers=ana).json()
    costs = [Fraction(h["cost"]["eps"]) for h in budget["history"]]
    assert sum(costs) <= 1
    assert statuses.count(200) == len(costs) == int(1 / Fraction(0.03)) == 33


def test_crash_between_spend_and_answer_keeps_the_charge(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    csv = write_csv(tmp_path / "d.csv")
    q = {"type": "count", "privacy": {"type": "pure", "eps": 0.25}}
    hdr = crash_after_spend(url, OWNER, tmp_path / "spent",
                            lambda base: _setup(base, csv, {"type": "pure", "eps": 1.0}), q)
    with Server(url, OWNER) as srv2:
        own = httpx.get(srv2.base + "/v1/datasets/d/budget", headers=OWN).json()
        assert own["admitted"] == 1
        assert own["remaining"]["exact"] == "3/4"  # the charge survived the crash
        events = [e["event"] for e in httpx.get(srv2.base + "/v1/datasets/d/audit",
                                                headers=OWN).json()]
        assert events == ["budget_set", "request", "decision"]  # no answer recorded
        # the retry is not charged again, and releases one answer
        r1 = httpx.post(srv2.base + "/v1/datasets/d/queries", json=q, headers=hdr)
        r2 = httpx.post(srv2.base + "/v1/datasets/d/queries", json=q, headers=hdr)
        assert r1.status_code == r2.status_code == 200
        assert r1.json()["value"] == r2.json()["value"]
        assert r1.json()["replayed"] is True
        own = httpx.get(srv2.base + "/v1/datasets/d/budget", headers=OWN).json()
        assert own["remaining"]["exact"] == "3/4"
        assert own["admitted"] == 1


@pytest.mark.slow  # waits for the header deadline (~20 s); CI runs the slow suite
def test_half_open_connections_are_closed(tmp_path: Path) -> None:
    """Issue 11: bounded time for half-open connections. A connection that sends nothing,
    or only part of its headers, was held open indefinitely (still open after 30 s);
    now it is closed once the header deadline (dpsieve.cli.serve.HEADER_TIMEOUT) passes,
    while complete requests, even sent in pieces within the deadline, are served."""
    import socket

    from dpsieve.cli.serve import HEADER_TIMEOUT

    def closed_within(sock: socket.socket, limit: float) -> bool:
        sock.settimeout(limit)
        try:
            while sock.recv(65536):
                pass
        except TimeoutError:
            return False
        return True

    with Server(f"sqlite:///{tmp_path / 'ledger.db'}", OWNER) as s:
        silent = socket.create_connection(("127.0.0.1", s.port))
        partial = socket.create_connection(("127.0.0.1", s.port))
        partial.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
        slow = socket.create_connection(("127.0.0.1", s.port))
        slow.sendall(b"GET /healthz HTTP/1.1\r\n")
        time.sleep(HEADER_TIMEOUT / 4)
        slow.sendall(b"Host: x\r\nConnection: close\r\n\r\n")
        slow.settimeout(30)
        assert slow.recv(65536).startswith(b"HTTP/1.1 200")
        assert httpx.get(s.base + "/healthz", timeout=30).status_code == 200  # still serving
        bound = 3 * HEADER_TIMEOUT + 10  # generous on a loaded machine; was never closed
        assert closed_within(silent, bound)
        assert closed_within(partial, bound)
        for sock in (silent, partial, slow):
            sock.close()


def test_trickled_bodies_are_cut_off_and_nothing_is_charged(tmp_path: Path) -> None:
    """Issue 11: bounded time for half-open connections, the body too. A client that sends
    complete headers and then its body a few bytes at a time (under the size limit) held
    the connection for as long as it liked; now the connection is closed once the body
    deadline (setting ``body_timeout``) passes, the half-sent query is never run or charged,
    and a body sent in pieces within the deadline is served."""
    import json
    import socket

    env = {"DPSIEVE_HEADER_TIMEOUT": "2", "DPSIEVE_BODY_TIMEOUT": "2"}
    csv = write_csv(tmp_path / "d.csv")
    with Server(f"sqlite:///{tmp_path / 'ledger.db'}", OWNER, env=env) as s:
        ana = _setup(s.base, csv, {"type": "pure", "eps": 1.0})
        body = json.dumps({"type": "count", "privacy": {"type": "pure", "eps": 0.25}}).encode()
        head = (f"POST /v1/datasets/d/queries HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: {ana['Authorization']}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()

        def closed_within(sock: socket.socket, limit: float) -> bytes | None:
            """What the server sent before closing, or None if still open after limit s."""
            sock.settimeout(limit)
            got = b""
            try:
                while chunk := sock.recv(65536):
                    got += chunk
            except TimeoutError:
                return None
            return got

        trickle = socket.create_connection(("127.0.0.1", s.port))
        trickle.sendall(head + body[:5])
        started = time.monotonic()
        reply = closed_within(trickle, 30)  # generous on a loaded machine; was never closed
        assert reply is not None, "a trickled body kept the connection open"
        assert time.monotonic() - started >= 1.0  # closed by the deadline, not at once
        assert b" 200 " not in reply  # no answer
        trickle.close()

        pieces = socket.create_connection(("127.0.0.1", s.port))
        pieces.sendall(head + body[:5])
        time.sleep(0.3)
        pieces.sendall(body[5:])
        answered = closed_within(pieces, 30)
        assert answered is not None
        assert answered.startswith(b"HTTP/1.1 200"), answered
        pieces.close()

        own = httpx.get(s.base + "/v1/datasets/d/budget", headers=OWN, timeout=30).json()
        assert own["admitted"] == 1  # the complete query only
        assert own["remaining"]["exact"] == "3/4"


def test_two_servers_on_one_ledger_never_overspend_and_survive_a_kill(
        ledger_url: tuple[str, str], tmp_path: Path) -> None:
    """Issue 11 ("keep the race and SIGKILL tests"): two servers on one database, clients
    spread over both, and one server SIGKILLed mid-burst; every request that failed is
    retried on the survivor with its idempotency key. 120 requests of eps = 0.03 race for
    eps = 1: exactly 33 are admitted (no overspend, nothing lost), each key is charged at
    most once (a retry of a key the killed server charged replays, never charges again),
    and the keys answered 200 are exactly the keys charged."""
    url, schema = ledger_url
    csv = write_csv(tmp_path / "d.csv")
    q = {"type": "count", "privacy": {"type": "pure", "eps": 0.03}}
    with Server(url, OWNER, schema=schema) as a, Server(url, OWNER, schema=schema) as b:
        ana = _setup(a.base, csv, {"type": "pure", "eps": 1.0})
        answered: dict[str, int] = {}
        failed: list[str] = []
        lock = threading.Lock()
        n_clients, per = 20, 6

        def client(i: int, start: Callable[[], object]) -> None:
            base = (a if i % 2 else b).base
            with httpx.Client(base_url=base, headers=ana, timeout=60) as c:
                start()
                for j in range(per):
                    key = f"k{i}-{j}"
                    try:
                        st = c.post("/v1/datasets/d/queries", json=q,
                                    headers={"Idempotency-Key": key}).status_code
                    except httpx.HTTPError:
                        with lock:
                            failed.append(key)
                        continue
                    with lock:
                        answered[key] = st

        def on_b() -> int:  # answers from the server to be killed (even clients)
            with lock:
                return sum(1 for k in answered if int(k[1:].split("-")[0]) % 2 == 0)

        def kill_b_mid_burst() -> None:
            deadline = time.monotonic() + 60
            while on_b() < 8 and time.monotonic() < deadline:
                time.sleep(0.005)
            b.kill()  # mid-burst: requests on b in flight or still to come fail

        race(client, n_clients, during=kill_b_mid_burst)
        assert failed, "the kill came after the burst: nothing was tested"
        print(f"two servers: {len(answered)} answered ({on_b()} by the killed one), "
              f"{len(failed)} retried")
        with httpx.Client(base_url=a.base, headers=ana, timeout=60) as c:
            for key in failed:  # the retries, on the survivor
                r = c.post("/v1/datasets/d/queries", json=q, headers={"Idempotency-Key": key})
                assert r.status_code in (200, 409), r.text
                answered[key] = r.status_code
    from dpsieve.ledger import open_store

    store = open_store(url, schema=schema)
    try:
        history = store.history("d")
    finally:
        store.close()
    keys = [h.key.removeprefix("ana/") for h in history]  # the service scopes keys
    assert len(keys) == len(set(keys))  # no key charged twice
    costs = [Fraction(h.cost["eps"]) for h in history]
    assert sum(costs) <= 1
    assert len(costs) == 33  # every key settled: the budget is used up exactly
    ok = {k for k, st in answered.items() if st == 200}
    assert ok == set(keys)  # every answer has its charge, every charge its answer
    assert set(answered) == {f"k{i}-{j}" for i in range(n_clients) for j in range(per)}
