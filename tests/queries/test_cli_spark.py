"""``dpsieve query --spark URL`` (issue 13 item 2): the CLI runs query plans on Spark -- the
data set's registered file read by Spark, or a catalog table with ``--spark-table`` --
charging the local ledger once per plan; shapes that need rows in memory are refused
before any spend; bad option combinations are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from spark_support import session_or_skip
from typer.testing import CliRunner

from dpsieve.cli import app

# The first test starts a JVM; on a loaded 2-core machine a Spark job takes minutes.
pytestmark = pytest.mark.timeout(1500)

runner = CliRunner()
PLAN = json.dumps({"type": "query", "privacy": {"type": "pure", "eps": 0.5},
                   "aggregations": [{"type": "count"},
                                    {"type": "sum", "column": "age", "lower": 0,
                                     "upper": 100}],
                   "group_by": ["city"], "keys": [["a"], ["b"], ["c"]]})


@pytest.fixture(scope="module")
def spark() -> Any:
    return session_or_skip()


def _ledger(tmp_path: Path) -> tuple[str, Path]:
    db = f"sqlite:///{tmp_path / 'l.db'}"
    csv = tmp_path / "d.csv"
    csv.write_text("age,income,city\n" + "".join(
        f"{20 + i % 50},{1000 + 37 * i % 900},{'abc'[i % 3]}\n" for i in range(90)))
    r = runner.invoke(app, ["budget", "set", "d", "--path", str(csv), "--infer-types",
        "--database-url", db,
                            "--budget", '{"type": "pure", "eps": 1.0}'])
    assert r.exit_code == 0, r.output
    return db, csv


def _admitted(db: str) -> int:
    r = runner.invoke(app, ["budget", "show", "--database-url", db, "--json"])
    return int(json.loads(r.output)["budgets"][0]["admitted"])


def test_query_plans_run_on_spark_from_the_registered_file_or_a_catalog_table(
        spark: Any, tmp_path: Path) -> None:
    db, csv = _ledger(tmp_path)
    r = runner.invoke(app, ["query", "d", PLAN, "--database-url", db, "--spark", "local[2]"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert [g["key"] for g in out["value"]["groups"]] == [["a"], ["b"], ["c"]]
    assert _admitted(db) == 1
    spark.read.option("header", "true").option("inferSchema", "true").csv(
        str(csv)).createOrReplaceTempView("dpsieve_cli_people")
    r = runner.invoke(app, ["query", "d", PLAN, "--database-url", db, "--spark", "local[2]",
                            "--spark-table", "dpsieve_cli_people"])
    assert r.exit_code == 0, r.output
    assert _admitted(db) == 2
    r = runner.invoke(app, ["query", "d", PLAN, "--database-url", db, "--spark", "local[2]"])
    assert r.exit_code == 1  # eps 1 is spent: refused, nothing more charged
    assert "refused" in json.loads(r.stdout.strip().splitlines()[-1])
    assert _admitted(db) == 2


def test_spark_options_refuse_what_they_cannot_do_before_any_spend(
        spark: Any, tmp_path: Path) -> None:
    db, _ = _ledger(tmp_path)
    robust = ('{"type": "robust_median", "column": "age", "bound": 100, '
              '"privacy": {"type": "approx", "eps": 0.5, "delta": 1e-6}}')
    r = runner.invoke(app, ["query", "d", robust, "--database-url", db, "--spark", "local[2]"])
    assert r.exit_code == 1  # its rows would have to leave Spark
    assert json.loads(r.stdout.strip().splitlines()[-1])["error"] == "invalid_parameter"
    r = runner.invoke(app, ["query", "d", PLAN, "--database-url", db, "--spark", "local[2]",
                            "--spark-table", "no_such_table_anywhere"])
    assert r.exit_code != 0
    assert "no_such_table_anywhere" in r.output
    r = runner.invoke(app, ["query", "d", PLAN, "--database-url", db,
                            "--spark-table", "t"])
    assert r.exit_code == 2
    assert "--spark-table needs --spark" in r.output
    assert _admitted(db) == 0
    # a one-query shape is a one-aggregation plan: it runs on Spark
    count = '{"type": "count", "privacy": {"type": "pure", "eps": 0.1}}'
    r = runner.invoke(app, ["query", "d", count, "--database-url", db, "--spark", "local[2]"])
    assert r.exit_code == 0, r.output
    assert _admitted(db) == 1
