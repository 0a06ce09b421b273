"""What a query request may know of the data set it runs on, and what it prepares.

A request (:mod:`dpsieve.queries.requests`) is prepared against a :class:`Source`: public
facts only (the schema, column names and kinds, the neighbouring relation, the privacy
unit, the row count where it is public under replace-one), every check that can fail run
there, before the spend. It returns a :class:`Ready`: the charge, the privacy the analyst
asked for, and ``run``, which reads the data (through :meth:`Source.engine` or
:meth:`Source.frame`) only after the charge is admitted and durable. ``run`` is total:
no value of any row may make it fail.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription
from dpsieve.queries.engine import Engine
from dpsieve.queries.release_sizing import ReleaseLimits
from dpsieve.queries.schema import Schema

__all__ = ["SHAPES", "BudgetKind", "Ready", "Source", "row_level"]

#: The one-aggregation shapes answered as one-aggregation plans (in their earlier form).
SHAPES = ("count", "sum", "mean", "histogram", "linear")


@dataclass(frozen=True, slots=True)
class BudgetKind:
    """The kind of budget a request will be charged to, as preparation may read it before
    the spend: ``kind`` (the filter's, e.g. ``"zcdp"``), ``name`` (in words, e.g. "a zCDP
    budget") and ``fits``, whether a budget of this kind can ever admit a charge of that
    kind, however small (:func:`dpsieve.filters.summary.query_fits`: the conversion the
    filter charges by exists for it). All public: the budget's kind and declared
    parameters, never its data. An (eps, delta) plan prepares only candidates whose charge
    fits (:mod:`dpsieve.queries.approx`)."""

    kind: str
    name: str
    fits: Callable[[PrivacyDescription], bool]


class Source(Protocol):
    """The data set a request runs on, as a session exposes it (public facts before the
    spend; the data after)."""

    @property
    def neighbouring(self) -> Neighbouring: ...

    @property
    def privacy_unit(self) -> str | None: ...

    @property
    def rng(self) -> np.random.Generator | None: ...

    def schema(self) -> Schema:
        """The public schema (plans), from metadata and declarations."""
        ...

    def columns(self) -> list[str]:
        """The column names (public metadata)."""
        ...

    def column_kind(self, column: str) -> str:
        """A column's kind (``integer``, ``float``, ``boolean``, ``string``, ``other``)."""
        ...

    def row_count(self) -> int:
        """The number of rows: read before a spend only where it is public (replace-one)."""
        ...

    def rows_loadable(self, owner: str) -> None:
        """Refuse, from the source's type only, a request whose rows cannot be loaded."""
        ...

    def check_engine(self) -> None:
        """Refuse, before the spend, an engine configuration that cannot run."""
        ...

    @property
    def release_limits(self) -> ReleaseLimits | None:
        """The work limits of release requests (None: the defaults)."""
        ...

    def engine(self) -> Engine:
        """The engine plans run on (after the spend)."""
        ...

    def budget_kind(self) -> BudgetKind | None:
        """The kind of the budget requests are charged to (public), None where unknown
        (then an (eps, delta) plan is charged as if any budget took every charge)."""
        ...

    def frame(self) -> Any:
        """The rows as a pandas frame (after the spend)."""
        ...


@dataclass(frozen=True, slots=True)
class Ready:
    """A request prepared from public values: ``charge`` (what the filter is charged),
    ``requested`` (the privacy the analyst asked for: named in a refusal) and ``run``,
    which reads the data and returns the answer to store (``value``, ``noise`` and,
    where there are, ``interval`` and ``details``). ``figures`` returns the request's
    public preview figures (JSON-ready: at least ``noise``, None where the kind states
    none before it runs), computed from public values only, never reading the data."""

    charge: PrivacyDescription
    requested: PrivacyDescription
    run: Callable[[], dict[str, Any]]
    figures: Callable[[], dict[str, Any]] | None = None


def row_level(source: Source, kind: str) -> None:
    """Refuse a row-level request (one that protects one row, not all rows of a unit) on a
    data set with a privacy unit, and one whose rows cannot be loaded; both from public
    facts, before the spend."""
    if source.privacy_unit is not None:
        raise fail("type", kind, "a query plan ({'type': 'query', ...}) or one of "
                   f"{', '.join(SHAPES)}: this data set's privacy unit is "
                   f"{source.privacy_unit!r}, and {kind} queries protect one row, "
                   "not all rows of a unit", kind)
    source.rows_loadable(kind)
