"""Sessions: private queries on one data set, each admitted by a filter before data is read.

The package's modules, each public (the service and the CLI use them):

============ ================================================================================
module       holds
============ ================================================================================
``core``     :class:`Session`: every request prepared, charged once, run, recorded
``source``   :class:`SessionData`: the data set every request is prepared against
``result``   :class:`QueryResult`: the answer with its cost and the budget left
``budgets``  :func:`filter_for_budget` and the privacy given as JSON at this edge
``data``     data access: frames, files' metadata and row counts, kept engines and frames
``datasets`` a registered data set (ledger registry record) and the session it runs in
``schema``   a data set's public schema: declarations over the engine's metadata
``outcomes`` a failure after the charge (one stored outcome), a registered source unread
============ ================================================================================

The kinds of query (plans, the one-aggregation shapes, release, robust statistics) are
typed requests of the query layer (:mod:`dpsieve.queries.requests`), read from JSON once.
"""

from __future__ import annotations

from dpsieve.session.budgets import filter_for_budget
from dpsieve.session.core import Session
from dpsieve.session.data import data_column_kinds, data_columns, data_row_count, load_frame
from dpsieve.session.result import QueryResult

__all__ = [
    "QueryResult",
    "Session",
    "data_column_kinds",
    "data_columns",
    "data_row_count",
    "filter_for_budget",
    "load_frame",
]
