"""The differential outcome harness: one plan run on neighbouring data sets, every entry.

An analyst observes the whole outcome of a query -- answer or refusal, error class and
text, status code -- so it must not depend on whether one person's rows are in the data
(beyond the noisy answer, which the charge covers). :func:`neighbours` builds a pair of
data sets ``(D, D + one unit)`` whose added unit holds adversarial rows (NaN, +-inf,
NULL, each type's extremes, strings with NUL bytes, quotes, line breaks, long ones);
:func:`random_plan` draws plans with adversarial constants, column names, bounds, deltas
and privacy; :class:`Pair` runs a plan on both data sets through one entry point:

* ``frame`` / ``polars`` -- ``Session.run`` on a pandas / polars frame;
* ``spark`` -- ``Session.run`` on a Spark DataFrame (a local Spark session; the entry is
  skipped with the reason where there is no Java runtime or pyspark:
  :func:`spark_skip_reason`);
* ``parquet`` -- ``Session.run`` on a Parquet file (DuckDB's SQL, a database per query);
* ``kept`` -- the same with the service's kept engine (:class:`dpsieve.session.data.
  FileEngines`: the file held in memory);
* ``csv`` -- ``Session.run`` on a CSV file with the owner's declared types;
* ``http`` -- ``POST /v1/datasets/{name}/queries`` on a service with both registered;
* ``cli`` -- ``dpsieve query NAME --file`` on a ledger with both registered.

:meth:`Pair.compare` returns the differences found; an empty list is the pass.
"""

from __future__ import annotations

import json
import math
import random
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

OWNER = "owner-key-for-differential-0123456789"
ENTRIES = ("frame", "polars", "spark", "parquet", "kept", "csv", "http", "cli")
#: The owner's declarations: the same on both data sets (never read from the values).
TYPES = {"pid": "integer", "n": "integer", "x": "float", "s": "string", "b": "boolean",
         "v": "integer", "k0": "string", "gid": "integer"}
BUDGET = {"type": "approx_zcdp", "rho": 1e6, "delta": 1e-2}
I64 = (-(2**63), 2**63 - 1)


def _base(rng: np.random.Generator, units: int = 24) -> pd.DataFrame:
    rows = int(units * 2.5)
    pid = rng.integers(0, units, rows)
    return pd.DataFrame({
        "pid": pd.array(pid, dtype="Int64"),
        "n": pd.array(rng.integers(-5, 50, rows), dtype="Int64"),
        "x": np.round(rng.normal(10.0, 5.0, rows), 3),
        "s": pd.array(rng.choice(["a", "b", "c", "d"], rows), dtype=object),
        "b": pd.array(rng.choice([True, False], rows), dtype="boolean"),
        "v": pd.array(rng.integers(0, 4, rows), dtype="Int64"),
        "k0": pd.array(rng.choice(["u", "w"], rows), dtype=object),
        "gid": pd.array(rng.integers(0, 3, rows), dtype="Int64"),
    })


#: Adversarial values per column for the added unit's rows.
ODD_ROWS: dict[str, list[Any]] = {
    "n": [None, I64[0], I64[1], 0, -1],
    "x": [math.nan, math.inf, -math.inf, 1.7976931348623157e308, -0.0, 5e-324, None],
    "s": [None, "", "\x00", "a\x00b", "é", "💥", "x" * 5000, "'; DROP TABLE t; --",
          '"quoted, with comma"', "line\nbreak", ",", "a"],
    "b": [None, True, False],
    "v": [None, I64[1], 3],
    "k0": [None, "u", "\\N", "NULL"],
    "gid": [None, I64[0], 2],
}


def neighbours(seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(D, D + one unit)``: the unit has 1 to 40 adversarial rows; its id is an int64
    extreme or an ordinary new id."""
    rng = np.random.default_rng(seed)
    d = _base(rng)
    r = random.Random(seed)
    unit = r.choice([I64[1], I64[0], 4242, 0 if r.random() < 0.3 else 999])
    rows = r.choice([1, 2, 5, 40])
    if unit in d["pid"].tolist():  # the added unit must be new
        unit = I64[1] - 7
    dtypes = {"n": "Int64", "v": "Int64", "gid": "Int64", "b": "boolean", "s": object,
              "k0": object}
    extra: dict[str, Any] = {"pid": pd.array([unit] * rows, dtype="Int64")}
    for c, odd in ODD_ROWS.items():
        vals = [r.choice(odd) for _ in range(rows)]
        if c == "x":
            extra[c] = np.asarray([math.nan if v is None else v for v in vals], dtype=float)
        else:
            extra[c] = pd.array(vals, dtype=dtypes[c])
    e = pd.DataFrame(extra)
    return d, pd.concat([d, e], ignore_index=True)


# -- plans ------------------------------------------------------------------------------------
#: Valid values of each column's type, extremes included.
TYPED: dict[str, list[Any]] = {
    "integer": [0, 1, 3, -1, 49, I64[0], I64[1], 2**31, -(2**31) - 1],
    "float": [0.0, 2.5, -0.0, 10, 1e308, -1e308, 5e-324, 1.7976931348623157e308],
    "string": ["a", "b", "u", "", "a\x00b", "é", "x" * 5000, "'", "\\N", "line\nbreak"],
    "boolean": [True, False],
}
#: Values that are wrong somewhere: out of every range, non-finite, of no type, invalid text.
ODD = [2**63, -(2**63) - 1, 2**70, 2**130, 10**400, math.inf, -math.inf, math.nan, "\ud800",
       None, [1, 2], {"x": 1}, True, "1", 1.5]
BOUNDS = [(-10, 10), (0, 100), (0, 1), (-1e3, 1e3), (0, 1e297), (-5e-324, 5e-324)]
ODD_BOUNDS = [(0, 1e306), (-1.7e308, 1.7e308), (10, 0), (0, math.inf), (math.nan, 1),
              (0, 10**400), ("0", 1), (None, None), (True, 2)]
DELTAS = [1e-6, 1e-9, 5e-324, 1e-308, 0.5]
ODD_DELTAS = [0, 1, -1e-6, math.nan, "1e-6", 2.0]
PRIVACY = [{"type": "pure", "eps": 0.5}, {"type": "pure", "eps": 2.0},
           {"type": "zcdp", "rho": 0.5}, {"type": "approx", "eps": 1.0, "delta": 1e-6},
           {"type": "approx", "eps": 0.5, "delta": 1e-9}]
#: The (eps, delta) ones: eps at the float range's ends and past it, delta 0 (the pure
#: plan), 1, negative, subnormal, NaN, and conversions at the extremes (eps 1e-20: a rho
#: whose Gaussian is past the sampler's range; eps 40: Laplace's std below 1e-8).
ODD_APPROX = [(1e-300, 1e-6), (1e300, 1e-6), (math.inf, 1e-6), (1.7976931348623157e308, 0.5),
              (1.0, 0.0), (1.0, 1.0), (1.0, 1e-300), (1.0, -1e-6), (1.0, 5e-324),
              (1e-20, 0.5), (40.0, 1e-6), (1.0, 1 - 2**-53), (1.0, math.nan)]
ODD_PRIVACY = [{"type": "pure", "eps": 1e-300}, {"type": "pure", "eps": 1e300},
               {"type": "pure", "eps": 5e-324}, {"type": "zcdp", "rho": 1e-300},
               {"type": "pure", "eps": math.inf}, {"type": "pure", "eps": True},
               {"type": "gdp", "mu": 1.0},
               *({"type": "approx", "eps": e, "delta": d} for e, d in ODD_APPROX)]
NUMERIC = ["n", "x", "b", "v", "gid"]
OPS = ["==", "!=", "<", "<=", ">", ">=", "in", "not_in", "is_null", "not_null"]


def _typed(r: random.Random, col: str) -> Any:
    return r.choice(TYPED[TYPES[col]])


def _agg(r: random.Random) -> dict[str, Any]:
    kind = r.choice(["count", "count", "sum", "mean", "variance", "quantile", "histogram"])
    if kind == "count":
        return {"type": "count", "per": r.choice(["row", "unit"])}
    if kind == "histogram":
        col = r.choice(["s", "n", "b", "k0", "v", "x"])
        cats = list(dict.fromkeys(_typed(r, col) for _ in range(r.choice([1, 2, 4]))))
        return {"type": "histogram", "column": col, "categories": cats}
    lo, hi = r.choice(BOUNDS)
    a: dict[str, Any] = {"type": kind, "column": r.choice(NUMERIC), "lower": lo, "upper": hi}
    if kind in ("sum", "mean"):
        a["per"] = r.choice(["row", "unit"])
    if kind == "quantile":
        a["quantiles"] = r.choice([[0.5], [0.1, 0.9]])
    return a


def _pred(r: random.Random) -> dict[str, Any]:
    op = r.choice(OPS)
    col = r.choice(list(TYPES))
    if TYPES[col] == "boolean" and op not in ("==", "!=", "in", "not_in", "is_null",
                                             "not_null"):
        op = "=="
    p: dict[str, Any] = {"column": col, "op": op}
    if op in ("in", "not_in"):
        p["value"] = list(dict.fromkeys(_typed(r, col) for _ in range(r.choice([1, 2, 3]))))
    elif op not in ("is_null", "not_null"):
        p["value"] = _typed(r, col)
    return p


def _valid_plan(r: random.Random) -> dict[str, Any]:
    plan: dict[str, Any] = {"type": "query", "privacy": r.choice(PRIVACY),
                            "aggregations": [_agg(r) for _ in range(r.choice([1, 1, 2]))],
                            "contribution": {"max_groups": r.choice([1, 2, 5]),
                                             "max_rows": r.choice([1, 3, 10])}}
    if r.random() < 0.6:
        plan["where"] = [_pred(r) for _ in range(r.choice([1, 2]))]
    g = r.random()
    if g < 0.3:
        col = r.choice(["s", "n", "b", "k0", "gid", "v"])
        keys = list(dict.fromkeys(_typed(r, col) for _ in range(r.choice([1, 2, 3]))))
        plan["group_by"], plan["keys"] = [col], [[k] for k in keys]
    elif g < 0.55:
        plan["group_by"] = r.sample(["s", "n", "b", "k0", "gid", "v"], r.choice([1, 2]))
        plan["select"] = {"delta": r.choice(DELTAS)}
    return plan


def _perturb(r: random.Random, plan: dict[str, Any]) -> None:
    """One adversarial change: a constant, a column name, bounds, a delta, the privacy,
    a contribution bound or a category."""
    what = r.choice(["const", "const", "name", "bounds", "delta", "privacy", "contrib",
                     "category", "key"])
    if what == "const":
        plan.setdefault("where", []).append(
            {"column": r.choice(list(TYPES)), "op": r.choice(OPS[:8]),
             "value": r.choice(ODD)})
    elif what == "name":
        plan.setdefault("where", []).append(
            {"column": r.choice(["nope", "", "_u", "\ud800", "V", '"s"']), "op": "is_null"})
    elif what == "bounds":
        lo, hi = r.choice(ODD_BOUNDS)
        plan["aggregations"].append({"type": r.choice(["sum", "mean", "variance"]),
                                     "column": r.choice(NUMERIC), "lower": lo, "upper": hi})
    elif what == "delta":
        plan["group_by"] = plan.get("group_by") or ["s"]
        plan.pop("keys", None)
        plan["select"] = {"delta": r.choice([*ODD_DELTAS, 5e-324, 1e-308])}
    elif what == "privacy":
        plan["privacy"] = r.choice(ODD_PRIVACY)
    elif what == "contrib":
        plan["contribution"] = {"max_groups": r.choice([0, 40, 10**9, -1, 1.5]),
                                "max_rows": r.choice([0, 10**7, None])}
    elif what == "category":
        col = r.choice(["s", "n", "b", "v", "x"])
        plan["aggregations"].append({"type": "histogram", "column": col,
                                     "categories": [_typed(r, col), r.choice(ODD)]})
    else:
        col = r.choice(["s", "n", "gid", "v"])
        plan["group_by"], plan["keys"] = [col], [[_typed(r, col)], [r.choice(ODD)]]
        plan.pop("select", None)


def random_plan(r: random.Random) -> dict[str, Any]:
    """A plan: valid (extreme but legal values), or with one adversarial change (a
    constant, name, bounds, delta, privacy, contribution, category or key)."""
    plan = _valid_plan(r)
    if r.random() < 0.4:
        _perturb(r, plan)
    return plan


# -- running ----------------------------------------------------------------------------------
@dataclass
class Outcome:
    kind: str  # ok | refused | failed (after a charge) | error (anything else)
    text: str = ""
    status: int = 0
    cost: Any = None

    def key(self) -> tuple[Any, ...]:
        """What must be identical on neighbours (the answer's value is noisy: not in it)."""
        return (self.kind, self.text, self.status, json.dumps(self.cost, sort_keys=True))


def _spark_support() -> Any:
    """tests/queries/spark_support.py (the local Spark session the Spark tests share)."""
    here = str(Path(__file__).resolve().parents[1] / "queries")
    if here not in sys.path:
        sys.path.append(here)
    import spark_support

    return spark_support


def spark_skip_reason() -> str | None:
    """Why the Spark entry cannot run here (no pyspark, no Java runtime), or None."""
    reason: str | None = _spark_support().skip_reason()
    return reason


def spark_frame(d: pd.DataFrame) -> Any:
    """``d`` as a Spark DataFrame of the declared types (every value as it is: NaN and
    +-inf are doubles, pandas' NA is NULL)."""
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    spark = _spark_support().local_session()
    kinds = {"integer": LongType(), "float": DoubleType(), "string": StringType(),
             "boolean": BooleanType()}
    schema = StructType([StructField(c, kinds[TYPES[c]], True) for c in d.columns])

    def value(v: Any, t: str) -> Any:
        if v is None or v is pd.NA:
            return None
        if t == "integer":
            return int(v)
        if t == "boolean":
            return bool(v)
        return float(v) if t == "float" else str(v)
    rows = [tuple(value(v, TYPES[c]) for c, v in zip(d.columns, r, strict=True))
            for r in d.astype(object).itertuples(index=False, name=None)]
    return spark.createDataFrame(rows, schema)


def _declarations() -> list[dict[str, str]]:
    return [{"name": n, "type": t} for n, t in TYPES.items()]


class Pair:
    """A plan run on both data sets of a neighbouring pair through one entry point."""

    def __init__(self, entry: str, d0: pd.DataFrame, d1: pd.DataFrame, tmp: Path,
                 budget: dict[str, Any] | None = None) -> None:
        self.entry = entry
        self.budget = BUDGET if budget is None else budget
        self.dir = tmp / f"{entry}-{uuid.uuid4().hex[:8]}"
        self.dir.mkdir(parents=True)
        self.frames = (d0, d1)
        self._ctx: Any = None
        self.paths: list[str] = []
        if entry in ("parquet", "kept", "http", "cli"):
            for i, d in enumerate(self.frames):
                p = self.dir / f"d{i}.parquet"
                d.to_parquet(p)
                self.paths.append(str(p))
        elif entry == "csv":
            for i, d in enumerate(self.frames):
                p = self.dir / f"d{i}.csv"
                d.to_csv(p, index=False)
                self.paths.append(str(p))
        if entry in ("frame", "polars", "spark", "parquet", "kept", "csv"):
            self.sessions = [self._session(i) for i in range(2)]
        elif entry == "http":
            self._http()
        elif entry == "cli":
            self._cli()
        else:
            raise ValueError(entry)

    def _session(self, i: int) -> Any:
        from dpsieve import Session
        from dpsieve.accounting.events import description_from_json
        from dpsieve.session.data import FileEngines

        budget = description_from_json(self.budget)
        if self.entry == "frame":
            return Session(self.frames[i], budget=budget, privacy_unit="pid")
        if self.entry == "polars":
            import polars as pl

            return Session(pl.from_pandas(self.frames[i]), budget=budget, privacy_unit="pid")
        if self.entry == "spark":
            return Session(spark_frame(self.frames[i]), budget=budget, privacy_unit="pid")
        engine = FileEngines().get(self.paths[i], TYPES) if self.entry == "kept" else None
        return Session(self.paths[i], budget=budget, privacy_unit="pid", engine=engine,
                       column_types=TYPES if self.entry == "csv" else None)

    def _http(self) -> None:
        from fastapi.testclient import TestClient

        from dpsieve.ledger import SQLiteStore
        from dpsieve.service import Settings, create_app

        self.store = SQLiteStore(self.dir / "ledger.db")
        # hundreds of queries and refusals as one analyst, as fast as the machine allows:
        # the request quota and the refusal and queue caps are lifted (a 429 depends on
        # timing, not on the data; the limits are tested in tests/system)
        app = create_app(Settings(owner_key=OWNER, max_body_bytes=5_000_000,
                                  analyst_requests_per_second=0, refusals_per_window=0,
                                  queued_per_window=0), store=self.store)
        self._ctx = TestClient(app, raise_server_exceptions=False)
        self.client = self._ctx.__enter__()
        own = {"Authorization": f"Bearer {OWNER}"}
        r = self.client.post("/v1/analysts", headers=own, json={"name": "ana"})
        assert r.status_code == 201, r.text
        self.key = {"X-API-Key": r.json()["api_key"], "Content-Type": "application/json"}
        for i, p in enumerate(self.paths):
            r = self.client.post("/v1/datasets", headers=own, json={
                "name": f"d{i}", "path": p, "budget": self.budget, "privacy_unit": "pid",
                "columns": _declarations()})
            assert r.status_code == 201, r.text
            r = self.client.post(f"/v1/datasets/d{i}/grants", headers=own,
                                 json={"analyst": "ana"})
            assert r.status_code == 201, r.text

    def _cli(self) -> None:
        from typer.testing import CliRunner

        from dpsieve.cli import app as cli_app

        self.runner, self.app = CliRunner(), cli_app
        self.url = f"sqlite:///{self.dir / 'ledger.db'}"
        for i, p in enumerate(self.paths):
            r = self.runner.invoke(self.app, [
                "budget", "set", f"d{i}", "--path", p, "--database-url", self.url,
                "--budget", json.dumps(self.budget), "--privacy-unit", "pid",
                "--columns", json.dumps(_declarations())])
            assert r.exit_code == 0, r.output

    # -- one data set ---------------------------------------------------------------------
    def _run_session(self, i: int, plan: dict[str, Any]) -> Outcome:
        from dpsieve.errors import DPError, QueryFailedError

        try:
            r = self.sessions[i].run(plan)
        except QueryFailedError as e:
            return Outcome("failed", str(e))
        except DPError as e:
            return Outcome("refused", f"{type(e).__name__}: {e}")
        except Exception as e:  # the defect
            return Outcome("error", f"{type(e).__name__}: {e}")
        return Outcome("ok", cost=r.cost.to_dict())

    def _run_http(self, i: int, plan: dict[str, Any]) -> Outcome:
        try:
            body = json.dumps(plan)  # NaN and Infinity as a careless client sends them
        except (TypeError, ValueError) as e:
            return Outcome("refused", f"not JSON: {type(e).__name__}")
        r = self.client.post(f"/v1/datasets/d{i}/queries", content=body.encode(
            "utf-8", "surrogatepass"), headers=self.key)
        if r.status_code == 200:
            return Outcome("ok", status=200, cost=r.json()["cost"])
        d = r.json() if r.headers.get("content-type", "").startswith("application/json") \
            else {}
        kind = "failed" if d.get("error") == "query_failed" else (
            "refused" if 400 <= r.status_code < 500 else "error")
        return Outcome(kind, r.text, r.status_code)

    def _run_cli(self, i: int, plans: list[dict[str, Any]]) -> list[Outcome]:
        path = self.dir / f"q{i}-{uuid.uuid4().hex[:8]}.jsonl"
        lines = []
        for p in plans:
            try:
                lines.append(json.dumps(p))
            except (TypeError, ValueError):
                lines.append('{"type": "not json"}')
        path.write_bytes(("".join(x + "\n" for x in lines)).encode("utf-8", "surrogatepass"))
        r = self.runner.invoke(self.app, ["query", f"d{i}", "--file", str(path),
                                          "--database-url", self.url])
        crashed = r.exception is not None and not isinstance(r.exception, SystemExit)
        if r.exit_code not in (0, 1) or crashed:
            kind = "refused" if r.exit_code == 2 and not crashed else "error"
            return [Outcome(kind, r.output, r.exit_code)] * len(plans)
        outs = []
        for line in r.stdout.strip().splitlines():
            d = json.loads(line)
            if "refused" in d:
                outs.append(Outcome("refused", json.dumps(d, sort_keys=True)))
            elif "error" in d:
                failed = "charged, but its computation failed" in json.dumps(d)
                outs.append(Outcome("failed" if failed else "refused",
                                    json.dumps(d, sort_keys=True)))
            else:
                outs.append(Outcome("ok", cost=d["cost"]))
        return outs

    def run(self, plans: list[dict[str, Any]]) -> list[tuple[Outcome, Outcome]]:
        """Each plan on D, then on D + the unit (the same order on both ledgers)."""
        if self.entry == "cli":
            a, b = self._run_cli(0, plans), self._run_cli(1, plans)
            return list(zip(a, b, strict=True))
        run = self._run_http if self.entry == "http" else self._run_session
        return [(run(0, p), run(1, p)) for p in plans]

    def compare(self, plans: list[dict[str, Any]]) -> list[str]:
        """The differences: an outcome that differs between D and D + the unit, and any
        failure after a charge or unexpected error (on either)."""
        bad = []
        for p, (a, b) in zip(plans, self.run(plans), strict=True):
            if a.key() != b.key():
                bad.append(f"{self.entry}: differs on neighbours: {a.key()} != {b.key()} "
                           f"for {p!r}")
            for o in (a, b):
                if o.kind in ("failed", "error"):
                    bad.append(f"{self.entry}: {o.kind} {o.text[:300]!r} for {p!r}")
        return bad

    def close(self) -> None:
        if self._ctx is not None:
            self._ctx.__exit__(None, None, None)
