"""``dpsieve blocks``: a steward declares blocks, adds them, sets quotas and groups, shows
the budgets and runs the queue; ``dpsieve query`` charges a data set with blocks to every
block its ``where`` may read and to the analyst's quota, refusals charging nothing."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

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
    assert [h["blocks"] for h in view["history"]] == [[1]]  # the query names its block
    r = runner.invoke(app, ["blocks", "show", "d", *db])
    assert "block 1: eps 0.7 of 1 left" in r.output
    assert "pure eps 0.3 on blocks 1" in r.output
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


class _Via:
    """The CLI's client, on an in-process app (TestClient) with the key given."""

    def __init__(self, client: Any, api_key: str) -> None:
        self.c, self.auth = client, {"Authorization": f"Bearer {api_key}"}

    def __enter__(self) -> _Via:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def request(self, method: str, path: str, **kw: Any) -> Any:
        return self.c.request(method, path, **{**kw, "headers": {**(kw.get("headers") or {}),
                                                                **self.auth}})


def test_blocks_through_a_service_with_url(tmp_path: Path, monkeypatch: Any) -> None:
    from fastapi.testclient import TestClient

    from dpsieve.cli import blocks_remote
    from dpsieve.ledger import SQLiteStore
    from dpsieve.service import Settings, create_app

    owner = "dps_owner-key-for-the-blocks-cli_Vb8Tq2Lm4Wx"
    store = SQLiteStore(tmp_path / "s.db")
    monkeypatch.delenv("DPSIEVE_API_KEY", raising=False)
    with TestClient(create_app(Settings(owner_key=owner), store=store),
                    raise_server_exceptions=False) as c:
        monkeypatch.setattr(blocks_remote, "_client", lambda url, key: _Via(c, key))

        def cli(key: str, *args: str) -> Any:
            return runner.invoke(app, ["blocks", *args, "--url", "http://testserver",
                                       "--api-key", key])

        r = cli(owner, "declare", "d", "--path", DATA, "--column", "sex", "--columns",
                '[{"name": "sex", "type": "integer"}]', "--budget",
                '{"type": "pure", "eps": 1}', "--scheduler", "dpack")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["blocks"]["scheduler"] == "dpack"
        assert store.block_spec("d")["column"] == "sex"  # type: ignore[attr-defined]
        r = cli(owner, "add", "d", "1", "2")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output) == {"dataset": "d", "added": [1, 2]}
        r = cli(owner, "add", "d", "male")
        assert r.exit_code == 2
        assert "integer" in r.output
        r = cli(owner, "add", "d", "1")  # the service's refusal: its status and message
        assert r.exit_code == 2
        assert "409" in r.output
        own = {"Authorization": f"Bearer {owner}"}
        ana = c.post("/v1/analysts", headers=own, json={"name": "ana"}).json()["api_key"]
        assert c.post("/v1/datasets/d/grants", headers=own,
                      json={"analyst": "ana"}).status_code == 201
        r = cli(owner, "quota", "d", "--analyst", "ana", "--budget",
                '{"type": "pure", "eps": 0.5}')
        assert r.exit_code == 0, r.output
        assert json.loads(r.output)["name"] == "ana"
        r = cli(owner, "group", "team", "ana")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output) == {"group": "team", "members": ["ana"]}
        # the analyst's side: queued as the key's analyst, answered at once if it fits
        r = cli(ana, "queue", "d", _q(0.3, [{"column": "sex", "op": "==", "value": 1}]),
                "--key", "q1")
        assert r.exit_code == 0, r.output
        out = json.loads(r.output)
        assert (out["status"], out["key"]) == ("admitted", "q1")
        assert out["budget"]["blocks"] == [1]
        assert out["budget"]["quotas"] == ["the quota of analyst 'ana'"]
        r = cli(ana, "status", "d", "q1")
        assert r.exit_code == 0, r.output
        again = json.loads(r.output)
        assert again["status"] == "admitted"
        assert again["value"] == out["value"]
        r = cli(ana, "status", "d", "nope")
        assert r.exit_code == 2
        assert "404" in r.output
        r = cli(ana, "show", "d", "--json")
        assert r.exit_code == 0, r.output
        view = json.loads(r.output)
        assert [b["admitted"] for b in view["blocks"]] == [1, 0]
        assert [q["name"] for q in view["quotas"]] == ["ana"]
        assert view["groups"] is None  # an analyst's view
        r = cli(owner, "show", "d")
        assert r.exit_code == 0, r.output
        assert "block 1: eps 0.7 of 1 left" in r.output
        r = cli(ana, "schedule", "d")  # the owner's route
        assert r.exit_code == 2
        assert "403" in r.output
        r = cli(owner, "schedule", "d")
        assert r.exit_code == 0, r.output
        assert json.loads(r.output) == {"dataset": "d", "changed": {}}
        # the ledger behind the service holds what the CLI was told
        left = store.load_filter("d/block:1").remaining().to_dict()
        assert Fraction(left["exact"]) == 1 - Fraction(0.3)
        r = runner.invoke(app, ["blocks", "show", "d", "--url", "http://testserver"])
        assert r.exit_code == 2
        assert "--api-key" in r.output


def test_a_child_is_refused_on_blocks(tmp_path: Path) -> None:
    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    r = runner.invoke(app, ["blocks", "declare", "d", "--path", DATA, "--column", "sex",
                            "--columns", '[{"name": "sex", "type": "integer"}]',
                            "--budget", '{"type": "pure", "eps": 1}', *db])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["blocks", "add", "d", "1", *db]).exit_code == 0
    r = runner.invoke(app, ["child", "open", "d", "sv", "--kind", "sparse_vector", "--spec",
                            '{"noise": "laplace", "eps": 0.5, "positives": 1}', *db])
    assert r.exit_code == 2
    assert "data set with blocks" in r.output
    r = runner.invoke(app, ["blocks", "show", "d", "--json", *db])
    view = json.loads(r.output)
    assert [b["used"] for b in view["blocks"]] == [0]
    r = runner.invoke(app, ["child", "list", "d", *db])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == ""  # no child was stored


def test_budget_show_groups_blocks_under_their_data_set(tmp_path: Path) -> None:
    """``dpsieve budget show`` lists a data set with blocks once, with the public summary
    ``GET /v1/datasets`` gives, and its blocks and quotas under it -- not each block's and
    quota's budget as a data set of its own."""
    from dpsieve.ledger import open_store
    from dpsieve.service.budget_view import blocks_summary_of

    url = f"sqlite:///{tmp_path / 'l.db'}"
    db = ["--database-url", url]
    for args in (["blocks", "declare", "d", "--path", DATA, "--column", "sex", "--columns",
                  '[{"name": "sex", "type": "integer"}]', "--budget",
                  '{"type": "pure", "eps": 1}'],
                 ["blocks", "add", "d", "1", "2", "3"],
                 ["blocks", "quota", "d", "--analyst", "cli", "--budget",
                  '{"type": "pure", "eps": 2}'],
                 ["query", "d", _q(0.3, [{"column": "sex", "op": "in", "value": [1, 2]}])],
                 ["query", "d", _q(0.1, [{"column": "sex", "op": "==", "value": 1}])],
                 ["budget", "set", "e", "--path", DATA, "--budget",
                  '{"type": "pure", "eps": 1}']):
        r = runner.invoke(app, [*args, *db])
        assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["budget", "show", "--json", *db])
    assert r.exit_code == 0, r.output
    rows = json.loads(r.output)["budgets"]
    assert [row["dataset"] for row in rows] == ["d", "e"]  # no "d/block:1", no quota
    d = rows[0]
    store = open_store(url)
    try:
        assert d["blocks"] == blocks_summary_of(store, "d")  # as GET /v1/datasets states it
    finally:
        store.close()
    assert d["blocks"]["n_blocks"] == 3
    assert d["summary"]["text"] == d["blocks"]["text"]
    assert d["admitted"] == 2  # two queries, one of them charged to two blocks
    assert [b["block"] for b in d["block_budgets"]] == [1, 2, 3]
    assert [b["admitted"] for b in d["block_budgets"]] == [2, 1, 0]
    assert Fraction(d["block_budgets"][0]["remaining"]["exact"]) == 1 - Fraction(0.3) \
        - Fraction(0.1)
    assert [(q["label"], q["admitted"]) for q in d["quotas"]] == [
        ("the quota of analyst 'cli'", 2)]
    assert rows[1]["admitted"] == 0
    assert "block_budgets" not in rows[1]
    r = runner.invoke(app, ["budget", "show", *db])
    assert r.exit_code == 0, r.output
    assert "d/block" not in r.output
    assert "d/quota" not in r.output
    lines = r.output.splitlines()
    at = {name: i for name in ("block 1", "block 3", "the quota of analyst 'cli'")
          for i, line in enumerate(lines) if f"│   {name} " in line}
    assert len(at) == 3
    assert at["block 1"] < at["block 3"] < at["the quota of analyst 'cli'"]
    r = runner.invoke(app, ["budget", "show", "d", "--json", *db])  # one data set by name
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["budgets"] == [d]


def test_blocks_declare_recompute(tmp_path: Path) -> None:
    """``--recompute`` (DPack's re-ranking within a pass) is declared, shown, and refused
    for another scheduler before anything is written."""
    from dpsieve.ledger import open_store

    url = f"sqlite:///{tmp_path / 'l.db'}"
    args = ["blocks", "declare", "d", "--path", DATA, "--column", "sex", "--columns",
            '[{"name": "sex", "type": "integer"}]', "--budget", '{"type": "pure", "eps": 1}',
            "--recompute", "3", "--database-url", url]
    r = runner.invoke(app, args)  # the scheduler is dpf by default
    assert r.exit_code == 2
    assert "recompute" in r.output
    store = open_store(url)
    try:
        assert store.dataset("d") is None
    finally:
        store.close()
    r = runner.invoke(app, [*args, "--scheduler", "dpack"])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["blocks"]["recompute"] == 3
    r = runner.invoke(app, ["blocks", "show", "d", "--database-url", url])
    assert "scheduler dpack (re-ranked every 3 admissions)" in r.output


def test_blocks_declare_cannot_change_unit_in_one_block_once_blocks_exist(
        tmp_path: Path) -> None:
    """Once blocks exist and a query was charged, ``blocks declare`` changing
    ``--unit-in-one-block`` exits 2 naming it and its stored value, before anything is
    written (the declaration and the registered file as they were); the same value with
    another scheduler passes."""
    import shutil

    from dpsieve.ledger import open_store

    url = f"sqlite:///{tmp_path / 'l.db'}"
    db = ["--database-url", url]
    args = ["blocks", "declare", "d", "--column", "sex", "--columns",
            '[{"name": "sex", "type": "integer"}]', "--budget", '{"type": "pure", "eps": 1}']
    r = runner.invoke(app, [*args, "--path", DATA, "--unit-in-one-block", *db])
    assert r.exit_code == 0, r.output
    assert runner.invoke(app, ["blocks", "add", "d", "1", "2", *db]).exit_code == 0
    r = runner.invoke(app, ["query", "d", _q(0.3), *db])
    assert r.exit_code == 0, r.output

    def stored() -> tuple[Any, Any]:
        store = open_store(url)
        try:
            return store.block_spec("d"), store.dataset("d")  # type: ignore[attr-defined]
        finally:
            store.close()

    before = stored()
    assert before[0]["unit_in_one_block"] is True
    copy = shutil.copy(DATA, tmp_path / "copy.csv")
    for extra in ([], ["--path", str(copy)]):
        r = runner.invoke(app, [*args, *extra, *db])
        assert r.exit_code == 2, r.output
        assert "'unit_in_one_block'" in r.output
        assert "cannot change" in r.output
        assert "It is true" in r.output
        assert stored() == before
    r = runner.invoke(app, [*args, "--unit-in-one-block", "--scheduler", "dpack", *db])
    assert r.exit_code == 0, r.output
    spec = stored()[0]
    assert (spec["unit_in_one_block"], spec["scheduler"]) == (True, "dpack")


def test_a_query_on_blocks_reads_the_declaration_once(tmp_path: Path, monkeypatch: Any) -> None:
    """``dpsieve query`` and ``dpsieve blocks queue`` read the block declaration once
    (the command's check that the data set has blocks hands it to the session)."""
    from dpsieve.ledger.blocks import SQLBlocks

    db = ["--database-url", f"sqlite:///{tmp_path / 'l.db'}"]
    for args in (["blocks", "declare", "d", "--path", DATA, "--column", "sex", "--columns",
                  '[{"name": "sex", "type": "integer"}]', "--budget",
                  '{"type": "pure", "eps": 1}'], ["blocks", "add", "d", "1"]):
        assert runner.invoke(app, [*args, *db]).exit_code == 0
    read = SQLBlocks.block_spec
    calls: list[str] = []

    def counting(self: Any, dataset: str) -> Any:
        calls.append(dataset)
        return read(self, dataset)

    monkeypatch.setattr(SQLBlocks, "block_spec", counting)
    for args in (["query", "d", _q(0.1)], ["blocks", "queue", "d", _q(0.1), "--key", "k"]):
        calls.clear()
        r = runner.invoke(app, [*args, *db])
        assert r.exit_code == 0, r.output
        assert calls == ["d"], (args, calls)
