"""Sessions: private queries on one data set, each admitted by a filter before data is read.

A :class:`Session` binds a data set (pandas or polars frame, or a CSV/Parquet file read
through DuckDB) to a budget in a ledger (:mod:`dpsieve.ledger`). Every query runs in the
same order, which is what makes the interaction private and accountable:

1. the query's privacy cost is computed from **public** parameters only (bounds,
   categories, the requested noise level) -- the data is not read;
2. the ledger checks and spends in one durable transaction (refusal raises
   :class:`~dpsieve.errors.BudgetExceededError` and nothing is read);
3. only then is the data loaded and the noisy answer computed;
4. the answer is stored in the ledger (first writer wins) and the stored answer released.

A crash between 2 and 4 loses the answer but keeps the charge (errs on the side of
privacy); retrying with the same idempotency ``key`` is not charged again and releases at
most one answer per charge.

Queries take the privacy to spend as a description. Query plans and the one-aggregation
shapes run through :mod:`dpsieve.queries`, which derives their sensitivities and noise:
``PureDP(eps)`` adds discrete Laplace noise, ``ZCDP(rho)`` discrete Gaussian noise, both
calibrated exactly to the sensitivity under the budget's neighbouring relation
(docs/proofs/queries.md); ``GDP(mu)`` noise is refused before any spend (the discrete
Gaussian is not known to be mu-GDP; docs/session.md). The budget and its filter must be a valid pair
(:func:`filter_for_budget` builds one; see docs/session.md). ``release`` queries run a
:mod:`dpsieve.release` mechanism over a public categorical domain and are charged
PureDP(eps, replace-one) (:func:`_release_plan`).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpsieve import _budget_view
from dpsieve._columns import (
    NUMERIC_KINDS,
    require_kind,
)
from dpsieve._session_release import (
    ReleaseLimits,
    _release_plan,
)
from dpsieve._session_request import (
    LEGACY,
    ROBUST_TYPES,
    Request,
    request_from_spec,
)
from dpsieve._validation import check_positive, fail, fail_private
from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
    description_from_dict,
)
from dpsieve.errors import UnsupportedError, ValidationError
from dpsieve.filters.base import BudgetLeft, Cost
from dpsieve.filters.charge import Workload

if TYPE_CHECKING:
    from dpsieve.filters.base import PrivacyFilter
    from dpsieve.filters.summary import BudgetSummary
    from dpsieve.ledger.base import BudgetStore
    from dpsieve.queries.plan import Query
    from dpsieve.queries.result import Answer
    from dpsieve.queries.schema import Schema

__all__ = [
    "QueryResult",
    "Session",
    "data_column_kinds",
    "data_columns",
    "data_row_count",
    "filter_for_budget",
    "load_frame",
    "parse_description",
]

FloatArray = npt.NDArray[np.float64]
#: The privacy a library call spends: a description, or its JSON (a dict), which the
#: session maps once, where it is given.
PrivacyIn = PrivacyDescription | Mapping[str, Any]
#: A pandas DataFrame (pandas ships no type stubs here).
Frame = Any
#: Upward relative margin on a robust estimator's eps, covering its own ulp rounding.
ROBUST_EPS_MARGIN = 1e-12


@dataclass(frozen=True, slots=True)
class QueryResult:
    """A released answer with its noise description, its cost and the budget left
    (``cost`` and ``remaining`` typed, as the decision states them; ``to_dict()`` is the
    JSON the service and CLI send)."""

    value: Any
    noise: dict[str, Any]
    cost: Cost
    remaining: BudgetLeft
    key: str
    replayed: bool = False
    query: dict[str, Any] = field(default_factory=dict)
    #: The budget left in plain words and numbers (:func:`dpsieve.filters.summary.budget_summary`
    #: with "about N more queries like this one" for this query's charge).
    budget: dict[str, Any] = field(default_factory=dict)
    #: The 95 % interval of ``value`` (noise only; plans carry one per estimate instead).
    interval: Any = None
    #: Lattice internals (granularity, integer sensitivities, lattice scales) for auditors.
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def answer(self) -> Answer:
        """A plan's answer as a typed :class:`~dpsieve.queries.result.Answer` (groups,
        estimates with their 95 % intervals, noise in the answer's units, details)."""
        from dpsieve.queries.result import Answer

        if self.query.get("type") != "query" or not isinstance(self.value, dict):
            raise fail("answer", "QueryResult", "the result of a query plan",
                       self.query.get("type"))
        return Answer.from_dict({**self.value, "noise": self.noise}, self.details)

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value, "noise": self.noise, "interval": self.interval,
            "details": self.details, "cost": self.cost.to_dict(),
            "remaining": self.remaining.to_dict(), "key": self.key, "replayed": self.replayed,
            "query": self.query, "budget": self.budget,
        }


def filter_for_budget(budget: PrivacyDescription, *,
                      typical: Workload | None = None) -> PrivacyFilter:
    """The valid, tight filter for a budget (docs/filters.md; Theorem 8 of the filters paper).

    ======================  ===============================================================
    budget                  filter
    ======================  ===============================================================
    ``GDP(mu)``             :class:`GDPResidueFilter` (valid for any adaptive queries)
    ``ApproxDP(eps, d>0)``  :class:`MixedFilter`: R_a (+) G_mu inside the (eps, d) target,
                            pure queries charged exactly to R_a, others by the GDP residue;
                            the split is chosen for ``typical`` (a query's privacy, or a
                            list), else for the first admitted query (docs/filters.md)
    ``PureDP(eps)``         :class:`PureDPFilter` (additive, exact Fractions)
    ``ZCDP(rho)``           :class:`ZCDPFilter` (additive, exact Fractions)
    ``ApproxZCDP(rho, d)``  :class:`ApproxZCDPFilter`
    ``RDP(orders, values)`` :class:`RDPFilter`
    ======================  ===============================================================

    A natural filter against an (eps, delta) target is never built: it is invalid for
    adaptive queries. ``typical`` applies to (eps, delta) budgets only.
    """
    from dpsieve import filters

    f: filters.FilterBase
    if isinstance(budget, GDP):
        f = filters.GDPResidueFilter(budget.mu)
    elif isinstance(budget, ApproxDP) and budget.delta > 0:
        f = filters.MixedFilter(budget.eps, budget.delta, typical=typical)
    elif isinstance(budget, (ApproxDP, PureDP)):
        f = filters.PureDPFilter(budget.eps)
    elif isinstance(budget, ZCDP):
        f = filters.ZCDPFilter(budget.rho)
    elif isinstance(budget, ApproxZCDP):
        f = filters.ApproxZCDPFilter(budget.rho, budget.delta)
    elif isinstance(budget, RDP):
        f = filters.RDPFilter(budget.orders, budget.values)
    else:
        raise fail("budget", "filter_for_budget", "a privacy description", budget)
    if typical is not None and not isinstance(f, filters.MixedFilter):
        raise fail("typical", "filter_for_budget", "given only with an ApproxDP(eps, delta > 0) "
                   "budget (other budgets need no split)", typical)
    # The filter enforces the budget's relation: a query stated under the other one is an
    # error unless converted (a replace-one cost can be twice the add/remove one).
    return f.with_neighbouring(budget.neighbouring)


def load_frame(data: Any) -> Frame:
    """A pandas frame from a pandas/polars frame or a CSV/Parquet path (read by DuckDB)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    if callable(data) and not isinstance(data, str | Path | pd.DataFrame):
        data = data()  # a lazy loader
    if isinstance(data, pd.DataFrame):
        return data
    if hasattr(data, "to_pandas"):  # polars and pyarrow tables
        frame: Frame = data.to_pandas()
        return frame
    if isinstance(data, str | Path):
        import duckdb

        path = str(data)
        low = path.lower()
        if low.endswith((".parquet", ".pq")):
            reader = "read_parquet"
        elif low.endswith((".csv", ".csv.gz", ".tsv")):
            reader = "read_csv_auto"
        else:
            raise fail("data", "load_frame", "a .csv or .parquet path", path)
        if not Path(path).is_file():
            raise fail("data", "load_frame", "an existing file", path)
        con = duckdb.connect()
        try:
            out: Frame = _read_file(con, reader, path)
        finally:
            con.close()
        return out
    _rows_loadable(data, "load_frame")
    raise fail_private("data", "load_frame", "a pandas/polars DataFrame or a CSV/Parquet path",
                       data)  # the message shows the type, never the data


def _rows_loadable(data: Any, owner: str) -> None:
    """Refuse, from public facts alone, a query shape whose rows cannot be loaded: a path
    that is not an existing CSV/Parquet file, or a source that only answers query plans (a
    Spark DataFrame is never collected to the driver; an engine object exposes aggregates
    only). Called before any spend (it was charged, then failed)."""
    from dpsieve.queries.engines.resolve import is_engine, is_spark_frame

    if isinstance(data, str | Path):  # the path is the steward's public configuration
        if not str(data).lower().endswith((".parquet", ".pq", ".csv", ".csv.gz", ".tsv")):
            raise fail("data", owner, "a .csv or .parquet path", str(data))
        if not Path(data).is_file():
            raise fail("data", owner, "an existing file", str(data))
    if is_spark_frame(data) or is_engine(data):
        raise fail("data", owner, "a pandas/polars DataFrame or a CSV/Parquet path for this "
                   "query type (a Spark DataFrame or an engine answers query plans: "
                   "{'type': 'query', ...})", f"<{type(data).__name__}>")


def _read_file(con: Any, reader: str, path: str) -> Frame:
    """Read a file whole; never fail on a cell (issue 10: nothing data-dependent leaves).

    DuckDB types a CSV's columns from a sample of rows; a later cell that does not parse
    as its column's type made the read fail *after* the spend, with a message quoting the
    whole line (a private record), and the failure itself told whether such a row exists.
    On a conversion error the file is re-read as text and each cell cast to its column's
    type with ``TRY_CAST``: a cell that does not parse becomes missing, as an empty cell
    would, so each row still maps to one row. No DuckDB message (which quotes cells) is
    passed on."""
    import duckdb

    try:
        return con.execute(f"SELECT * FROM {reader}(?)", [path]).df()
    except duckdb.Error:
        if reader != "read_csv_auto":
            raise fail("data", "load_frame", "a readable Parquet file (DuckDB could not read "
                       "it; its message is withheld because it may quote data values)",
                       path) from None
    try:
        cols = con.execute(f"DESCRIBE SELECT * FROM {reader}(?)", [path]).fetchall()
        # a table first: DuckDB pushes casts on a CSV scan into the reader, even TRY_CASTs
        con.execute("CREATE TEMP TABLE _text AS SELECT * FROM read_csv_auto(?, "
                    "all_varchar = true)", [path])
        cast = ", ".join(
            f"TRY_CAST({_quote(str(c[0]))} AS {c[1]}) AS {_quote(str(c[0]))}"
            if str(c[1]).upper() != "VARCHAR" else _quote(str(c[0])) for c in cols)
        return con.execute(f"SELECT {cast} FROM _text").df()
    except duckdb.Error:
        raise fail("data", "load_frame", "a CSV file DuckDB can read (its message is "
                   "withheld because it may quote data values)", path) from None


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def parse_description(d: Any, name: str = "privacy") -> PrivacyDescription:
    """``description_from_dict`` with every failure a :class:`ValidationError` naming ``name``."""
    try:
        return description_from_dict(d)
    except ValidationError:
        raise
    except (KeyError, TypeError, ValueError) as e:
        raise fail(name, "query", f"a complete privacy description (missing or bad {e})",
                   d) from None


def data_columns(data: Any) -> list[str]:
    """Column names only (the public schema): a frame's names, or a file's header via DuckDB.

    No value of the data is released or used in a decision; a lazy loader (a callable)
    has no schema of its own and is loaded.
    """
    if isinstance(data, str | Path):
        import duckdb

        path = str(data)
        reader = "read_parquet" if path.lower().endswith((".parquet", ".pq")) else "read_csv_auto"
        if not Path(path).is_file():
            raise fail("data", "data_columns", "an existing .csv or .parquet file", path)
        con = duckdb.connect()
        try:
            rows = con.execute(f"DESCRIBE SELECT * FROM {reader}(?)", [path]).fetchall()
        finally:
            con.close()
        return [str(r[0]) for r in rows]
    return [str(c) for c in load_frame(data).columns]


def data_column_kinds(data: Any) -> dict[str, str]:
    """The kind of each column (public schema, :mod:`dpsieve._columns`): a frame's dtypes,
    or the file's column types as DuckDB describes them. No value is released."""
    from dpsieve._columns import frame_kinds, kind_of_sql

    if isinstance(data, str | Path):
        import duckdb

        path = str(data)
        reader = "read_parquet" if path.lower().endswith((".parquet", ".pq")) else "read_csv_auto"
        if not Path(path).is_file():
            raise fail("data", "data_column_kinds", "an existing .csv or .parquet file", path)
        con = duckdb.connect()
        try:
            rows = con.execute(f"DESCRIBE SELECT * FROM {reader}(?)", [path]).fetchall()
        finally:
            con.close()
        return {str(r[0]): kind_of_sql(str(r[1])) for r in rows}
    return frame_kinds(load_frame(data))


def data_row_count(path: str | Path) -> int:
    """The number of rows of a CSV/Parquet file (DuckDB), without loading it."""
    import duckdb

    p = str(path)
    reader = "read_parquet" if p.lower().endswith((".parquet", ".pq")) else "read_csv_auto"
    con = duckdb.connect()
    try:
        row = con.execute(f"SELECT COUNT(*) FROM {reader}(?)", [p]).fetchone()
    finally:
        con.close()
    return int(row[0]) if row else 0


def _privacy(p: PrivacyDescription, nb: Neighbouring, robust: bool = False,
             release: bool = False) -> PrivacyDescription:
    """The session's policy for release and robust queries' privacy (typed: mapped from
    JSON by :func:`~dpsieve._session_request.request_from_spec`)."""
    if release:
        if nb != Neighbouring.REPLACE_ONE:
            raise fail("privacy", "release query", "spent under replace-one neighbours: the "
                       "release mechanisms are pure eps-DP under replace-one only, which does "
                       "not imply eps-DP under add/remove (no conversion is offered); open "
                       "the session with a replace-one budget", p)
        if not isinstance(p, PureDP) or p.neighbouring != nb:
            raise fail("privacy", "release query", "PureDP(eps) under replace-one", p)
        check_positive("eps", p.eps, "release query")
        return p
    if robust:
        if not isinstance(p, ApproxDP) or not (p.eps > 0) or not (0 < p.delta < 1):
            raise fail("privacy", "robust query", "ApproxDP(eps > 0, 0 < delta < 1)", p)
        if nb != Neighbouring.REPLACE_ONE or p.neighbouring != nb:
            raise fail("privacy", "robust query", "under replace-one neighbours (the robust "
                       "estimators' relation); open the session with a replace-one budget", p)
        return p
    raise fail("privacy", "query", "the privacy of a release or robust query", p)


def _as_description(p: PrivacyIn, nb: Neighbouring, name: str) -> PrivacyDescription:
    """A privacy description (or its dict, under ``nb`` unless it says otherwise)."""
    if isinstance(p, Mapping):
        p = parse_description({"neighbouring": nb.value, **p}, name)
    if not isinstance(p, PureDP | ApproxDP | GDP | ZCDP | ApproxZCDP | RDP):
        raise fail(name, "Session", "a privacy description such as PureDP(0.1)", p)
    return p


class Session:
    """Private queries on one data set against one budget (see module docstring).

    ``Session(data, budget=GDP(1.0))`` builds the filter with :func:`filter_for_budget` in
    a :class:`~dpsieve.ledger.MemoryStore`; pass ``filter=`` for a filter you built, and
    ``store=``/``budget_id=`` to keep the ledger in SQLite or PostgreSQL (an existing
    budget there is reused). ``columns`` is the public schema (column names) and
    ``column_types`` maps names to kinds (``integer``, ``float``, ``boolean``, ``string``,
    ``other``; :mod:`dpsieve._columns`); without them they are read from the frame's dtypes
    or the file header (never values) before a spend. ``row_count`` returns the number of
    rows, read before the spend of queries whose ``n`` is public (release; robust
    estimators); without it a file's rows are counted by DuckDB. A lazy loader (a callable) without
    ``column_types`` is loaded to read its dtypes before its first typed query (nothing is
    released; give ``column_types`` to keep a refused query from loading the data).
    ``release_limits`` (:class:`~dpsieve._session_release.ReleaseLimits`) bounds the work
    of ``release`` queries; they are refused from public parameters past it.
    ``memory_limit`` (e.g. ``"1GB"``) is DuckDB's memory limit for a file's queries; by
    default 32 MiB per core, at least 64 MiB, and a query out of memory under it runs again
    under 128 MiB per core (``DPSIEVE_DUCKDB_MEMORY_LIMIT`` sets a fixed limit instead),
    beyond which DuckDB spills to a temporary directory (docs/queries.md, Memory).
    ``engine`` is the engine query plans run on, for ``data`` itself (default: a new one
    for ``data`` each query; the service passes one it keeps open per registered file);
    query types that load rows still load them from ``data``.
    """

    def __init__(
        self,
        data: Any,
        *,
        budget: PrivacyDescription | None = None,
        filter: PrivacyFilter | None = None,
        store: BudgetStore | None = None,
        budget_id: str = "session",
        principal: str = "",
        rng: np.random.Generator | None = None,
        neighbouring: Neighbouring | None = None,
        after_spend: Callable[[str], None] | None = None,
        columns: Sequence[str] | None = None,
        column_types: Mapping[str, str] | None = None,
        typical: PrivacyIn | Sequence[PrivacyIn] | None = None,
        row_count: Callable[[], int] | None = None,
        schema: Any = None,
        privacy_unit: str | None = None,
        table: str | None = None,
        release_limits: ReleaseLimits | None = None,
        loader: Callable[[], Frame] | None = None,
        memory_limit: str | None = None,
        engine: Any = None,
    ) -> None:
        from dpsieve.ledger.base import has_budget
        from dpsieve.ledger.memory import MemoryStore

        if budget is not None and filter is not None:
            raise ValidationError("Give either 'budget' or 'filter' to Session(), not both.")
        self._data = data
        self._frame: Frame | None = None
        self._columns = list(columns) if columns is not None else None
        self._kinds = dict(column_types) if column_types is not None else None
        self._rows = row_count
        self._declared_schema = schema
        self._table = table
        if memory_limit is not None:  # checked here, before any spend
            from dpsieve.queries.engines.duckdb import _checked_limit

            memory_limit = _checked_limit(memory_limit, "memory_limit")
        self._memory_limit = memory_limit
        self._loader = loader
        self._engine = engine
        self._public: Schema | None = None
        from dpsieve._session_query import declared_unit

        self.privacy_unit: str | None = declared_unit(schema, privacy_unit)
        self.store: BudgetStore = store if store is not None else MemoryStore()
        self.budget_id = budget_id
        self.principal = principal
        self._rng = rng
        self._after_spend = after_spend
        self._release_limits = release_limits
        if typical is not None and budget is None:
            raise fail("typical", "Session", "given with 'budget' (it chooses the budget's "
                       "split)", typical)
        typ: list[PrivacyDescription] | None = None
        if budget is not None and typical is not None:
            items = [typical] if isinstance(typical, Mapping) or not isinstance(
                typical, Sequence) else list(typical)
            typ = [_as_description(t, budget.neighbouring, "typical") for t in items]
        flt = filter if filter is not None else (
            filter_for_budget(budget, typical=typ) if budget is not None else None)
        exists = has_budget(self.store, budget_id)  # no filter parsed: the spend reads it
        if flt is not None and not exists:
            self.store.create_budget(budget_id, flt)
        elif flt is None and not exists:
            raise ValidationError(
                f"Session() needs 'budget' or 'filter': no budget {budget_id!r} in the store.")
        # The filters do not track the neighbouring relation, so the session must know the
        # budget's: from the budget, the argument, the registry, or (a new filter) add/remove.
        known = self.store.dataset(budget_id) if (
            exists and flt is None and budget is None and neighbouring is None) else None
        if budget is not None:
            self.neighbouring = budget.neighbouring
            if neighbouring is not None and neighbouring != budget.neighbouring:
                raise fail("neighbouring", "Session", f"the budget's {budget.neighbouring.value!r}",
                           neighbouring)
        elif neighbouring is not None:
            self.neighbouring = Neighbouring(neighbouring)
        elif known is not None and "neighbouring" in known:
            self.neighbouring = Neighbouring(known["neighbouring"])
        elif flt is not None and not exists:
            self.neighbouring = Neighbouring.ADD_REMOVE
        else:
            raise ValidationError(
                f"Session() attaches to the existing budget {budget_id!r}: give 'neighbouring' "
                "(the relation the budget was set under); calibrating noise under the wrong "
                "relation could understate the cost.")

    # -- budget -------------------------------------------------------------------------
    def remaining(self) -> BudgetLeft:
        """The budget left, as the filter states it (typed; ``to_dict()`` for JSON)."""
        return self.store.load_filter(self.budget_id).remaining()

    def budget(self, like: PrivacyIn | None = None, *, cap: int | None = None
               ) -> BudgetSummary:
        """The budget left in plain words: eps at the target's delta, the fraction used and,
        for ``like`` (a privacy description), how many more such queries the filter admits,
        counted exactly by its own decisions (:class:`dpsieve.filters.summary.BudgetSummary`).
        """
        from dpsieve._budget_view import store_summary

        if like is not None:
            like = _as_description(like, self.neighbouring, "like")
        return store_summary(self.store, self.budget_id, like=like, cap=cap)

    def frame(self) -> Frame:
        """The private data (loaded on first use, after an admitted spend)."""
        if self._frame is None:
            self._frame = self._loader() if self._loader is not None else load_frame(self._data)
        return self._frame

    # -- queries ------------------------------------------------------------------------
    def count(self, *, privacy: PrivacyIn, key: str | None = None) -> QueryResult:
        """Number of rows + noise. Delta_1 = Delta_2 = 1."""
        return self.run({"type": "count", "privacy": privacy}, key=key)

    def sum(self, column: str, *, lower: float, upper: float, privacy: PrivacyIn,
            key: str | None = None) -> QueryResult:
        """Sum of the column clipped to [lower, upper] (missing values count as 0 clipped)."""
        return self.run({"type": "sum", "column": column, "lower": lower, "upper": upper,
                         "privacy": privacy}, key=key)

    def mean(self, column: str, *, lower: float, upper: float, privacy: PrivacyIn,
             key: str | None = None) -> QueryResult:
        """Noisy clipped sum / noisy count, the privacy split evenly between the two."""
        return self.run({"type": "mean", "column": column, "lower": lower, "upper": upper,
                         "privacy": privacy}, key=key)

    def histogram(self, column: str, *, categories: Sequence[Any], privacy: PrivacyIn,
                  key: str | None = None) -> QueryResult:
        """Counts of each public category (values outside them are not counted)."""
        return self.run({"type": "histogram", "column": column,
                         "categories": list(categories), "privacy": privacy}, key=key)

    def release(self, mechanism: str, *, columns: Sequence[str],
                domain: dict[str, Sequence[Any]], n: int, privacy: PrivacyIn,
                workload: str = "marginals:1", rounds: int | None = None,
                eta: float | None = None, gamma: float | None = None,
                key: str | None = None) -> QueryResult:
        """A workload of counting queries over the public ``domain`` of ``columns``
        released by a :mod:`dpsieve.release` mechanism (envelope, pmw, mwem, laplace, blr),
        pure eps-DP under replace-one; ``n`` is the public row count (docs/session.md)."""
        spec: dict[str, Any] = {
            "type": "release", "mechanism": mechanism, "columns": list(columns),
            "domain": {c: list(v) for c, v in domain.items()}, "n": n,
            "workload": workload, "privacy": privacy}
        for name, v in (("rounds", rounds), ("eta", eta), ("gamma", gamma)):
            if v is not None:
                spec[name] = v
        return self.run(spec, key=key)

    def query(self, plan: Query | dict[str, Any], *, key: str | None = None) -> QueryResult:
        """Run a query plan (:class:`~dpsieve.queries.plan.Query` or its JSON): checked
        against :meth:`schema` before any spend, charged once for all its aggregations,
        run on the data set's engine (docs/queries.md). ``result.answer`` is the typed
        answer."""
        from dpsieve._session_query import is_plan

        if not is_plan(plan):
            raise fail("plan", "Session.query", "a Query or a {'type': 'query', ...} dict",
                       plan.get("type") if isinstance(plan, dict) else type(plan).__name__)
        return self.run(plan, key=key)

    def schema(self) -> Schema:
        """The data set's public schema: column names, types, declared public domains and
        bounds, and the privacy unit (from metadata and declarations; never values)."""
        from dpsieve._session_query import resolve_schema

        if self._public is None:
            def actual() -> Any:
                return self._plan_engine().columns()
            self._public = resolve_schema(self._declared_schema, self.privacy_unit, actual,
                                          self._kinds)
        return self._public

    def _plan_engine(self) -> Any:
        """The engine plans run on: ``engine=``, else the one for the data."""
        from dpsieve._session_query import engine_for

        if self._engine is not None:
            return self._engine
        return engine_for(self._data, self._table, self._memory_limit)

    def run(self, spec: dict[str, Any] | Query, *, key: str | None = None) -> QueryResult:
        """Run a query given as a JSON-ready dict (the library's dict entry point) or a
        typed plan: mapped once, at this edge (:func:`~dpsieve._session_request.
        request_from_spec`), then :meth:`execute`."""
        return self.execute(request_from_spec(spec, self.neighbouring), key=key)

    def execute(self, request: Request, *, key: str | None = None) -> QueryResult:
        """Run a typed :class:`~dpsieve._session_request.Request` (the service and the CLI
        map their JSON to one, once): checked, charged once, then run."""
        t = request.kind
        if request.plan is not None:
            return self._run_plan(request.plan, request.public, key,
                                  legacy=t if t in LEGACY else None)
        if self.privacy_unit is not None:
            raise fail("type", t, "a query plan ({'type': 'query', ...}) or one of "
                       f"{', '.join(LEGACY)}: this data set's privacy unit is "
                       f"{self.privacy_unit!r}, and {t} queries protect one row, "
                       "not all rows of a unit", t)
        _rows_loadable(self._data, t)  # before the spend, from the type only
        p = _privacy(request.privacy, self.neighbouring, t in ROBUST_TYPES, t == "release")
        spec = {**request.params, "type": t}
        cost, plan = self._plan(spec, p)  # public parameters only: no value is read

        def compute() -> dict[str, Any]:
            value, noise = plan(self.frame())
            return {"value": value, "noise": noise}
        return self._charged(cost, request.public, p, compute, key)

    def _run_plan(self, q: Query, public: dict[str, Any], key: str | None,
                  legacy: str | None = None) -> QueryResult:
        """A plan: prepared (every check, the charge) from public values, then charged once,
        then run on the engine; only per-group aggregates leave it. ``legacy``: a
        one-aggregation shape of earlier versions, answered in its earlier form
        (:func:`dpsieve._session_query.legacy_stored`)."""
        from dpsieve._session_query import is_file, legacy_stored
        from dpsieve.queries.engines.duckdb import default_memory_limit
        from dpsieve.queries.prepare import prepare

        prepared = prepare(q, self.schema(), self.neighbouring)
        if self._memory_limit is None and self._engine is None and is_file(self._data):
            default_memory_limit()  # a bad DPSIEVE_DUCKDB_MEMORY_LIMIT: refused before the spend
        rng = self._rng

        def compute() -> dict[str, Any]:
            answer = prepared.run(self._plan_engine(), rng)
            if legacy is not None:
                return legacy_stored(legacy, prepared, answer)
            d = answer.to_dict()
            return {"value": {k: v for k, v in d.items() if k != "noise"},
                    "noise": d["noise"], "details": answer.details}
        return self._charged(prepared.charge.description, public, q.privacy, compute, key)

    def _charged(self, cost: PrivacyDescription, public: dict[str, Any],
                 requested: PrivacyDescription, compute: Callable[[], dict[str, Any]],
                 key: str | None) -> QueryResult:
        """Spend ``cost`` durably, then (admitted) compute and store the answer: the
        ledger's order (module docstring)."""
        key = key or uuid.uuid4().hex
        out = self.store.spend(self.budget_id, cost, key=key, principal=self.principal,
                               request=public)
        d = out.decision
        if not d.admitted:
            raise _budget_view.refused(self.store, self.budget_id, cost, requested,
                                       d.remaining)
        stored = out.answer if out.replayed else None
        if stored is None:
            if self._after_spend is not None:
                self._after_spend(key)
            stored = self.store.record_answer(self.budget_id, key, compute())
        return QueryResult(stored["value"], stored["noise"], d.cost, d.remaining, key,
                           replayed=out.replayed, query=public,
                           budget=_budget_view.after_query(self.store, self.budget_id, cost),
                           interval=stored.get("interval"),
                           details=dict(stored.get("details") or {}))

    def _plan(self, spec: dict[str, Any], p: PrivacyDescription
              ) -> tuple[Any, Callable[[Frame], tuple[Any, dict[str, Any]]]]:
        """(cost, compute) from public parameters; ``compute`` reads the data."""
        t = spec["type"]
        if t == "release":
            return _release_plan(spec, p, self._schema(), self._rng, self._row_count,
                                 self._release_limits)
        col = self._column(spec)
        require_kind(col, self._kind(col), NUMERIC_KINDS, t)
        return self._robust(spec, p, col)

    def _robust(self, spec: dict[str, Any], p: PrivacyDescription, col: str
                ) -> tuple[Any, Callable[[Frame], tuple[Any, dict[str, Any]]]]:
        """Propose-Filter-Release mean/median (:mod:`dpsieve.robust`), charged up front.

        The charge is ApproxDP(eps (1 + ROBUST_EPS_MARGIN), delta) under replace-one, at
        least what the estimator states for any run (a refusal included). Before the
        spend, the estimator's public plan is built from the row count ``n`` (public under
        replace-one; :func:`dpsieve.robust.mean_plan`, :func:`~dpsieve.robust.median.
        median_plan`): every parameter check runs there, a public refusal (too few rows)
        is refused uncharged, and a plan stating more than the charge is refused. The
        released value is still withheld (NumericalError) if a run ever states more.
        Missing values become 0 so the row count never changes.
        """
        from dpsieve.errors import NumericalError
        from dpsieve.robust.mean import mean_plan
        from dpsieve.robust.median import median_plan
        from dpsieve.robust.results import Refusal

        if not isinstance(p, ApproxDP):
            raise UnsupportedError(f"robust statistics are charged ApproxDP, not {p!r}")
        t = spec["type"]
        bound = check_positive("bound", spec.get("bound"), t)
        eps_charged = p.eps * (1 + ROBUST_EPS_MARGIN)
        if not math.isfinite(eps_charged):
            raise fail("eps", t, "a finite float after the charge's margin (1 + 1e-12)", p.eps)
        charged = ApproxDP(eps_charged, p.delta, Neighbouring.REPLACE_ONE)
        n = self._row_count()
        planned: Any = mean_plan(n, p.eps, p.delta, bound=bound) if t == "robust_mean" \
            else median_plan(n, p.eps, p.delta, bound=bound)
        if isinstance(planned, Refusal):
            raise fail("n", t, f"enough rows for the estimator ({planned.reason}; decided "
                       "from public values, nothing charged)", n)
        stated = planned[0].privacy if isinstance(planned, tuple) else planned
        if not (stated.eps <= charged.eps and stated.delta <= charged.delta):
            raise NumericalError(f"{t} would state {stated!r}, above the charge "
                                 f"{charged!r}; refused before any spend.")
        rng = self._rng

        def run(df: Frame) -> tuple[Any, dict[str, Any]]:
            import pandas as pd  # type: ignore[import-untyped,unused-ignore]

            from dpsieve import robust

            v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
            v = np.where(np.isnan(v), 0.0, v)
            est = robust.pfr_mean if t == "robust_mean" else robust.pfr_median
            out = est(v, p.eps, p.delta, bound=bound, rng=rng)
            stated = out.privacy
            s_delta = stated.delta if isinstance(stated, ApproxDP) else 0.0
            if not (stated.eps <= charged.eps and s_delta <= charged.delta):
                raise NumericalError(f"{t} stated {stated!r}, above the charge {charged!r}; "
                                     "the answer is withheld.")
            d = out.to_dict()
            value = None if d["refused"] else d["value"]
            return value, {"mechanism": f"pfr_{t[7:]}", **{k: v for k, v in d.items()
                                                            if k != "value"}}
        return charged, run

    def _column(self, spec: dict[str, Any]) -> str:
        """The column name, checked against the schema (names only: public metadata).

        Read before the spend: the names come from ``columns=``, a frame's names or a
        file's header, never from the values."""
        col = self._column_name(spec)
        if col not in self._schema():
            raise fail("column", spec["type"], "a column of the data set", col)
        return col

    def _kind(self, col: str) -> str:
        """The column's kind (public schema; see :mod:`dpsieve._columns`), before a spend."""
        from dpsieve._columns import KINDS

        if self._kinds is None or col not in self._kinds:
            src = self._frame if self._frame is not None else self._data
            self._kinds = {**data_column_kinds(src), **(self._kinds or {})}
        kind = self._kinds.get(col, "other")
        if kind not in KINDS:
            raise fail("column_types", "Session", f"kinds among {', '.join(KINDS)}", kind)
        return kind

    def _row_count(self) -> int:
        """The number of rows, read before a spend only for queries whose ``n`` is public
        (replace-one neighbours share it): ``row_count=``, a file's count (DuckDB), or the
        frame's length (a lazy loader is loaded; nothing is released)."""
        if self._rows is not None:
            return int(self._rows())
        if self._frame is None and isinstance(self._data, str | Path):
            return data_row_count(self._data)
        return len(self.frame())

    def _schema(self) -> list[str]:
        """The column names (public metadata; see :meth:`_column`)."""
        if self._columns is None:
            self._columns = data_columns(self._frame if self._frame is not None else self._data)
        return self._columns

    @staticmethod
    def _column_name(spec: dict[str, Any]) -> str:
        col = spec.get("column")
        if not isinstance(col, str) or not col:
            raise fail("column", spec["type"], "a column name", col)
        return col
