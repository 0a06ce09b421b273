"""Request bodies of the HTTP API (pydantic), separate from the ledger's rows.

Types are strict: a number is a JSON number (``true`` and ``"0.5"`` are
refused, not read as 1.0 and 0.5), an integer a JSON integer; floats are finite (NaN and
infinities are refused with 422), strings and lists bounded, unknown fields refused.

This is where the service's JSON becomes typed values, once: :meth:`PrivacyIn.description`
and :meth:`BudgetIn.budget` build privacy descriptions from the validated fields, and
``QueryIn.request`` / ``PlanIn.request`` the typed
:data:`~dpsieve.queries.requests.Request` the session executes (its plan read by
:func:`dpsieve.queries.plan.from_spec`). Nothing below the service sees the request JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    model_validator,
)

from dpsieve._validation import fail
from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
)
from dpsieve.queries.source import SHAPES

if TYPE_CHECKING:
    from dpsieve.queries.requests import Request

__all__ = ["AnalystIn", "BlocksIn", "BudgetIn", "ColumnIn", "DatasetIn", "GrantIn", "PlanIn",
           "PrivacyIn", "QueryBody", "QueryIn", "SchemaIn", "UnlockIn"]

Finite = Annotated[float, Field(allow_inf_nan=False)]
Name = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")]
Column = Annotated[str, Field(min_length=1, max_length=256)]
#: A category keeps its JSON type (true stays a boolean, 1 an integer, "1" a string): the
#: query layer canonicalises it against the column's public type (dpsieve.queries.schema).
Category = StrictBool | StrictInt | StrictFloat | StrictStr


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


#: The fields each description type needs, in its constructor's order.
_NEEDS = {"pure": ("eps",), "approx": ("eps", "delta"), "zcdp": ("rho",),
          "approx_zcdp": ("rho", "delta"), "gdp": ("mu",), "rdp": ("orders", "values")}
_MAKE: dict[str, Any] = {"pure": PureDP, "approx": ApproxDP, "zcdp": ZCDP,
                         "approx_zcdp": ApproxZCDP, "gdp": GDP, "rdp": RDP}


def _describe(m: BaseModel, kind: str, neighbouring: str, name: str) -> PrivacyDescription:
    """The description a validated model states (its constructor checks the ranges); a
    missing field is a ValidationError naming ``name``. Fields another type takes are
    ignored."""
    args: list[Any] = []
    for f in _NEEDS[kind]:
        v = getattr(m, f)
        if v is None:
            raise fail(name, "query", f"a complete privacy description (missing or bad {f!r})",
                       m.model_dump(exclude_none=True))
        args.append(tuple(v) if isinstance(v, list) else v)
    d: PrivacyDescription = _MAKE[kind](*args, Neighbouring(neighbouring))
    return d


class PrivacyIn(_Strict):
    """The privacy a query spends: ``{"type": "gdp", "mu": 0.1}``, or pure/eps, zcdp/rho."""

    type: Literal["pure", "gdp", "zcdp", "approx"]
    eps: Finite | None = None
    delta: Finite | None = None
    mu: Finite | None = None
    rho: Finite | None = None

    def description(self, neighbouring: str, name: str = "privacy") -> PrivacyDescription:
        """The privacy description, under the data set's ``neighouring`` relation."""
        return _describe(self, self.type, neighbouring, name)


class QueryIn(_Strict):
    """A query: count, sum, mean, histogram, linear, robust_mean, robust_median, release
    (docs/session.md). ``workload`` is a matrix for ``linear`` and a name such as
    ``"marginals:1"`` for ``release``."""

    type: Literal["count", "sum", "mean", "histogram", "linear", "release", "robust_mean",
                  "robust_median"]
    privacy: PrivacyIn
    column: Column | None = None
    lower: Finite | None = None
    upper: Finite | None = None
    bound: Finite | None = None
    categories: Annotated[list[Category], Field(max_length=10_000)] | None = None
    workload: (Annotated[list[Annotated[list[Finite], Field(max_length=1000)]],
                         Field(max_length=1000)]
               | Annotated[str, Field(min_length=1, max_length=64)] | None) = None
    mechanism: Literal["envelope", "pmw", "mwem", "laplace", "blr"] | None = None
    #: count/sum/mean/histogram/linear only: a privacy unit's contribution bounds and a row
    #: filter, read by :func:`dpsieve.queries.plan.from_spec` (which names the parameter).
    contribution: Annotated[dict[str, Any], Field(max_length=4)] | None = None
    where: Annotated[list[Annotated[dict[str, Any], Field(max_length=4)]],
                     Field(max_length=32)] | None = None
    columns: Annotated[list[Column], Field(min_length=1, max_length=16)] | None = None
    domain: Annotated[dict[Column, Annotated[list[Category], Field(max_length=4096)]],
                      Field(max_length=16)] | None = None
    n: Annotated[int, Field(ge=1)] | None = None
    rounds: Annotated[int, Field(ge=1)] | None = None
    eta: Finite | None = None
    gamma: Finite | None = None

    @model_validator(mode="after")
    def _plan_fields(self) -> QueryIn:
        if self.type not in _SHAPES:
            for name in ("contribution", "where"):
                if getattr(self, name) is not None:
                    raise ValueError(f"'{name}' is for {', '.join(_SHAPES)} queries and "
                                     f"plans, not {self.type!r}")
        return self

    def request(self, neighbouring: Neighbouring) -> Request:
        """The typed request (privacy built here; the plan of a one-aggregation shape read
        by ``from_spec``), what the session executes."""
        return _request(self, neighbouring)


def _request(body: QueryIn | PlanIn, neighbouring: Neighbouring) -> Request:
    from dpsieve.queries.requests import request_from_json

    spec = body.model_dump(exclude_none=True, exclude={"privacy"})
    spec["privacy"] = body.privacy.description(neighbouring.value)
    return request_from_json(spec, neighbouring)


_SHAPES = SHAPES
#: A group key's value (``null``: the missing-value group).
KeyPart = Category | None


class PlanIn(_Strict):
    """A query plan (docs/queries.md): one or more aggregations for one charge, optional
    ``group_by`` with public ``keys`` or DP key selection (``select``), a row filter
    (``where``) and a privacy unit's contribution bounds. The envelope is checked here; the
    nested objects are read once by :func:`dpsieve.queries.plan.from_spec`, which names the
    parameter of any error, and checked against the data set's public schema before any
    spend."""

    type: Literal["query"]
    privacy: PrivacyIn
    aggregations: Annotated[list[Annotated[dict[str, Any], Field(max_length=8)]],
                            Field(max_length=32)]
    group_by: Annotated[list[Column], Field(max_length=8)] | None = None
    keys: Annotated[list[Annotated[list[KeyPart], Field(max_length=8)]],
                    Field(max_length=100_000)] | None = None
    select: Annotated[dict[str, Any], Field(max_length=2)] | None = None
    where: Annotated[list[Annotated[dict[str, Any], Field(max_length=4)]],
                     Field(max_length=32)] | None = None
    #: ``{max_groups, max_rows}`` (numbers or ``"auto"``) or ``"auto"``: required with a
    #: privacy unit (checked against the schema before any spend).
    contribution: Annotated[dict[str, Any], Field(max_length=4)] | Literal["auto"] | None = None
    weights: Annotated[list[Finite], Field(max_length=32)] | None = None
    #: The share of ``privacy`` spent on ``"auto"`` bounds (docs/queries.md).
    auto_share: Finite | None = None

    def request(self, neighbouring: Neighbouring) -> Request:
        """The typed request: the privacy built here, the plan read by ``from_spec``."""
        return _request(self, neighbouring)


#: The body of ``POST /v1/datasets/{name}/queries``: a plan or a one-query shape.
QueryBody = Annotated[QueryIn | PlanIn, Field(discriminator="type")]


class ColumnIn(_Strict):
    """A public column declaration: its type (checked against the table's), and optional
    public ``categories`` (domain) and ``bounds`` (default clipping) -- public knowledge
    the owner states, never read from the data."""

    name: Column
    type: Literal["integer", "float", "string", "boolean", "other"]
    categories: Annotated[list[KeyPart], Field(max_length=10_000)] | None = None
    bounds: Annotated[list[Finite], Field(min_length=2, max_length=2)] | None = None


class BudgetIn(_Strict):
    """A budget as a privacy description, e.g. ``{"type": "gdp", "mu": 1.0}``."""

    type: Literal["pure", "approx", "zcdp", "approx_zcdp", "gdp", "rdp"]
    eps: Finite | None = None
    delta: Finite | None = None
    rho: Finite | None = None
    mu: Finite | None = None
    orders: Annotated[list[Finite], Field(max_length=1000)] | None = None
    values: Annotated[list[Finite], Field(max_length=1000)] | None = None
    neighbouring: Literal["add_remove", "replace_one"] = "add_remove"
    #: The typical query's privacy (or a list, cycled): chooses the split of an (eps, delta)
    #: budget between a pure and a Gaussian part (docs/filters.md, "Mixed budgets").
    typical: PrivacyIn | Annotated[list[PrivacyIn], Field(min_length=1, max_length=16)] | None \
        = None

    def description(self) -> dict[str, Any]:
        """The budget as a privacy-description dict (without ``typical``)."""
        return self.model_dump(exclude_none=True, exclude={"typical"})

    def budget(self) -> PrivacyDescription:
        """The budget as a privacy description (built from the validated fields)."""
        return _describe(self, self.type, self.neighbouring, "budget")

    def typicals(self) -> list[PrivacyDescription] | None:
        """The typical queries as descriptions, under the budget's relation."""
        if self.typical is None:
            return None
        items = self.typical if isinstance(self.typical, list) else [self.typical]
        return [t.description(self.neighbouring, "typical") for t in items]


class UnlockIn(_Strict):
    """How a block's budget is unlocked: ``none``; ``periodic`` (``fraction`` or ``1/n``
    more each ``period`` seconds); ``arrivals`` (``fraction`` or ``1/n`` more per arriving
    ``analyst`` or ``request``)."""

    type: Literal["none", "periodic", "arrivals"]
    fraction: Finite | StrictStr | None = None
    n: StrictInt | None = None
    period: Finite | None = None
    by: Literal["analyst", "request"] | None = None


class BlocksIn(_Strict):
    """A data set's block declaration (docs/proofs/blocks.md): the block column (integer
    or string), the budget every block arrives with, unlocking, the scheduler, and
    whether every privacy unit's rows lie in one block (the steward's statement)."""

    column: Column
    budget: BudgetIn
    unlock: UnlockIn | None = None
    scheduler: Literal["dpf", "dpack", "fcfs"] = "dpf"
    recompute: int = Field(0, ge=0, description=(
        "dpack only: re-rank the waiting requests after every this many admissions within "
        "a pass (DPack's metric_recomputation_period); 0 ranks once a pass."))
    unit_in_one_block: bool = False

    def spec(self) -> dict[str, Any]:
        """The declaration's JSON (:func:`dpsieve.blocks.spec.block_spec_from_dict`)."""
        out: dict[str, Any] = {"column": self.column,
                               "budget": self.budget.model_dump(exclude_none=True),
                               "scheduler": self.scheduler,
                               "unit_in_one_block": self.unit_in_one_block}
        if self.recompute:
            out["recompute"] = self.recompute
        if self.unlock is not None:
            out["unlock"] = self.unlock.model_dump(exclude_none=True)
        return out


class DatasetIn(_Strict):
    """Register a CSV or Parquet file (a path on the server) under a name -- or, on a
    service started with a Spark URL (``DPSIEVE_SPARK_URL``), a table of the Spark catalog
    (``spark_table``; it answers query plans only). Exactly one of the two."""

    name: Name
    #: no NUL: the OS cannot take one (it reached os.path.realpath: a 500)
    path: Annotated[str, Field(min_length=1, max_length=4096,
                               pattern=r"^[^\x00]+$")] | None = None
    spark_table: Annotated[str, Field(min_length=1, max_length=256,
                                      pattern=r"^[A-Za-z0-9_.`]+$")] | None = None
    budget: BudgetIn | None = None
    #: The column identifying a person (absent: one row per person); it cannot change once
    #: the data set's budget has paid for queries.
    privacy_unit: Column | None = None
    #: Declarations of public types, domains and bounds of some columns.
    columns: Annotated[list[ColumnIn], Field(max_length=4096)] | None = None
    #: A CSV file: declare every column not in ``columns`` with the type DuckDB's reader
    #: guesses from its values (the owner's choice, stored as declarations; listed in
    #: the answer). Otherwise a CSV's undeclared columns are text.
    infer_types: bool = False
    #: A block column and the budget each block arrives with (docs/proofs/blocks.md):
    #: the data set then has a budget per block instead of ``budget``.
    blocks: BlocksIn | None = None

    @model_validator(mode="after")
    def _one_source(self) -> DatasetIn:
        if (self.path is None) == (self.spark_table is None):
            raise ValueError("give exactly one of 'path' and 'spark_table'")
        if self.blocks is not None and self.budget is not None:
            raise ValueError("give at most one of 'budget' and 'blocks' (a data set with "
                             "blocks has a budget per block)")
        return self


class SchemaIn(_Strict):
    """A data set's declarations, replaced in place (``PUT /v1/datasets/{name}/schema``):
    ``columns`` (absent or empty: none) and ``privacy_unit`` (absent: one row per person)."""

    privacy_unit: Column | None = None
    columns: Annotated[list[ColumnIn], Field(max_length=4096)] | None = None


class AnalystIn(_Strict):
    """Create an analyst; the response carries the API key, shown once."""

    name: Name


class GrantIn(_Strict):
    """Let an analyst query a data set."""

    analyst: Name
