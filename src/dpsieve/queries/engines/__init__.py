"""Engines that compute a :class:`~dpsieve.queries.engine.BoundingSpec`: DuckDB (files),
pandas and polars (frames in memory), and the pure-Python reference.

Engines import their library lazily: importing this package needs none of them.
"""

from __future__ import annotations

from dpsieve.queries.engines.duckdb import DuckDBEngine, compile_sql
from dpsieve.queries.engines.frames import PandasEngine, PolarsEngine
from dpsieve.queries.engines.reference import ReferenceEngine
from dpsieve.queries.engines.resolve import engine_for, is_engine, is_spark_frame

__all__ = ["DuckDBEngine", "PandasEngine", "PolarsEngine", "ReferenceEngine", "compile_sql",
           "engine_for", "is_engine", "is_spark_frame"]
