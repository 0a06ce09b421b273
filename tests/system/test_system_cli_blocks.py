"""``dpsieve blocks``: a steward declares blocks, adds them, sets quotas and groups, shows
the budgets and runs the queue; ``dpsieve query`` charges a data set with blocks to every
block its ``where`` may read and to the analyst's quota, refusals charging nothing."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from dpsieve.cli import app

runner = CliRunner()
DATA = str(Path(__file__).resolve().parents[2] / "src" / "dpsieve" / "data" / "diabetes.csv")


def _q(eps: float, where: list[dict[str, object]] | None = None) -> str:
    return json.dumps({"type": "query", "privacy": {"type": "pure", "eps": eps},
                       "aggregations": [{"type": "count"}], "where": where or []})


def test_blocks_declare_add_quota_query_show(tmp_path: Path) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    r = runner.invoke(app, ["blocks", "declare", "d", "--path", DATA, "--column", "sex",
                            "--columns", '[{"name": "sex", "type": "integer"}]',
                            "--budget", '{"type": "pure", "eps": 1}', "--scheduler", "dpack",
                            *db])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["blocks"]["scheduler"] == "dpack"
    r = runner.invoke(app, ["blocks", "add", "d", "1", "2", *db])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["added"] == [1, 2]
    r = runner.invoke(app, ["blocks", "add", "d", "male", *db])
    assert r.exit_code == 2
    assert "integer" in r.output
    r = runner.invoke(app, ["blocks", "quota", "d", "--analyst", "cli", "--budget",
                            '{"type": "pure", "eps": 0.5}', *db])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["query", "d", _q(0.3, [{"column": "sex", "op": "==", "value": 1}]),
                            *db])
    assert r.exit_code == 0, r.output
    out = json.loads(r.output)
    assert out["budget"]["blocks"] == [1]
    assert out["budget"]["quotas"] == ["the quota of analyst 'cli'"]
    r = runner.invoke(app, ["query", "d", _q(0.3), *db])  # the quota: 0.6 > 0.5
    assert "quota of analyst 'cli'" in json.loads(r.output.splitlines()[0])["refused"]
    r = runner.invoke(app, ["blocks", "show", "d", "--json", *db])
    assert r.exit_code == 0, r.output
    view = json.loads(r.output)
    assert [b["admitted"] for b in view["blocks"]] == [1, 0]  # the refusal charged nothing
    assert view["blocks"][0]["used"] == 0.3
    assert view["quotas"][0]["used"] == 0.3 / 0.5
    r = runner.invoke(app, ["blocks", "show", "d", *db])
    assert "block 1: eps 0.7 of 1 left" in r.output
    r = runner.invoke(app, ["blocks", "schedule", "d", *db])
    assert json.loads(r.output)["changed"] == {}
    r = runner.invoke(app, ["blocks", "group", "team", "nobody", *db])
    assert r.exit_code == 2
    # a data set with a budget of its own declares no blocks
    r = runner.invoke(app, ["budget", "set", "e", "--path", DATA, "--budget",
                            '{"type": "pure", "eps": 1}', *db])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["blocks", "declare", "e", "--column", "sex", "--columns",
                            '[{"name": "sex", "type": "integer"}]', "--budget",
                            '{"type": "pure", "eps": 1}', *db])
    assert r.exit_code == 2
    assert "budget of its own" in r.output


def test_blocks_queue_and_status(tmp_path: Path) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    r = runner.invoke(app, ["blocks", "declare", "d", "--path", DATA, "--column", "sex",
                            "--columns", '[{"name": "sex", "type": "integer"}]',
                            "--budget", '{"type": "pure", "eps": 1}', "--unlock",
                            '{"type": "arrivals", "n": 4, "by": "analyst"}', *db])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["blocks", "add", "d", "1", *db]).exit_code == 0
    r = runner.invoke(app, ["blocks", "queue", "d", _q(0.5), "--key", "q1", *db])
    assert r.exit_code == 0, r.output
    w = json.loads(r.output)
    assert (w["status"], w["position"], w["key"]) == ("waiting", 1, "q1")
    assert "25 % of its budget unlocked" in w["reason"]
    r = runner.invoke(app, ["blocks", "status", "d", "q1", *db])
    assert json.loads(r.output)["status"] == "waiting"
    r = runner.invoke(app, ["blocks", "queue", "d", _q(0.2), "--key", "q2", *db])
    out = json.loads(r.output)
    assert out["status"] == "admitted"
    assert out["budget"]["blocks"] == [1]
    r = runner.invoke(app, ["blocks", "status", "d", "nope", *db])
    assert r.exit_code == 2
