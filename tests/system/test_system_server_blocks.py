"""The real server in a subprocess, on a data set with blocks (both ``-m slow``: the
ledger-level race and SIGKILL tests run by default): a crash (SIGKILL) between the
multi-budget spend and the answer keeps the charge on every block and quota and the retry
answers once on the blocks first charged; 50 concurrent HTTP clients of two analysts with
quotas never overspend a block or a quota, on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import httpx
import pytest
from service_harness import Server, crash_after_spend, race, write_csv

OWNER = "dps_test-owner-key_Sb7RmZ2vK9pLw4sN8bYc3FhJ6t"
OWN = {"Authorization": f"Bearer {OWNER}"}
CITIES = ("a", "b", "c")


def _count(eps: float, city: str | None = None) -> dict[str, Any]:
    where = [] if city is None else [{"column": "city", "op": "==", "value": city}]
    return {"type": "query", "privacy": {"type": "pure", "eps": eps},
            "aggregations": [{"type": "count"}], "where": where}


def _setup(base: str, csv: Path, quota: float) -> dict[str, dict[str, str]]:
    with httpx.Client(base_url=base, headers=OWN, timeout=30) as c:
        r = c.post("/v1/datasets", json={
            "name": "d", "path": str(csv), "infer_types": True,
            "blocks": {"column": "city", "budget": {"type": "pure", "eps": 1.0}}})
        assert r.status_code == 201, r.text
        for city in CITIES:
            assert c.post("/v1/datasets/d/blocks", json={"block": city}).status_code == 201
        keys = {}
        for who in ("ana", "bob"):
            keys[who] = {"Authorization": "Bearer " + c.post(
                "/v1/analysts", json={"name": who}).json()["api_key"]}
            assert c.post("/v1/datasets/d/grants", json={"analyst": who}).status_code == 201
            assert c.put("/v1/datasets/d/quotas", json={
                "scope": "analyst", "name": who,
                "budget": {"type": "pure", "eps": quota}}).status_code == 200
    return keys


def _spent(view: dict[str, Any], quota: float = 1.0) -> dict[str, Fraction]:
    """Exact eps spent per block and per quota (budget minus the exact remaining)."""
    out = {}
    for b in view["blocks"]:
        out[f"block {b['block']}"] = 1 - Fraction(b["remaining"]["exact"])
    for q in view["quotas"]:
        out[q["label"]] = Fraction(quota) - Fraction(q["remaining"]["exact"])
    return out


@pytest.mark.slow  # two server start-ups (~20 s); the ledger's SIGKILL test runs by default
def test_crash_between_the_blocks_spend_and_the_answer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    csv = write_csv(tmp_path / "d.csv")
    q = _count(0.25)
    hdr = crash_after_spend(url, OWNER, tmp_path / "spent",
                            lambda base: _setup(base, csv, 1.0)["ana"], q)
    with Server(url, OWNER) as srv2:
        view = httpx.get(srv2.base + "/v1/datasets/d/blocks", headers=OWN, timeout=30).json()
        spent = _spent(view)
        assert all(spent[f"block {c}"] == Fraction(0.25) for c in CITIES), spent
        assert spent["the quota of analyst 'ana'"] == Fraction(0.25)
        # a block arrives; the retry is charged nothing and answers on the blocks first
        # charged, once
        assert httpx.post(srv2.base + "/v1/datasets/d/blocks", headers=OWN,
                          json={"block": "z"}).status_code == 201
        r1 = httpx.post(srv2.base + "/v1/datasets/d/queries", json=q, headers=hdr, timeout=60)
        r2 = httpx.post(srv2.base + "/v1/datasets/d/queries", json=q, headers=hdr, timeout=60)
        assert r1.status_code == r2.status_code == 200, r1.text
        assert r1.json()["replayed"] is True
        assert r1.json()["value"] == r2.json()["value"]
        assert r1.json()["budget"]["blocks"] == list(CITIES)
        after = _spent(httpx.get(srv2.base + "/v1/datasets/d/blocks", headers=OWN,
                                 timeout=30).json())
        assert after == {**spent, "block z": 0}


@pytest.mark.slow
def test_fifty_http_clients_never_overspend_blocks_or_quotas(
        ledger_url: tuple[str, str], tmp_path: Path) -> None:
    """50 clients (25 per analyst) send 4 queries each of eps 0.03 on one city or on all:
    each block holds 33, each analyst's quota (eps 0.6) 20; no more are admitted."""
    url, schema = ledger_url
    csv = write_csv(tmp_path / "d.csv")
    env = {"DPSIEVE_REFUSALS_PER_WINDOW": "100000",
           "DPSIEVE_ANALYST_REQUESTS_PER_SECOND": "0"}
    with Server(url, OWNER, schema=schema, env=env) as srv:
        keys = _setup(srv.base, csv, 0.6)
        statuses: list[int] = []
        lock = threading.Lock()

        def client(i: int, start: Callable[[], object]) -> None:
            who = "ana" if i % 2 else "bob"
            with httpx.Client(base_url=srv.base, headers=keys[who], timeout=120) as c:
                start()
                for j in range(4):
                    city = None if (i + j) % 4 == 0 else CITIES[(i + j) % 3]
                    st = c.post("/v1/datasets/d/queries", json=_count(0.03, city)).status_code
                    with lock:
                        statuses.append(st)

        race(client, 50)  # a client's error surfaced
        view = httpx.get(srv.base + "/v1/datasets/d/blocks", headers=OWN, timeout=60).json()
    assert set(statuses) <= {200, 409}, sorted(set(statuses))
    spent = _spent(view, 0.6)
    cost = Fraction(0.03)
    for b in view["blocks"]:
        assert spent[f"block {b['block']}"] <= 1
        assert spent[f"block {b['block']}"] == cost * b["admitted"]  # one charge each
    for who in ("ana", "bob"):
        assert spent[f"the quota of analyst '{who}'"] <= Fraction(0.6)
    # every admitted query is charged to its blocks and its analyst's quota: the quotas
    # count every admission once, so together they count the 200s
    admitted = statuses.count(200)
    assert sum(spent[q["label"]] for q in view["quotas"]) == cost * admitted
    assert admitted >= 33  # the race was real: blocks or quotas were filled
