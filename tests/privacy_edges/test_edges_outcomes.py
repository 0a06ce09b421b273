"""Regression tests for what an analyst observes besides the answer (docs/outputs.md).

* A CSV's schema is the owner's declarations (or all text): never a function of the values
  -- a float in an integer column, a ``maybe`` in a boolean one, ``inf`` in the first data
  row, a ragged row, one more row of a headerless file -- on the Session, the service's
  ``GET .../schema`` and ``dpsieve query --schema``.
* After the registered file is removed or rewritten (a new header, a headerless data row),
  an analyst's error names the data set only: never the path, the new header or a value;
  nothing is charged.
* A failure after the charge (out of memory) is one fixed message on every entry point;
  the charge is kept, and a retry with the same idempotency key returns the same outcome,
  never a fresh computation.
* pandas unit ids are compared by typed value: ``1`` and ``1.0`` one unit, ``1`` and
  ``"1"`` two.
* Registration tells the owner -- only -- when the privacy unit is all or mostly missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import PureDP
from dpsieve.errors import DPError, QueryFailedError

OWNER = "owner-key-for-outcome-tests-0123456789"
HEADER = "pid,age,flag,city"
ROWS = [f"{i},{20 + i % 50},{'true' if i % 3 else 'false'},{'ab'[i % 2]}" for i in range(40)]
DECL = [{"name": "pid", "type": "integer"}, {"name": "age", "type": "integer"},
        {"name": "flag", "type": "boolean"}, {"name": "city", "type": "string"}]
VARIANTS = {
    "plain": [HEADER, *ROWS],
    "float age": [HEADER, *ROWS, "77,30.5,true,a"],
    "maybe flag": [HEADER, *ROWS, "77,30,maybe,a"],
    "inf first": [HEADER, "77,inf,true,a", *ROWS],
    "ragged": [HEADER, *ROWS, "77,30,true,a,extra,fields", "78,31"],
    "quoted break": [HEADER, *ROWS, '77,30,true,"a\nb"'],
}


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


class Service:
    """The service in process, an analyst granted every data set registered."""

    def __init__(self, tmp: Path) -> None:
        from fastapi.testclient import TestClient

        from dpsieve.ledger import SQLiteStore
        from dpsieve.service import Settings, create_app

        self.store = SQLiteStore(tmp / "ledger.db")
        settings = Settings(owner_key=OWNER, analyst_requests_per_second=0,  # limits: tests/system
                            refusals_per_window=0, queued_per_window=0)
        self.ctx = TestClient(create_app(settings, store=self.store),
                              raise_server_exceptions=False)
        self.c = self.ctx.__enter__()
        self.own = {"Authorization": f"Bearer {OWNER}"}
        r = self.c.post("/v1/analysts", headers=self.own, json={"name": "ana"})
        self.ana = {"X-API-Key": r.json()["api_key"]}

    def register(self, name: str, path: Path, **kw: Any) -> Any:
        r = self.c.post("/v1/datasets", headers=self.own, json={
            "name": name, "path": str(path), "budget": {"type": "pure", "eps": 100.0},
            **kw})
        assert r.status_code == 201, r.text
        self.c.post(f"/v1/datasets/{name}/grants", headers=self.own, json={"analyst": "ana"})
        return r.json()

    def close(self) -> None:
        self.ctx.__exit__(None, None, None)
        self.store.close()


@pytest.fixture
def service(tmp_path: Path) -> Any:
    s = Service(tmp_path)
    yield s
    s.close()


@pytest.mark.parametrize("declared", [None, DECL])
def test_csv_schema_is_the_same_for_every_variant(declared: Any, tmp_path: Path,
                                                  service: Service) -> None:
    from typer.testing import CliRunner

    from dpsieve.cli import app

    seen = set()
    for i, (name, lines) in enumerate(VARIANTS.items()):
        path = _write(tmp_path / f"v{i}.csv", lines)
        types = None if declared is None else {d["name"]: d["type"] for d in declared}
        s = Session(str(path), budget=PureDP(1.0), privacy_unit="pid", column_types=types)
        kw = {} if declared is None else {"columns": declared}
        service.register(f"v{i}", path, privacy_unit="pid", **kw)
        got = service.c.get(f"/v1/datasets/v{i}/schema", headers=service.ana).json()
        db = f"sqlite:///{tmp_path / 'cli.db'}"
        r = CliRunner().invoke(app, ["budget", "set", f"v{i}", "--path", str(path),
                                     "--database-url", db, "--budget", '{"type": "pure", '
                                     '"eps": 1}', "--privacy-unit", "pid",
                                     *(["--columns", json.dumps(declared)] if declared
                                       else [])])
        assert r.exit_code == 0, (name, r.output)
        r = CliRunner().invoke(app, ["query", f"v{i}", "--schema", "--database-url", db])
        assert r.exit_code == 0, r.output
        cli = json.loads(r.stdout)
        one = json.dumps(s.schema().to_dict(), sort_keys=True)
        assert json.dumps({"columns": got["columns"], "privacy_unit": got["privacy_unit"]},
                          sort_keys=True) == one, name
        assert json.dumps({"columns": cli["columns"], "privacy_unit": cli["privacy_unit"]},
                          sort_keys=True) == one, name
        seen.add(one)
    assert len(seen) == 1, seen
    want = "string" if declared is None else "integer"
    assert json.loads(seen.pop())["columns"][1]["type"] == want


def test_a_headerless_file_reads_its_first_line_as_the_header_whatever_follows(
        tmp_path: Path) -> None:
    """The first line is the header by contract (nothing sniffed): a file without one
    publishes its first line as column names (the owner's registration), and no later
    row ever changes them."""
    lines = ["alice_smith,positive", "bob_jones,negative", "carol,positive"]
    a = _write(tmp_path / "a.csv", lines)
    b = _write(tmp_path / "b.csv", [*lines, "dave_secret,30.5,extra"])
    sa = Session(str(a), budget=PureDP(1.0)).schema().to_dict()
    sb = Session(str(b), budget=PureDP(1.0)).schema().to_dict()
    assert sa == sb
    assert "bob_jones" not in json.dumps(sa)
    assert "dave_secret" not in json.dumps(sb)


QUERIES = [
    {"type": "count", "privacy": {"type": "pure", "eps": 0.1}},
    {"type": "sum", "column": "age", "lower": 0, "upper": 100,
     "privacy": {"type": "pure", "eps": 0.1}},
    {"type": "mean", "column": "age", "lower": 0, "upper": 100,
     "privacy": {"type": "pure", "eps": 0.1}},
    {"type": "histogram", "column": "city", "categories": ["a", "b"],
     "privacy": {"type": "pure", "eps": 0.1}},
    {"type": "linear", "column": "city", "categories": ["a", "b"], "workload": [[1, 1]],
     "privacy": {"type": "pure", "eps": 0.1}},
    {"type": "query", "privacy": {"type": "pure", "eps": 0.1},
     "aggregations": [{"type": "count"}], "where": [{"column": "age", "op": ">", "value": 3}]},
    {"type": "robust_mean", "column": "age", "bound": 100,
     "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}},
]


@pytest.mark.parametrize("change", ["removed", "new header", "headerless"])
def test_errors_after_the_file_changed_name_the_data_set_only(change: str, tmp_path: Path,
                                                              service: Service) -> None:
    path = _write(tmp_path / "data.csv", [HEADER, *ROWS])
    service.register("d", path, columns=DECL)
    if change == "removed":
        path.unlink()
    elif change == "new header":
        _write(path, ["SECRETCOL,OTHER_SECRET", "alice_smith,positive"])
    else:
        _write(path, ["alice_smith,positive", "bob_jones,negative"])
    for q in QUERIES:
        r = service.c.post("/v1/datasets/d/queries", headers=service.ana, json=q)
        assert 400 <= r.status_code < 500, (q, r.text)
        for secret in (str(path), str(tmp_path), "SECRETCOL", "OTHER_SECRET", "alice_smith",
                       "positive", "bob_jones"):
            assert secret not in r.text, (q, secret, r.text)
    assert service.store.history("d") == []  # nothing charged


def _oom(monkeypatch: pytest.MonkeyPatch) -> None:
    import duckdb

    from dpsieve.queries.engines import duckdb as duckdb_engine
    from dpsieve.queries.engines import frames

    def boom(self: Any, spec: Any) -> Any:
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data "
                                          "of size 4.2 GiB (/srv/private/alice.parquet)")
    monkeypatch.setattr(duckdb_engine.DuckDBEngine, "aggregate", boom)
    monkeypatch.setattr(frames.PandasEngine, "aggregate", boom)


def test_a_failure_after_the_charge_is_one_message_kept_and_replayed(
        tmp_path: Path, service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    from dpsieve.session.outcomes import FAILED_MESSAGE

    path = _write(tmp_path / "data.csv", [HEADER, *ROWS])
    service.register("d", path, columns=DECL)
    _oom(monkeypatch)
    q = QUERIES[5]
    key = {**service.ana, "Idempotency-Key": "k-1"}
    first = service.c.post("/v1/datasets/d/queries", headers=key, json=q)
    assert first.status_code == 422, first.text
    assert first.json() == {"error": "query_failed", "message": FAILED_MESSAGE}
    assert len(service.store.history("d")) == 1  # the charge is kept
    monkeypatch.undo()  # the engine works again: the retry must not compute afresh
    again = service.c.post("/v1/datasets/d/queries", headers=key, json=q)
    assert again.status_code == 422
    assert again.json() == first.json()
    assert len(service.store.history("d")) == 1  # no new charge
    fresh = service.c.post("/v1/datasets/d/queries", headers=service.ana, json=q)
    assert fresh.status_code == 200, fresh.text  # another key: a new query


def test_a_real_out_of_memory_failure_is_the_one_message(tmp_path: Path) -> None:
    """DuckDB out of memory under a small fixed limit, on a plan that needs more."""
    from dpsieve.session.outcomes import FAILED_MESSAGE

    n = 300_000
    rng = np.random.default_rng(0)
    path = tmp_path / "big.parquet"
    pd.DataFrame({"pid": np.arange(n), "g": rng.integers(0, n, n).astype(str),
                  "x": rng.normal(size=n)}).to_parquet(path)
    s = Session(str(path), budget=PureDP(10.0), privacy_unit="pid", memory_limit="2MB")
    q = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
         "aggregations": [{"type": "sum", "column": "x", "lower": -1, "upper": 1}],
         "group_by": ["g"], "keys": [[str(i)] for i in range(2000)],
         "contribution": {"max_groups": 1, "max_rows": 3}}
    with pytest.raises(QueryFailedError) as e:
        s.run(q, key="same")
    assert str(e.value) == FAILED_MESSAGE
    spent = s.remaining().to_dict()["exact"]
    assert spent != "10/1"  # charged
    with pytest.raises(QueryFailedError):
        s.run(q, key="same")
    assert s.remaining().to_dict()["exact"] == spent


def test_the_cli_prints_the_one_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                        ) -> None:
    from typer.testing import CliRunner

    from dpsieve.cli import app
    from dpsieve.session.outcomes import FAILED_MESSAGE

    path = _write(tmp_path / "data.csv", [HEADER, *ROWS])
    db = f"sqlite:///{tmp_path / 'l.db'}"
    r = CliRunner().invoke(app, ["budget", "set", "d", "--path", str(path), "--database-url",
                                 db, "--budget", '{"type": "pure", "eps": 10}',
                                 "--columns", json.dumps(DECL)])
    assert r.exit_code == 0, r.output
    _oom(monkeypatch)
    r = CliRunner().invoke(app, ["query", "d", json.dumps(QUERIES[5]), "--database-url", db])
    assert FAILED_MESSAGE in r.stdout, r.output
    assert "alice" not in r.output
    assert "GiB" not in r.output


def test_pandas_units_are_compared_by_typed_value() -> None:
    from dpsieve.queries.engine import BoundingSpec, Level, RowCount
    from dpsieve.queries.engines import PandasEngine

    spec = BoundingSpec((RowCount("units", Level.UNIT), RowCount("rows", Level.ROW)), (),
                        ((),), (), "u", 1, 10, 3)

    def counts(units: list[Any]) -> tuple[int, int]:
        df = pd.DataFrame({"u": pd.array(units, dtype=object), "x": range(len(units))})
        a = PandasEngine(df).aggregate(spec)
        return int(a.values["units"][0]), int(a.values["rows"][0])
    assert counts([1, 1.0]) == (1, 2)  # one person's 1 and 1.0: one unit
    assert counts([1, "1"]) == (2, 2)  # 1 and "1": two units
    assert counts([True, 1]) == (2, 2)
    assert counts(["a", "a", np.nan, None]) == (1, 2)  # NaN and None: missing
    # a person's rows cannot be split: sensitivity of a unit count stays 1
    base = [2, 3, "x"]
    for extra in ([7, 7.0], [np.int64(7), 7.0], ["y", "y"]):
        assert counts(base + extra)[0] - counts(base)[0] == 1


@pytest.mark.parametrize(("units", "warned"), [
    (["", ""] * 20, "every row"), (["", "", "1"] * 20, "40 of 60"), (["1", "2"] * 20, None)])
def test_registration_tells_the_owner_only_about_a_missing_unit(
        units: list[str], warned: str | None, tmp_path: Path, service: Service) -> None:
    from typer.testing import CliRunner

    from dpsieve.cli import app

    lines = ["pid,age", *[f"{u},{i}" for i, u in enumerate(units)]]
    path = _write(tmp_path / "u.csv", lines)
    out = service.register("d", path, privacy_unit="pid", columns=DECL[:2])
    db = f"sqlite:///{tmp_path / 'l.db'}"
    r = CliRunner().invoke(app, ["budget", "set", "d", "--path", str(path), "--database-url",
                                 db, "--budget", '{"type": "pure", "eps": 1}',
                                 "--privacy-unit", "pid", "--columns", json.dumps(DECL[:2])])
    assert r.exit_code == 0, r.output
    if warned is None:
        assert "warnings" not in out
        assert "warning" not in r.output
    else:
        assert any(warned in w for w in out["warnings"]), out
        assert warned in r.output
    # analysts never see it
    got = service.c.get("/v1/datasets/d/schema", headers=service.ana).text
    assert "warning" not in got
    assert "missing" not in got


def test_declared_types_cast_every_cell_and_keep_every_row(tmp_path: Path) -> None:
    """A cell that does not cast to its declared type is missing, and its row is kept
    (DuckDB would push a bare TRY_CAST into the reader and drop the row)."""
    path = _write(tmp_path / "c.csv", ["pid,age", "1,30", "2,abc", "3,30.5", "4,inf",
                                       "5,1e400", "6,"])
    s = Session(str(path), budget=PureDP(1e9), column_types={"pid": "integer",
                                                             "age": "integer"})
    from dpsieve.session import data_row_count, load_frame

    assert data_row_count(path) == 6
    frame = load_frame(str(path), {"pid": "integer", "age": "integer"})
    assert len(frame) == 6
    assert frame["age"].isna().sum() == 4  # abc, inf, 1e400, empty
    q = {"type": "query", "privacy": {"type": "pure", "eps": 1e6},
         "aggregations": [{"type": "count"}], "where": [{"column": "age", "op": "is_null"}]}
    assert abs(s.run(q).value["groups"][0]["estimates"][0]["value"] - 4) < 0.01
    shutil.rmtree(tmp_path / "nothing", ignore_errors=True)
    with pytest.raises(DPError):  # undeclared: text, so no sum
        Session(str(path), budget=PureDP(1.0)).run(
            {"type": "sum", "column": "age", "lower": 0, "upper": 1,
             "privacy": {"type": "pure", "eps": 0.1}})
