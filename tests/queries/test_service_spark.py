"""The service over a Spark catalog table (issue 13 item 2): an owner registers
``{"spark_table": ...}`` on a service started with a Spark URL; only the catalog's column
types are read (the public schema analysts read); query shapes that need rows in memory
(release, robust) are refused before any spend, the one-aggregation shapes run in Spark; a data
set names exactly one source; without a Spark URL the registration is a 422, never a 5xx."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from spark_support import session_or_skip, spark_frame

from dpsieve.queries import Column, ColumnType
from dpsieve.service import Settings, create_app

pytestmark = pytest.mark.timeout(1500)
OWNER = secrets.token_urlsafe(32)
COLS = (Column("pid", ColumnType.INTEGER), Column("city", ColumnType.STRING),
        Column("x", ColumnType.FLOAT))


@pytest.fixture(scope="module")
def spark() -> Any:
    s = session_or_skip()
    rows = [{"pid": i % 7, "city": "ab"[i % 2], "x": float(i)} for i in range(40)]
    spark_frame(s, rows, COLS).createOrReplaceTempView("dpsieve_service_people")
    return s


def _client(tmp_path: Path, spark_url: str | None) -> Any:
    app = create_app(Settings(owner_key=OWNER, database_url=f"sqlite:///{tmp_path / 'l.db'}",
                              spark_url=spark_url))
    return TestClient(app, raise_server_exceptions=False)


def test_a_spark_table_is_registered_from_its_catalog_types(spark: Any, tmp_path: Path) -> None:
    own = {"Authorization": f"Bearer {OWNER}"}
    with _client(tmp_path, "local[2]") as c:
        r = c.post("/v1/datasets", headers=own, json={
            "name": "people", "spark_table": "dpsieve_service_people",
            "budget": {"type": "pure", "eps": 1.0}})
        assert r.status_code == 201, r.text
        assert r.json()["spark_table"] == "dpsieve_service_people"
        key = c.post("/v1/analysts", headers=own, json={"name": "ana"}).json()["api_key"]
        c.post("/v1/datasets/people/grants", headers=own, json={"analyst": "ana"})
        ana = {"Authorization": f"Bearer {key}"}
        r = c.post("/v1/datasets/people/queries", headers=ana, json={
            "type": "robust_median", "column": "x", "bound": 100.0,
            "privacy": {"type": "approx", "eps": 0.5, "delta": 1e-6}})
        assert r.status_code == 422, r.text  # rows are never collected: plans only
        assert "query plans" in r.text
        b = c.get("/v1/datasets/people/budget", headers=ana).json()
        assert b["admitted"] == 0
        r = c.get("/v1/datasets/people/schema", headers=ana)
        assert r.status_code == 200, r.text
        assert {col["name"]: col["type"] for col in r.json()["columns"]} == {
            c_.name: c_.type.value for c_ in COLS}
        # a one-aggregation shape is a plan: it runs inside Spark
        r = c.post("/v1/datasets/people/queries", headers=ana, json={
            "type": "count", "privacy": {"type": "pure", "eps": 0.5}})
        assert r.status_code == 200, r.text
        assert c.get("/v1/datasets/people/budget", headers=ana).json()["admitted"] == 1
        r = c.post("/v1/datasets", headers=own, json={
            "name": "nope", "spark_table": "no_such_table_here"})
        assert r.status_code == 422, r.text
        assert "no_such_table_here" in r.text


def test_a_data_set_names_one_source_and_spark_needs_a_url(spark: Any, tmp_path: Path) -> None:
    own = {"Authorization": f"Bearer {OWNER}"}
    with _client(tmp_path, None) as c:
        for body in ({"name": "a"}, {"name": "a", "path": "/x.csv", "infer_types": True,
            "spark_table": "t"}):
            r = c.post("/v1/datasets", headers=own, json=body)
            assert r.status_code == 422, r.text
        r = c.post("/v1/datasets", headers=own, json={"name": "a", "spark_table": "t"})
        assert r.status_code == 422
        assert "DPSIEVE_SPARK_URL" in r.text
        assert c.get("/v1/datasets", headers=own).json() == []
