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

import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsieve import _budget_view
from dpsieve._columns import NUMERIC_KINDS, require_kind
from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription
from dpsieve.errors import ValidationError
from dpsieve.filters.base import BudgetLeft
from dpsieve.session import data as _data
from dpsieve.session.budgets import PrivacyIn, as_description, filter_for_budget
from dpsieve.session.data import Frame, data_column_kinds, data_columns, data_row_count
from dpsieve.session.release import ReleaseLimits, release_plan, release_privacy
from dpsieve.session.request import LEGACY, Request, request_from_spec
from dpsieve.session.result import QueryResult
from dpsieve.session.robust import robust_plan, robust_privacy

if TYPE_CHECKING:
    from dpsieve.filters.base import PrivacyFilter
    from dpsieve.filters.summary import BudgetSummary
    from dpsieve.ledger.base import BudgetStore
    from dpsieve.queries.plan import Query
    from dpsieve.queries.schema import Schema

__all__ = ["Session"]


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
    ``release_limits`` (:class:`~dpsieve.session.release.ReleaseLimits`) bounds the work
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
        from dpsieve.session.plans import declared_unit

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
            typ = [as_description(t, budget.neighbouring, "typical") for t in items]
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
            like = as_description(like, self.neighbouring, "like")
        return store_summary(self.store, self.budget_id, like=like, cap=cap)

    def frame(self) -> Frame:
        """The private data (loaded on first use, after an admitted spend)."""
        if self._frame is None:
            self._frame = (self._loader() if self._loader is not None
                           else _data.load_frame(self._data))
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
        from dpsieve.session.plans import is_plan

        if not is_plan(plan):
            raise fail("plan", "Session.query", "a Query or a {'type': 'query', ...} dict",
                       plan.get("type") if isinstance(plan, dict) else type(plan).__name__)
        return self.run(plan, key=key)

    def schema(self) -> Schema:
        """The data set's public schema: column names, types, declared public domains and
        bounds, and the privacy unit (from metadata and declarations; never values)."""
        from dpsieve.session.plans import resolve_schema

        if self._public is None:
            def actual() -> Any:
                return self._plan_engine().columns()
            self._public = resolve_schema(self._declared_schema, self.privacy_unit, actual,
                                          self._kinds)
        return self._public

    def _plan_engine(self) -> Any:
        """The engine plans run on: ``engine=``, else the one for the data."""
        from dpsieve.queries.engines.resolve import engine_for

        if self._engine is not None:
            return self._engine
        return engine_for(self._data, table=self._table, memory_limit=self._memory_limit,
                          name="data", owner="Session")

    def run(self, spec: dict[str, Any] | Query, *, key: str | None = None) -> QueryResult:
        """Run a query given as a JSON-ready dict (the library's dict entry point) or a
        typed plan: mapped once, at this edge (:func:`~dpsieve.session.request.
        request_from_spec`), then :meth:`execute`."""
        return self.execute(request_from_spec(spec, self.neighbouring), key=key)

    def execute(self, request: Request, *, key: str | None = None) -> QueryResult:
        """Run a typed :class:`~dpsieve.session.request.Request` (the service and the CLI
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
        _data.rows_loadable(self._data, t)  # before the spend, from the type only
        p = (release_privacy if t == "release" else robust_privacy)(request.privacy,
                                                                     self.neighbouring)
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
        (:func:`dpsieve.session.plans.legacy_stored`)."""
        from dpsieve.queries.engines.duckdb import default_memory_limit
        from dpsieve.queries.prepare import prepare
        from dpsieve.session.plans import is_file, legacy_stored

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
            return release_plan(spec, p, self._schema(), self._rng, self._row_count,
                                self._release_limits)
        col = self._column(spec)
        require_kind(col, self._kind(col), NUMERIC_KINDS, t)
        return robust_plan(spec, p, col, self._row_count, self._rng)

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
