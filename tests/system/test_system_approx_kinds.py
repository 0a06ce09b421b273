"""(eps, delta) plans on every kind of budget through the service and the CLI
(docs/proofs/queries.md §8): the preview states the candidate the budget can take and the
charge in its currency, the query then runs it and the ledger records that charge; a plan
no candidate of which fits is refused before the spend (422 / the CLI's
``invalid_parameter``) naming ``privacy`` and the budget, with nothing written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dpsieve.accounting.events import ApproxDP
from dpsieve.cli import app as cli
from dpsieve.ledger import SQLiteStore, open_store
from dpsieve.queries.approx import gaussian_rho
from dpsieve.service import Settings, create_app

OWNER = "dps_test-owner-key_Ak7RmZ2vK9pLw4sN8bYc3FhJ6t"
RHO = gaussian_rho(ApproxDP(1.0, 1e-6))
#: Each unit in up to 14 of 20 public groups: the Gaussian is the less noisy candidate.
PLAN: dict[str, Any] = {
    "type": "query", "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6},
    "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["g"],
    "keys": [[i] for i in range(20)], "contribution": {"max_groups": 14}}
SELECT: dict[str, Any] = {**{k: v for k, v in PLAN.items() if k != "keys"},
                          "select": {"delta": 1e-7}}
#: budget -> (mechanism, charge without key selection; None: refused) and with it.
CASES: dict[str, tuple[dict[str, Any], tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]
                       | None]] = {
    "pure": ({"type": "pure", "eps": 4.0}, ("laplace", {"type": "pure", "eps": 1.0}), None),
    "gdp": ({"type": "gdp", "mu": 3.0}, ("laplace", {"type": "pure", "eps": 1.0}), None),
    "zcdp": ({"type": "zcdp", "rho": 1.0}, ("gaussian", {"type": "zcdp", "rho": RHO}), None),
    "rdp": ({"type": "rdp", "orders": [2.0, 8.0, 32.0], "values": [2.0, 8.0, 32.0]},
            ("gaussian", {"type": "zcdp", "rho": RHO}), None),
    "azcdp": ({"type": "approx_zcdp", "rho": 1.0, "delta": 1e-5},
              ("gaussian", {"type": "zcdp", "rho": RHO}),
              ("gaussian", {"type": "approx_zcdp", "rho": RHO, "delta": 1e-7})),
    "approx": ({"type": "approx", "eps": 8.0, "delta": 1e-4},
               ("gaussian", {"type": "approx", "eps": 1.0, "delta": 1e-6}),
               ("gaussian", {"type": "approx", "eps": 1.0, "delta": 1.1e-6})),
}


def _groups(path: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 3000
    pd.DataFrame({"pid": rng.integers(0, 400, n), "g": rng.integers(0, 20, n)}
                 ).to_parquet(path)
    return path


def _plain(charge: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in charge.items() if k != "neighbouring"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("approx_kinds")
    path = _groups(tmp / "g.parquet")
    store = SQLiteStore(tmp / "svc.db")
    app = create_app(Settings(owner_key=OWNER), store=store)
    own = {"Authorization": f"Bearer {OWNER}"}
    with TestClient(app, raise_server_exceptions=False) as c:
        yield {"client": c, "store": store, "own": own, "path": path, "tmp": tmp}


@pytest.mark.parametrize("name", sorted(CASES))
def test_service_and_cli_run_the_candidate_the_budget_takes(service: dict[str, Any],
                                                           name: str) -> None:
    budget, plain, selected = CASES[name]
    c, st, own = service["client"], service["store"], service["own"]
    r = c.post("/v1/datasets", headers=own, json={
        "name": name, "path": str(service["path"]), "privacy_unit": "pid",
        "budget": budget})
    assert r.status_code == 201, r.text
    url = f"/v1/datasets/{name}/queries"
    db = f"sqlite:///{service['tmp'] / (name + '.db')}"
    runner = CliRunner()
    r2 = runner.invoke(cli, ["budget", "set", name, "--path", str(service["path"]),
                             "--database-url", db, "--privacy-unit", "pid",
                             "--budget", json.dumps(budget)])
    assert r2.exit_code == 0, r2.output
    for plan, want in ((PLAN, plain), (SELECT, selected)):
        page = c.get(f"/v1/datasets/{name}/budget", headers=own)
        assert page.status_code == 200, page.text
        before = (page.json(), len(st.history(name)))
        p = c.post(url, params={"preview": "true"}, json=plan, headers=own)
        cli_p = runner.invoke(cli, ["query", name, json.dumps(plan), "--preview",
                                    "--database-url", db])
        if want is None:
            assert p.status_code == 422, p.text
            assert p.json()["parameter"] == "privacy", p.text
            r = c.post(url, json=plan, headers=own)
            assert r.status_code == 422, r.text
            assert "budget" in r.json()["message"]
            assert (c.get(f"/v1/datasets/{name}/budget", headers=own).json(),
                    len(st.history(name))) == before
            r2 = runner.invoke(cli, ["query", name, json.dumps(plan), "--database-url", db])
            assert r2.exit_code == 1
            out = json.loads(r2.stdout)
            assert out["parameter"] == "privacy", out
            assert json.loads(cli_p.stdout)["parameter"] == "privacy"
            continue
        mech, charge = want
        assert p.status_code == 200, p.text
        pv = p.json()
        assert pv["calibration"]["mechanism"] == mech
        assert _plain(pv["charge"]) == charge
        assert pv["admitted"] is True
        assert json.loads(cli_p.stdout)["calibration"] == pv["calibration"]
        r = c.post(url, json=plan, headers=own)
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["cost"]["query"] == pv["charge"]
        assert _plain(st.history(name)[-1].cost["query"]) == charge
        for parts in out["noise"].values():
            for n in parts.values():
                assert n["mechanism"] == f"discrete_{mech}"
        r2 = runner.invoke(cli, ["query", name, json.dumps(plan), "--database-url", db])
        assert r2.exit_code == 0, r2.output
        co = json.loads(r2.stdout)
        assert co["cost"]["query"] == pv["charge"]
        store = open_store(db)
        try:
            rec = store.history(name)[-1]
        finally:
            store.close()
        assert _plain(rec.cost["query"]) == charge
        if charge["type"] == "zcdp" and name == "zcdp":
            assert Fraction(rec.cost["exact"]) == Fraction(RHO)
