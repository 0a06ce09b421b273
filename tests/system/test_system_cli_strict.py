"""JSON is mapped to typed privacy values once, strictly, in every entry point (issue 11
defect 4, issue 12 item 1): the service refused ``"eps": true`` and ``"eps": "0.5"``, but
the CLI and ``Session`` read them through ``description_from_dict``, which cast with
``float()`` -- ``true`` was charged as eps = 1. And ``dpsieve query``'s PostgreSQL schema
option was shadowed by its ``--schema`` flag (the flag that prints a data set's schema), so
a ledger in another PostgreSQL schema could not be queried; it is ``--ledger-schema``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from dpsieve.accounting.events import PureDP, description_from_dict
from dpsieve.cli import app
from dpsieve.errors import ValidationError
from dpsieve.ledger import open_store
from dpsieve.session import Session

runner = CliRunner()

BAD = [
    ({"type": "pure", "eps": True}, "eps"),
    ({"type": "pure", "eps": "0.5"}, "eps"),
    ({"type": "approx", "eps": 1.0, "delta": True}, "delta"),
    ({"type": "zcdp", "rho": "0.5"}, "rho"),
    ({"type": "gdp", "mu": False}, "mu"),
    ({"type": "approx_zcdp", "rho": 1.0, "delta": "1e-6"}, "delta"),
    ({"type": "rdp", "orders": [2.0, 3.0], "values": [0.1, "0.2"]}, "values"),
    ({"type": "pure", "eps": 10**400}, "eps"),
]


@pytest.mark.parametrize(("d", "param"), BAD)
def test_descriptions_take_numbers_only(d: dict[str, Any], param: str) -> None:
    with pytest.raises(ValidationError) as e:
        description_from_dict(d)
    assert e.value.parameter == param


def test_numbers_of_every_kind_are_still_read() -> None:
    assert description_from_dict({"type": "pure", "eps": 2}) == PureDP(2.0)
    assert description_from_dict({"type": "pure", "eps": np.float32(0.5)}) == PureDP(0.5)
    for desc in (PureDP(0.25), PureDP(float("inf"))):
        assert description_from_dict(desc.to_dict()) == desc


def _visits(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 300
    df = pd.DataFrame({"pid": rng.integers(0, 60, n), "ward": rng.choice(["A", "B"], n),
                       "cost": rng.gamma(2.0, 50.0, n).round(2)})
    path = tmp / "visits.parquet"
    duckdb.from_df(df).write_parquet(str(path))
    return path


def _plan(privacy: Any) -> dict[str, Any]:
    return {"type": "query", "privacy": privacy,
            "aggregations": [{"type": "count", "per": "unit"}],
            "group_by": ["ward"], "keys": [["A"], ["B"]],
            "contribution": {"max_groups": 1}}


@pytest.mark.parametrize(("d", "param"), BAD[:3])
def test_session_refuses_a_bool_or_string_privacy_before_any_spend(
        tmp_path: Path, d: dict[str, Any], param: str) -> None:
    s = Session(_visits(tmp_path), budget=PureDP(5.0), privacy_unit="pid")
    for spec in (_plan(d), {"type": "count", "privacy": d,
                            "contribution": {"max_rows": 1}}):
        with pytest.raises(ValidationError) as e:
            s.run(spec)
        assert e.value.parameter == param
    assert s.store.history(s.budget_id) == []


def test_cli_refuses_a_bool_or_string_privacy_and_spends_nothing(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path)
    r = runner.invoke(app, ["budget", "set", "v", "--path", str(path), "--infer-types",
        "--database-url", db,
                            "--privacy-unit", "pid", "--budget", '{"type": "pure", "eps": 5}'])
    assert r.exit_code == 0, r.output
    for d in ({"type": "pure", "eps": True}, {"type": "pure", "eps": "1"}):
        r = runner.invoke(app, ["query", "v", json.dumps(_plan(d)), "--database-url", db])
        assert r.exit_code == 1, r.output
        line = json.loads(r.stdout.splitlines()[0])
        assert line["error"] == "invalid_parameter"
        assert line["parameter"] == "eps"
    r = runner.invoke(app, ["budget", "set", "w", "--path", str(path), "--infer-types",
        "--database-url", db,
                            "--budget", '{"type": "pure", "eps": true}'])
    assert r.exit_code != 0
    assert "eps" in r.output
    store = open_store(db)
    try:
        assert store.history("v") == []
        assert store.dataset("w") is None
    finally:
        store.close()


def test_cli_query_takes_the_ledger_schema_beside_the_schema_flag(
        tmp_path: Path, monkeypatch: Any) -> None:
    import dpsieve.ledger as ledger

    db = f"sqlite:///{tmp_path / 'l.db'}"
    path = _visits(tmp_path)
    r = runner.invoke(app, ["budget", "set", "v", "--path", str(path), "--infer-types",
        "--database-url", db,
                            "--privacy-unit", "pid", "--budget", '{"type": "pure", "eps": 5}'])
    assert r.exit_code == 0, r.output
    seen: list[str] = []
    real = ledger.open_store

    def spy(url: str, *, schema: str = "dpsieve", **kw: Any) -> Any:
        seen.append(schema)
        return real(url, schema=schema, **kw)
    monkeypatch.setattr(ledger, "open_store", spy)
    plan = json.dumps(_plan({"type": "pure", "eps": 1.0}))
    r = runner.invoke(app, ["query", "v", plan, "--database-url", db,
                            "--ledger-schema", "other_schema"])
    assert r.exit_code == 0, r.output
    assert seen == ["other_schema"]
    r = runner.invoke(app, ["query", "v", "--schema", "--database-url", db,
                            "--ledger-schema", "third"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["privacy_unit"] == "pid"
    assert seen[-1] == "third"
