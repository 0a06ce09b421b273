"""``dpsieve budget set`` registers a file with its public schema and privacy unit;
``dpsieve query`` prints that schema (``--schema``; never a value) and runs plans and the
one-query shapes against it: checked before any spend, per privacy unit (issue 12 item 6)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
from typer.testing import CliRunner

from dpsieve.cli import app
from dpsieve.ledger import open_store

runner = CliRunner()
PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
        "aggregations": [{"type": "count", "per": "unit"},
                         {"type": "sum", "column": "cost", "lower": 0, "upper": 500,
                          "per": "unit"}],
        "group_by": ["ward"], "keys": [["A"], ["B"], ["Z"]],
        "contribution": {"max_groups": 2, "max_rows": 5}}


def _visits(tmp: Path) -> Path:
    rng = np.random.default_rng(3)
    n = 800
    df = pd.DataFrame({"pid": rng.integers(0, 120, n), "ward": rng.choice(["A", "B", "C"], n),
                       "cost": rng.gamma(2.0, 50.0, n).round(2),
                       "age": rng.integers(18, 90, n)})
    path = tmp / "visits.parquet"
    duckdb.from_df(df).write_parquet(str(path))
    return path


def _spends(db: str) -> int:
    store = open_store(db)
    try:
        return len(store.history("v"))
    finally:
        store.close()


def _register(db: str, path: Path, *extra: str) -> Any:
    return runner.invoke(app, ["budget", "set", "v", "--path", str(path), "--infer-types",
        "--database-url", db,
                               "--budget", '{"type": "pure", "eps": 3.0}', *extra])


def test_registration_schema_plans_and_refusals(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path)
    r = _register(db, path, "--privacy-unit", "pid", "--columns",
                  '[{"name": "age", "type": "integer", "bounds": [0, 100]}]')
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["query", "v", "--schema", "--database-url", db])
    assert r.exit_code == 0, r.output
    sch = json.loads(r.stdout)
    assert sch["privacy_unit"] == "pid"
    cols = {c["name"]: c for c in sch["columns"]}
    assert {n: c["type"] for n, c in cols.items()} == {
        "pid": "integer", "ward": "string", "cost": "float", "age": "integer"}
    assert cols["age"]["bounds"] == [0.0, 100.0]
    assert "bounds" not in cols["cost"]  # nothing derived from the data

    r = runner.invoke(app, ["query", "v", json.dumps(PLAN), "--database-url", db])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["value"]["labels"] == ["count", "sum(cost)"]
    assert [g["key"] for g in out["value"]["groups"]] == [["A"], ["B"], ["Z"]]
    assert _spends(db) == 1  # two aggregations, one charge

    # refused before any spend, the parameter named; the CLI goes on and exits 1
    bad = [{**PLAN, "contribution": {"max_groups": 0, "max_rows": 5}},
           {**PLAN, "aggregations": [{"type": "sum", "column": "ward", "lower": 0,
                                      "upper": 1}]},
           {"type": "mean", "column": "age", "lower": 0, "upper": 100,
            "privacy": {"type": "pure", "eps": 0.5}},  # per-row on a unit: needs max_rows
           {"type": "robust_median", "column": "age", "bound": 100,
            "privacy": {"type": "approx", "eps": 0.5, "delta": 1e-6}}]
    lines = tmp_path / "q.jsonl"
    lines.write_text("".join(json.dumps(b) + "\n" for b in bad))
    r = runner.invoke(app, ["query", "v", "--file", str(lines), "--database-url", db])
    assert r.exit_code == 1, r.output
    outs = [json.loads(x) for x in r.stdout.strip().splitlines()]
    # the shape gave no contribution bounds: refused naming 'contribution' (no silent
    # max_groups=1), pointing to 'auto' and the preview
    assert [o.get("parameter") for o in outs[:3]] == ["max_groups", "column", "contribution"]
    assert "error" in outs[3]
    assert _spends(db) == 1

    # the old shape with the unit's contribution bound runs (one more charge)
    mean = {**bad[2], "contribution": {"max_rows": 3}}
    r = runner.invoke(app, ["query", "v", json.dumps(mean), "--database-url", db])
    assert r.exit_code == 0, r.output
    assert 0 <= json.loads(r.stdout)["value"] <= 100
    assert _spends(db) == 2


def test_registration_refuses_bad_schemas_before_writing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path)
    for extra, word in ((["--privacy-unit", "patient"], "privacy_unit"),
                        (["--columns", '[{"name": "age", "type": "integer", '
                                       '"categories": ["x"]}]'], "categories"),
                        (["--columns", '[{"name": "nope", "type": "integer"}]'], "schema"),
                        (["--columns", '{"name": "age"}'], "--columns")):
        r = _register(db, path, *extra)
        assert r.exit_code == 2, r.output
        assert word in r.output
    r = runner.invoke(app, ["query", "v", "--schema", "--database-url", db])
    assert r.exit_code != 0  # nothing was registered


def test_the_unit_is_kept_by_a_budget_change_and_cannot_change_once_spent(
        tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path)
    assert _register(db, path, "--privacy-unit", "pid").exit_code == 0
    r = runner.invoke(app, ["budget", "set", "v", "--database-url", db,
                            "--budget", '{"type": "pure", "eps": 2.0}'])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["query", "v", "--schema", "--database-url", db])
    assert json.loads(r.stdout)["privacy_unit"] == "pid"
    r = runner.invoke(app, ["query", "v", json.dumps(PLAN), "--database-url", db])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["budget", "set", "v", "--database-url", db, "--privacy-unit",
                            "ward", "--budget", '{"type": "pure", "eps": 2.0}'])
    assert r.exit_code == 2, r.output
    assert "cannot change" in r.output
    r = runner.invoke(app, ["query", "v", "--schema", "--database-url", db])
    assert json.loads(r.stdout)["privacy_unit"] == "pid"  # nothing half-written


def test_schema_from_the_service(tmp_path: Path, monkeypatch: Any) -> None:
    import httpx
    from fastapi.testclient import TestClient

    from dpsieve.ledger import SQLiteStore
    from dpsieve.service import Settings, create_app

    owner = "owner-secret-key-for-the-cli-test"
    app_ = create_app(Settings(owner_key=owner), store=SQLiteStore(tmp_path / "s.db"))
    with TestClient(app_, raise_server_exceptions=False) as c:
        own = {"Authorization": f"Bearer {owner}"}
        r = c.post("/v1/datasets", headers=own, json={
            "name": "v", "path": str(_visits(tmp_path)), "infer_types": True,
                "privacy_unit": "pid"})
        assert r.status_code == 201, r.text
        monkeypatch.setattr(httpx, "get", lambda u, **kw: c.get(u, headers=kw["headers"]))
        r = runner.invoke(app, ["query", "v", "--schema", "--url", "http://testserver",
                                "--api-key", owner])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["privacy_unit"] == "pid"
        r = runner.invoke(app, ["query", "nope", "--schema", "--url", "http://testserver",
                                "--api-key", owner])
        assert r.exit_code == 2
        assert "404" in r.output


def test_the_schema_is_edited_in_place_until_the_first_spend(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path)
    r = _register(db, path, "--privacy-unit", "pid")
    assert r.exit_code == 0, r.output

    def schema() -> Any:
        r = runner.invoke(app, ["query", "v", "--schema", "--database-url", db])
        assert r.exit_code == 0, r.output
        return json.loads(r.stdout)

    before = schema()
    for bad in ('[{"name": "nope", "type": "integer"}]',
                '[{"name": "age", "type": "integer", "bounds": [5, 1]}]',
                '{"name": "age"}', "not json"):
        r = runner.invoke(app, ["budget", "schema", "v", "--columns", bad, "--database-url", db])
        assert r.exit_code == 2, (bad, r.output)
        assert schema() == before  # nothing half-written
    r = runner.invoke(app, ["budget", "schema", "v", "--database-url", db, "--columns",
                            '[{"name": "age", "type": "integer", "bounds": [20, 80]}]'])
    assert r.exit_code == 0, r.output
    after = schema()
    assert after["privacy_unit"] == "pid"  # kept unless given
    assert {c["name"]: c.get("bounds") for c in after["columns"]}["age"] == [20.0, 80.0]
    r = runner.invoke(app, ["query", "v", json.dumps(PLAN), "--database-url", db])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["budget", "schema", "v", "--columns", "[]", "--database-url", db])
    assert r.exit_code == 2, r.output
    assert "already paid" in r.output
    assert schema() == after
    assert _spends(db) == 1
