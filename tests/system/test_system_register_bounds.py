"""Bounded registration (issue 25): a symlink loop was a 500; a 20,000-column CSV or a
10 GiB sparse file held a worker 24-44 s before a 422. Each is now a 422 naming the
parameter before the file's types are sniffed, and a metadata read past the deadline is
a 422 naming ``path``. Registering a spent data set again never resets its budget."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from service_harness import write_csv

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Rg8TzL2wN4cVb6mRx9Qs3Kd7Jf"
OWN = {"Authorization": f"Bearer {OWNER}"}
Q = {"type": "count", "privacy": {"type": "pure", "eps": 0.1}}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    store = SQLiteStore(tmp_path / "l.db")
    with TestClient(create_app(Settings(owner_key=OWNER, max_columns=1000), store=store),
                    raise_server_exceptions=False) as c:
        yield c


def _register(c: TestClient, path: Path | str, **extra: Any) -> Any:
    return c.post("/v1/datasets", headers=OWN, json={"name": "d", "path": str(path),
                                                      **extra})


def _no_sniffing(monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsieve.service.routes.datasets as ds

    def boom(*_: Any) -> Any:
        raise AssertionError("the file's types were sniffed")

    monkeypatch.setattr(ds, "file_columns", boom)  # the table's types (declared, metadata)
    monkeypatch.setattr(ds, "with_inferred", boom)  # infer_types: DuckDB's guesses


def test_a_symlink_loop_is_a_422_naming_path(client: TestClient, tmp_path: Path) -> None:
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    a.symlink_to(b)
    b.symlink_to(a)
    r = _register(client, a)
    assert r.status_code == 422, r.text
    assert r.json()["parameter"] == "path"
    assert "loop" in r.json()["message"]


def test_too_many_columns_is_refused_before_sniffing(client: TestClient, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    wide = tmp_path / "wide.csv"
    wide.write_text(",".join(f"c{i}" for i in range(20_000)) + "\n"
                    + ",".join("1" for _ in range(20_000)) + "\n")
    _no_sniffing(monkeypatch)
    r = _register(client, wide)
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["parameter"] == "columns"
    assert "20000" in body["message"] or "20,000" in body["message"]
    assert "DPSIEVE_MAX_COLUMNS" in body["message"]
    assert client.get("/v1/datasets", headers=OWN).json() == []


def test_too_many_parquet_columns_is_refused(client: TestClient, tmp_path: Path) -> None:
    import duckdb

    p = tmp_path / "wide.parquet"
    cols = ", ".join(f"1 AS c{i}" for i in range(1200))
    duckdb.connect().execute(f"COPY (SELECT {cols}) TO '{p}' (FORMAT parquet)")
    r = _register(client, p)
    assert r.status_code == 422, r.text
    assert r.json()["parameter"] == "columns"


def test_a_sparse_file_without_a_header_line_is_refused_at_once(
        client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "big.csv"
    with big.open("wb") as f:
        f.truncate(10 << 30)  # 10 GiB of zeros, no block written
    _no_sniffing(monkeypatch)
    try:
        r = _register(client, big)
        assert r.status_code == 422, r.text
        assert r.json()["parameter"] == "path"
        assert "first line" in r.json()["message"]
    finally:
        big.unlink()


def test_a_metadata_read_past_the_deadline_is_a_422(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    import dpsieve.service.routes.datasets as ds

    release = threading.Event()
    real = ds.file_columns

    def stuck(path: Any, types: Any = None) -> Any:
        release.wait()  # held until the test has its answer
        return real(path, types)

    monkeypatch.setattr(ds, "file_columns", stuck)
    store = SQLiteStore(tmp_path / "l.db")
    app = create_app(Settings(owner_key=OWNER, registration_timeout=0.05), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        try:
            r = _register(c, write_csv(tmp_path / "p.csv"))
        finally:
            release.set()
        assert r.status_code == 422, r.text
        assert r.json()["parameter"] == "path"
        assert "DPSIEVE_REGISTRATION_TIMEOUT" in r.json()["message"]
        assert c.get("/v1/datasets", headers=OWN).json() == []


def test_registering_a_spent_data_set_again_keeps_its_budget(client: TestClient,
                                                            tmp_path: Path) -> None:
    c = client
    csv = write_csv(tmp_path / "p.csv")
    assert _register(c, csv, budget={"type": "pure", "eps": 1.0}).status_code == 201
    key = c.post("/v1/analysts", headers=OWN, json={"name": "ana"}).json()["api_key"]
    c.post("/v1/datasets/d/grants", headers=OWN, json={"analyst": "ana"})
    ana = {"X-API-Key": key}
    assert c.post("/v1/datasets/d/queries", headers=ana, json=Q).status_code == 200
    before = c.get("/v1/datasets/d/budget", headers=OWN).json()
    # with a budget: refused before anything is written (the registration stays as it was)
    other = write_csv(tmp_path / "other.csv", n=50)
    r = _register(c, other, budget={"type": "pure", "eps": 100.0})
    assert r.status_code == 409, r.text
    assert "never reset" in r.json()["message"]
    schema = c.get("/v1/datasets/d/schema", headers=OWN).json()
    assert c.get("/v1/datasets/d/budget", headers=OWN).json() == before
    assert r.json()["error"] == "ledger_conflict"
    # new declarations: refused as an edit in place is (PUT .../schema), nothing written
    # (was: accepted here while the same edit through PUT .../schema was a 409)
    age = [{"name": "age", "type": "integer", "bounds": [0, 99]}]
    for r in (_register(c, other, columns=age), _register(c, csv, columns=age),
              c.put("/v1/datasets/d/schema", headers=OWN, json={"columns": age})):
        assert r.status_code == 409, r.text
        assert r.json()["error"] == "ledger_conflict"
        assert r.json()["message"].startswith("'columns': the schema of 'd' cannot change")
        assert "'age'" in r.json()["message"]
    assert c.get("/v1/datasets/d/schema", headers=OWN).json() == schema
    assert c.get("/v1/datasets/d/budget", headers=OWN).json() == before
    # the same schema, another file (a refreshed extract of the same people): the name
    # points at it, the budget and its history carry on
    r = _register(c, other)
    assert r.status_code == 201, r.text
    assert r.json()["path"] == str(other)
    after = c.get("/v1/datasets/d/budget", headers=OWN).json()
    assert after["remaining"] == before["remaining"]
    assert after["admitted"] == 1
    assert c.get("/v1/datasets/d/schema", headers=OWN).json() == schema
    assert c.post("/v1/datasets/d/queries", headers=ana, json=Q).status_code == 200
    assert c.get("/v1/datasets/d/budget", headers=OWN).json()["admitted"] == 2


def test_the_declarations_may_change_until_the_budget_pays(client: TestClient,
                                                            tmp_path: Path) -> None:
    """Before any query, registering again replaces the declarations (and the file)."""
    c = client
    csv = write_csv(tmp_path / "p.csv")
    assert _register(c, csv, budget={"type": "pure", "eps": 1.0}).status_code == 201
    age = [{"name": "age", "type": "integer", "bounds": [0, 99]}]
    r = _register(c, write_csv(tmp_path / "q.csv", n=50), columns=age)
    assert r.status_code == 201, r.text
    cols = {x["name"]: x for x in c.get("/v1/datasets/d/schema", headers=OWN).json()["columns"]}
    assert cols["age"]["type"] == "integer"
    assert cols["age"]["bounds"] == [0, 99]
