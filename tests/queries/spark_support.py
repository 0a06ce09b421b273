"""A local Spark session for the Spark engine tests, or a clear reason to skip."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Sequence
from typing import Any

import pytest

from dpsieve.queries import Column, ColumnType


def skip_reason() -> str | None:
    """Why the Spark tests cannot run here (None if they can)."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install 'dpsieve[spark]')"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return ("no Java runtime on PATH (Spark needs one: Debian's openjdk-17-jre-headless; "
                ".ci/run installs it)")
    return None


def local_session() -> Any:
    """A small local[2] session: 2 shuffle partitions, no UI, quiet logs."""
    from pyspark.sql import SparkSession

    spark = (SparkSession.builder.master("local[2]").appName("dpsieve-tests")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "1g")
             .config("spark.sql.session.timeZone", "UTC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def session_or_skip() -> Any:
    """The local session, or a pytest skip naming what is missing."""
    reason = skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return local_session()


def spark_frame(spark: Any, rows: Sequence[dict[str, Any]], columns: Sequence[Column],
                partitions: int | None = None) -> Any:
    """A DataFrame of dict rows with the columns' Spark types."""
    from pyspark.sql.types import (
        BooleanType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    types = {ColumnType.INTEGER: LongType(), ColumnType.FLOAT: DoubleType(),
             ColumnType.STRING: StringType(), ColumnType.BOOLEAN: BooleanType()}
    schema = StructType([StructField(c.name, types[c.type], True) for c in columns])
    df = spark.createDataFrame([tuple(r[c.name] for c in columns) for r in rows], schema)
    return df.repartition(partitions) if partitions else df
