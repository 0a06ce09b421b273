"""The Spark engine: a :class:`BoundingSpec` compiled to PySpark DataFrame operations.

For tables that live in a cluster. Only the DataFrame API is used (no RDDs, no Python
UDFs), so the same plan runs on a local Spark, on a cluster, and through Spark Connect,
and the executors need no Python package of ours. What the plan does, step by step
(docs/queries-engines.md has the semantics; docs/spark.md the deployment):

1. project the columns the spec reads, apply the row predicates, drop rows whose unit is
   missing, attach each row's group (a broadcast join with the public keys, or the
   observed key columns and their hash ``h(g)``) and its per-row lattice integers;
2. **one shuffle on the privacy unit**: ``repartition(unit)``. Every bounding step after it
   -- the (unit, group) cells, the L0 choice of each unit's groups, the L-infinity choice
   of rows in a cell -- is a window or a group-by whose keys contain the unit, which that
   partitioning already satisfies, so Spark adds no exchange for them
   (:meth:`SparkEngine.bounding_shuffles` counts them in the physical plan);
3. one aggregation by group of small ``(group, measure, bucket, value)`` entries, summed as
   ``DECIMAL(38, 0)`` (exact; a total outside 64 bits raises :class:`NumericalError`);
   only these per-group totals are collected to the driver.

Noise and accounting never run here: they stay in dpsieve on the driver.

The keyed mixer of :mod:`dpsieve.queries._mix` is evaluated on Spark ``LongType`` columns.
Spark 4 runs in ANSI mode, where a 64-bit product that overflows raises, so the products
``x * C mod 2^64`` are computed from 16-bit limbs (every partial product and carry stays
below 2^36) and reassembled with shifts and bitwise ors, which never overflow. Unsigned
64-bit order is the signed order of ``x XOR 2^63``.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from dpsieve._validation import fail
from dpsieve.errors import NumericalError
from dpsieve.queries._mix import C1, C2, MASK64, NULL_CODE, sampling_keys
from dpsieve.queries.engine import (
    Aggregates,
    BoundingSpec,
    BucketCount,
    Level,
    Op,
    Predicate,
    RowCount,
    ValueSum,
)
from dpsieve.queries.schema import Column, ColumnType, KeyValue

if TYPE_CHECKING:
    from pyspark.sql import Column as SCol
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkEngine", "spark_column_type"]

_SIGN = 1 << 63
_LIMB = 0xFFFF
#: Entry kinds of the final aggregation (column ``_w``): per measure index >= 0, and this
#: one for the number of kept units of a group.
_UNITS = -1
_DEC = "decimal(38,0)"


def _signed(x: int) -> int:
    """A 64-bit word as the signed long Spark stores."""
    x &= MASK64
    return x - (1 << 64) if x >= _SIGN else x


#: Spark's integer and float types by their storage names (DuckDB's vocabulary).
_SPARK_STORAGE = {"byte": "TINYINT", "short": "SMALLINT", "integer": "INTEGER",
                  "long": "BIGINT", "float": "FLOAT", "double": "DOUBLE"}


def spark_column_type(type_name: str) -> ColumnType:
    """The public type of a Spark SQL type (its ``typeName()``)."""
    t = type_name.lower()
    if t in ("byte", "short", "integer", "long"):
        return ColumnType.INTEGER
    if t in ("float", "double") or t.startswith("decimal"):
        return ColumnType.FLOAT
    if t == "string" or t.startswith("varchar") or t.startswith("char"):
        return ColumnType.STRING
    if t == "boolean":
        return ColumnType.BOOLEAN
    return ColumnType.OTHER


class _Plan:
    """Builds the DataFrame of one spec; every mixer step is its own projection so that
    no expression is duplicated (each column is referenced several times per step)."""

    def __init__(self, df: DataFrame, types: dict[str, ColumnType]) -> None:
        self.df = df
        self.types = types
        self._n = 0

    def tmp(self) -> str:
        self._n += 1
        return f"__t{self._n}"

    # ---- the mixer, as SQL text (one py4j call per projection) ---------------------------
    def _project(self, exprs: dict[str, str], drop: Sequence[str] = ()) -> None:
        """Adds (or replaces) columns given as SQL expressions, in one projection, and
        drops the columns ``drop`` (which the new expressions may still read)."""
        gone = set(exprs) | set(drop)
        keep = [f"`{c}`" for c in self.df.columns if c not in gone]
        self.df = self.df.selectExpr(*keep, *[f"{e} AS `{n}`" for n, e in exprs.items()])

    @staticmethod
    def _xs(x: str, s: int) -> str:
        return f"({x} ^ shiftrightunsigned({x}, {s}))"

    @staticmethod
    def _limbs(x: str, names: list[str]) -> dict[str, str]:
        return {n: f"(shiftrightunsigned({x}, {16 * i}) & {_LIMB})" for i, n in enumerate(names)}

    @staticmethod
    def _product(limbs: list[str], c: int) -> str:
        """``x * c mod 2^64`` from the 16-bit limbs of ``x``: no partial product, sum or
        carry exceeds 2^36, so ANSI overflow checks never fire; the digits are reassembled
        with shifts and ors (which do not overflow)."""
        cl = [(c >> (16 * i)) & _LIMB for i in range(4)]
        sums = [" + ".join(f"`{limbs[i]}` * {cl[k - i]}" for i in range(k + 1))
                for k in range(4)]
        t = f"({sums[0]})"
        digits = [f"({t} & {_LIMB})"]
        for k in range(1, 4):
            t = f"({sums[k]} + shiftright({t}, 16))"
            digits.append(f"shiftleft({t} & {_LIMB}, {16 * k})")
        return "(" + " | ".join(digits) + ")"

    def mix_many(self, jobs: dict[str, str]) -> None:
        """``dst = mix(src)`` for every ``dst: src`` (``src`` a SQL expression of existing
        columns), computed side by side in five projections (limbs, product, limbs,
        product, final shift): every column is referenced several times per step, so each
        step is materialised rather than inlined."""
        a = {d: [self.tmp() for _ in range(4)] for d in jobs}
        b = {d: self.tmp() for d in jobs}
        c = {d: [self.tmp() for _ in range(4)] for d in jobs}
        e = {d: self.tmp() for d in jobs}
        step: dict[str, str] = {}
        for d, src in jobs.items():
            step.update(self._limbs(self._xs(f"({src})", 27), a[d]))
        self._project(step)
        self._project({b[d]: self._product(a[d], C1) for d in jobs}, drop=[
            n for d in jobs for n in a[d]])
        step = {}
        for d in jobs:
            step.update(self._limbs(self._xs(f"`{b[d]}`", 33), c[d]))
        self._project(step, drop=list(b.values()))
        self._project({e[d]: self._product(c[d], C2) for d in jobs}, drop=[
            n for d in jobs for n in c[d]])
        self._project({d: self._xs(f"`{e[d]}`", 27) for d in jobs}, drop=list(e.values()))

    # ---- values -------------------------------------------------------------------------
    def missing(self, col: str) -> SCol:
        from pyspark.sql import functions as sf

        c = sf.col(col)
        if self.types[col] == ColumnType.FLOAT:
            return c.isNull() | sf.isnan(c)
        return c.isNull()

    def encode(self, col: str) -> SCol:
        """The 64-bit encoding of a unit or key value (``_mix.encode``), as a signed long."""
        from pyspark.sql import functions as sf

        c = sf.col(col)
        t = self.types[col]
        if t == ColumnType.STRING:
            h = sf.md5(c)  # 32 hex digits; bytes 8..15 are digits 16..31, little-endian
            le = sf.concat(*[sf.substring(h, 17 + 2 * i, 2) for i in reversed(range(8))])
            e = sf.conv(le, 16, -10).cast("long")
        else:
            e = c.cast("long")
        return sf.when(c.isNull(), sf.lit(_signed(NULL_CODE))).otherwise(e)

    def predicate(self, p: Predicate) -> SCol:
        from pyspark.sql import functions as sf

        c = sf.col(p.column)
        miss = self.missing(p.column)
        if p.op == Op.IS_NULL:
            return miss
        if p.op == Op.NOT_NULL:
            return ~miss
        if p.op in (Op.IN, Op.NOT_IN):
            vals = p.value if isinstance(p.value, tuple) else (p.value,)
            inside = sf.lit(False)
            for v in vals:
                inside = inside | (c == sf.lit(v))
            return ~miss & (~inside if p.op == Op.NOT_IN else inside)
        lit = sf.lit(p.value)
        cmp: SCol = {Op.EQ: c == lit, Op.NE: c != lit, Op.LT: c < lit, Op.LE: c <= lit,
                     Op.GT: c > lit, Op.GE: c >= lit}[p.op]
        return ~miss & cmp

    def lattice(self, col: str, g: float, lo: float, hi: float, rlo: int, rhi: int) -> SCol:
        """The clamped lattice integer of one row (``engine.snap``), as a long."""
        from pyspark.sql import functions as sf

        x = sf.when(self.missing(col), sf.lit(0.0)).otherwise(sf.col(col).cast("double"))
        xc = sf.least(sf.greatest(x, sf.lit(float(lo))), sf.lit(float(hi)))
        a = xc / sf.lit(float(g))
        fl = sf.floor(a).cast("long")
        r = fl + sf.when(a - fl >= sf.lit(0.5), sf.lit(1)).otherwise(sf.lit(0))
        return sf.least(sf.greatest(r, sf.lit(int(rlo))), sf.lit(int(rhi))).cast("long")

    def add_row_integer(self, m: ValueSum | BucketCount, dst: str) -> None:
        """Adds column ``dst``: a measure's per-row integer (a long). Integer divisions and
        large squares are exact (SQL ``div`` on ``DECIMAL(38, 0)``)."""
        from pyspark.sql import functions as sf

        if isinstance(m, ValueSum):
            r = self.lattice(m.column, m.granularity, m.lower, m.upper, m.row_lower,
                             m.row_upper)
            self.df = self.df.withColumn(dst, r)
            s = m.square_shift
            if s is None:
                return
            top = max(abs(m.row_lower), abs(m.row_upper))
            if top * top + (1 << max(s - 1, 0)) < _SIGN:
                sq = sf.col(dst) * sf.col(dst)
                e = sf.shiftright(sq + sf.lit(1 << (s - 1)), s) if s > 0 else sq
            else:  # exact in decimals; a row integer beyond 64 bits raises (overflow)
                q = f"CAST(`{dst}` AS {_DEC})"
                half = (1 << (s - 1)) if s > 0 else 0
                e = sf.expr(f"({q} * {q} + {half}) div {1 << s}")
            self.df = self.df.withColumn(dst, e.cast("long"))
            return
        if m.categories is not None:
            c = sf.col(m.column)
            out = sf.lit(-1)
            for i in reversed(range(len(m.categories))):
                out = sf.when(c == sf.lit(m.categories[i]), sf.lit(i)).otherwise(out)
            self.df = self.df.withColumn(
                dst, sf.when(self.missing(m.column), sf.lit(-1)).otherwise(out).cast("long"))
            return
        b = m.bins
        assert b is not None  # BucketCount guarantees one of the two
        r = self.lattice(m.column, b.granularity, b.lower, b.upper, b.row_lower, b.row_upper)
        self.df = self.df.withColumn(dst, r)
        width = b.row_upper - b.row_lower + 1
        e = sf.expr(f"((CAST(`{dst}` AS {_DEC}) - ({b.row_lower})) * {b.count}) div {width}")
        self.df = self.df.withColumn(dst, e.cast("long"))


class SparkEngine:
    """A Spark DataFrame, or a table or view of a Spark catalog.

    ``SparkEngine(df)`` or ``SparkEngine("db.people", spark=session)`` (the active session
    if ``spark`` is omitted). ``partitions`` sets the number of partitions of the shuffle on
    the privacy unit (Spark's ``spark.sql.shuffle.partitions`` when omitted).
    """

    name = "spark"

    def __init__(self, source: DataFrame | str, *, spark: SparkSession | None = None,
                 partitions: int | None = None) -> None:
        try:
            from pyspark.sql import SparkSession
        except ImportError as e:  # pragma: no cover - exercised without the extra
            raise ImportError("the Spark engine needs pyspark: pip install "
                              "'dpsieve[spark]'") from e
        if isinstance(source, str):
            session = spark or SparkSession.getActiveSession()
            if session is None:
                raise fail("spark", "SparkEngine", "a SparkSession (none is active) to read "
                           "a catalog table", None)
            if not session.catalog.tableExists(source):
                raise fail("source", "SparkEngine", "a table or view in the Spark catalog",
                           source)
            self._df = session.table(source)
        elif hasattr(source, "schema") and hasattr(source, "groupBy"):
            self._df = source
        else:
            raise fail("source", "SparkEngine", "a Spark DataFrame or a catalog table name",
                       type(source).__name__)
        if partitions is not None and not (isinstance(partitions, int) and partitions >= 1):
            raise fail("partitions", "SparkEngine", "an int >= 1", partitions)
        self._partitions = partitions

    def columns(self) -> tuple[Column, ...]:
        return tuple(Column(f.name, spark_column_type(f.dataType.typeName()),
                            storage=_SPARK_STORAGE.get(f.dataType.typeName().lower()))
                     for f in self._df.schema.fields)

    # ---- the plan -----------------------------------------------------------------------
    def plan(self, spec: BoundingSpec) -> DataFrame:
        """The DataFrame whose rows are ``(group..., _w, _b, _v)`` totals: ``_w`` a measure
        index (or -1 for units), ``_b`` a bucket (0 for scalars), ``_v`` the exact total."""
        from pyspark.sql import Window
        from pyspark.sql import functions as sf

        cols = self.columns()
        types = {c.name: c.type for c in cols}
        for name in _spec_columns(spec):
            if name not in types:
                raise fail("column", "SparkEngine", "a column of the table", name)
        k0, k1 = sampling_keys(spec.seed)
        public = spec.keys is not None
        P = _Plan(self._df, types)
        df = self._df
        where = [P.predicate(p) for p in spec.where]
        if spec.unit is not None:
            where.append(~sf.col(spec.unit).isNull())
        for w in where:
            df = df.filter(w)
        P.df = df
        # groups
        if public and spec.group_by:
            assert spec.keys is not None
            gcols = ["_g"]
            P.df = self._join_keys(P, spec)
            P.df = P.df.withColumn("_hg", sf.col("_g").cast("long"))
        elif public:
            gcols = ["_g"]
            P.df = P.df.withColumn("_g", sf.lit(0).cast("long")).withColumn(
                "_hg", sf.lit(0).cast("long"))
        else:
            gcols = [f"_k{j}" for j in range(len(spec.group_by))]
            P.df = P.df.select("*", *[sf.col(c).alias(f"_k{j}")
                                      for j, c in enumerate(spec.group_by)])
            P.df = P.df.select("*", *[P.encode(c).alias(f"_e{j}")
                                      for j, c in enumerate(spec.group_by)])
            P.mix_many({"_hg": "CAST(0 AS BIGINT) ^ `_e0`"})
            for j in range(1, len(spec.group_by)):
                P.mix_many({"_hg": f"`_hg` ^ `_e{j}`"})
            P.df = P.df.drop(*[f"_e{j}" for j in range(len(spec.group_by))])
        # per-row integers
        row_ms = spec.row_measures
        mcols: dict[int, str] = {}
        for n, m in enumerate(spec.measures):
            if isinstance(m, ValueSum | BucketCount):
                mcols[n] = f"_m{n}"
                P.add_row_integer(m, mcols[n])
        if spec.unit is None:
            keep = [*gcols, *mcols.values()]
            P.df = P.df.select(*keep)
            entries = self._entries(spec, gcols, mcols, cell_first=sf.lit(True),
                                    kept_rows=sf.lit(1), unit_sums={}, row_kept=sf.lit(True))
            return self._totals(P.df, gcols, entries)
        # the one shuffle on the privacy unit
        P.df = P.df.withColumn("_hu", P.encode(spec.unit)).select(
            sf.col(spec.unit).alias("_u"), "_hu", *gcols, "_hg", *mcols.values())
        P.df = (P.df.repartition(self._partitions, "_u") if self._partitions
                else P.df.repartition("_u"))
        # L0: the max_groups cells of each unit with the smallest p0 (ties by h(g), then by
        # the key itself, so that at most max_groups cells are kept even if h collides)
        P.mix_many({"_a0": f"`_hu` ^ CAST({_signed(k0)} AS BIGINT)"}
                    | ({"_a1": f"`_hu` ^ CAST({_signed(k1)} AS BIGINT)"} if row_ms else {}))
        P.mix_many({"_p0": "`_a0` ^ `_hg`"} | ({"_b1": "`_a1` ^ `_hg`"} if row_ms else {}))
        cell = Window.partitionBy("_u", *gcols)
        L = spec.max_rows
        unit_ms = {n: m for n, m in enumerate(spec.measures)
                   if isinstance(m, ValueSum) and m.level == Level.UNIT}
        if not row_ms:
            # cells by a group-by (no exchange: the data are partitioned by the unit)
            aggs = [sf.count(sf.lit(1)).alias("_n")]
            for n, m in unit_ms.items():
                aggs.append(sf.least(sf.greatest(sf.sum(sf.col(mcols[n]).cast(_DEC)),
                                               sf.lit(Decimal(_lo(m)))),
                                    sf.lit(Decimal(_hi(m)))).alias(f"_s{n}"))
            cells = P.df.groupBy("_u", *gcols, "_hg", "_p0").agg(*aggs)
            order = Window.partitionBy("_u").orderBy(
                sf.col("_p0").bitwiseXOR(sf.lit(-_SIGN)), sf.col("_hg").bitwiseXOR(
                    sf.lit(-_SIGN)), *[sf.col(c).asc_nulls_last() for c in gcols])
            kept = cells.withColumn("_r0", sf.row_number().over(order)).filter(
                sf.col("_r0") <= spec.max_groups)
            nrows = sf.col("_n") if L is None else sf.least(sf.col("_n"), sf.lit(L))
            entries = self._entries(spec, gcols, mcols, cell_first=sf.lit(True),
                                    kept_rows=nrows, unit_sums={n: sf.col(f"_s{n}")
                                                                for n in unit_ms},
                                    row_kept=sf.lit(True))
            return self._totals(kept, gcols, entries)
        # rows: L0 by the dense rank of the cell's (p0, h(g), key) within the unit
        order = Window.partitionBy("_u").orderBy(
            sf.col("_p0").bitwiseXOR(sf.lit(-_SIGN)), sf.col("_hg").bitwiseXOR(sf.lit(-_SIGN)),
            *[sf.col(c).asc_nulls_last() for c in gcols])
        P.df = P.df.withColumn("_r0", sf.dense_rank().over(order)).filter(
            sf.col("_r0") <= spec.max_groups)
        # L-inf: rank a cell's rows by content (i), keep the L smallest p1(u, g, i)
        content = Window.partitionBy("_u", *gcols).orderBy(
            *[sf.col(mcols[spec.measures.index(m)]) for m in row_ms])
        P.df = P.df.withColumn("_i", sf.row_number().over(content) - sf.lit(1))
        P.df = P.df.withColumn("_cn", sf.count(sf.lit(1)).over(cell))
        for n in unit_ms:
            P.df = P.df.withColumn(f"_cs{n}", sf.sum(sf.col(mcols[n]).cast(_DEC)).over(cell))
        P.mix_many({"_p1": "`_b1` ^ CAST(`_i` AS BIGINT)"})
        assert L is not None  # BoundingSpec requires it with row measures and a unit
        pick = Window.partitionBy("_u", *gcols).orderBy(
            sf.col("_p1").bitwiseXOR(sf.lit(-_SIGN)), sf.col("_i"))
        P.df = P.df.withColumn("_r1", sf.row_number().over(pick))
        unit_sums: dict[int, SCol] = {}
        for n, m in unit_ms.items():
            unit_sums[n] = sf.least(sf.greatest(sf.col(f"_cs{n}"), sf.lit(Decimal(_lo(m)))),
                                   sf.lit(Decimal(_hi(m))))
        entries = self._entries(spec, gcols, mcols, cell_first=sf.col("_r1") == sf.lit(1),
                                kept_rows=sf.lit(1), unit_sums=unit_sums,
                                row_kept=sf.col("_r1") <= sf.lit(L))
        return self._totals(P.df, gcols, entries)

    def _join_keys(self, P: _Plan, spec: BoundingSpec) -> DataFrame:
        """Rows joined with the public keys (broadcast; a missing value matches no key)."""
        from pyspark.sql import functions as sf
        from pyspark.sql.types import LongType, StructField, StructType

        assert spec.keys is not None
        fields = [StructField(f"_key{j}", self._df.schema[c].dataType, True)
                  for j, c in enumerate(spec.group_by)]
        fields.append(StructField("_g", LongType(), False))
        keys = self._session().createDataFrame(
            [(*k, i) for i, k in enumerate(spec.keys)], StructType(fields))
        cond = None
        for j, c in enumerate(spec.group_by):
            e = (sf.col(c) == sf.col(f"_key{j}")) & ~P.missing(c)
            cond = e if cond is None else cond & e
        joined = P.df.join(sf.broadcast(keys), cond, "inner")
        return joined.drop(*[f"_key{j}" for j in range(len(spec.group_by))])

    def _session(self) -> SparkSession:
        s: SparkSession = self._df.sparkSession
        return s

    @staticmethod
    def _entries(spec: BoundingSpec, gcols: list[str], mcols: dict[int, str], *,
                 cell_first: SCol, kept_rows: SCol, unit_sums: dict[int, SCol],
                 row_kept: SCol) -> SCol:
        """The array of (measure, bucket, value) entries one row (or cell) contributes.

        ``cell_first`` marks the one row standing for its cell (cell-level entries),
        ``kept_rows`` the rows it counts for ``RowCount(ROW)``, ``row_kept`` whether the row
        survived the L-infinity choice (row-level entries)."""
        from pyspark.sql import functions as sf

        def entry(w: int, b: SCol, v: SCol) -> SCol:
            return sf.struct(sf.lit(w).alias("_w"), b.cast("long").alias("_b"),
                            v.cast(_DEC).alias("_v"))

        out: list[SCol] = []
        conds: list[SCol] = []
        out.append(entry(_UNITS, sf.lit(0), sf.lit(1)))
        conds.append(cell_first)
        for n, m in enumerate(spec.measures):
            if isinstance(m, RowCount):
                if m.level == Level.ROW and spec.row_measures and spec.unit is not None:
                    out.append(entry(n, sf.lit(0), sf.lit(1)))
                    conds.append(row_kept)
                else:
                    out.append(entry(n, sf.lit(0), kept_rows if m.level == Level.ROW
                                     else sf.lit(1)))
                    conds.append(cell_first)
            elif isinstance(m, BucketCount):
                out.append(entry(n, sf.col(mcols[n]), sf.lit(1)))
                conds.append(row_kept & (sf.col(mcols[n]) >= sf.lit(0)))
            elif m.level == Level.ROW:
                out.append(entry(n, sf.lit(0), sf.col(mcols[n])))
                conds.append(row_kept)
            else:
                v = unit_sums.get(n, sf.least(sf.greatest(sf.col(mcols[n]).cast(_DEC),
                                                        sf.lit(Decimal(_lo(m)))),
                                             sf.lit(Decimal(_hi(m)))))
                out.append(entry(n, sf.lit(0), v))
                conds.append(cell_first)
        arr = sf.array(*[sf.when(c, e) for c, e in zip(conds, out, strict=True)])
        return sf.filter(arr, lambda e: e.isNotNull())

    @staticmethod
    def _totals(df: DataFrame, gcols: list[str], entries: SCol) -> DataFrame:
        from pyspark.sql import functions as sf

        ex = df.select(*gcols, sf.explode(entries).alias("_e")).select(
            *gcols, "_e._w", "_e._b", "_e._v")
        return ex.groupBy(*gcols, "_w", "_b").agg(sf.sum("_v").alias("_v"))

    # ---- running it ---------------------------------------------------------------------
    def explain(self, spec: BoundingSpec) -> str:
        """The physical plan Spark executes for ``spec`` (as text)."""
        import contextlib
        import io

        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):  # classic and Connect both print it
            self.plan(spec).explain()
        return buf.getvalue()

    def bounding_shuffles(self, spec: BoundingSpec) -> int:
        """Exchanges on the privacy unit in the physical plan (1 for any spec with a unit)."""
        return self.explain(spec).count("hashpartitioning(_u")

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        plan = self.plan(spec)
        try:
            rows = plan.collect()
        except Exception as e:
            text = str(e)
            if "ARITHMETIC_OVERFLOW" in text or "overflow" in text.lower():
                raise NumericalError("an aggregate does not fit in Spark's exact decimal "
                                     "sums") from None
            raise
        return _collect(spec, [tuple(r) for r in rows], self.name)


def _lo(m: ValueSum) -> int:
    """A UNIT-level sum's lower clamp (BoundingSpec validation guarantees it is set)."""
    return 0 if m.unit_lower is None else m.unit_lower


def _hi(m: ValueSum) -> int:
    return 0 if m.unit_upper is None else m.unit_upper


def _spec_columns(spec: BoundingSpec) -> list[str]:
    names = [p.column for p in spec.where] + list(spec.group_by)
    if spec.unit is not None:
        names.append(spec.unit)
    names += [m.column for m in spec.measures if isinstance(m, ValueSum | BucketCount)]
    return names


def _collect(spec: BoundingSpec, rows: Sequence[tuple[Any, ...]], engine: str) -> Aggregates:
    """Dense per-group arrays from the ``(group..., _w, _b, _v)`` totals."""
    public = spec.keys is not None
    ng = 1 if public else len(spec.group_by)
    index: dict[tuple[Any, ...], int] = {}
    keys: list[tuple[KeyValue, ...]] = []
    if public:
        assert spec.keys is not None
        keys = list(spec.keys)
    for r in rows:
        g = tuple(r[:ng])
        if public:
            continue
        if g not in index and int(r[ng]) == _UNITS:
            index[g] = len(keys)
            keys.append(tuple(g))
    n = len(keys)
    totals: dict[int, list[Any]] = {}
    for w, m in enumerate(spec.measures):
        totals[w] = ([[0] * m.buckets for _ in range(n)] if isinstance(m, BucketCount)
                     else [0] * n)
    units = [0] * n
    for r in rows:
        g = tuple(r[:ng])
        i = int(g[0]) if public else index.get(g, -1)
        if i < 0:
            continue
        w, b, v = int(r[ng]), int(r[ng + 1]), int(r[ng + 2])
        if w == _UNITS:
            units[i] += v
        elif isinstance(spec.measures[w], BucketCount):
            totals[w][i][b] += v
        else:
            totals[w][i] += v
    values: dict[str, Any] = {}
    for w, m in enumerate(spec.measures):
        t = totals[w]
        flat = [x for row in t for x in row] if isinstance(m, BucketCount) else t
        if any(not -_SIGN <= x < _SIGN for x in flat):
            raise NumericalError(f"the aggregate {m.name!r} does not fit in 64 bits")
        shape = (n, m.buckets) if isinstance(m, BucketCount) else (n,)
        values[m.name] = np.asarray(flat, dtype=np.int64).reshape(shape)
    if public:
        return Aggregates(tuple(keys), values, None, engine)
    return Aggregates(tuple(keys), values, np.asarray(units, dtype=np.int64), engine)
