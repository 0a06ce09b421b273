"""The three public entry points behind one interface, for the privacy-edge tests.

Every test in ``tests/privacy_edges/`` talks to dpsieve through :class:`Entry` only:

* ``session`` -- :meth:`dpsieve.Session.run` on the CSV file;
* ``http``    -- ``POST /v1/datasets/{name}/queries`` of :func:`dpsieve.service.create_app`
                 (in process, an analyst key, a SQLite ledger);
* ``cli``     -- ``dpsieve budget set`` then ``dpsieve query --file`` (a SQLite ledger);

and, not in :data:`ENTRIES` (the audits that need thousands of runs use it in the default
suite, the three above in the slow one):

* ``frame``   -- :meth:`dpsieve.Session.run` on the pandas DataFrame itself (the pandas
                 engine, an in-memory ledger): the same path as ``session`` from the plan
                 to the ledger, ~2 ms a run instead of ~60 ms (DuckDB opens the CSV file
                 on every run).

So the tests keep guarding whatever the query layer behind them becomes. An outcome is
``ok`` (an answer and the charge the ledger recorded), ``refused`` (a clean 4xx / a
``ValidationError``-like refusal / exit code 2), or ``error`` (anything else: a 5xx, a
traceback, an unexpected exception). ``spent()`` is the ledger's spent epsilon as an
exact Fraction (the audit budgets are pure DP), read from the ledger itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

import pandas as pd

OWNER = "owner-key-for-edge-tests-0123456789"
ENTRIES = ("session", "http", "cli")
#: A very large pure-DP budget: the audits repeat queries hundreds of times.
BIG = 1e9


@dataclass
class Outcome:
    kind: str  # "ok" | "refused" | "error"
    value: Any = None
    cost: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    status: int = 0
    noise: dict[str, Any] = field(default_factory=dict)
    #: the lattice internals of a plan's answer (granularity, sensitivities, lattice scale)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


class Entry:
    """One data set behind one entry point, under a pure-DP budget (replace-one or not)."""

    def __init__(self, name: str, frame: pd.DataFrame, tmp: Path, *, eps: float = BIG,
                 neighbouring: str = "add_remove", budget: dict[str, Any] | None = None,
                 unit: str | None = None) -> None:
        self.name = name
        self.dir = tmp / f"{name}-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(parents=True)
        self.csv = self.dir / "data.csv"
        frame.to_csv(self.csv, index=False)
        self.budget = budget or {"type": "pure", "eps": eps, "neighbouring": neighbouring}
        self._client: Any = None
        self._ctx: Any = None
        self.db = self.dir / "ledger.db"
        if name == "frame":
            from dpsieve import Session
            from dpsieve.accounting.events import description_from_json
            from dpsieve.ledger import MemoryStore

            self.store = MemoryStore()
            self.session = Session(frame, budget=description_from_json(self.budget),
                                   store=self.store, budget_id="d", privacy_unit=unit)
        elif name == "session":
            from dpsieve import Session
            from dpsieve.accounting.events import description_from_json
            from dpsieve.ledger import SQLiteStore

            self.store = SQLiteStore(self.db)
            from dpsieve.queries.engines.files import infer_types

            self.session = Session(str(self.csv), budget=description_from_json(self.budget),
                                   store=self.store, budget_id="d", privacy_unit=unit,
                                   column_types=infer_types(str(self.csv)))
        elif name == "http":
            from fastapi.testclient import TestClient

            from dpsieve.ledger import SQLiteStore
            from dpsieve.service import Settings, create_app

            self.store = SQLiteStore(self.db)
            # the audits send hundreds of queries (and refusals) as one analyst: its
            # request quota and refusal cap are lifted (they are tested in tests/system)
            app = create_app(Settings(owner_key=OWNER, max_body_bytes=5_000_000,
                                      analyst_requests_per_second=0,
                                      refusals_per_window=0), store=self.store)
            self._ctx = TestClient(app, raise_server_exceptions=False)
            self._client = self._ctx.__enter__()
            own = {"Authorization": f"Bearer {OWNER}"}
            r = self._client.post("/v1/datasets", headers=own, json={
                "name": "d", "path": str(self.csv), "infer_types": True, "budget": self.budget,
                **({} if unit is None else {"privacy_unit": unit})})
            assert r.status_code == 201, r.text
            r = self._client.post("/v1/analysts", headers=own, json={"name": "ana"})
            assert r.status_code == 201, r.text
            self.key = {"X-API-Key": r.json()["api_key"]}
            r = self._client.post("/v1/datasets/d/grants", headers=own, json={"analyst": "ana"})
            assert r.status_code == 201, r.text
        elif name == "cli":
            from typer.testing import CliRunner

            from dpsieve.cli import app as cli_app

            self.runner, self.app = CliRunner(), cli_app
            self.url = f"sqlite:///{self.db}"
            r = self.runner.invoke(self.app, ["budget", "set", "d", "--path", str(self.csv),
                                              "--infer-types",
                                              "--database-url", self.url,
                                              "--budget", json.dumps(self.budget),
                                              *([] if unit is None else
                                                ["--privacy-unit", unit])])
            assert r.exit_code == 0, r.output
            self.store = None
        else:
            raise ValueError(name)

    # -- running ----------------------------------------------------------------------
    def run(self, spec: dict[str, Any]) -> Outcome:
        return self.run_many([spec])[0]

    def run_many(self, specs: list[dict[str, Any]]) -> list[Outcome]:
        """Run queries in order (the CLI runs them in one ``--file`` invocation)."""
        if self.name in ("session", "frame"):
            return [self._session_run(s) for s in specs]
        if self.name == "http":
            return [self._http_run(s) for s in specs]
        return self._cli_run(specs)

    def _session_run(self, spec: dict[str, Any]) -> Outcome:
        from dpsieve.errors import DPError

        try:
            r = self.session.run(spec)
        except DPError as e:
            return Outcome("refused", message=str(e))
        except Exception as e:
            return Outcome("error", message=f"{type(e).__name__}: {e}")
        return Outcome("ok", r.value, r.cost, noise=r.noise, details=r.details)

    def _http_run(self, spec: dict[str, Any]) -> Outcome:
        # the body as Python writes it: NaN and Infinity included, as a careless client would
        r = self._client.post("/v1/datasets/d/queries", content=json.dumps(spec),
                              headers={**self.key, "Content-Type": "application/json"})
        if r.status_code == 200:
            body = r.json()
            return Outcome("ok", body["value"], body["cost"], status=200, noise=body["noise"],
                           details=body.get("details") or {})
        kind = "refused" if 400 <= r.status_code < 500 else "error"
        return Outcome(kind, message=r.text, status=r.status_code)

    def _cli_run(self, specs: list[dict[str, Any]]) -> list[Outcome]:
        path = self.dir / f"q-{uuid.uuid4().hex[:8]}.jsonl"
        path.write_text("".join(json.dumps(s) + "\n" for s in specs))
        r = self.runner.invoke(self.app, ["query", "d", "--file", str(path),
                                          "--database-url", self.url])
        crashed = r.exception is not None and not isinstance(r.exception, SystemExit)
        if r.exit_code not in (0, 1) or crashed:  # 1: answers printed, some refused
            kind = "refused" if r.exit_code == 2 and not crashed else "error"
            return [Outcome(kind, message=r.output, status=r.exit_code)] * len(specs)
        outs = []
        for line in r.stdout.strip().splitlines():
            d = json.loads(line)
            if "refused" in d:
                outs.append(Outcome("refused", message=d["refused"]))
            elif "error" in d:  # a DPError refusing one query (the CLI goes on)
                outs.append(Outcome("refused", message=json.dumps(d)))
            else:
                outs.append(Outcome("ok", d["value"], d["cost"], noise=d["noise"],
                                    details=d.get("details") or {}))
        return outs

    # -- the ledger -------------------------------------------------------------------
    @contextmanager
    def _ledger(self) -> Iterator[Any]:
        if self.store is not None:
            yield self.store
            return
        from dpsieve.ledger import SQLiteStore

        s = SQLiteStore(self.db)
        try:
            yield s
        finally:
            s.close()

    def spends(self) -> int:
        """How many charges the ledger recorded."""
        with self._ledger() as s:
            return len(s.history("d"))

    def charges(self, since: int = 0) -> list[dict[str, Any]]:
        """The privacy descriptions the ledger charged, from the ``since``-th spend on."""
        with self._ledger() as s:
            return [dict(r.cost["query"]) for r in s.history("d")[since:]]

    def remaining(self) -> Any:
        """The ledger filter's own statement of what is left (any budget type)."""
        with self._ledger() as s:
            return s.load_filter("d").remaining()

    def spent(self) -> Fraction:
        """The epsilon spent so far (exact), read from the ledger's filter state."""
        with self._ledger() as s:
            left = s.load_filter("d").remaining()
        return Fraction(self.budget["eps"]) - Fraction(left["exact"])

    def close(self) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
        if self.store is not None:
            self.store.close()


@contextmanager
def entry(name: str, frame: pd.DataFrame, tmp: Path, **kw: Any) -> Iterator[Entry]:
    e = Entry(name, frame, tmp, **kw)
    try:
        yield e
    finally:
        e.close()
