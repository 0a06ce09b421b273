"""Query release (dpsieve.release) through Session and the HTTP service: charged
PureDP(eps, replace-one) before the data are read, refused before any spend otherwise."""

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

from dpsieve import Session
from dpsieve.accounting.events import ApproxZCDP, Neighbouring, PureDP
from dpsieve.errors import BudgetExceededError, ValidationError
from dpsieve.ledger import SQLiteStore
from dpsieve.release import InstanceTooLargeError
from dpsieve.service import Settings, create_app

RO = Neighbouring.REPLACE_ONE
OWNER = "owner-secret-key"
DOMAIN = {"sex": ["F", "M"], "smoker": ["no", "yes"]}
LABELS = ["sex=F", "sex=M", "smoker=no", "smoker=yes"]
N = 12


def _frame() -> pd.DataFrame:
    sex = ["F"] * 7 + ["M"] * 5
    smoker = ["no", "yes", "no", "no", "yes", "no", "no", "yes", "yes", "no", "no", "no"]
    return pd.DataFrame({"sex": sex, "smoker": smoker, "age": range(N)})


class Loader:
    """A lazy data source that counts how often the private data was read."""

    def __init__(self, df: pd.DataFrame) -> None:
        self.df, self.reads = df, 0

    def __call__(self) -> pd.DataFrame:
        self.reads += 1
        return self.df


def _spec(mechanism: str = "envelope", eps: float = 1.0, **extra: Any) -> dict[str, Any]:
    return {"type": "release", "mechanism": mechanism, "columns": ["sex", "smoker"],
            "domain": DOMAIN, "n": N, "workload": "marginals:1",
            "privacy": {"type": "pure", "eps": eps}, **extra}


def _session(data: Any, budget: Any, seed: int = 0, **kw: Any) -> Session:
    return Session(data, budget=budget, rng=np.random.default_rng(seed),
                   columns=["sex", "smoker", "age"], **kw)


def test_envelope_release_is_charged_before_the_data_are_read() -> None:
    data = Loader(_frame())
    seen: list[tuple[int, int]] = []
    # the row count n is public under replace-one and is checked before the spend; given
    # as row_count=, the data themselves are not read until after it
    s = _session(data, ApproxZCDP(2.0, 1e-5, RO), row_count=lambda: N,
                 after_spend=lambda key: seen.append(
                     (data.reads, len(s.store.history("session")))))
    r = s.run(_spec(rounds=4))
    assert seen == [(0, 1)]  # spent and recorded, nothing read yet
    assert data.reads == 1
    assert r.value["queries"] == LABELS
    a = r.value["answers"]
    assert len(a) == 4
    # the envelope decodes the answers at a distribution: each attribute's cells sum to 1
    assert a[0] + a[1] == pytest.approx(1.0)
    assert a[2] + a[3] == pytest.approx(1.0)
    assert r.value["privacy"] == {"type": "pure", "eps": 1.0, "neighbouring": "replace_one"}
    assert r.cost["query"] == {"type": "pure", "eps": 1.0, "neighbouring": "replace_one"}
    assert r.noise["rounds"] == 4
    assert r.noise["selections"] == 3
    assert "not_private" not in json.dumps(r.to_dict())
    assert "expected_error" not in json.dumps(r.to_dict())
    # the same seed gives the same release (simulation); the answer is stored in the ledger
    again = _session(_frame(), ApproxZCDP(2.0, 1e-5, RO)).run(_spec(rounds=4))
    assert again.value["answers"] == a
    assert s.store.history("session")[0].request["mechanism"] == "envelope"


@pytest.mark.parametrize("mechanism", ["envelope", "pmw", "mwem", "laplace", "blr"])
def test_every_mechanism_spends_exactly_eps(mechanism: str) -> None:
    s = _session(_frame(), PureDP(1.0, RO))
    extra = {"rounds": 3} if mechanism in ("envelope", "pmw", "mwem") else {}
    r = s.run(_spec(mechanism, 0.25, **extra))
    assert len(r.value["answers"]) == 4
    assert r.noise["mechanism"] == f"release_{mechanism}"
    assert Fraction(r.remaining["exact"]) == Fraction(3, 4)
    with pytest.raises(BudgetExceededError):
        s.run(_spec(mechanism, 0.9, **extra))
    assert len(s.store.history("session")) == 1


def test_laplace_at_large_eps_answers_marginals_out_of_domain_as_first_level() -> None:
    df = _frame()
    df.loc[0, "sex"] = "X"  # outside the public domain: counted as "F"
    df.loc[1, "smoker"] = None  # missing: counted as "no"
    s = _session(df, PureDP(1e7, RO))
    r = s.release("laplace", columns=["sex", "smoker"], domain=DOMAIN, n=N,
                  privacy=PureDP(1e6, RO))
    truth = [7 / N, 5 / N, 9 / N, 3 / N]
    assert r.value["answers"] == pytest.approx(truth, abs=1e-4)
    # one replaced row moves one cell up and one down in each marginal: L1 = 4/n;
    # the noise is never below sensitivity / eps
    assert r.noise["l1_sensitivity"] == pytest.approx(4 / N)
    assert r.noise["scale"] >= r.noise["l1_sensitivity"] / 1e6


def test_add_remove_budget_is_refused_with_no_spend() -> None:
    data = Loader(_frame())
    s = _session(data, PureDP(5.0))
    with pytest.raises(ValidationError, match="replace-one"):
        s.run(_spec("laplace"))
    ro = _session(data, PureDP(5.0, RO))
    with pytest.raises(ValidationError, match="'privacy'"):
        ro.run(_spec("laplace", privacy={"type": "pure", "eps": 1.0,
                                         "neighbouring": "add_remove"}))
    with pytest.raises(ValidationError, match="'privacy'"):
        ro.run(_spec("laplace", privacy={"type": "zcdp", "rho": 0.1}))
    assert data.reads == 0
    assert s.store.history("session") == []
    assert ro.store.history("session") == []


@pytest.mark.parametrize(("bad", "match"), [
    ({"rounds": 40}, "envelope"),  # 4^39 transcripts
    ({"workload": "range1d", "columns": ["age"], "domain": {"age": list(range(2048))}},
     "workload"),
    ({"mechanism": "blr", "columns": ["age"], "domain": {"age": list(range(16))},
      "workload": "random:50000"}, "BLR"),  # 816 candidates x 50016 columns
], ids=["envelope-rounds", "workload-entries", "blr-candidates"])
def test_too_large_instances_are_refused_before_any_spend(bad: dict[str, Any],
                                                          match: str) -> None:
    data = Loader(_frame())
    s = _session(data, PureDP(5.0, RO))
    with pytest.raises(InstanceTooLargeError, match=match) as ei:
        s.run({**_spec(), **bad})
    assert ei.value.estimated_cost > ei.value.limit
    assert data.reads == 0
    assert s.store.history("session") == []
    assert Fraction(s.remaining()["exact"]) == 5


@pytest.mark.parametrize(("bad", "param"), [
    ({"mechanism": "aim"}, "'mechanism'"),
    ({"domain": None}, "'domain'"),
    ({"domain": {"sex": ["F", "M"]}}, "'domain'"),
    ({"domain": {"sex": ["F", "F"], "smoker": ["no"]}}, "'domain'"),
    ({"domain": {"sex": [1, "1"], "smoker": ["no"]}}, "'domain'"),
    ({"columns": ["sex", "nope"], "domain": {"sex": ["F"], "nope": ["a"]}}, "'columns'"),
    ({"n": None}, "'n'"),
    ({"n": 0}, "'n'"),
    ({"mechanism": "laplace", "rounds": 3}, "'rounds'"),
    ({"mechanism": "pmw", "rounds": 1}, "'rounds'"),
    ({"workload": "marginals:3"}, "'workload'"),
    ({"workload": "cubes"}, "'workload'"),
    ({"workload": [[1.0]]}, "'workload'"),
    ({"gamma": 2.0}, "'gamma'"),
], ids=lambda v: str(v)[:40])
def test_bad_release_specs_name_the_parameter_and_spend_nothing(
        bad: dict[str, Any], param: str) -> None:
    data = Loader(_frame())
    s = _session(data, PureDP(5.0, RO))
    with pytest.raises(ValidationError, match=param):
        s.run({**_spec(rounds=3), **bad})
    assert data.reads == 0
    assert s.store.history("session") == []


def test_wrong_public_row_count_is_refused_before_the_spend() -> None:
    """Issue 10, defect 6: n is compared with the row count (public under replace-one)
    before the ledger is touched; it once failed after the spend and kept the charge."""
    data = Loader(_frame())
    s = _session(data, PureDP(5.0, RO))
    for mech in ("laplace", "envelope", "pmw", "mwem", "blr"):
        with pytest.raises(ValidationError, match="'n'"):
            s.run(_spec(mech, n=N + 1))
    assert data.reads == 1  # loaded once, to count its rows
    assert s.store.history("session") == []


# -- HTTP ----------------------------------------------------------------------------------
@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, Any]]:
    store = SQLiteStore(tmp_path / "svc.db")
    csv = tmp_path / "people.csv"
    _frame().to_csv(csv, index=False)
    app = create_app(Settings(owner_key=OWNER, max_body_bytes=20_000), store=store)
    with TestClient(app, raise_server_exceptions=False) as client:
        own = {"Authorization": f"Bearer {OWNER}"}
        for name, nb in (("ro", "replace_one"), ("ar", "add_remove")):
            r = client.post("/v1/datasets", headers=own, json={
                "name": name, "path": str(csv), "infer_types": True,
                "budget": {"type": "pure", "eps": 2.0, "neighbouring": nb}})
            assert r.status_code == 201, r.text
        r = client.post("/v1/analysts", json={"name": "ana"}, headers=own)
        ana = {"X-API-Key": r.json()["api_key"]}
        for name in ("ro", "ar"):
            assert client.post(f"/v1/datasets/{name}/grants", json={"analyst": "ana"},
                               headers=own).status_code == 201
        yield {"client": client, "store": store, "ana": ana}


def _state(store: Any) -> tuple[int, str, str]:
    return (len(store.audit()), store.load_filter("ro").to_json(),
            store.load_filter("ar").to_json())


def test_release_over_http(env: dict[str, Any]) -> None:
    c, store = env["client"], env["store"]
    r = c.post("/v1/datasets/ro/queries", json=_spec("pmw", 0.5, rounds=3), headers=env["ana"])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["value"]["queries"] == LABELS
    assert len(body["value"]["answers"]) == 4
    assert body["cost"]["query"]["neighbouring"] == "replace_one"
    assert body["remaining"]["exact"] == "3/2"
    assert "not_private" not in r.text
    hist = c.get("/v1/datasets/ro/budget", headers=env["ana"]).json()["history"]
    assert len(hist) == 1
    assert hist[0]["query"]["mechanism"] == "pmw"
    assert store.history("ar") == []


@pytest.mark.parametrize(("dataset", "patch", "error", "needle"), [
    ("ro", {"mechanism": "aim"}, "invalid_parameter", "mechanism"),
    ("ro", {"workload": "cubes"}, "invalid_parameter", "workload"),
    ("ro", {"domain": {"sex": ["F", "M"]}}, "invalid_parameter", "domain"),
    ("ro", {"rounds": 40}, "instance_too_large", "rounds"),
    ("ar", {}, "invalid_parameter", "replace-one"),
], ids=["mechanism", "workload", "domain", "too-large", "add-remove"])
def test_bad_release_requests_are_clean_4xx_and_write_nothing(
        env: dict[str, Any], dataset: str, patch: dict[str, Any], error: str,
        needle: str) -> None:
    c, store = env["client"], env["store"]
    before = _state(store)
    r = c.post(f"/v1/datasets/{dataset}/queries", json={**_spec(rounds=3), **patch},
               headers=env["ana"])
    assert r.status_code == 422, r.text
    assert r.json()["error"] == error
    assert needle in r.json()["message"]
    assert "Traceback" not in r.text
    assert _state(store) == before


def _grid_csv(path: Path, a: int, b: int, n: int) -> str:
    rows = ["a,b"] + [f"{i % a},{(i // a) % b}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


@pytest.mark.parametrize(("a", "b"), [(6, 6), (16, 16), (32, 32)])
def test_large_envelope_instances_are_refused_from_public_parameters(
        tmp_path: Path, a: int, b: int) -> None:
    """Issue 11 defect 6: an envelope release on 36 cells with n = 50 was refused after
    240 s and 4.9 GB, 2^8 cells after 148 s, 2^10 not within 580 s. The grouping is now
    costed exactly from n and the workload (exact_prefix_work) and refused before any
    work, with the estimate; nothing is spent. The limit is a service setting."""
    csv = _grid_csv(tmp_path / "g.csv", a, b, 50)
    store = SQLiteStore(tmp_path / "l.db")
    own = {"Authorization": f"Bearer {OWNER}"}
    spec = {"type": "release", "mechanism": "envelope", "columns": ["a", "b"],
            "domain": {"a": list(range(a)), "b": list(range(b))}, "n": 50,
            "workload": "marginals:1", "privacy": {"type": "pure", "eps": 1.0}}
    app = create_app(Settings(owner_key=OWNER), store=store)
    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.post("/v1/datasets", headers=own, json={
            "name": "g", "path": csv, "infer_types": True,
            "budget": {"type": "pure", "eps": 10.0, "neighbouring": "replace_one"}})
        assert r.status_code == 201, r.text
        r = c.post("/v1/datasets/g/queries", headers=own, json=spec)
        assert r.status_code == 422, r.text
        body = r.json()
        assert body["error"] == "instance_too_large"
        assert body["limit"] == Settings().release_max_group_work
        assert body["estimated_cost"] > body["limit"]
        assert "at least" in body["message"]  # the exact prefix: refused before any work
        assert store.history("g") == []


def test_release_limits_are_settings(tmp_path: Path) -> None:
    """A small instance the defaults admit is refused under a lower setting (and the
    envelope's enumeration limit likewise), before any spend."""
    csv = _grid_csv(tmp_path / "g.csv", 2, 2, 12)
    own = {"Authorization": f"Bearer {OWNER}"}
    spec = {"type": "release", "mechanism": "envelope", "columns": ["a", "b"],
            "domain": {"a": [0, 1], "b": [0, 1]}, "n": 12, "workload": "marginals:1",
            "privacy": {"type": "pure", "eps": 1.0}, "rounds": 4}
    for settings, status, limit in (
            (Settings(owner_key=OWNER), 200, None),
            (Settings(owner_key=OWNER, release_max_group_work=10.0), 422, 10.0),
            (Settings(owner_key=OWNER, release_max_cost=10.0), 422, 10.0)):
        store = SQLiteStore(tmp_path / f"l{status}{limit}.db")
        with TestClient(create_app(settings, store=store),
                        raise_server_exceptions=False) as c:
            r = c.post("/v1/datasets", headers=own, json={
                "name": "g", "path": csv, "infer_types": True,
                "budget": {"type": "pure", "eps": 10.0, "neighbouring": "replace_one"}})
            assert r.status_code == 201, r.text
            r = c.post("/v1/datasets/g/queries", headers=own, json=spec)
            assert r.status_code == status, r.text
            if status == 422:
                assert r.json()["error"] == "instance_too_large"
                assert r.json()["limit"] == limit
                assert store.history("g") == []
            else:
                assert len(store.history("g")) == 1


def test_release_limits_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPSIEVE_RELEASE_MAX_COST", "1e6")
    monkeypatch.setenv("DPSIEVE_RELEASE_MAX_GROUP_WORK", "2.5e5")
    s = Settings.from_env()
    assert (s.release_max_cost, s.release_max_group_work) == (1e6, 2.5e5)
