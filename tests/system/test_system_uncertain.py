"""A 503 tells the truth about the charge under real faults (issue 25: "503 nothing was
spent" after the spend committed, 7/854 on a PostgreSQL stop). PostgreSQL sits behind a
TCP proxy cut and restored while queries run; every 503 says ``charged`` no / unknown /
yes and carries the key the server assigned. Afterwards: each "no" left no spend, each
"yes" left one, and retrying every 503 with its key charges each query exactly once."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv
from test_system_faults import Proxy

from conftest import pg_available, unique_schema
from dpsieve.service import Settings, create_app

T = TypeVar("T")

OWNER = "dps_test-owner-key_Uc8TzL2wN4cVb6mRx9Qs3Kd7Jf"
OWN = {"Authorization": f"Bearer {OWNER}"}
Q = {"type": "count", "privacy": {"type": "pure", "eps": 0.001}}


def _after_outage(read: Callable[[], T]) -> T:
    """A read once the connection is back: the first use of a pooled connection the
    outage cut fails (LedgerUnavailableError, the connection dropped), the next opens a
    new one; reads are idempotent, so a few tries are safe."""
    from dpsieve.ledger.base import LedgerUnavailableError

    for _ in range(4):
        try:
            return read()
        except LedgerUnavailableError:
            time.sleep(0.2)
    return read()


@pytest.mark.slow
@pytest.mark.postgres
def test_every_503_states_the_charge_truthfully_under_a_flapping_postgresql(
        tmp_path: Path) -> None:
    from dpsieve.ledger import PostgresStore

    if reason := pg_available():
        pytest.skip(reason)
    proxy = Proxy()
    schema = unique_schema()
    store = PostgresStore(f"postgresql://postgres@127.0.0.1:{proxy.port}/test",
                          schema=schema, connect_timeout=2)
    app = create_app(Settings(owner_key=OWNER, analyst_requests_per_second=0), store=store)
    stop = threading.Event()
    rng = random.Random(25)

    def flap() -> None:  # cut and restore the connection at random moments
        while not stop.is_set():
            stop.wait(rng.uniform(0.05, 0.4))
            proxy.down()
            stop.wait(rng.uniform(0.0, 0.05))
            proxy.up()

    try:
        with TestClient(app, raise_server_exceptions=False) as c:
            r = c.post("/v1/datasets", headers=OWN, json={
                "name": "p", "path": str(write_csv(tmp_path / "p.csv")), "infer_types": True,
                "budget": {"type": "pure", "eps": 1e6}})
            assert r.status_code == 201, r.text
            key = c.post("/v1/analysts", headers=OWN, json={"name": "ana"}).json()["api_key"]
            c.post("/v1/datasets/p/grants", headers=OWN, json={"analyst": "ana"})
            ana = {"X-API-Key": key}
            flapper = threading.Thread(target=flap)
            flapper.start()
            ok, faults = 0, []
            try:
                for _ in range(400):
                    r = c.post("/v1/datasets/p/queries", headers=ana, json=Q)
                    if r.status_code == 200:
                        ok += 1
                    elif r.status_code == 503 and "charged" in r.json():
                        faults.append((r.json()["idempotency_key"], r.json()["charged"]))
                    else:  # a fault outside the query's ledger work (e.g. the key lookup)
                        assert r.status_code in (401, 503), r.text
            finally:
                stop.set()
                flapper.join()
                if proxy._listener is None:
                    proxy.up()
            assert faults, "no fault was injected: the test proved nothing"
            kinds = {k: sum(c == k for _, c in faults) for k in ("no", "unknown", "yes")}
            print(f"\nflapping PostgreSQL: {ok} answered, {len(faults)} query 503s {kinds}")
            spent = {h.key for h in _after_outage(lambda: store.history("p"))}
            for k, charged in faults:
                if charged == "no":
                    assert f"ana/{k}" not in spent, (k, charged)
                elif charged == "yes":
                    assert f"ana/{k}" in spent, (k, charged)
            for k, _ in faults:  # every retry with the assigned key is safe
                r = c.post("/v1/datasets/p/queries", headers={**ana, "Idempotency-Key": k},
                           json=Q)
                assert r.status_code == 200, r.text
            assert len(_after_outage(lambda: store.history("p"))) == ok + len(faults)
            assert all(c.ok for c in store.verify())
    finally:
        proxy.down()
        store.close()
        cleanup = PostgresStore("postgresql://postgres@127.0.0.1:5432/test", schema=schema)
        cleanup.drop_schema()
        cleanup.close()
