"""A session's data set as the query layer sees it: :class:`SessionData`, the
:class:`~dpsieve.queries.source.Source` every request is prepared against.

Before a spend it states public facts only: the column names (``columns=``, a frame's
names or a file's header), their kinds (``column_types=``, or as the engine reports them
from a frame's dtypes or the file's metadata: :class:`dpsieve.queries.schema.ColumnType`),
the public schema of plans (declarations over the engine's metadata), and the row count
where it is public (replace-one). After the spend it gives the rows: the engine plans run
on, or the frame (loaded once).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring
from dpsieve.session import data as _data
from dpsieve.session.outcomes import reading

if TYPE_CHECKING:
    from dpsieve.queries.engine import Engine
    from dpsieve.queries.release_sizing import ReleaseLimits
    from dpsieve.queries.schema import Schema
    from dpsieve.queries.source import BudgetKind

__all__ = ["SessionData"]


class SessionData:
    """One data set's public facts and rows (see the module docstring and
    :class:`dpsieve.session.Session` for the arguments)."""

    def __init__(self, data: Any, *, columns: Sequence[str] | None,
                 column_types: Mapping[str, str] | None, row_count: Callable[[], int] | None,
                 schema: Any, privacy_unit: str | None, table: str | None,
                 release_limits: ReleaseLimits | None, loader: Callable[[], Any] | None,
                 memory_limit: str | None, engine: Any, rng: np.random.Generator | None,
                 dataset: str | None = None) -> None:
        from dpsieve.session.schema import declared_unit

        self._data = data
        self._frame: Any = None
        self._columns = list(columns) if columns is not None else None
        self._kinds = dict(column_types) if column_types is not None else None
        self._rows = row_count
        self._declared = schema
        self._table = table
        if memory_limit is not None:  # checked here, before any spend
            from dpsieve.queries.engines.duckdb import checked_limit

            memory_limit = checked_limit(memory_limit, "memory_limit")
        self._memory_limit = memory_limit
        self._loader = loader
        self._engine = engine
        #: A registered data set's name (its stored schema is the public one; a source
        #: that cannot be read as registered is refused naming it only).
        self.dataset = dataset
        self._public: Schema | None = None
        self.privacy_unit: str | None = declared_unit(schema, privacy_unit)
        self.release_limits = release_limits
        self.rng = rng
        #: The budget's relation (set by the session once it knows it).
        self.neighbouring = Neighbouring.ADD_REMOVE
        #: Reads the kind of the budget requests are charged to (set by the session;
        #: None: unknown).
        self.budget_reader: Callable[[], BudgetKind | None] | None = None

    def schema(self) -> Schema:
        """The data set's public schema: column names, types, declared public domains and
        bounds, and the privacy unit (from metadata and declarations; never values)."""
        from dpsieve.session.schema import resolve_schema

        if self._public is None:
            # a file's engine reads the declared column_types itself (types()): its table
            # then has every column, in file order, with its storage type
            kinds = None if isinstance(self._data, str | Path) and self._engine is None \
                else self._kinds
            with reading(self.dataset):
                # the table's columns read here, handed over (no call back into this
                # module from session.schema)
                table = self.engine().columns() if kinds is None else None
                self._public = resolve_schema(self._declared, self.privacy_unit, table,
                                              kinds, registered=self.dataset is not None)
        return self._public

    def types(self) -> dict[str, Any]:
        """The declared column types (a file's engine reads its columns as these; a CSV's
        undeclared columns are text)."""
        from dpsieve.session.schema import declared_types

        return declared_types(self._declared, self._kinds)

    def engine(self) -> Engine:
        """The engine plans run on: ``engine=``, else the one for the data."""
        from dpsieve.queries.engines.resolve import engine_for

        if self._engine is not None:
            engine: Engine = self._engine
            return engine
        return engine_for(self._data, table=self._table, memory_limit=self._memory_limit,
                          name="data", owner="Session", types=self.types())

    def budget_kind(self) -> BudgetKind | None:
        """The kind of the budget requests are charged to (public: its filter's kind and
        declared parameters), read when a request asks (an (eps, delta) plan); None where
        the session states none."""
        return None if self.budget_reader is None else self.budget_reader()

    def check_engine(self) -> None:
        """A bad ``DPSIEVE_DUCKDB_MEMORY_LIMIT`` for a file's engine, refused before the
        spend."""
        from dpsieve.queries.engines.duckdb import default_memory_limit

        if self._memory_limit is None and self._engine is None and isinstance(
                self._data, str | Path):
            default_memory_limit()

    def frame(self) -> Any:
        """The private data (loaded on first use, after an admitted spend)."""
        if self._frame is None:
            self._frame = (self._loader() if self._loader is not None
                           else _data.load_frame(self._data, self.types()))
        return self._frame

    def rows_loadable(self, owner: str) -> None:
        """Refuse before the spend a query shape whose rows cannot be loaded. Whether the
        source answers query plans only (a Spark table, an engine) is the registration's
        public configuration, so that refusal names it; a failure to read a registered
        file is the one generic message of :func:`reading`."""
        _data.plans_only(self._data, owner)
        with reading(self.dataset):
            _data.rows_loadable(self._data, owner)

    def columns(self) -> list[str]:
        """The column names (public metadata), read before a spend from ``columns=``, a
        frame's names or a file's header, never from the values."""
        if self._columns is None:
            with reading(self.dataset):
                self._columns = _data.data_columns(
                    self._frame if self._frame is not None else self._data)
        return self._columns

    def column_kind(self, column: str) -> str:
        """The column's kind (public schema: a :class:`~dpsieve.queries.schema.ColumnType`
        value), before a spend."""
        from dpsieve.queries.schema import ColumnType

        kinds = [t.value for t in ColumnType]
        if self.dataset is not None:  # a registered data set: its stored schema
            with reading(self.dataset):
                return self.schema().column(column, "column", "query").type.value
        if self._kinds is None or column not in self._kinds:
            src = self._frame if self._frame is not None else self._data
            self._kinds = {**_data.data_column_kinds(src, self.types()),
                           **(self._kinds or {})}
        kind = self._kinds.get(column, "other")
        if kind not in kinds:
            raise fail("column_types", "Session", f"kinds among {', '.join(kinds)}", kind)
        return kind

    def row_count(self) -> int:
        """The number of rows, read before a spend only for queries whose ``n`` is public
        (replace-one neighbours share it): ``row_count=``, a file's count (DuckDB), or the
        frame's length (a lazy loader is loaded; nothing is released)."""
        with reading(self.dataset):
            if self._rows is not None:
                return int(self._rows())
            if self._frame is None and isinstance(self._data, str | Path):
                return _data.data_row_count(self._data)
        return len(self.frame())
