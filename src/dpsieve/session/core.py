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
PureDP(eps, replace-one) (:class:`~dpsieve.queries.request_release.ReleaseRequest`).

Every kind of query is a typed request of the query layer
(:mod:`dpsieve.queries.requests`), prepared against the session's data set
(:class:`~dpsieve.session.source.SessionData`) to a charge and a run: :meth:`Session.execute`
prepares, spends, runs and records, whatever the kind.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsieve import _budget_view
from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription
from dpsieve.errors import QueryFailedError, ValidationError
from dpsieve.filters.base import BudgetLeft
from dpsieve.queries.plan import Query
from dpsieve.queries.release_sizing import ReleaseLimits
from dpsieve.queries.request_release import ReleaseRequest
from dpsieve.queries.requests import PlanRequest, Request, privacy_of, request_from_json
from dpsieve.session.budgets import (
    PrivacyIn,
    as_description,
    budget_kind_of,
    filter_for_budget,
)
from dpsieve.session.data import Frame
from dpsieve.session.outcomes import FAILED, FAILED_MESSAGE, total
from dpsieve.session.result import QueryResult
from dpsieve.session.source import SessionData

if TYPE_CHECKING:
    from dpsieve.filters.base import PrivacyFilter
    from dpsieve.filters.summary import BudgetSummary
    from dpsieve.ledger.base import BudgetStore
    from dpsieve.queries.schema import Schema
    from dpsieve.queries.source import BudgetKind
    from dpsieve.session.children import Children

__all__ = ["Session"]


class Session:
    """Private queries on one data set against one budget (see module docstring).

    ``Session(data, budget=GDP(1.0))`` builds the filter with :func:`filter_for_budget` in
    a :class:`~dpsieve.ledger.MemoryStore`; pass ``filter=`` for a filter you built, and
    ``store=``/``budget_id=`` to keep the ledger in SQLite or PostgreSQL (an existing
    budget there is reused). ``columns`` is the public schema (column names) and
    ``column_types`` maps names to kinds (``integer``, ``float``, ``boolean``, ``string``,
    ``other``: :class:`dpsieve.queries.schema.ColumnType`); without them they are read
    from the frame's dtypes or the file header (never values) before a spend.
    ``row_count`` returns the number of rows, read before the spend of queries whose ``n``
    is public (release; robust estimators); without it a file's rows are counted by
    DuckDB. A lazy loader (a callable) without ``column_types`` is loaded to read its
    dtypes before its first typed query (nothing is released; give ``column_types`` to
    keep a refused query from loading the data).
    ``release_limits`` (:class:`~dpsieve.queries.request_release.ReleaseLimits`) bounds the work
    of ``release`` queries; they are refused from public parameters past it.
    ``memory_limit`` (e.g. ``"1GB"``) is DuckDB's memory limit for a file's queries; by
    default 32 MiB per core, at least 64 MiB, and a query out of memory under it runs again
    under 128 MiB per core (``DPSIEVE_DUCKDB_MEMORY_LIMIT`` sets a fixed limit instead),
    beyond which DuckDB spills to a temporary directory (docs/queries.md, Memory).
    ``engine`` is the engine query plans run on, for ``data`` itself (default: a new one
    for ``data`` each query; the service passes one it keeps open per registered file);
    query types that load rows still load them from ``data``. A file's columns are read
    as the declared ``column_types``/``schema`` types (a CSV's undeclared ones are text).
    ``dataset`` names a registered data set (the service and the CLI): its public schema
    is the stored one, and a failure to read its source before the spend is one refusal
    naming the data set (:func:`dpsieve.session.outcomes.reading`). A computation that
    fails after its charge is stored as the charge's outcome, one fixed message
    (:class:`~dpsieve.errors.QueryFailedError`), returned again on a retry with the same
    key (:func:`dpsieve.session.outcomes.total`).
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
        dataset: str | None = None,
    ) -> None:
        from dpsieve.ledger.base import has_budget
        from dpsieve.ledger.memory import MemoryStore

        if budget is not None and filter is not None:
            raise ValidationError("Give either 'budget' or 'filter' to Session(), not both.")
        self._source = SessionData(
            data, columns=columns, column_types=column_types, row_count=row_count,
            schema=schema, privacy_unit=privacy_unit, table=table,
            release_limits=release_limits, loader=loader, memory_limit=memory_limit,
            engine=engine, rng=rng, dataset=dataset)
        self.privacy_unit: str | None = self._source.privacy_unit
        self.store: BudgetStore = store if store is not None else MemoryStore()
        self.budget_id = budget_id
        self.principal = principal
        self._after_spend = after_spend
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
        self._source.neighbouring = self.neighbouring
        self._source.budget_reader = self._budget_kind

    def _budget_kind(self) -> BudgetKind | None:
        """The budget's kind as preparation reads it (:func:`budget_kind_of`): its filter's
        kind and declared parameters, public, read from the store when a request asks."""
        return budget_kind_of([self.store.load_filter(self.budget_id)])

    # -- budget -------------------------------------------------------------------------
    def remaining(self) -> BudgetLeft:
        """The budget left, as the filter states it (typed; ``to_dict()`` for JSON)."""
        return self.store.load_filter(self.budget_id).remaining().under(self.neighbouring)

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

    @property
    def children(self) -> Children:
        """The interactive children of this budget, questioned with this session's data
        (sparse vector, continual counter, answer cache: :mod:`dpsieve.session.children`)."""
        from dpsieve.session.children import Children

        return Children(self)

    def frame(self) -> Frame:
        """The private data (loaded on first use, after an admitted spend)."""
        return self._source.frame()

    def schema(self) -> Schema:
        """The data set's public schema: column names, types, declared public domains and
        bounds, and the privacy unit (from metadata and declarations; never values)."""
        return self._source.schema()

    # -- queries ------------------------------------------------------------------------
    def count(self, *, privacy: PrivacyIn, key: str | None = None) -> QueryResult:
        """Number of rows + noise. Delta_1 = Delta_2 = 1."""
        return self._shape("count", privacy, key)

    def sum(self, column: str, *, lower: float, upper: float, privacy: PrivacyIn,
            key: str | None = None) -> QueryResult:
        """Sum of the column clipped to [lower, upper] (missing values count as 0 clipped)."""
        return self._shape("sum", privacy, key, column=column, lower=lower, upper=upper)

    def mean(self, column: str, *, lower: float, upper: float, privacy: PrivacyIn,
             key: str | None = None) -> QueryResult:
        """Noisy clipped sum / noisy count, the privacy split evenly between the two."""
        return self._shape("mean", privacy, key, column=column, lower=lower, upper=upper)

    def histogram(self, column: str, *, categories: Sequence[Any], privacy: PrivacyIn,
                  key: str | None = None) -> QueryResult:
        """Counts of each public category (values outside them are not counted)."""
        return self._shape("histogram", privacy, key, column=column,
                           categories=list(categories))

    def _shape(self, kind: str, privacy: PrivacyIn, key: str | None, **fields: Any
               ) -> QueryResult:
        return self.execute(PlanRequest.shape(kind, privacy, self.neighbouring, **fields),
                            key=key)

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
        p = privacy_of(spec, self.neighbouring)
        return self.execute(ReleaseRequest.from_json(spec, p), key=key)

    def query(self, plan: Query | dict[str, Any], *, key: str | None = None) -> QueryResult:
        """Run a query plan (:class:`~dpsieve.queries.plan.Query` or its JSON): checked
        against :meth:`schema` before any spend, charged once for all its aggregations,
        run on the data set's engine (docs/queries.md). ``result.answer`` is the typed
        answer."""
        if isinstance(plan, Query):
            return self.execute(PlanRequest.of(plan), key=key)
        if not (isinstance(plan, Mapping) and plan.get("type") == "query"):
            raise fail("plan", "Session.query", "a Query or a {'type': 'query', ...} dict",
                       plan.get("type") if isinstance(plan, dict) else type(plan).__name__)
        return self.run(plan, key=key)

    def preview(self, request: Request | Query | dict[str, Any]) -> dict[str, Any]:
        """What a query of any kind (a typed request, a plan, or any query's JSON) would
        cost and how noisy its answer would be, free (nothing read, spent or logged): the
        charge, whether the budget admits it and what is left after, each released
        number's noise (std, 95 % half-width) in the answer's units where the kind states
        it before running, and for DP key selection the threshold and the units a group
        needs to be released with probability 1/2 and 95 % (:mod:`dpsieve.session.preview`).
        """
        from dpsieve.session.preview import preview_request

        return preview_request(self, request)

    def utility_analysis(self, plan: Query | dict[str, Any], candidates: Any = None, *,
                         per_group: bool = False) -> dict[str, Any]:
        """**Not private; for the data owner only.** Bias (exact, on every row) and noise
        (the preview's calibration) of a typical plan's counts, sums and means under
        candidate bounds, and the candidate with the smallest expected error
        (:mod:`dpsieve.queries.utility`): to choose the public bounds to declare. Reads
        the rows (a frame or a CSV/Parquet file); touches no budget and logs nothing. The
        service offers it on no analyst route."""
        from dpsieve.queries.plan import from_spec
        from dpsieve.queries.utility import analyze

        q = plan if isinstance(plan, Query) else from_spec(plan, self.neighbouring.value)
        self._source.rows_loadable("Session.utility_analysis")
        return analyze(self._source.frame(), self._source.schema(), q, candidates,
                       self.neighbouring, per_group=per_group)

    def run(self, spec: dict[str, Any] | Query, *, key: str | None = None) -> QueryResult:
        """Run a query given as a JSON-ready dict (the library's dict entry point) or a
        typed plan: mapped once, at this edge (:func:`~dpsieve.queries.requests.
        request_from_json`), then :meth:`execute`."""
        return self.execute(request_from_json(spec, self.neighbouring), key=key)

    def execute(self, request: Request, *, key: str | None = None) -> QueryResult:
        """Run a typed request (:mod:`dpsieve.queries.requests`; the service and the CLI map
        their JSON to one, once), whatever its kind: prepared against the data set from
        public values (every check, the charge), then the charge spent durably, then
        (admitted) run and its answer recorded (the ledger's order, module docstring)."""
        ready = request.prepare(self._source)
        public = request.public
        key = key or uuid.uuid4().hex
        out = self.store.spend(self.budget_id, ready.charge, key=key,
                               principal=self.principal, request=public)
        d = out.decision
        left = d.remaining.under(self.neighbouring)  # stated under the budget's relation
        if not d.admitted:
            raise _budget_view.refused(self.store, self.budget_id, ready.charge,
                                       ready.requested, left)
        stored = out.answer if out.replayed else None
        if stored is None:
            if self._after_spend is not None:
                self._after_spend(key)
            stored = self.store.record_answer(self.budget_id, key, total(ready.run))
        if FAILED in stored:  # the stored outcome of this charge: a failure
            raise QueryFailedError(FAILED_MESSAGE)
        return QueryResult(stored["value"], stored["noise"], d.cost, left, key,
                           replayed=out.replayed, query=public,
                           budget=_budget_view.after_query(self.store, self.budget_id,
                                                           ready.charge),
                           interval=stored.get("interval"),
                           details=dict(stored.get("details") or {}))
