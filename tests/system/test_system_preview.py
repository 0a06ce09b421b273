"""Preview everywhere: the service's ``POST .../queries?preview=true``, ``dpsieve query
--preview`` and the budget page state a query's charge, the budget after it and its noise
for free: nothing is spent, logged or read; the query then costs what the preview said."""

from __future__ import annotations

import json
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dpsieve.cli import app as cli
from dpsieve.ledger import SQLiteStore, open_store
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Pv7RmZ2vK9pLw4sN8bYc3FhJ6t"
PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
        "aggregations": [{"type": "count", "per": "unit"},
                         {"type": "mean", "column": "cost", "lower": 0, "upper": 500}],
        "group_by": ["ward"], "keys": [["A"], ["B"], ["C"]],
        "contribution": {"max_groups": 2, "max_rows": 5}}


def _visits(path: Path) -> Path:
    rng = np.random.default_rng(0)
    n = 2000
    pd.DataFrame({"pid": rng.integers(0, 300, n), "ward": rng.choice(["A", "B", "C"], n),
                  "cost": rng.gamma(2.0, 50.0, n).round(2)}).to_parquet(path)
    return path


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "svc.db")
    app = create_app(Settings(owner_key=OWNER), store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        own = {"Authorization": f"Bearer {OWNER}"}
        r = client.post("/v1/datasets", headers=own, json={
            "name": "visits", "path": str(_visits(tmp_path / "v.parquet")),
            "privacy_unit": "pid", "budget": {"type": "pure", "eps": 2.0}})
        assert r.status_code == 201, r.text
        r = client.post("/v1/analysts", json={"name": "ana"}, headers=own)
        ana = {"X-API-Key": r.json()["api_key"]}
        yield {"client": client, "store": store, "own": own, "ana": ana}


def test_service_preview_is_free_and_the_query_then_costs_what_it_said(
        env: dict[str, Any]) -> None:
    c, st = env["client"], env["store"]
    url = "/v1/datasets/visits/queries"
    audit = len(st.audit("visits"))
    r = c.post(url, params={"preview": "true"}, json=PLAN, headers=env["own"])
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["preview"] is True
    assert p["admitted"] is True
    assert p["kind"] == "query"
    assert p["charged"] == "pure eps 0.5"
    assert p["eps_left"] == 2.0
    assert p["eps_left_after"] == pytest.approx(1.5)
    assert "Idempotency-Key" not in r.headers
    assert st.history("visits") == []
    assert len(st.audit("visits")) == audit  # nothing logged
    r = c.post(url, json=PLAN, headers=env["own"])
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["cost"]["query"] == p["charge"]
    assert out["remaining"] == p["budget_after"]
    stds = {(lab, part): n["std"] for lab, parts in out["noise"].items()
            for part, n in parts.items()}
    assert stds == {(lab, part): n["std"] for lab, parts in p["noise"].items()
                    for part, n in parts.items()}
    # more than is left: stated, not refused, and nothing written
    big = {**PLAN, "privacy": {"type": "pure", "eps": 5.0}}
    r = c.post(url, params={"preview": "true"}, json=big, headers=env["own"])
    assert r.status_code == 200
    assert r.json()["admitted"] is False
    assert len(st.history("visits")) == 1
    # a bad request: 422 naming the parameter, as the query would be
    bad = {**PLAN, "aggregations": [{"type": "sum", "column": "nope", "lower": 0,
                                     "upper": 1}]}
    r = c.post(url, params={"preview": "true"}, json=bad, headers=env["own"])
    assert r.status_code == 422
    assert r.json()["parameter"] == "column"
    # an analyst without a grant sees no data set
    r = c.post(url, params={"preview": "true"}, json=PLAN, headers=env["ana"])
    assert r.status_code == 404


def test_cli_preview_prints_the_charge_and_spends_nothing(tmp_path: Path) -> None:
    runner = CliRunner()
    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path / "v.parquet")
    r = runner.invoke(cli, ["budget", "set", "v", "--path", str(path), "--database-url", db,
                            "--privacy-unit", "pid", "--budget", '{"type": "pure", "eps": 2}'])
    assert r.exit_code == 0, r.output
    r = runner.invoke(cli, ["query", "v", json.dumps(PLAN), "--preview", "--database-url", db])
    assert r.exit_code == 0, r.output
    p = json.loads(r.stdout)
    assert p["preview"] is True
    assert p["charge"]["eps"] == 0.5
    assert p["admitted"] is True
    assert p["noise"]["count"]["a0.count"]["std"] > 0
    store = open_store(db)
    try:
        assert store.history("v") == []
    finally:
        store.close()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no headless Chromium on PATH "
                    "(Debian: apt-get install chromium); the route is tested above")
def test_budget_page_offers_the_preview(tmp_path: Path) -> None:
    from cdp import Browser
    from service_harness import Server

    path = _visits(tmp_path / "v.parquet")
    with Server(f"sqlite:///{tmp_path / 'l.db'}", OWNER) as srv, \
            Browser(str(shutil.which("chromium")), tmp_path / "profile") as chrome:
        import httpx

        own = {"Authorization": f"Bearer {OWNER}"}
        r = httpx.post(srv.base + "/v1/datasets", headers=own, timeout=60, json={
            "name": "visits", "path": str(path), "privacy_unit": "pid",
            "budget": {"type": "pure", "eps": 2.0}})
        assert r.status_code == 201, r.text
        q = urllib.parse.quote(json.dumps(PLAN))
        page = chrome.render(f"{srv.base}/ui#dataset=visits&key={OWNER}&preview={q}",
                             1280, 900, mobile=False, screenshot=tmp_path / "p.png",
                             ready="document.body.dataset.preview")
        dom = page["dom"]
        assert 'data-admitted="true"' in dom, dom[-3000:]
        assert "Costs pure eps 0.5: the budget admits it; eps 1.5 left after it" in dom
        assert dom.count("<tr><td>count: a0.count</td>") == 1
        assert httpx.get(srv.base + "/v1/datasets/visits/budget", headers=own,
                         timeout=60).json()["admitted"] == 0


def test_service_auto_plan_previews_its_stage_and_is_charged_once(env: dict[str, Any]
                                                                  ) -> None:
    """Issue 24 item 2 over HTTP: ``contribution: "auto"`` and ``"upper": "auto"`` pass
    the request model; the preview states the auto stage (nothing spent), the query is
    charged the plan's privacy once and answers with the bounds it used; a plan without
    bounds on the unit is 422 naming ``contribution``."""
    c, st = env["client"], env["store"]
    url = "/v1/datasets/visits/queries"
    plan = {**PLAN, "contribution": "auto", "auto_share": 0.2,
            "aggregations": [{"type": "count", "per": "unit"},
                             {"type": "mean", "column": "cost", "lower": 0,
                              "upper": "auto"}]}
    r = c.post(url, params={"preview": "true"}, json=plan, headers=env["own"])
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["charged"] == "pure eps 0.5"
    assert p["auto"]["privacy"]["eps"] == pytest.approx(0.1)
    assert set(p["auto"]["each"]) == {"max_groups", "max_rows", "1.upper"}
    assert st.history("visits") == []
    r = c.post(url, json=plan, headers=env["own"])
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["cost"]["query"] == p["charge"]
    assert out["remaining"] == p["budget_after"]
    b = out["value"]["bounds"]
    assert set(b["contribution"]) == {"max_groups", "max_rows"}
    assert b["aggregations"][0]["label"] == "mean(cost)"
    assert b["aggregations"][0]["upper"] > 0
    none = {k: v for k, v in PLAN.items() if k != "contribution"}
    r = c.post(url, json=none, headers=env["own"])
    assert r.status_code == 422, r.text
    assert r.json()["parameter"] == "contribution"
    assert len(st.history("visits")) == 1


def _many_groups(path: Path) -> Path:
    rng = np.random.default_rng(4)
    n = 3000
    pd.DataFrame({"pid": rng.integers(0, 400, n), "g": rng.integers(0, 20, n)}).to_parquet(path)
    return path


#: An (eps, delta) plan with 20 public keys, each unit in up to 14: Gaussian noise is
#: less noisy than Laplace here (docs/proofs/queries.md §8), Laplace at max_groups 1.
APPROX_PLAN = {"type": "query", "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6},
               "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["g"],
               "keys": [[i] for i in range(20)], "contribution": {"max_groups": 14}}


@pytest.mark.parametrize(("max_groups", "mechanism"), [(14, "gaussian"), (1, "laplace")])
def test_approx_plans_preview_the_mechanism_the_service_and_the_cli_run(
        env: dict[str, Any], tmp_path: Path, max_groups: int, mechanism: str) -> None:
    """Issue 24: an (eps, delta) plan states its chosen noise in the preview (service and
    CLI), and the query then runs that noise at the charge the preview said."""
    plan = {**APPROX_PLAN, "contribution": {"max_groups": max_groups}}
    c, st = env["client"], env["store"]
    path = _many_groups(tmp_path / "g.parquet")
    r = c.post("/v1/datasets", headers=env["own"], json={
        "name": "groups", "path": str(path), "privacy_unit": "pid",
        "budget": {"type": "approx", "eps": 2.0, "delta": 1e-5}})
    assert r.status_code == 201, r.text
    url = "/v1/datasets/groups/queries"
    r = c.post(url, params={"preview": "true"}, json=plan, headers=env["own"])
    assert r.status_code == 200, r.text
    p = r.json()
    assert p["calibration"]["mechanism"] == mechanism
    assert p["admitted"] is True
    assert st.history("groups") == []
    want_charge = ({"type": "approx", "eps": 1.0, "delta": 1e-6} if mechanism == "gaussian"
                   else {"type": "pure", "eps": 1.0})
    assert {k: v for k, v in p["charge"].items() if k != "neighbouring"} == want_charge
    r = c.post(url, json=plan, headers=env["own"])
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["cost"]["query"] == p["charge"]
    assert out["remaining"] == p["budget_after"]
    assert out["noise"]["count"]["a0.count"]["mechanism"] == f"discrete_{mechanism}"
    assert out["noise"]["count"]["a0.count"]["std"] == p["noise"]["count"]["a0.count"]["std"]
    # the CLI: the same preview, then the query at that noise
    runner = CliRunner()
    db = f"sqlite:///{tmp_path / 'l.db'}"
    r2 = runner.invoke(cli, ["budget", "set", "g", "--path", str(path), "--database-url", db,
                             "--privacy-unit", "pid", "--budget",
                             '{"type": "approx", "eps": 2, "delta": 1e-5}'])
    assert r2.exit_code == 0, r2.output
    r2 = runner.invoke(cli, ["query", "g", json.dumps(plan), "--preview", "--database-url",
                             db])
    assert r2.exit_code == 0, r2.output
    cp = json.loads(r2.stdout)
    assert cp["calibration"] == p["calibration"]
    assert cp["noise"] == p["noise"]
    r2 = runner.invoke(cli, ["query", "g", json.dumps(plan), "--database-url", db])
    assert r2.exit_code == 0, r2.output
    co = json.loads(r2.stdout)
    assert co["cost"]["query"] == cp["charge"]
    assert co["noise"]["count"]["a0.count"]["std"] == cp["noise"]["count"]["a0.count"]["std"]
    assert co["noise"]["count"]["a0.count"]["mechanism"] == f"discrete_{mechanism}"
