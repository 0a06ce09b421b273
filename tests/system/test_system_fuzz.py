"""Issue 11, "How it is checked": property-based fuzzing of the HTTP service.

Two fuzzers, both driven by hypothesis:

* **schemathesis over the OpenAPI schema**: every operation the service publishes, with
  schema-valid (positive) and schema-violating (negative) requests, sent as the owner, as
  an analyst, with a made-up key and with no key; path names are half the time the name of
  a real data set / analyst so requests reach the handlers and not only the 404.
* **extreme budgets**: data sets registered with budgets of every type at the edges (eps and
  mu up to 1e3 and down to subnormals, delta at 0, near 0, near 1 and 1), then queried,
  viewed and charted by the analyst and the owner.

Checked on every response: status < 500, and a refused request (status >= 400) writes
nothing to the ledger: the budgets, spends, principals, keys, data sets and grants tables
are unchanged, and the only audit rows it may add are the record of a refused query
(``request`` and a ``decision`` that did not admit). The number of requests sent is
printed at the end of the module. The default suite runs a bounded number of examples
(tens of seconds); ``-m slow`` runs the same properties with many more.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from service_harness import write_csv

from dpsieve.ledger import SQLiteStore
from dpsieve.service import Settings, create_app

OWNER = "owner-" + "f" * 40
#: Tables a refused request must leave exactly as they were (``audit`` is checked row by
#: row; ``ready`` is the readiness probe's scratch row).
TABLES = ("budgets", "spends", "principals", "api_keys", "datasets", "grants", "children",
          "child_grants", "child_answers", "blocksets", "blocks", "quotas", "members",
          "pending", "txns", "arrivals")
FAST, SLOW = 12, 150  # examples per operation and mode (default suite / -m slow)
SENT: dict[str, int] = {"schema": 0, "budgets": 0}
STATUS: dict[int, int] = {}


class Fuzz:
    """One service on a SQLite ledger, its keys, and the ledger checks."""

    def __init__(self, tmp: Path, **limits: int) -> None:
        self.db = tmp / "ledger.db"
        self.store = SQLiteStore(self.db)
        # failed authentication is rate-limited per address; the fuzzer sends many made-up
        # keys from one address, so the limit is lifted here (it has its own test)
        self.app = create_app(Settings(owner_key=OWNER, auth_failures_per_minute=10**9,
                                       **limits), store=self.store)
        self.client = TestClient(self.app, raise_server_exceptions=False)
        self.csv = str(write_csv(tmp / "people.csv"))
        self.owner = {"Authorization": f"Bearer {OWNER}"}
        r = self.client.post("/v1/datasets", headers=self.owner, json={
            "name": "people", "path": self.csv, "infer_types": True,
                "budget": {"type": "pure", "eps": 1000.0}})
        assert r.status_code == 201, r.text
        r = self.client.post("/v1/analysts", headers=self.owner, json={"name": "ana"})
        assert r.status_code == 201, r.text
        self.ana = {"X-API-Key": r.json()["api_key"]}
        self.ana_kid = r.json()["key_id"]
        r = self.client.post("/v1/datasets/people/grants", headers=self.owner,
                             json={"analyst": "ana"})
        assert r.status_code == 201, r.text
        # a data set with blocks (issue 29): blocks by age, a quota, a queued request
        r = self.client.post("/v1/datasets", headers=self.owner, json={
            "name": "days", "path": self.csv, "infer_types": True,
            "blocks": {"column": "age", "budget": {"type": "pure", "eps": 1000.0},
                       "unlock": {"type": "periodic", "fraction": 0.5, "period": 86400}}})
        assert r.status_code == 201, r.text
        for age in range(20, 30):
            r = self.client.post("/v1/datasets/days/blocks", headers=self.owner,
                                 json={"block": age})
            assert r.status_code == 201, r.text
        for url, body in (("/v1/datasets/days/grants", {"analyst": "ana"}),):
            assert self.client.post(url, headers=self.owner, json=body).status_code == 201
        r = self.client.put("/v1/datasets/days/quotas", headers=self.owner, json={
            "scope": "analyst", "name": "ana", "budget": {"type": "pure", "eps": 1000.0}})
        assert r.status_code == 200, r.text
        r = self.client.post("/v1/datasets/people/children", headers=self.ana, json={
            "child": "sv", "kind": "sparse_vector", "spec": {"eps": 1.0, "positives": 50}})
        assert r.status_code == 201, r.text  # a real child, so questions reach it
        self.auth = {"owner": self.owner, "analyst": self.ana,
                     "stranger": {"X-API-Key": "dps_made_up_key"}, "none": {}}
        self._con = sqlite3.connect(self.db)
        self.schema = schemathesis.openapi.from_asgi("/openapi.json", self.app)

    def snapshot(self) -> tuple[dict[str, list[Any]], int]:
        tables = {t: sorted(self._con.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
                  for t in TABLES}
        seq = self._con.execute("SELECT COALESCE(MAX(seq), 0) FROM audit").fetchone()[0]
        return tables, int(seq)

    def send(self, kind: str, **kw: Any) -> Any:
        """Send one request; assert no 5xx and, for a refusal, no ledger write."""
        before, seq = self.snapshot()
        r = self.client.request(**kw)
        SENT[kind] += 1
        STATUS[r.status_code] = STATUS.get(r.status_code, 0) + 1
        what = f"{kw['method']} {kw['url']} -> {r.status_code}: {r.text[:300]}"
        assert r.status_code < 500, what
        if r.status_code >= 400:
            after, _ = self.snapshot()
            changed = [t for t in TABLES if after[t] != before[t]]
            assert not changed, f"refused request wrote {changed}: {what}"
            for event, payload in self._con.execute(
                    "SELECT event, payload FROM audit WHERE seq > ? ORDER BY seq", (seq,)):
                assert event in ("request", "decision"), f"audit {event!r} on {what}"
                if event == "decision":
                    assert json.loads(payload)["admitted"] is False, what
        return r

    def close(self) -> None:
        self._con.close()
        self.store.close()


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory,
         request: pytest.FixtureRequest) -> Iterator[Fuzz]:
    f = Fuzz(tmp_path_factory.mktemp("fuzz"))
    yield f
    f.close()
    rep = request.config.pluginmanager.get_plugin("terminalreporter")
    line = (f"service fuzz: {SENT['schema']} schema-driven + {SENT['budgets']} "
            f"extreme-budget requests sent, {sum(n for c, n in STATUS.items() if c >= 500)} "
            "with status >= 500 (each one fails its test), 0 ledger writes by refusals "
            f"(statuses {dict(sorted(STATUS.items()))})")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if rep is not None and capman is not None:
        with capman.global_and_fixture_disabled():  # shown in the run's log
            rep.write_line("\n" + line)


def _operations() -> list[tuple[str, str]]:
    from dpsieve.ledger import MemoryStore

    app = create_app(Settings(owner_key=OWNER), store=MemoryStore())
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    ops = [r.ok() for r in schema.get_all_operations()]
    return sorted((op.path, op.method.upper()) for op in ops)


OPERATIONS = _operations()
_AUTH_HEADERS = {"authorization", "x-api-key"}


def _printable(v: Any) -> bool:
    return isinstance(v, str) and all(32 <= ord(ch) < 127 for ch in v)


def _schema_property(fuzz: Fuzz, path: str, method: str, data: st.DataObject) -> None:
    op = fuzz.schema[path][method]
    mode = data.draw(st.sampled_from([GenerationMode.POSITIVE, GenerationMode.NEGATIVE]))
    case = data.draw(op.as_strategy(generation_mode=mode))
    who = data.draw(st.sampled_from(["owner", "analyst", "stranger", "none"]))
    for param, real in (("name", data.draw(st.sampled_from(["people", "ana", "days"]))),
                        ("kid", "0" * 16), ("child", "sv")):
        if case.path_parameters and param in case.path_parameters and data.draw(st.booleans()):
            case.path_parameters[param] = real
    if (path, method) == ("/v1/datasets", "POST") and isinstance(case.body, dict) \
            and data.draw(st.booleans()):
        case.body["path"] = fuzz.csv  # a real file, so the budget and name are parsed
    kw = case.as_transport_kwargs()
    headers = {k: v for k, v in kw.get("headers", {}).items()
               if k.lower() not in _AUTH_HEADERS and _printable(k) and _printable(v)}
    headers.update(fuzz.auth[who])
    kw["headers"] = headers
    kw.pop("cookies", None)
    fuzz.send("schema", **kw)


def _schema_test(examples: int) -> Any:
    @settings(max_examples=examples, deadline=None, derandomize=examples == FAST,
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(fuzz: Fuzz, path: str, method: str, data: st.DataObject) -> None:
        _schema_property(fuzz, path, method, data)
    return run


@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_every_operation_never_5xx_and_refusals_write_nothing(
        fuzz: Fuzz, path: str, method: str) -> None:
    _schema_test(FAST)(fuzz, path, method)


@pytest.mark.slow
@pytest.mark.parametrize(("path", "method"), OPERATIONS)
def test_every_operation_never_5xx_and_refusals_write_nothing_long(
        fuzz: Fuzz, path: str, method: str) -> None:
    _schema_test(SLOW)(fuzz, path, method)


def test_the_fuzzer_covers_every_published_operation() -> None:
    """The fuzzed list is the schema's: a new endpoint is fuzzed without editing this file."""
    from dpsieve.ledger import MemoryStore

    app = create_app(Settings(owner_key=OWNER), store=MemoryStore())
    published = {(p, m.upper()) for p, ms in app.openapi()["paths"].items() for m in ms}
    assert set(OPERATIONS) == published
    assert len(OPERATIONS) >= 15


# -- extreme budgets ------------------------------------------------------------------------
#: The issue's range (eps and mu up to 1e3) and the values of its defect list beyond it.
EDGE = [5e-324, 1e-300, 1e-12, 1e-3, 1.0, 50.0, 709.78, 710.0, 1e3, 1e308, 1.7976931348623157e308]
DELTA = [0.0, 5e-324, 1e-300, 1e-12, 1e-6, 0.5, 1 - 1e-16, 1 - 1e-9, 1.0]


def _pos() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(EDGE), st.floats(min_value=5e-324, max_value=1e3))


def _delta() -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(DELTA), st.floats(min_value=0.0, max_value=1.0))


@st.composite
def budgets(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["pure", "approx", "zcdp", "approx_zcdp", "gdp", "rdp"]))
    b: dict[str, Any] = {"type": kind,
                         "neighbouring": draw(st.sampled_from(["add_remove", "replace_one"]))}
    if kind in ("pure", "approx"):
        b["eps"] = draw(_pos())
    if kind in ("approx", "approx_zcdp"):
        b["delta"] = draw(_delta())
    if kind in ("zcdp", "approx_zcdp"):
        b["rho"] = draw(_pos())
    if kind == "gdp":
        b["mu"] = draw(_pos())
    if kind == "rdp":
        orders = draw(st.lists(st.floats(min_value=1.0, max_value=1e3), min_size=1,
                               max_size=4, unique=True))
        b["orders"] = sorted(orders)
        b["values"] = [draw(_pos()) for _ in orders]
    return b


@st.composite
def privacies(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["pure", "approx", "zcdp", "gdp"]))
    p: dict[str, Any] = {"type": kind}
    if kind in ("pure", "approx"):
        p["eps"] = draw(_pos())
    if kind == "approx":
        p["delta"] = draw(_delta())
    if kind == "zcdp":
        p["rho"] = draw(_pos())
    if kind == "gdp":
        p["mu"] = draw(_pos())
    return p


@st.composite
def queries(draw: st.DrawFn) -> dict[str, Any]:
    q: dict[str, Any] = {"privacy": draw(privacies())}
    kind = draw(st.sampled_from(["count", "sum", "mean", "histogram"]))
    q["type"] = kind
    if kind in ("sum", "mean"):
        q["column"] = draw(st.sampled_from(["age", "income", "city"]))
        q["lower"] = draw(st.sampled_from([0.0, -1e308, 1e-320, 20.0]))
        q["upper"] = draw(st.sampled_from([1e-320, 100.0, 1e308, 1e3]))
    if kind == "histogram":
        q["column"] = "city"
        q["categories"] = ["a", "b", "c"]
    return q


def _budget_property(fuzz: Fuzz, n: list[int], budget: dict[str, Any],
                     asks: list[dict[str, Any]]) -> None:
    n[0] += 1
    name = f"edge{n[0]}"
    send = fuzz.send
    r = send("budgets", method="POST", url="/v1/datasets", headers=fuzz.owner,
             json={"name": name, "path": fuzz.csv, "infer_types": True, "budget": budget})
    if r.status_code != 201:
        return
    send("budgets", method="POST", url=f"/v1/datasets/{name}/grants", headers=fuzz.owner,
         json={"analyst": "ana"})
    for q in asks:
        before = len(fuzz.store.history(name))
        r = send("budgets", method="POST", url=f"/v1/datasets/{name}/queries",
                 headers=fuzz.ana, json=q)
        assert len(fuzz.store.history(name)) == before + (r.status_code == 200), r.text
    for who in (fuzz.ana, fuzz.owner):
        send("budgets", method="GET", url=f"/v1/datasets/{name}/budget", headers=who)
        send("budgets", method="GET", url=f"/v1/datasets/{name}/curves", headers=who)
    send("budgets", method="GET", url=f"/v1/datasets/{name}/audit", headers=fuzz.owner)
    send("budgets", method="PUT", url=f"/v1/datasets/{name}/budget", headers=fuzz.owner,
         json=budget)


def _budget_test(examples: int) -> Any:
    @settings(max_examples=examples, deadline=None, derandomize=examples != SLOW,
              suppress_health_check=list(HealthCheck))
    @given(budget=budgets(), asks=st.lists(queries(), min_size=1, max_size=3))
    def run(fuzz: Fuzz, n: list[int], budget: dict[str, Any],
            asks: list[dict[str, Any]]) -> None:
        _budget_property(fuzz, n, budget, asks)
    return run


def _corner(kind: str, v: float, delta: float) -> dict[str, Any]:
    keys = {"pure": ("eps",), "approx": ("eps", "delta"), "zcdp": ("rho",),
            "approx_zcdp": ("rho", "delta"), "gdp": ("mu",)}
    if kind == "rdp":
        return {"type": "rdp", "orders": [1.5, 2.0, 1e3], "values": [v, v, v]}
    return {"type": kind, **{k: delta if k == "delta" else v for k in keys[kind]}}


def test_budget_corners_never_5xx_and_refusals_write_nothing(fuzz: Fuzz) -> None:
    """Every budget type at every edge value (a deterministic sweep: random draws may miss
    a corner such as GDP mu = 1e308, whose filter cannot state its remaining budget)."""
    n = [5_000]
    for i, (kind, v) in enumerate((k, v) for k in ("pure", "approx", "zcdp", "approx_zcdp",
                                                   "gdp", "rdp") for v in EDGE):
        delta = DELTA[i % len(DELTA)]
        ask = {"type": "count", "privacy": _corner(
            {"approx_zcdp": "zcdp", "rdp": "pure"}.get(kind, kind), v, delta)}
        _budget_property(fuzz, n, _corner(kind, v, delta), [ask])


def test_extreme_budgets_never_5xx_and_refusals_write_nothing(fuzz: Fuzz) -> None:
    _budget_test(40)(fuzz, [0])
    assert SENT["budgets"] > 0


@pytest.mark.slow
def test_extreme_budgets_never_5xx_and_refusals_write_nothing_long(fuzz: Fuzz) -> None:
    _budget_test(SLOW * 2)(fuzz, [10_000])


# -- plans asking for (eps, delta) (queries/approx.py; audit h24gaudit) ---------------------
#: eps and delta at and past their ends (inf, NaN, negatives, 0 and 1 included).
APPROX_EPS = [*EDGE, 40.0, 1e6, 1e300, 0.0, -1.0, float("inf"), float("nan")]
APPROX_DELTA = [*DELTA, 2.0, -1e-6, float("nan"), 1e-9]
#: One data set per budget kind the (eps, delta) plans meet (name -> budget).
APPROX_BUDGETS = {"ax-azcdp": {"type": "approx_zcdp", "rho": 1e6, "delta": 0.5},
                  "ax-approx": {"type": "approx", "eps": 1e3, "delta": 1e-3},
                  "ax-pure": {"type": "pure", "eps": 1e3},
                  "ax-zcdp": {"type": "zcdp", "rho": 1e3}}
#: The charges an answered (eps, delta) plan may have on each (docs/proofs/queries.md §8).
APPROX_CHARGES = {"ax-azcdp": ("pure", "approx", "zcdp", "approx_zcdp"),
                  "ax-approx": ("pure", "approx"), "ax-pure": ("pure",),
                  "ax-zcdp": ("pure", "zcdp")}


@st.composite
def approx_plans(draw: st.DrawFn) -> dict[str, Any]:
    privacy = {"type": "approx", "eps": draw(st.one_of(st.sampled_from(APPROX_EPS),
                                                       st.floats(1e-6, 1e3))),
               "delta": draw(st.one_of(st.sampled_from(APPROX_DELTA),
                                       st.floats(0.0, 1.0)))}
    agg = draw(st.sampled_from([
        {"type": "count"}, {"type": "sum", "column": "income", "lower": 0, "upper": 2000},
        {"type": "mean", "column": "age", "lower": 0, "upper": 100},
        {"type": "variance", "column": "age", "lower": 0, "upper": 1e308},
        {"type": "histogram", "column": "city", "categories": ["a", "b", "c"]}]))
    plan: dict[str, Any] = {"type": "query", "privacy": privacy, "aggregations": [agg]}
    g = draw(st.sampled_from(["none", "keys", "select"]))
    if g == "keys":
        plan["group_by"], plan["keys"] = ["city"], [["a"], ["b"], ["z"]]
    elif g == "select":
        plan["group_by"] = ["city"]
        plan["select"] = {"delta": draw(st.sampled_from([1e-6, 5e-324, 0.5, 1 - 1e-16]))}
    return plan


@pytest.fixture
def approx_fuzz(tmp_path: Path) -> Iterator[Fuzz]:
    """A service of its own with the analyst's request and refusal quotas lifted (a 429
    depends on timing, not on the plan; the quotas have their own tests)."""
    f = Fuzz(tmp_path, analyst_requests_per_second=0, refusals_per_window=0,
             queued_per_window=0)
    yield f
    f.close()


def test_approx_plans_never_5xx_and_refusals_write_nothing(approx_fuzz: Fuzz) -> None:
    """240 (eps, delta) plans (eps and delta at every edge, NaN and inf sent as a careless
    client does) on data sets with an approximate-zCDP, an (eps, delta), a pure and a zCDP
    budget: never a 5xx, a refusal writes nothing, an answer one spend. An eps of 1e6 or
    more was a 500 (the variance ratio divided by a Laplace std of 0.0)."""
    fuzz = approx_fuzz
    for name, budget in APPROX_BUDGETS.items():
        r = fuzz.send("budgets", method="POST", url="/v1/datasets", headers=fuzz.owner,
                      json={"name": name, "path": fuzz.csv, "infer_types": True,
                            "budget": budget})
        assert r.status_code == 201, r.text
        r = fuzz.send("budgets", method="POST", url=f"/v1/datasets/{name}/grants",
                      headers=fuzz.owner, json={"analyst": "ana"})
        assert r.status_code == 201, r.text
    seen: dict[int, int] = {}

    @settings(max_examples=240, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(plan=approx_plans(), name=st.sampled_from(sorted(APPROX_BUDGETS)))
    def run(plan: dict[str, Any], name: str) -> None:
        before = len(fuzz.store.history(name))
        r = fuzz.send("budgets", method="POST", url=f"/v1/datasets/{name}/queries",
                      headers={**fuzz.ana, "Content-Type": "application/json"},
                      content=json.dumps(plan).encode())
        seen[r.status_code] = seen.get(r.status_code, 0) + 1
        assert len(fuzz.store.history(name)) == before + (r.status_code == 200), r.text
        if r.status_code == 200:  # charged in a currency the budget takes (§8)
            assert r.json()["cost"]["query"]["type"] in APPROX_CHARGES[name], r.text
    run()
    print(f"approx plans: statuses {dict(sorted(seen.items()))}")
    assert seen.get(200, 0) > 0, seen  # the fuzzer reaches answers, not only refusals
    assert sum(seen.values()) >= 200, seen
