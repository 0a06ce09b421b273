"""``dpsieve query --url``: plans sent to a live service (``dpsieve serve`` in a subprocess on
a loopback port), answered, refused before any spend, and charged once each; DP key
selection on an (eps, delta) budget; the service's DuckDB under DPSIEVE_DUCKDB_MEMORY_LIMIT."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import httpx
import numpy as np
import pandas as pd
from service_harness import Server
from typer.testing import CliRunner

from dpsieve.cli import app

OWNER = "dps_test-owner-key_Qp4TzL8wN2cVb6mRx9Hs3Kd7Jf"
OWN = {"Authorization": f"Bearer {OWNER}"}
runner = CliRunner()
PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
        "aggregations": [{"type": "count", "per": "unit"},
                         {"type": "sum", "column": "cost", "lower": 0, "upper": 500,
                          "per": "unit"}],
        "group_by": ["ward"], "keys": [["A"], ["B"], ["Z"]],
        "contribution": {"max_groups": 2}}
SELECT = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
          "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["ward"],
          "select": {"delta": 1e-7}, "contribution": {"max_groups": 2}}


def _visits(tmp: Path) -> Path:
    rng = np.random.default_rng(11)
    n = 3000
    df = pd.DataFrame({"pid": rng.integers(0, 400, n), "ward": rng.choice(["A", "B", "C"], n),
                       "cost": rng.gamma(2.0, 50.0, n).round(2)})
    path = tmp / "visits.parquet"
    duckdb.from_df(df).write_parquet(str(path))
    return path


def _setup(base: str, path: Path, name: str, budget: dict[str, Any]) -> str:
    with httpx.Client(base_url=base, headers=OWN, timeout=60) as c:
        r = c.post("/v1/datasets", json={"name": name, "path": str(path), "infer_types": True,
            "budget": budget,
                                          "privacy_unit": "pid"})
        assert r.status_code == 201, r.text
        r = c.post("/v1/analysts", json={"name": f"ana-{name}"})
        assert r.status_code == 201, r.text
        key = str(r.json()["api_key"])
        r = c.post(f"/v1/datasets/{name}/grants", json={"analyst": f"ana-{name}"})
        assert r.status_code == 201, r.text
    return key


def _history(base: str, name: str, key: str) -> list[dict[str, Any]]:
    r = httpx.get(f"{base}/v1/datasets/{name}/budget", timeout=60,
                  headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 200, r.text
    return list(r.json()["history"])


def _cli(*args: str) -> Any:
    return runner.invoke(app, ["query", *args])


def test_plans_through_a_live_service(tmp_path: Path) -> None:
    path = _visits(tmp_path)
    with Server(f"sqlite:///{tmp_path / 'l.db'}", OWNER,
                env={"DPSIEVE_DUCKDB_MEMORY_LIMIT": "64MiB"}) as srv:
        key = _setup(srv.base, path, "v", {"type": "pure", "eps": 2.0})
        url = ["--url", srv.base, "--api-key", key]
        r = _cli("v", "--schema", *url)
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["privacy_unit"] == "pid"
        r = _cli("v", json.dumps(PLAN), *url)
        assert r.exit_code == 0, r.output
        ans = json.loads(r.stdout.splitlines()[-1])
        groups = ans["value"]["groups"]
        assert [g["key"] for g in groups] == [["A"], ["B"], ["Z"]]  # Z: noise only
        assert all(len(g["estimates"]) == 2 for g in groups)
        assert len(_history(srv.base, "v", key)) == 1
        # a plan the schema refuses: the service's 422, exit 1, nothing spent
        bad = {**PLAN, "aggregations": [{"type": "sum", "column": "nope", "lower": 0,
                                         "upper": 1}]}
        r = _cli("v", json.dumps(bad), *url)
        assert r.exit_code == 1, r.output
        out = json.loads(r.stdout.splitlines()[-1])
        assert out["status"] == 422
        assert "nope" in out["message"]
        assert len(_history(srv.base, "v", key)) == 1
        # a file of plans: each charged once, replays under the same key are not
        plans = tmp_path / "plans.jsonl"
        plans.write_text("\n".join(json.dumps(p) for p in (PLAN, PLAN)) + "\n")
        for _ in range(2):
            r = _cli("v", "--file", str(plans), "--idempotency-key", "batch-1", *url)
            assert r.exit_code == 0, r.output
        assert len(_history(srv.base, "v", key)) == 3
        # DP key selection is refused by the pure budget before any spend, saying why
        r = _cli("v", json.dumps(SELECT), *url)
        assert r.exit_code == 1, r.output
        assert "no delta to pay it" in r.stdout
        assert len(_history(srv.base, "v", key)) == 3


def test_key_selection_through_a_live_service_on_an_eps_delta_budget(tmp_path: Path) -> None:
    path = _visits(tmp_path)
    with Server(f"sqlite:///{tmp_path / 'l.db'}", OWNER) as srv:
        key = _setup(srv.base, path, "w", {"type": "approx", "eps": 2.0, "delta": 1e-5})
        url = ["--url", srv.base, "--api-key", key]
        r = _cli("w", json.dumps(SELECT), *url)
        assert r.exit_code == 0, r.output
        ans = json.loads(r.stdout.splitlines()[-1])
        assert ans["value"]["selection"] is not None
        (h,) = _history(srv.base, "w", key)
        assert h["cost"]["query"]["type"] == "approx"
        assert h["cost"]["query"]["eps"] == 0.5
        assert h["cost"]["query"]["delta"] == 1e-7
