"""Budgets over time in the service: a data set registered with a block column, blocks
arriving with fresh budgets, quotas and groups set by the owner, queries charged to every
block their ``where`` may read (and to the analyst's quotas) all or nothing, the queue
with positions and reasons, and the page's view. Every refusal is a 4xx with public
text and charges nothing."""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Bk7RmZ2vK9pLw4sN8bYc3FhJ6t"
DAYS = [20240101, 20240102, 20240103]


def _count(eps: float, where: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "query", "privacy": {"type": "pure", "eps": eps},
            "aggregations": [{"type": "count"}], "where": where or []}


def _data(path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 600
    pd.DataFrame({"day": rng.choice([*DAYS, 20240104], n),  # 20240104: not declared
                  "cost": rng.gamma(2.0, 50.0, n).round(2)}).to_parquet(path)
    return path


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "svc.db")
    app = create_app(Settings(owner_key=OWNER), store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        own = {"Authorization": f"Bearer {OWNER}"}
        r = client.post("/v1/datasets", headers=own, json={
            "name": "d", "path": str(_data(tmp_path / "d.parquet")),
            "blocks": {"column": "day", "budget": {"type": "pure", "eps": 1.0}}})
        assert r.status_code == 201, r.text
        assert r.json()["blocks"]["column"] == "day"
        for day in DAYS:
            r = client.post("/v1/datasets/d/blocks", headers=own, json={"block": day})
            assert r.status_code == 201, r.text
        keys = {}
        for who in ("ana", "bob"):
            r = client.post("/v1/analysts", json={"name": who}, headers=own)
            keys[who] = {"X-API-Key": r.json()["api_key"]}
            assert client.post("/v1/datasets/d/grants", headers=own,
                               json={"analyst": who}).status_code == 201
        yield {"client": client, "store": store, "own": own, **keys}


def _left(st: Any, day: int, dataset: str = "d") -> Fraction:
    return Fraction(st.load_filter(f"{dataset}/block:{day}").remaining().to_dict()["exact"])


def test_a_query_is_charged_to_every_block_its_where_may_read(env: dict[str, Any]) -> None:
    c, st = env["client"], env["store"]
    r = c.post("/v1/datasets/d/queries", json=_count(0.25, [
        {"column": "day", "op": ">=", "value": 20240102}]), headers=env["ana"])
    assert r.status_code == 200, r.text
    assert r.json()["budget"]["blocks"] == [20240102, 20240103]
    assert [_left(st, d) for d in DAYS] == [1, 1 - Fraction(0.25), 1 - Fraction(0.25)]
    # a block with no matching row is charged like any other: the where on another
    # column cannot be decided from public values
    r = c.post("/v1/datasets/d/queries", json=_count(0.25, [
        {"column": "cost", "op": ">", "value": 1e9}]), headers=env["bob"])
    assert r.status_code == 200, r.text
    assert r.json()["budget"]["blocks"] == DAYS
    # the undeclared day is never read: the count is over the declared days only
    # (its rows would be about a quarter of the data)
    assert r.json()["value"]["groups"][0]["estimates"][0]["value"] < 100
    # all or nothing: the first block has 0.75 left, the others 0.5; 0.6 fits only day 1
    before = [_left(st, d) for d in DAYS]
    r = c.post("/v1/datasets/d/queries", json=_count(0.6), headers=env["ana"])
    assert r.status_code == 409, r.text
    assert r.json()["error"] == "budget_exceeded"
    assert "block 20240102" in r.json()["message"]
    assert [_left(st, d) for d in DAYS] == before
    # a filter no declared block satisfies: refused before any spend
    r = c.post("/v1/datasets/d/queries", json=_count(0.1, [
        {"column": "day", "op": "==", "value": 20240104}]), headers=env["ana"])
    assert r.status_code == 422, r.text
    assert r.json()["parameter"] == "where"
    # kinds that read every row are refused on blocks (nothing spent)
    r = c.post("/v1/datasets/d/queries", headers=env["ana"], json={
        "type": "robust_mean", "column": "cost", "lower": 0, "upper": 500,
        "privacy": {"type": "pure", "eps": 0.1}})
    assert r.status_code == 422, r.text
    assert [_left(st, d) for d in DAYS] == before
    # a retry replays on the blocks it was charged to, even after a block arrived
    h = {**env["ana"], "Idempotency-Key": "k1"}
    first = c.post("/v1/datasets/d/queries", json=_count(0.1), headers=h)
    assert first.status_code == 200, first.text
    assert c.post("/v1/datasets/d/blocks", headers=env["own"],
                  json={"block": 20240104}).status_code == 201
    again = c.post("/v1/datasets/d/queries", json=_count(0.1), headers=h)
    assert again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.json()["value"] == first.json()["value"]
    assert again.json()["budget"]["blocks"] == DAYS
    assert _left(st, 20240104) == 1


def test_quotas_and_groups_are_charged_in_the_same_transaction(env: dict[str, Any]) -> None:
    c, st = env["client"], env["store"]
    own = env["own"]
    r = c.put("/v1/datasets/d/quotas", headers=own, json={
        "scope": "analyst", "name": "ana", "budget": {"type": "pure", "eps": 0.3}})
    assert r.status_code == 200, r.text
    assert c.put("/v1/datasets/d/quotas", headers=env["ana"], json={
        "scope": "analyst", "name": "ana", "budget": {"type": "pure", "eps": 9}}
    ).status_code == 403
    r = c.put("/v1/groups/team", headers=own, json={"members": ["ana", "bob"]})
    assert r.status_code == 200, r.text
    assert c.put("/v1/groups/team", headers=own, json={"members": ["nobody"]}
                 ).status_code == 404
    assert c.put("/v1/datasets/d/quotas", headers=own, json={
        "scope": "group", "name": "team", "budget": {"type": "pure", "eps": 0.5}}
    ).status_code == 200
    assert c.post("/v1/datasets/d/queries", json=_count(0.2), headers=env["ana"]
                  ).status_code == 200
    before = [_left(st, d) for d in DAYS]
    r = c.post("/v1/datasets/d/queries", json=_count(0.2), headers=env["ana"])
    assert r.status_code == 409  # ana's own quota: 0.4 > 0.3
    assert "quota of analyst 'ana'" in r.json()["message"]
    r = c.post("/v1/datasets/d/queries", json=_count(0.31), headers=env["bob"])
    assert r.status_code == 409  # the group's: 0.2 + 0.31 > 0.5
    assert "quota of group 'team'" in r.json()["message"]
    assert [_left(st, d) for d in DAYS] == before
    view = c.get("/v1/datasets/d/blocks", headers=env["bob"]).json()
    assert [q["label"] for q in view["quotas"]] == ["the quota of group 'team'"]
    assert view["groups"] is None
    view = c.get("/v1/datasets/d/blocks", headers=own).json()
    assert len(view["quotas"]) == 2
    assert view["groups"] == {"team": ["ana", "bob"]}
    assert view["blocks"][0]["history"][0]["principal"] == "ana"


def test_the_queue_gives_position_and_reason_and_admits_when_unlocked(
        env: dict[str, Any], tmp_path: Path) -> None:
    c, st, own = env["client"], env["store"], env["own"]
    r = c.post("/v1/datasets", headers=own, json={
        "name": "u", "path": str(_data(tmp_path / "u.parquet")),
        "blocks": {"column": "day", "budget": {"type": "pure", "eps": 1.0},
                   "unlock": {"type": "arrivals", "n": 4, "by": "analyst"},
                   "scheduler": "dpack"}})
    assert r.status_code == 201, r.text
    assert c.post("/v1/datasets/u/blocks", headers=own, json={"block": DAYS[0]}
                  ).status_code == 201
    for who in ("ana", "bob"):
        c.post("/v1/datasets/u/grants", headers=own, json={"analyst": who})
    # ana arrives: 25 % unlocked; her query of 40 % waits
    r = c.post("/v1/datasets/u/queue", params={"wait": 600}, json=_count(0.4),
               headers={**env["ana"], "Idempotency-Key": "q1"})
    assert r.status_code == 202, r.text
    w = r.json()
    assert (w["status"], w["position"], w["key"]) == ("waiting", 1, "q1")
    assert "25 % of its budget unlocked" in w["reason"]
    assert "needs 40 %" in w["reason"]
    assert st.history(f"u/block:{DAYS[0]}") == []
    # bob's view of the queue: position and reason, not ana's request
    view = c.get("/v1/datasets/u/blocks", headers=env["bob"]).json()
    assert view["queue"][0]["position"] == 1
    assert "request" not in view["queue"][0]
    assert c.get("/v1/datasets/u/queue/q1", headers=env["bob"]).status_code == 404
    # bob arrives (a query that fits his 25 %): 50 % unlocked; ana's fits now
    r = c.post("/v1/datasets/u/queries", json=_count(0.05), headers=env["bob"])
    assert r.status_code == 200, r.text
    r = c.get("/v1/datasets/u/queue/q1", headers=env["ana"])
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "admitted"
    value = r.json()["value"]
    again = c.get("/v1/datasets/u/queue/q1", headers=env["ana"]).json()
    assert again["value"] == value  # the stored answer
    left = _left(st, DAYS[0], "u")
    assert left == 1 - Fraction(0.4) - Fraction(0.05)
    # a request no block could ever pay for is refused at once, nothing queued
    r = c.post("/v1/datasets/u/queue", json=_count(2.0), headers=env["ana"])
    assert r.status_code == 409, r.text
    # withdraw: nothing charged
    r = c.post("/v1/datasets/u/queue", params={"wait": 600}, json=_count(0.5),
               headers={**env["ana"], "Idempotency-Key": "q2"})
    assert r.status_code == 202, r.text
    r = c.delete("/v1/datasets/u/queue/q2", headers=env["ana"])
    assert r.json()["status"] == "refused"
    assert c.post("/v1/datasets/u/schedule", headers=own).json()["changed"] == {}
    assert _left(st, DAYS[0], "u") == left


def test_declarations_are_checked_before_anything_is_written(
        env: dict[str, Any], tmp_path: Path) -> None:
    c, st, own = env["client"], env["store"], env["own"]
    path = str(_data(tmp_path / "x.parquet"))
    bad = [
        ({"column": "cost", "budget": {"type": "pure", "eps": 1}}, 422),  # a float column
        ({"column": "nope", "budget": {"type": "pure", "eps": 1}}, 422),
        ({"column": "day", "budget": {"type": "pure", "eps": 1},
          "unlock": {"type": "periodic", "n": 4}}, 422),  # no period
        ({"column": "day", "budget": {"type": "pure", "eps": -1}}, 422),
        # re-ranking within a pass: DPack only, an integer >= 0
        ({"column": "day", "budget": {"type": "pure", "eps": 1}, "recompute": 5}, 422),
        ({"column": "day", "budget": {"type": "pure", "eps": 1}, "scheduler": "dpack",
          "recompute": -1}, 422),
    ]
    for spec, status in bad:
        r = c.post("/v1/datasets", headers=own, json={"name": "x", "path": path,
                                                      "blocks": spec})
        assert r.status_code == status, (spec, r.text)
        assert st.dataset("x") is None
        if "recompute" in spec:
            assert "recompute" in r.text
    r = c.post("/v1/datasets", headers=own, json={"name": "z", "path": path, "blocks": {
        "column": "day", "budget": {"type": "pure", "eps": 1}, "scheduler": "dpack",
        "recompute": 50}})
    assert r.status_code == 201, r.text
    assert r.json()["blocks"]["recompute"] == 50
    assert c.get("/v1/datasets/z/blocks", headers=own).json()["recompute"] == 50
    listed = {d["dataset"]: d for d in c.get("/v1/datasets", headers=own).json()}
    assert listed["z"]["blocks"]["recompute"] == 50
    assert listed["d"]["blocks"]["recompute"] == 0  # the default: ranked once a pass
    assert c.get("/v1/datasets/d/blocks", headers=own).json()["recompute"] == 0
    r = c.post("/v1/datasets", headers=own, json={
        "name": "x", "path": path, "budget": {"type": "pure", "eps": 1},
        "blocks": {"column": "day", "budget": {"type": "pure", "eps": 1}}})
    assert r.status_code == 422
    # a data set with a budget of its own cannot declare blocks
    c.post("/v1/datasets", headers=own, json={"name": "y", "path": path,
                                              "budget": {"type": "pure", "eps": 1}})
    r = c.put("/v1/datasets/y/blocks", headers=own, json={
        "column": "day", "budget": {"type": "pure", "eps": 1}})
    assert r.status_code == 409, r.text
    # blocks: a value of the column's type, once each
    assert c.post("/v1/datasets/d/blocks", headers=own, json={"block": "monday"}
                  ).status_code == 422
    r = c.post("/v1/datasets/d/blocks", headers=own, json={"block": DAYS[0]})
    assert r.status_code == 409, r.text
    assert c.post("/v1/datasets/d/blocks", headers=env["ana"], json={"block": 1}
                  ).status_code == 403
    assert c.post("/v1/datasets/y/blocks", headers=own, json={"block": 1}
                  ).status_code == 409


def test_unit_in_one_block_cannot_change_once_blocks_exist(env: dict[str, Any],
                                                           tmp_path: Path) -> None:
    """``unit_in_one_block`` decides the guarantee the page states for the charges made:
    once blocks exist, PUT .../blocks and a new registration with blocks that change it are
    409 naming it and its stored value, before anything is written (the declaration and
    the registration as they were); the same value with another scheduler passes."""
    c, st, own = env["client"], env["store"], env["own"]
    assert c.post("/v1/datasets/d/queries", headers=env["ana"], json=_count(0.1)
                  ).status_code == 200
    before = c.get("/v1/datasets/d/blocks", headers=own).json()
    assert before["unit_in_one_block"] is False
    spec = st.block_spec("d")
    src = st.dataset("d")
    budget = {"type": "pure", "eps": 1.0}
    r = c.put("/v1/datasets/d/blocks", headers=own, json={
        "column": "day", "budget": budget, "unit_in_one_block": True})
    assert r.status_code == 409, r.text
    msg = r.json()["message"]
    assert "'unit_in_one_block'" in msg
    assert "cannot change" in msg
    assert "It is false" in msg
    other = str(_data(tmp_path / "other.parquet"))
    r = c.post("/v1/datasets", headers=own, json={"name": "d", "path": other, "blocks": {
        "column": "day", "budget": budget, "unit_in_one_block": True}})
    assert r.status_code == 409, r.text
    assert "'unit_in_one_block'" in r.json()["message"]
    assert st.block_spec("d") == spec  # nothing written
    assert st.dataset("d") == src
    after = c.get("/v1/datasets/d/blocks", headers=own).json()
    assert after["unit_in_one_block"] is False
    assert after["blocks"] == before["blocks"]
    r = c.put("/v1/datasets/d/blocks", headers=own, json={
        "column": "day", "budget": budget, "scheduler": "dpack", "unit_in_one_block": False})
    assert r.status_code == 200, r.text
    assert st.block_spec("d")["scheduler"] == "dpack"
    assert st.block_spec("d")["unit_in_one_block"] is False


def test_a_preview_on_blocks_is_free_and_says_which_budget_refuses(
        env: dict[str, Any]) -> None:
    c, st, own = env["client"], env["store"], env["own"]
    assert c.put("/v1/datasets/d/quotas", headers=own, json={
        "scope": "analyst", "name": "ana", "budget": {"type": "pure", "eps": 0.5}}
    ).status_code == 200
    audit = {d: len(st.audit(f"d/block:{d}")) for d in DAYS}
    url = "/v1/datasets/d/queries"
    q = _count(0.4, [{"column": "day", "op": "<", "value": 20240103}])
    r = c.post(url, params={"preview": "true"}, json=q, headers=env["ana"])
    assert r.status_code == 200, r.text
    p = r.json()
    assert (p["admitted"], p["blocks"], p["charged"]) == (True, DAYS[:2], "pure eps 0.4")
    assert [b["label"] for b in p["budgets"]] == [
        "block 20240101", "block 20240102", "the quota of analyst 'ana'"]
    assert p["budgets"][2]["used_after"] == pytest.approx(0.8)
    assert p["noise"]  # the plan's own figures
    r = c.post(url, params={"preview": "true"}, json=_count(0.6), headers=env["ana"])
    assert r.json()["admitted"] is False
    assert r.json()["reason"].startswith("the quota of analyst 'ana'")
    # nothing spent, counted or written
    assert {d: len(st.audit(f"d/block:{d}")) for d in DAYS} == audit
    assert all(_left(st, d) == 1 for d in DAYS)
    # the query then costs what the preview said
    r = c.post(url, json=q, headers=env["ana"])
    assert r.status_code == 200, r.text
    assert r.json()["budget"]["blocks"] == DAYS[:2]


def test_the_list_and_the_budget_name_the_blocks(env: dict[str, Any]) -> None:
    c = env["client"]

    def listed(who: dict[str, str]) -> dict[str, Any]:
        r = c.get("/v1/datasets", headers=who)
        assert r.status_code == 200, r.text
        (d,) = [x for x in r.json() if x["dataset"] == "d"]
        return dict(d)

    before = listed(env["ana"])
    assert before["remaining"] == {}
    b = before["blocks"]
    assert (b["column"], b["n_blocks"], b["budget_kind"]) == ("day", 3, "pure")
    assert b["block_budget"] == {"type": "pure", "eps": 1.0, "neighbouring": "add_remove"}
    assert before["budget_left"] == b["text"]
    assert "3 blocks by 'day'" in b["text"]
    assert "pure eps 1" in b["text"]
    assert listed(env["own"]) == before  # public metadata: the same for every key
    r = c.post("/v1/datasets/d/queries", headers={**env["ana"], "Idempotency-Key": "a1"},
               json=_count(0.25, [{"column": "day", "op": ">=", "value": 20240102}]))
    assert r.status_code == 200, r.text
    r = c.post("/v1/datasets/d/queries", json=_count(0.125), headers=env["bob"])
    assert r.status_code == 200, r.text
    assert listed(env["ana"]) == before  # the list states no block's use
    # the budget's history names each query's blocks; another analyst's query unnamed
    r = c.get("/v1/datasets/d/budget", headers=env["ana"])
    assert r.status_code == 200, r.text
    v = r.json()
    assert (v["summary"], v["remaining"]) == (None, {})  # the page turns to GET .../blocks
    assert v["blocks"] == b
    assert v["admitted"] == 2
    mine, other = v["history"]
    assert mine["blocks"] == [20240102, 20240103]
    assert mine["key"] == "a1"
    assert mine["charged"] == "pure eps 0.25"
    assert "count" in mine["description"]
    assert other["blocks"] == DAYS
    assert other["key"] is None
    assert other["description"] == "a query by another analyst"
    assert other["principal"] is None
    assert other["charged"] == "pure eps 0.125"
    r = c.get("/v1/datasets/d/blocks", headers=env["ana"])  # the page's view: the same
    assert r.json()["history"] == v["history"]
    r = c.get("/v1/datasets/d/budget", headers=env["own"])
    assert [h["principal"] for h in r.json()["history"]] == ["ana", "bob"]
    assert r.json()["history"][0]["key"] == "ana/a1"
    r = c.get("/v1/datasets/d/curves", headers=env["ana"])
    assert r.status_code == 409
    assert "budget per block" in r.json()["message"]


def test_a_query_on_blocks_reads_the_stored_schema_once(env: dict[str, Any],
                                                         monkeypatch: Any) -> None:
    from dpsieve.session import datasets

    memo = datasets._SCHEMAS
    calls: list[str] = []

    class Counting:
        def get(self, key: str, make: Any) -> Any:
            calls.append(key)
            return memo.get(key, make)

    monkeypatch.setattr(datasets, "_SCHEMAS", Counting())
    r = env["client"].post("/v1/datasets/d/queries", json=_count(0.1), headers=env["ana"])
    assert r.status_code == 200, r.text
    assert len(calls) == 1  # the engine's column types and the session's schema share it


def test_a_request_on_blocks_reads_the_declaration_once(env: dict[str, Any],
                                                        monkeypatch: Any) -> None:
    """The route reads the block declaration to find that the data set has blocks and
    hands it to the block session, which does not read it again (it read it twice)."""
    c, st = env["client"], env["store"]
    read = st.block_spec
    calls: list[str] = []

    def counting(dataset: str) -> Any:
        calls.append(dataset)
        return read(dataset)

    monkeypatch.setattr(st, "block_spec", counting)
    ana = env["ana"]
    for method, url, kw in (
            ("POST", "/v1/datasets/d/queries", {"json": _count(0.1)}),
            ("POST", "/v1/datasets/d/queries?preview=true", {"json": _count(0.1)}),
            ("POST", "/v1/datasets/d/queue", {"json": _count(0.1), "params": {"wait": 60}}),
            ("GET", "/v1/datasets/d/blocks", {})):
        calls.clear()
        r = c.request(method, url, headers=ana, **kw)
        assert r.status_code in (200, 202), r.text
        assert calls == ["d"], (url, calls)


def test_children_are_refused_on_blocks_before_anything_is_written(
        env: dict[str, Any]) -> None:
    from dpsieve.errors import UnsupportedError
    from dpsieve.session.blocks import BlockSession

    c, st = env["client"], env["store"]
    audit = {d: len(st.audit(f"d/block:{d}")) for d in DAYS}
    spec = {"noise": "laplace", "eps": 0.5, "positives": 1}
    for who in ("ana", "own"):
        r = c.post("/v1/datasets/d/children", headers=env[who],
                   json={"child": "sv", "kind": "sparse_vector", "spec": spec})
        assert r.status_code == 422, r.text
        assert r.json()["error"] == "unsupported"
        assert "data set with blocks" in r.json()["message"]
        assert "Nothing was written or spent" in r.json()["message"]
        r = c.get("/v1/datasets/d/children", headers=env[who])
        assert r.status_code == 422, r.text
    assert [_left(st, d) for d in DAYS] == [1, 1, 1]
    assert {d: len(st.audit(f"d/block:{d}")) for d in DAYS} == audit
    s = BlockSession(_data_path(st), dataset="d", store=st)
    with pytest.raises(UnsupportedError, match="arrive later"):
        s.children.open("sv", "sparse_vector", spec)
    assert [_left(st, d) for d in DAYS] == [1, 1, 1]


def _data_path(st: Any) -> str:
    return str(st.dataset("d")["path"])
