"""Sessions: private queries on one data set, each admitted by a filter before data is read.

The package's modules, each public (the service and the CLI use them):

============ ================================================================================
module       holds
============ ================================================================================
``core``     :class:`Session`: every query is checked, charged once, run, recorded
``request``  :class:`Request`: a query's JSON mapped once (:func:`request_from_spec`)
``result``   :class:`QueryResult`: the answer with its cost and the budget left
``budgets``  :func:`filter_for_budget` and the privacy given as JSON at this edge
``data``     data access: frames, files' metadata and row counts, kept engines and frames
``datasets`` a registered data set (ledger registry record) and the session it runs in
``plans``    a data set's public schema, and how a plan's answer is stored
``release``  query release over a public categorical domain
``robust``   Propose-Filter-Release mean and median
============ ================================================================================
"""

from __future__ import annotations

from dpsieve.session.budgets import filter_for_budget, parse_description
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
    "parse_description",
]
