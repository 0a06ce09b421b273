"""DP key selection streams the observed groups (issue 12 gap B): the engine hands them back
in batches and each batch is thresholded before the next is fetched, so Python holds one
batch plus the groups kept, not every observed group. The selection is the same mechanism:
with one batch the answer is bit for bit the one of thresholding all groups at once, and
with many it is that answer for the same per-group noise (each group's decision reads its
own count and its own draw only)."""

from __future__ import annotations

import weakref
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest

from dpsieve.accounting.events import Neighbouring
from dpsieve.queries import Schema
from dpsieve.queries.engine import (
    Aggregates,
    BoundingSpec,
    GroupBatch,
    StreamingEngine,
    aggregate_batches,
)
from dpsieve.queries.engines import duckdb as duckdb_module
from dpsieve.queries.engines.duckdb import DuckDBEngine
from dpsieve.queries.engines.frames import PandasEngine
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import Prepared, prepare
from dpsieve.queries.result import Answer, GroupAnswer

SCHEMA = Schema.of([("pid", "integer"), ("city", "string"), ("cost", "float")], "pid")
BIG = ("big0", "big1", "big2", "big3")


def _frame(small: int = 3000, big_units: int = 300, mid: int = 0,
           mid_units: int = 16) -> pd.DataFrame:
    """``small`` groups of one unit each (none survives the threshold but with probability
    ~delta), ``mid`` groups of ``mid_units`` units (about half survive when that is the
    selection's units_50) and four groups of ``big_units`` units (all survive)."""
    cities = ([f"c{i:05d}" for i in range(small)] + [f"m{i:03d}" for i in range(mid)
                                                     for _ in range(mid_units)]
              + [c for c in BIG for _ in range(big_units)])
    n = len(cities)
    return pd.DataFrame({"pid": np.arange(n, dtype=np.int64), "city": cities,
                         "cost": (np.arange(n) % 17).astype(np.float64)})


def _prepared(delta: float = 1e-6, by: str = "auto", per: str = "unit") -> Prepared:
    spec = {"type": "query", "privacy": {"type": "pure", "eps": 1.0},
            "aggregations": [{"type": "count", "per": per},
                             {"type": "sum", "column": "cost", "lower": 0, "upper": 20,
                              "per": "unit"}],
            "group_by": ["city"], "select": {"delta": delta, "by": by},
            "contribution": {"max_groups": 1, "max_rows": 2}}
    return prepare(from_spec(spec), SCHEMA, Neighbouring.ADD_REMOVE)


def _mid_frame(p: Prepared) -> pd.DataFrame:
    """400 one-unit groups, 60 groups at the selection's units_50 (units of one row, as
    units_50 assumes), four big groups."""
    assert p.charge.selection is not None
    return _frame(small=400, mid=60, mid_units=p.charge.selection.info()["units_50"])


class CountingEngine:
    """A streaming engine over another engine's aggregates (computed engine side) that
    counts, each time the next batch is asked for, how many groups of the batches it
    already handed out are still alive in the caller (weak references to their arrays)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = "counting"
        self.held_at_fetch: list[int] = []
        self.batches = 0

    def columns(self) -> Any:
        return self.inner.columns()

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        return self.inner.aggregate(spec)  # type: ignore[no-any-return]

    def aggregate_batches(self, spec: BoundingSpec, size: int) -> Iterator[Aggregates]:
        whole = self.inner.aggregate(spec)  # the engine's side (DuckDB's memory)
        alive: list[tuple[list[weakref.ref[Any]], int]] = []  # per batch: its arrays
        for lo in range(0, len(whole.keys), size):
            self.held_at_fetch.append(sum(n for refs, n in alive
                                          if any(r() is not None for r in refs)))
            batch = whole.take(np.arange(lo, min(lo + size, len(whole.keys))))
            alive.append(([weakref.ref(a) for a in [batch.units, *batch.values.values()]],
                          len(batch.keys)))
            self.batches += 1
            yield batch
            del batch


class ListEngine:
    """Not streaming: DP key selection falls back to slices of ``aggregate`` (all groups
    held), which the same counting shows."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = "list"
        self.whole: weakref.ref[Any] | None = None

    def columns(self) -> Any:
        return self.inner.columns()

    def aggregate(self, spec: BoundingSpec) -> Aggregates:
        out: Aggregates = self.inner.aggregate(spec)
        self.whole = weakref.ref(out.units)
        return out


def _old_run(p: Prepared, engine: Any, rng: np.random.Generator, seed: int,
             noise_batches: int | None = None) -> Answer:
    """The selection all at once (every observed group held, as before streaming), its
    per-group randomness drawn in chunks of ``noise_batches`` groups (the draws a streamed
    run makes), then every group decided at once; the released count thresholded is the
    one the selection drew (docs/proofs/queries.md §5.2)."""
    from dpsieve.mechanisms._random import as_source
    from dpsieve.queries.calibrate import Calibrated
    from dpsieve.queries.prepare import _key_order
    from dpsieve.queries.selection import GeometricSelection

    aggs = engine.aggregate(replace(p.spec, seed=seed))
    keys = list(aggs.keys)
    sel = p.charge.selection
    assert sel is not None
    units = np.asarray(aggs.units, dtype=np.int64)
    n = len(units)
    step = n if noise_batches is None else noise_batches
    sizes = [min(step, n - lo) for lo in range(0, n, max(step, 1))]
    noisy: Any = None
    if isinstance(sel, GeometricSelection):
        words = np.concatenate([as_source(rng, "t").words(k) for k in sizes] or
                               [np.zeros(0, dtype=np.uint64)])
        last = len(sel.table) - 1
        probs = np.asarray(sel.table[:-1], dtype=np.uint64)[np.minimum(units, last - 1)]
        keep = (units >= last) | (words < probs)
    else:
        draws = [np.asarray(sel.mechanism.sample(k, rng), dtype=np.int64).reshape(-1)
                 for k in sizes]
        z = np.concatenate(draws) if draws else np.zeros(0, dtype=np.int64)
        stat = units if sel.statistic == "units" else np.asarray(aggs.values[sel.part])
        noisy = stat + z
        keep = noisy >= sel.threshold
    order = sorted(range(len(keys)), key=lambda i: _key_order(keys[i]))
    idx = np.asarray([i for i in order if keep[i]], dtype=np.int64)
    sel_info = {**sel.info(), "selected": int(idx.size)}
    noisy_parts: dict[str, Any] = {}
    cal: dict[str, Calibrated] = {}
    for c, part in zip(p.charge.parts, (q for k in p.plans for q in k.parts), strict=True):
        if part.release.name == sel.part:
            noisy_parts[sel.part] = noisy[idx].astype(np.float64).reshape(-1, 1)
        else:
            noisy_parts[part.release.name] = c.draw(part.exact(aggs)[idx], rng)
        cal[part.release.name] = c
    groups = [GroupAnswer(tuple(keys[i]), tuple(k.finish(noisy_parts, cal, j)
                                                for k in p.plans))
              for j, i in enumerate(idx.tolist())]
    noise = {lab: {q.release.name: cal[q.release.name].noise() for q in k.parts}
             for lab, k in zip(p.labels, p.plans, strict=True)}
    details = {q.release.name: cal[q.release.name].details() for k in p.plans for q in k.parts}
    covers = {lab: k.covers for lab, k in zip(p.labels, p.plans, strict=True)}
    return Answer(p.labels, tuple(groups), noise, sel_info, details, covers)


def test_a_selection_holds_one_batch_and_the_groups_it_kept() -> None:
    p = _prepared()
    engine = CountingEngine(PandasEngine(_frame()))
    assert isinstance(engine, StreamingEngine)
    answer = p.run(engine, np.random.default_rng(1), seed=7, batch=100)
    assert engine.batches == 31  # 3004 observed groups, 100 at a time
    assert len(engine.held_at_fetch) == 31
    # when each batch is fetched, no group of an earlier batch is alive: the caller holds
    # that batch (<= 100 groups) and the selected ones (copies) only
    assert engine.held_at_fetch == [0] * 31
    assert {g.key[0] for g in answer.groups} == set(BIG)
    assert answer.selection is not None
    assert answer.selection["selected"] == 4


def test_the_count_detects_a_caller_holding_every_group() -> None:
    """The same measure on the fallback (an engine without aggregate_batches): the whole
    aggregates stay alive until the selection is done (so the measure above can fail)."""
    p = _prepared()
    engine = ListEngine(PandasEngine(_frame(small=300)))
    seen: list[bool] = []
    it = aggregate_batches(engine, replace(p.spec, seed=3), 50)
    for _ in it:
        assert engine.whole is not None
        seen.append(engine.whole() is not None)
    assert len(seen) == 7
    assert all(seen)
    counting = CountingEngine(PandasEngine(_frame(small=300)))
    held = []
    for b in aggregate_batches(counting, replace(p.spec, seed=3), 50):
        held.append(b)  # a caller that keeps its batches is seen
    assert counting.held_at_fetch[-1] == 300


BYS = [("count", "unit"), ("count", "row"), ("units", "unit")]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("by", "per"), BYS)
def test_one_batch_is_the_old_selection_bit_for_bit(seed: int, by: str, per: str) -> None:
    p = _prepared(delta=1e-2, by=by, per=per)
    inner = PandasEngine(_mid_frame(p))  # about half the mid groups pass
    new = p.run(CountingEngine(inner), np.random.default_rng(seed), seed=11, batch=10**6)
    old = _old_run(p, inner, np.random.default_rng(seed), 11)
    assert new.to_dict() == old.to_dict()
    assert 4 + 10 < len(new.groups) < 4 + 50


@pytest.mark.parametrize(("seed", "batch"), [(0, 1), (1, 7), (2, 100), (3, 463)])
@pytest.mark.parametrize(("by", "per"), BYS)
def test_many_batches_are_the_old_selection_for_the_same_draws(seed: int, batch: int,
                                                               by: str, per: str) -> None:
    """Streamed in batches, the answer is the all-at-once selection given the same noise
    per group (drawn batch by batch): the same groups, the same noisy answers."""
    p = _prepared(delta=1e-2, by=by, per=per)
    inner = PandasEngine(_mid_frame(p))
    new = p.run(CountingEngine(inner), np.random.default_rng(seed), seed=5, batch=batch)
    old = _old_run(p, inner, np.random.default_rng(seed), 5, noise_batches=batch)
    assert new.to_dict() == old.to_dict()
    assert 4 + 10 < len(new.groups) < 4 + 50
    fallback = p.run(inner, np.random.default_rng(seed), seed=5, batch=batch)  # slices
    assert fallback.to_dict() == old.to_dict()


def test_nothing_selected_and_no_groups_at_all() -> None:
    p = _prepared()
    none = p.run(CountingEngine(PandasEngine(_frame(small=50, big_units=0))),
                 np.random.default_rng(0), seed=1, batch=8)
    assert none.groups == ()
    assert none.selection is not None
    assert none.selection["selected"] == 0
    empty = _frame(small=0, big_units=0)
    got = p.run(CountingEngine(PandasEngine(empty)), np.random.default_rng(0), seed=1)
    assert got.groups == ()


def test_an_engine_breaking_the_batch_contract_is_refused_without_counts() -> None:
    class Greedy(CountingEngine):
        def aggregate_batches(self, spec: BoundingSpec, size: int) -> Iterator[Aggregates]:
            yield self.inner.aggregate(spec)

    from dpsieve.errors import UnsupportedError

    with pytest.raises(UnsupportedError, match="more than the 10 groups") as e:
        _prepared().run(Greedy(PandasEngine(_frame(small=30))), np.random.default_rng(0),
                        seed=1, batch=10)
    assert "34" not in str(e.value)  # the number of observed groups is private


@pytest.fixture
def parquet(tmp_path: Any) -> Any:
    path = tmp_path / "many.parquet"
    _frame(small=2500).to_parquet(path)
    return path


def _all_of(batch: Any) -> Aggregates:
    got: Aggregates = batch.take(np.arange(batch.n_groups))
    return got


@pytest.mark.parametrize("keep_open", [False, True])
def test_duckdb_fetches_the_groups_a_batch_at_a_time(parquet: Any, keep_open: bool,
                                                     monkeypatch: Any) -> None:
    """The DuckDB engine's batches are read from the aggregation's table a batch at a time:
    a batch holds unit counts only, and rows reach _collect only for the groups taken
    (never a dropped group's); every group is in exactly one batch, with the values
    aggregate() gives it; a batch cannot be taken from once the next one is fetched."""
    p = _prepared()
    spec = replace(p.spec, seed=9)
    engine = DuckDBEngine(parquet, keep_open=keep_open, copy_max_bytes=0)
    want = engine.aggregate(spec)
    sizes: list[int] = []
    real = duckdb_module._collect

    def spy(spec: BoundingSpec, rows: list[tuple[Any, ...]], name: str) -> Aggregates:
        sizes.append(len(rows))
        return real(spec, rows, name)
    monkeypatch.setattr(duckdb_module, "_collect", spy)
    it = aggregate_batches(engine, spec, 300)
    first = next(it)
    assert first.n_groups == 300
    assert first.units is not None
    assert first.units.shape == (300,)
    assert sizes == []  # no row of the 2504 groups made into Python objects yet
    parts = [_all_of(first)]
    assert sizes == [300]
    assert first.take(np.asarray([5, 2], dtype=np.int64)).keys == (parts[0].keys[5],
                                                                   parts[0].keys[2])
    second = next(it)
    with pytest.raises(RuntimeError, match="after the next batch"):
        first.take(np.arange(1))
    parts.append(_all_of(second))
    parts += [_all_of(b) for b in it]
    assert [len(q.keys) for q in parts] == [300] * 8 + [104]
    got = Aggregates.concat(spec, parts)
    assert got.same_as(want)
    sizes.clear()
    answer = p.run(engine, np.random.default_rng(2), seed=9, batch=300)
    assert {g.key[0] for g in answer.groups} == set(BIG)
    assert sum(sizes) == len(answer.groups) == 4  # only the kept groups' rows


class FetchmanyEngine(DuckDBEngine):
    """The DuckDB stream before columns (commit 6ccb414): the SQL's rows fetched with
    fetchmany and made into Aggregates by _collect, batch by batch (verbatim)."""

    def _batches_sql(self, spec: BoundingSpec, memory_limit: str | None, size: int,
                     rank_twice: bool = False) -> Generator[Aggregates, None, None]:
        with self._session(memory_limit) as (execute, described, source):
            sql, params = duckdb_module.compile_sql(spec, self._columns_of(described),
                                                    source, rank_twice=rank_twice)
            result = execute(sql, params)
            while rows := result.fetchmany(size):
                batch = duckdb_module._collect(spec, rows, self.name)
                del rows
                yield batch
                del batch


@pytest.mark.parametrize(("seed", "batch"), [(0, 1), (1, 7), (2, 100), (3, 463), (4, 10**6)])
def test_duckdb_answers_as_the_fetchmany_stream_for_a_fixed_seed(tmp_path: Any, seed: int,
                                                                 batch: int) -> None:
    """The same answer, bit for bit, as the fetchmany stream for the same seed: the groups
    come in the same order and batches (one thread: DuckDB's group order is then fixed),
    so each group gets the same draw, the same groups are kept, and the same noise is added
    to their aggregates. About half the mid groups pass, so the draws decide."""
    path = tmp_path / "mid.parquet"
    p = _prepared(delta=1e-2)
    _mid_frame(p).to_parquet(path)
    new = p.run(DuckDBEngine(path, threads=1), np.random.default_rng(seed), seed=5,
                batch=batch)
    old = p.run(FetchmanyEngine(path, threads=1), np.random.default_rng(seed), seed=5,
                batch=batch)
    assert new.to_dict() == old.to_dict()
    assert 4 + 10 < len(new.groups) < 4 + 50
    other = p.run(DuckDBEngine(path, threads=1), np.random.default_rng(seed + 1), seed=5,
                  batch=batch)
    assert other.to_dict() != new.to_dict()  # the draws matter: the test can fail


def test_duckdb_in_memory_copy_and_public_keys_are_cut_into_batches(parquet: Any) -> None:
    p = _prepared()
    spec = replace(p.spec, seed=9)
    kept = DuckDBEngine(parquet, keep_open=True)  # small file: held as numpy columns
    got = [_all_of(b) for b in kept.aggregate_batches(spec, 1000)]
    assert [len(b.keys) for b in got] == [1000, 1000, 504]
    assert Aggregates.concat(spec, got).same_as(DuckDBEngine(parquet).aggregate(spec))
    public = replace(spec, keys=(("big0",), ("nowhere",)))
    parts = [_all_of(b) for b in DuckDBEngine(parquet).aggregate_batches(public, 1)]
    assert [b.keys for b in parts] == [(("big0",),), (("nowhere",),)]


def test_duckdb_retries_a_stream_that_runs_out_of_memory_before_its_first_batch(
        parquet: Any, monkeypatch: Any) -> None:
    """Out of memory while the query runs (before the first batch: nothing was handed out,
    no noise drawn): the same SQL again under the retry limit, the same groups."""
    monkeypatch.delenv(duckdb_module.MEMORY_LIMIT_ENV, raising=False)
    p = _prepared()
    spec = replace(p.spec, seed=9)
    engine = DuckDBEngine(parquet)
    want = engine.aggregate(spec)
    limits: list[str | None] = []
    real = DuckDBEngine._batches_sql

    def first_fails(self: DuckDBEngine, spec: BoundingSpec, memory_limit: str | None,
                    size: int, rank_twice: bool = False) -> Iterator[GroupBatch]:
        limits.append(memory_limit)
        if len(limits) == 1:
            raise duckdb.OutOfMemoryException("out of memory (test)")
        yield from real(self, spec, memory_limit, size, rank_twice)
    monkeypatch.setattr(DuckDBEngine, "_batches_sql", first_fails)
    got = [_all_of(b) for b in engine.aggregate_batches(spec, 500)]
    assert limits == [None, engine._retry_limit]
    assert engine._retry_limit is not None
    assert Aggregates.concat(spec, got).same_as(want)


def test_duckdb_under_a_forced_small_memory_limit_retries_the_whole_aggregation(
        parquet: Any, monkeypatch: Any) -> None:
    """A real out-of-memory error: under 4 MB DuckDB cannot aggregate the 2504 groups (nor
    make their table). The aggregation into the table is retried as a whole under the
    retry limit before any batch is handed out, and the selection answers as without the
    small limit; under a given limit (never raised) the error comes before any batch, so
    before any noise is drawn."""
    monkeypatch.delenv(duckdb_module.MEMORY_LIMIT_ENV, raising=False)
    p = _prepared()
    spec = replace(p.spec, seed=9)
    with pytest.raises(duckdb.OutOfMemoryException):  # the limit does bite
        DuckDBEngine(parquet, memory_limit="4MB").aggregate(spec)
    small = DuckDBEngine(parquet, threads=1)
    small._memory_limit = "4MB"  # the default, forced small; the retry limit as it is
    assert small._retry_limit == duckdb_module.retry_memory_limit(1)
    limits: list[str | None] = []
    real = DuckDBEngine._session

    def seen(self: DuckDBEngine, memory_limit: str | None = None) -> Any:
        limits.append(memory_limit)
        return real(self, memory_limit)
    monkeypatch.setattr(DuckDBEngine, "_session", seen)
    got = p.run(small, np.random.default_rng(4), seed=9, batch=300)
    assert limits == [None, small._retry_limit]  # ran out under 4 MB, then retried
    want = p.run(DuckDBEngine(parquet, threads=1), np.random.default_rng(4), seed=9,
                 batch=300)
    assert got.to_dict() == want.to_dict()
    assert {g.key[0] for g in got.groups} == set(BIG)
    given = DuckDBEngine(parquet, memory_limit="4MB")
    stream = given.aggregate_batches(spec, 300)
    with pytest.raises(duckdb.OutOfMemoryException):
        next(stream)  # before the first batch: nothing drawn, nothing released


def test_duckdb_runs_only_reads_of_its_table_after_the_first_batch(
        parquet: Any, monkeypatch: Any) -> None:
    """The aggregation (reading the file) completes before the first batch is handed out;
    every statement after it reads the materialised groups, one batch of rows at most
    (and drops the table at the end)."""
    p = _prepared()
    spec = replace(p.spec, seed=9)
    engine = DuckDBEngine(parquet)
    statements: list[str] = []
    real = DuckDBEngine._session

    @contextmanager
    def spying(self: DuckDBEngine, memory_limit: str | None = None) -> Any:
        with real(self, memory_limit) as (execute, described, source):
            def run(sql: str, params: dict[str, Any]) -> Any:
                statements.append(sql)
                return execute(sql, params)
            yield run, described, source
    monkeypatch.setattr(DuckDBEngine, "_session", spying)
    it = engine.aggregate_batches(spec, 1000)
    first = next(it)
    before = len(statements)
    assert any("read_parquet" in q and q.startswith("CREATE TEMPORARY TABLE")
               for q in statements)
    _all_of(first)
    rest = [b.n_groups for b in it]
    after = statements[before:]
    assert [first.n_groups, *rest] == [1000, 1000, 504]
    assert after
    assert all("read_parquet" not in q for q in after)
    assert all(q.startswith(("SELECT rowid AS _r", "DROP TABLE")) for q in after)
    assert after[-1].startswith("DROP TABLE")


ALL_KINDS: list[dict[str, Any]] = [
    {"type": "count"}, {"type": "count", "per": "unit"},
    {"type": "sum", "column": "cost", "lower": 0, "upper": 20},
    {"type": "sum", "column": "cost", "lower": 0, "upper": 20, "per": "unit"},
    {"type": "mean", "column": "cost", "lower": 0, "upper": 20},
    {"type": "variance", "column": "cost", "lower": 0, "upper": 20},
    {"type": "quantile", "column": "cost", "lower": 0, "upper": 20, "bins": 8},
    {"type": "histogram", "column": "city", "categories": ["a", "b"]},
    {"type": "linear", "column": "city", "categories": ["a", "b"],
     "workload": [[1, 0.5], [2, -3]]},
]


@pytest.mark.parametrize("agg", ALL_KINDS, ids=lambda a: f"{a['type']}-{a.get('per', 'row')}")
def test_no_observed_group_answers_no_group_for_every_kind(agg: dict[str, Any]) -> None:
    """A selection that observes no group at all (a WHERE no row passes, charged before the
    engine runs) answered with a ValueError after the spend (reshape of a (0,) array to
    (0, -1), kinds._column_of and the linear workload): now an answer with no groups."""
    spec = {"type": "query", "privacy": {"type": "pure", "eps": 1.0}, "aggregations": [agg],
            "group_by": ["city"], "select": {"delta": 1e-6},
            "where": [{"column": "cost", "op": ">", "value": 100.0}],
            "contribution": {"max_groups": 1, "max_rows": 2}}
    p = prepare(from_spec(spec), SCHEMA, Neighbouring.ADD_REMOVE)
    for engine in (PandasEngine(_frame(small=20)), CountingEngine(PandasEngine(_frame(20)))):
        got = p.run(engine, np.random.default_rng(0), seed=1, batch=8)
        assert got.groups == ()
        assert got.selection is not None
        assert got.selection["selected"] == 0


def test_a_session_query_streams_its_selection(tmp_path: Any, monkeypatch: Any) -> None:
    """End to end: a Session over a Parquet file (DuckDB, SQL path) runs a DP key selection
    through the stream; with SELECTION_BATCH at 200 (read when the query runs) DuckDB's rows
    reach Python 200 unit counts at a time, only the kept groups' rows are fetched, and the
    big groups are answered."""
    from dpsieve.accounting.events import ApproxDP
    from dpsieve.queries import engine as engine_module
    from dpsieve.session import Session

    path = tmp_path / "s.parquet"
    _frame(small=1500, big_units=300).to_parquet(path)
    monkeypatch.setattr(engine_module, "SELECTION_BATCH", 200)
    sizes: list[int] = []
    real = duckdb_module._TableBatch.__init__

    def spy(self: Any, *args: Any) -> None:
        real(self, *args)
        sizes.append(self.n_groups)
    monkeypatch.setattr(duckdb_module._TableBatch, "__init__", spy)
    collected: list[int] = []
    collect = duckdb_module._collect

    def spy_collect(spec: BoundingSpec, rows: list[tuple[Any, ...]], name: str) -> Aggregates:
        collected.append(len(rows))
        return collect(spec, rows, name)
    monkeypatch.setattr(duckdb_module, "_collect", spy_collect)
    s = Session(str(path), budget=ApproxDP(4.0, 1e-5), privacy_unit="pid")
    r = s.run({"type": "query", "privacy": {"type": "pure", "eps": 1.0},
               "aggregations": [{"type": "count", "per": "unit"}], "group_by": ["city"],
               "select": {"delta": 1e-7}, "contribution": {"max_groups": 1}})
    assert sum(sizes) == 1504
    assert max(sizes) == 200
    assert sum(collected) == 4  # rows made into Python objects: the kept groups only
    assert {tuple(g["key"]) for g in r.value["groups"]} == {(c,) for c in BIG}
