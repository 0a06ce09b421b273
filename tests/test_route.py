"""One HTTP query's route through the package (issue 27: "no module entered twice on the
way from the route to the ledger and back").

``sys.setprofile`` records every call of a dpsieve function while one ``POST
/v1/datasets/{name}/queries`` runs (a plan on a Parquet file, a SQLite ledger). For
every stack below the route (``service.routes.queries``), consecutive frames of one
module collapsed into one, no module may appear twice -- a call that climbs back into a
module it came through -- not even within one package: a base class's template method
calls its subclass's implementation, which calls helpers kept in modules of their own
(``filters._state``, ``ledger.loaders``, ``ledger.cursor``), never back into the base's
module. The stacks at the ledger's spend and answer record must be exactly
``routes.queries > session.core > ledger.sql``.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

import numpy as np
import pandas as pd

OWNER = "owner-key-for-the-route-test-0123456789"
ROUTE = "dpsieve.service.routes.queries"
PLAN = {"type": "query", "privacy": {"type": "pure", "eps": 0.5},
        "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["g"],
        "keys": [["a"], ["b"]], "contribution": {"max_groups": 1}}


def _module(frame: FrameType) -> str | None:
    m = str(frame.f_globals.get("__name__", ""))
    return m if m.startswith("dpsieve") else None


def _stack(frame: FrameType | None) -> tuple[tuple[str, str], ...]:
    """(module, function) of each dpsieve module on the stack, outermost first, runs of
    one module collapsed (the outermost frame of each run kept)."""
    out: list[tuple[str, str]] = []
    while frame is not None:
        m = _module(frame)
        if m is not None:
            if out and out[-1][0] == m:
                out[-1] = (m, frame.f_code.co_name)
            else:
                out.append((m, frame.f_code.co_name))
        frame = frame.f_back
    return tuple(out[::-1])


def _route(tmp: Path) -> list[tuple[tuple[str, str], ...]]:
    """The stacks of every dpsieve call made while the query runs (warm: once before)."""
    from fastapi.testclient import TestClient

    from dpsieve.ledger import SQLiteStore
    from dpsieve.service import Settings, create_app

    rng = np.random.default_rng(0)
    pd.DataFrame({"pid": np.arange(200) % 50, "x": rng.normal(size=200),
                  "g": rng.choice(["a", "b"], 200)}).to_parquet(tmp / "d.parquet")
    stacks: list[tuple[tuple[str, str], ...]] = []
    active = [False]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if active[0] and event == "call" and _module(frame) is not None:
            stacks.append(_stack(frame))
    threading.setprofile(profile)  # the test client's portal thread starts after this
    try:
        store = SQLiteStore(tmp / "l.db")
        with TestClient(create_app(Settings(owner_key=OWNER), store=store)) as c:
            own = {"Authorization": f"Bearer {OWNER}"}
            key = c.post("/v1/analysts", headers=own, json={"name": "ana"}).json()["api_key"]
            r = c.post("/v1/datasets", headers=own, json={
                "name": "d", "path": str(tmp / "d.parquet"), "privacy_unit": "pid",
                "budget": {"type": "pure", "eps": 10.0}})
            assert r.status_code == 201, r.text
            c.post("/v1/datasets/d/grants", headers=own, json={"analyst": "ana"})
            ana = {"X-API-Key": key}
            assert c.post("/v1/datasets/d/queries", headers=ana, json=PLAN).status_code == 200
            sys.setprofile(profile)
            active[0] = True
            try:
                r = c.post("/v1/datasets/d/queries", headers=ana, json=PLAN)
            finally:
                active[0] = False
                sys.setprofile(None)
            assert r.status_code == 200, r.text
        store.close()
    finally:
        threading.setprofile(None)  # type: ignore[arg-type]
    return [s[[m for m, _ in s].index(ROUTE):] for s in stacks
            if ROUTE in [m for m, _ in s]]


def _reentries(stack: tuple[tuple[str, str], ...]) -> list[str]:
    """Modules entered twice on one stack (within one package too)."""
    bad = []
    mods = [m for m, _ in stack]
    for j, m in enumerate(mods):
        if m in mods[:j]:
            bad.append(" > ".join(f"{x.removeprefix('dpsieve.')}:{f}" for x, f in stack))
    return bad


def test_no_module_is_entered_twice_on_one_http_query(tmp_path: Path) -> None:
    stacks = _route(tmp_path)
    assert len(stacks) > 100  # the profile saw the query (a plan: hundreds of calls)
    bad = sorted({b for s in stacks for b in _reentries(s)})
    assert not bad, "\n".join(bad)
    at_ledger = {f: [m for m, _ in s] for s in stacks for m, f in s[-1:]
                 if m.startswith("dpsieve.ledger") and f in ("spend", "record_answer")}
    assert set(at_ledger) == {"spend", "record_answer"}, at_ledger
    for f, mods in at_ledger.items():
        assert mods == [ROUTE, "dpsieve.session.core", "dpsieve.ledger.sql"], (f, mods)


def test_the_check_sees_a_climb_back() -> None:
    """A stack that climbs back into a module is reported, across packages and within
    one (a base class's dispatch calling back into its own module); a stack entering
    each module once is not."""
    climb = (("dpsieve.service.routes.queries", "query"), ("dpsieve.session.core", "x"),
             ("dpsieve.queries.requests", "prepare"), ("dpsieve.session.core", "y"))
    assert _reentries(climb)
    callback = (("dpsieve.session.source", "schema"), ("dpsieve.session.schema",
                "resolve_schema"), ("dpsieve.session.source", "actual"))
    assert _reentries(callback)
    dispatch = (("dpsieve.ledger.base", "load_filters"), ("dpsieve.ledger.sql", "load_filters"),
                ("dpsieve.ledger.base", "parsed_initial"))
    assert _reentries(dispatch)
    one_way = (("dpsieve.ledger.base", "load_filters"), ("dpsieve.ledger.sql", "load_filters"),
               ("dpsieve.ledger.loaders", "parsed_initial"))
    assert not _reentries(one_way)
