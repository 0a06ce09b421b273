"""Opening Spark for the CLI and the service: a session from a URL, a source from a name.

* :func:`open_spark` -- ``sc://host:15002`` connects through **Spark Connect** (the client
  needs no JVM); any other URL is a **master** (``local[2]``, ``spark://host:7077``,
  ``yarn``, ``k8s://...``) for a classic session created in this process (needs Java).
* :func:`spark_source` -- a table or view of the session's catalog (``db.people``), or a
  file Spark reads itself (``.parquet`` / ``.csv`` paths, including ``hdfs://`` and
  ``s3a://`` ones): only its schema is read here; rows stay on the executors.

Both only connect and describe; the bounding runs in :class:`SparkEngine`.
"""

from __future__ import annotations

from typing import Any

from dpsieve._validation import fail
from dpsieve.queries.engines.spark import SparkEngine

__all__ = ["open_spark", "spark_source"]

_FILE_READERS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv"}


def open_spark(url: str, app_name: str = "dpsieve") -> Any:
    """The SparkSession for ``url`` (Spark Connect for ``sc://``, else a master URL)."""
    if not isinstance(url, str) or not url.strip():
        raise fail("spark", "open_spark", "a Spark master URL (local[2], spark://host:7077) "
                   "or a Spark Connect URL (sc://host:15002)", url)
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise fail("spark", "open_spark", "usable with pyspark installed (pip install "
                   "'dpsieve[spark]')", url) from None
    builder = SparkSession.builder.appName(app_name)
    if url.startswith("sc://"):
        return builder.remote(url).getOrCreate()
    return builder.master(url).config("spark.ui.showConsoleProgress", "false").getOrCreate()


def spark_source(source: str, spark: Any) -> SparkEngine:
    """The engine over ``source``: a ``.parquet``/``.csv`` path read by Spark, or else a
    table or view of the session's catalog (refused, naming it, if there is none)."""
    if not isinstance(source, str) or not source:
        raise fail("source", "spark_source", "a Spark catalog table name or a .parquet/.csv "
                   "path", source)
    low = source.lower()
    for ext, fmt in _FILE_READERS.items():
        if low.endswith(ext):
            reader = spark.read.format(fmt)
            if fmt == "csv":
                reader = reader.option("header", "true").option("inferSchema", "true")
            return SparkEngine(reader.load(source))
    return SparkEngine(source, spark=spark)
