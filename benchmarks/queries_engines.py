"""The query layer at scale: DuckDB and Spark engines, a hand-written SQL baseline, peers.

Usage::

    python -m benchmarks.queries_engines --quick           # 200k rows, 1 repeat, ~1 min
    python -m benchmarks.queries_engines                   # the full run (issues 12, 13)
    python -m benchmarks.queries_engines --only duckdb --rows 50000000 --repeats 3

Parts (``--only``, default all): ``duckdb`` -- dpsieve's DuckDB engine vs the same
bounding hand-written in DuckDB SQL (issue 12: <= 15 s, <= 1 GB, <= 1.2x, at 50M rows);
``memory`` -- peak memory of the query path at 1M / 10M / 50M rows; ``peers`` -- OpenDP's
Polars context and PipelineDP's local backend beside dpsieve at 10M rows (time, peak
memory, RMSE); ``spark`` -- dpsieve's Spark engine beside DuckDB and PipelineDP's Spark
RDD backend at 10M rows, the physical plan of the bounding (its count of shuffles on the
unit, before and as executed, PipelineDP's RDD lineage); ``scaling`` -- the 1M / 10M / 50M
curve on Spark; ``plan`` -- the Spark plans alone (before and as executed), no timed runs.

Data (benchmarks/_queries_data.py) are generated once by DuckDB into ``--data`` (default
``/tmp/dpsieve-qbench``) and reused; nothing is downloaded. Every measurement runs in a
fresh process; its peak memory is the largest sum of the resident set sizes of that
process and its children (DuckDB's buffers, Spark's JVM), sampled every 20 ms, and never
less than the process's own ``ru_maxrss``. Times are of the query itself (imports and
Spark's session start excluded; the start is reported apart). Medians over ``--repeats``
runs; ``uptime``'s load average is printed beside each table: the machine is shared.
The full mode writes each part's section to ``benchmarks/results/queries/<part>.md`` and
joins them into ``benchmarks/results/queries.md`` (merged into RESULTS.md by
``run_all``), after ``results/queries/notes.md`` (the reading of the figures, written by
hand); ``--quick`` and ``--no-write`` only print.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from benchmarks import _queries_data as qd

HERE = Path(__file__).resolve().parent
PARTS = ("duckdb", "memory", "peers", "rows", "spark", "scaling", "plan")


# -- one measured process ------------------------------------------------------------------

def _tree_rss(pid: int) -> tuple[int, int]:
    """(RSS of the process tree, RSS of its java processes), bytes."""
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0, 0
    total = jvm = 0
    for p in procs:
        try:
            rss = p.memory_info().rss
            total += rss
            if "java" in p.name():
                jvm += rss
        except psutil.Error:
            pass
    return total, jvm


def measure(runner: str, path: Path, timeout: float = 3600.0,
            env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``runner`` on ``path`` in a fresh process (``env``: variables set in it); its
    result plus peak memory."""
    cmd = [sys.executable, "-m", "benchmarks.queries_engines", "child", runner, str(path)]
    proc = subprocess.Popen(cmd, cwd=HERE.parent, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, **(env or {})})
    peak = [0, 0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            total, jvm = _tree_rss(proc.pid)
            peak[0], peak[1] = max(peak[0], total), max(peak[1], jvm)
            done.wait(0.02)

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        done.set()
        th.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{runner} failed (exit {proc.returncode})")
    res: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    res["peak_bytes"] = max(peak[0], res.pop("self_maxrss", 0))
    res["jvm_peak_bytes"] = peak[1]
    return res


def child(runner: str, path: str) -> None:
    from benchmarks._queries_runners import RUNNERS

    res = RUNNERS[runner](Path(path))
    res["self_maxrss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(res))


# -- statistics ----------------------------------------------------------------------------

def rmse(a: list[float], b: list[float]) -> float:
    return math.sqrt(sum((x - y) ** 2 for x, y in zip(a, b, strict=True)) / len(a))


def load() -> str:
    return "load " + ", ".join(f"{x:.1f}" for x in os.getloadavg())


def repeat(runner: str, path: Path, n: int, env: dict[str, str] | None = None
           ) -> dict[str, Any]:
    """Median seconds and peak memory over ``n`` runs (the last run's answers)."""
    runs = []
    for i in range(n):
        r = measure(runner, path, env=env)
        print(f"  {runner}{env or ''} {path.name} run {i + 1}/{n}: {r['seconds']:.2f} s, "
              f"{r['peak_bytes'] / 2**20:.0f} MiB ({load()})", flush=True)
        runs.append(r)
    out = dict(runs[-1])
    out["seconds"] = statistics.median(r["seconds"] for r in runs)
    out["all_seconds"] = [r["seconds"] for r in runs]
    out["cpu_seconds"] = statistics.median(r.get("cpu_seconds", math.nan) for r in runs)
    out["all_cpu"] = [r.get("cpu_seconds", math.nan) for r in runs]
    out["peak_bytes"] = statistics.median(r["peak_bytes"] for r in runs)
    out["max_peak_bytes"] = max(r["peak_bytes"] for r in runs)
    out["jvm_peak_bytes"] = statistics.median(r["jvm_peak_bytes"] for r in runs)
    out["min_peak_bytes"] = min(r["peak_bytes"] for r in runs)
    if "base_bytes" in runs[0]:
        out["base_bytes"] = statistics.median(r["base_bytes"] for r in runs)
    if "startup" in runs[0]:
        out["startup"] = statistics.median(r["startup"] for r in runs)
    return out


def _mib(b: float) -> str:
    return f"{b / 2**20:,.0f}"


def _secs(r: dict[str, Any]) -> str:
    """Wall seconds, median (every run) | CPU seconds, median."""
    allv = ", ".join(f"{s:.1f}" for s in r["all_seconds"])
    return f"{r['seconds']:.2f} ({allv}) | {r['cpu_seconds']:.2f}"


# -- the parts -----------------------------------------------------------------------------

def part_duckdb(a: argparse.Namespace, out: list[str]) -> None:
    path = qd.ensure(a.data, a.big)
    t = qd.truth(path)
    out += [f"### dpsieve's DuckDB engine vs hand-written DuckDB SQL, {a.big:,} rows",
            "", f"Command: `{a.command}`. Same run, alternating; {load()} at the start.",
            ""]
    from dpsieve.queries.engines.duckdb import MEMORY_LIMIT_ENV

    before = {MEMORY_LIMIT_ENV: a.memory_before} if a.memory_before else None
    res: dict[str, list[dict[str, Any]]] = {"dpsieve-duckdb": [], "session-duckdb": [],
                                            "sql-duckdb": [], "sql-duckdb-lattice": [],
                                            "sql-duckdb-session-limits": []}
    if before:
        res["session-before"] = []
    for _ in range(a.repeats):  # interleaved, so all see the same machine load
        for name, runs in res.items():
            runs.append(repeat("session-duckdb", path, 1, before) if name == "session-before"
                        else repeat(name, path, 1))
    med = {name: _merge(runs) for name, runs in res.items()}
    d, e, s = med["dpsieve-duckdb"], med["session-duckdb"], med["sql-duckdb"]
    sl, lat = med["sql-duckdb-session-limits"], med["sql-duckdb-lattice"]
    if max(abs(a - b) for a, b in zip(lat["sum"], t["bounded_sum"], strict=True)) > 1e-6 * max(
            1.0, max(abs(b) for b in t["bounded_sum"])):
        raise AssertionError("hand-written lattice SQL disagrees with the bounded truth")
    if s["count"] != t["bounded_count"] or sl["count"] != t["bounded_count"]:
        raise AssertionError("hand-written SQL disagrees with the bounded truth")
    out += ["| implementation | wall s, median (runs) | CPU s | peak memory MiB (max) | "
            "RMSE count | RMSE sum |", "|---|---|---|---|---|---|"]
    for label, r in (("dpsieve (prepare + DuckDBEngine(memory_limit "
                      f"{os.environ.get('QBENCH_DUCKDB_MEMORY', '600MB')}, 2 threads) + "
                      "exact noise)", d),
                     (f"dpsieve Session, its defaults ({_session_limit()})", e),
                     *([(f"dpsieve Session, {MEMORY_LIMIT_ENV}={a.memory_before}",
                         med["session-before"])] if before else [])):
        out.append(f"| {label} | {_secs(r)} | {_mib(r['peak_bytes'])} "
                   f"({_mib(r['max_peak_bytes'])}) | "
                   f"{rmse(r['count'], t['bounded_count']):.1f} | "
                   f"{rmse(r['sum'], t['bounded_sum']):.1f} |")
    out += [f"| hand-written DuckDB SQL (no noise; memory_limit "
            f"{os.environ.get('QBENCH_DUCKDB_MEMORY', '600MB')}, 2 threads) | {_secs(s)} | "
            f"{_mib(s['peak_bytes'])} ({_mib(s['max_peak_bytes'])}) | 0 | 0 |",
            f"| hand-written DuckDB SQL with dpsieve's exact integer sums (lattice 2^-14; "
            f"no noise; memory_limit {os.environ.get('QBENCH_DUCKDB_MEMORY', '600MB')}, "
            f"2 threads) | {_secs(lat)} | {_mib(lat['peak_bytes'])} "
            f"({_mib(lat['max_peak_bytes'])}) | 0 | 0 |",
            f"| hand-written DuckDB SQL (no noise) under Session's memory policy "
            f"({_session_limit()}; on out-of-memory rerun under the retry limit: "
            f"{sum(1 for r in res['sql-duckdb-session-limits'] if r.get('retried'))} of "
            f"{len(res['sql-duckdb-session-limits'])} runs) | {_secs(sl)} | "
            f"{_mib(sl['peak_bytes'])} ({_mib(sl['max_peak_bytes'])}) | 0 | 0 |", ""]
    for label, r in (("DuckDBEngine", d), ("Session", e),
                     *([(f"Session at {a.memory_before}", med["session-before"])]
                       if before else [])):
        out.append(
            f"- {label} / hand-written: **{r['seconds'] / s['seconds']:.2f}x** wall, "
            f"**{r['cpu_seconds'] / s['cpu_seconds']:.2f}x** CPU (goal <= 1.2x); "
            f"<= 15 s {'met' if r['seconds'] <= 15 else 'MISSED'}, <= 1 GB peak "
            f"{'met' if r['max_peak_bytes'] <= 2**30 else 'MISSED'}.")
    for label, r in (("DuckDBEngine", d), ("Session", e)):
        out.append(f"- {label} / hand-written with the same integer arithmetic: "
                   f"**{r['seconds'] / lat['seconds']:.2f}x** wall, "
                   f"**{r['cpu_seconds'] / lat['cpu_seconds']:.2f}x** CPU (goal <= 1.2x).")
    out.append(f"- Session / hand-written under the same memory policy (like for like): "
               f"**{e['seconds'] / sl['seconds']:.2f}x** wall, "
               f"**{e['cpu_seconds'] / sl['cpu_seconds']:.2f}x** CPU (goal <= 1.2x).")
    out += ["", "RMSE is against the exact bounded answers (the noise alone). Spilling to "
            "a temporary directory. " + load() + " at the end.", ""]


def _merge(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[-1])
    out["all_seconds"] = [s for r in runs for s in r["all_seconds"]]
    out["seconds"] = statistics.median(out["all_seconds"])
    out["all_cpu"] = [s for r in runs for s in r["all_cpu"]]
    out["cpu_seconds"] = statistics.median(out["all_cpu"])
    out["peak_bytes"] = statistics.median(r["peak_bytes"] for r in runs)
    out["max_peak_bytes"] = max(r["max_peak_bytes"] for r in runs)
    out["jvm_peak_bytes"] = statistics.median(r["jvm_peak_bytes"] for r in runs)
    if "startup" in runs[0]:
        out["startup"] = statistics.median(r["startup"] for r in runs)
    return out


def _session_limit() -> str:
    from dpsieve.queries.engines.duckdb import MEMORY_LIMIT_ENV, default_memory_limit

    env = os.environ.get(MEMORY_LIMIT_ENV)
    return (f"{MEMORY_LIMIT_ENV}={env}" if env else
            f"memory_limit {default_memory_limit()} = max(64 MiB, 32 MiB x "
            f"{os.cpu_count()} cores)")


def part_memory(a: argparse.Namespace, out: list[str]) -> None:
    from dpsieve.queries.engines.duckdb import MEMORY_LIMIT_ENV

    runner = "dpsieve-duckdb" if a.engine_memory else "session-duckdb"
    configs: list[tuple[str, dict[str, str] | None]] = [("default", None)]
    if a.memory_before:  # the earlier default, interleaved with the current one
        configs.append((f"{MEMORY_LIMIT_ENV}={a.memory_before}",
                        {MEMORY_LIMIT_ENV: a.memory_before}))
    out += [f"### Peak memory of the query path ({runner}) by table size", "",
            f"Command: `{a.command}`. {load()} at the start.", "",
            "| rows | Parquet MiB | limit | wall s, median (runs) | CPU s | peak MiB, median "
            "(min-max) | before the query MiB | query's increment MiB | peak / smallest |",
            "|---|---|---|---|---|---|---|---|---|"]
    first: dict[str, float] = {}
    results: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for rows in a.sizes:
        path = qd.ensure(a.data, rows)
        for _ in range(a.repeats):  # interleaved, so each config sees the same load
            for label, env in configs:
                results.setdefault((rows, label), []).append(repeat(runner, path, 1, env))
        for label, _env in configs:
            r = _merge(results[(rows, label)])
            r["min_peak_bytes"] = min(x["min_peak_bytes"] for x in results[(rows, label)])
            first.setdefault(label, r["peak_bytes"])
            bases = [x["base_bytes"] for x in results[(rows, label)] if "base_bytes" in x]
            base = statistics.median(bases) if bases else None
            out.append(
                f"| {rows:,} | {_mib(path.stat().st_size)} | {label} | {_secs(r)} | "
                f"{_mib(r['peak_bytes'])} ({_mib(r['min_peak_bytes'])}-"
                f"{_mib(r['max_peak_bytes'])}) | "
                f"{_mib(base) if base is not None else '-'} | "
                f"{_mib(r['peak_bytes'] - base) if base is not None else '-'} | "
                f"{r['peak_bytes'] / first[label]:.2f} |")
    out += ["", ("prepare + DuckDBEngine(memory_limit "
                 f"{os.environ.get('QBENCH_DUCKDB_MEMORY', '600MB')}, 2 threads)"
                 if a.engine_memory else "Session(path, budget, privacy_unit='unit')"
                 ".query(plan): the engine Session picks, DuckDB on all cores; 'default': "
                 f"dpsieve's default memory limit ({_session_limit()})")
            + ", spilling to a temporary directory. Peak = the process's largest resident "
            "set (Python, dpsieve, DuckDB's buffers and the answer), sampled every 20 ms; "
            "'before the query': its resident set once Python, dpsieve and DuckDB are "
            "imported; the increment is the difference (medians). " + load()
            + " at the end.", ""]


def _table(rows: list[tuple[str, dict[str, Any]]], t: dict[str, Any], jvm: bool) -> list[str]:
    head = ("| implementation | wall s, median (runs) | CPU s | peak memory MiB"
            + (" (of it JVM) | session start s" if jvm else "")
            + " | RMSE count / sum vs exact | RMSE count / sum vs bounded |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    notes = [f"- {name}: {r['note']} (median run)" for name, r in rows if "note" in r]
    for name, r in rows:
        mem = _mib(r["peak_bytes"])
        if jvm:
            mem += f" ({_mib(r['jvm_peak_bytes'])}) | " + (
                f"{r['startup']:.1f}" if "startup" in r else "-")
        lines.append(f"| {name} | {_secs(r)} | {mem} | {rmse(r['count'], t['count']):,.0f} "
                     f"/ {rmse(r['sum'], t['sum']):,.0f} | "
                     f"{rmse(r['count'], t['bounded_count']):,.0f} / "
                     f"{rmse(r['sum'], t['bounded_sum']):,.0f} |")
    return lines + (["", *notes] if notes else [])


_RMSE_NOTE = (
    "RMSE over the public groups. 'exact': the unbounded per-group count and sum; "
    "'bounded': the count with at most L-inf rows per (unit, group) and the sum of "
    "per-(unit, group) sums clipped to [0, 100] (exact, deterministic here: no unit has "
    "more than L0 groups), so for dpsieve that column is its noise alone; a peer whose "
    "bounding differs (row sampling before the sum) also shows its own bias there.")


def part_peers(a: argparse.Namespace, out: list[str]) -> None:
    path = qd.ensure(a.data, a.mid)
    t = qd.truth(path)
    out += [f"### Side by side with OpenDP and PipelineDP, {a.mid:,} rows", "",
            f"Command: `{a.command}`. {load()} at the start.", ""]
    rows = []
    for name, label in (("dpsieve-duckdb", "dpsieve, DuckDB engine"),
                        ("opendp-polars", "OpenDP Context (Polars), integer sums, "
                         f"L0 = {qd.L0} groups kept"),
                        ("opendp-polars-drop", "OpenDP Context (Polars), integer sums, "
                         f"truncate_num_groups({qd.L0}): {qd.L0 - 1} groups kept"),
                        ("pipelinedp-local", "PipelineDP LocalBackend")):
        try:
            rows.append((label, repeat(name, path, a.peer_repeats)))
        except RuntimeError as e:
            out.append(f"- {label}: failed ({e})")
    out += _table(rows, t, jvm=False)
    out += ["", _RMSE_NOTE + " " + load() + " at the end.", ""]


def part_rows(a: argparse.Namespace, out: list[str]) -> None:
    """Per-row bounds (issue 24, item 4: CPU <= OpenDP's and <= 1.5x hand-written SQL,
    under the default memory limit), each runner in a fresh process, interleaved."""
    path = qd.ensure(a.data, a.mid)
    t = qd.truth(path)
    out += [f"### Per-row bounds, {a.mid:,} rows: Session vs hand-written DuckDB SQL vs "
            "OpenDP", "", f"Command: `{a.command}`. {load()} at the start.", ""]
    names = (("session-rows", "dpsieve Session (its defaults; the plan ranks rows: "
              f"{_retry_limit()})"),
             ("sql-duckdb-rows", "hand-written DuckDB SQL, rows sampled by a hash of their "
              "value (no noise; DuckDB's default memory limit, 2 threads)"),
             ("sql-duckdb-rows-ranked", "hand-written DuckDB SQL, dpsieve's sample (rows "
              "ranked by value, ranks by a keyed hash; same settings)"),
             ("opendp-polars", "OpenDP Context (Polars), integer sums clipped per row, "
              f"truncate_per_group({qd.LINF}), truncate_num_groups({qd.L0 + 1}): L0 = "
              f"{qd.L0} groups kept"))
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n, _ in names}
    failed: dict[str, str] = {}
    for _ in range(a.peer_repeats):
        for name, _label in names:
            if name in failed:
                continue
            try:
                runs[name].append(repeat(name, path, 1))
            except RuntimeError as e:
                failed[name] = str(e)
    med = {n: _merge(r) for n, r in runs.items() if r}
    out += ["| implementation | wall s, median (runs) | CPU s | peak memory MiB (max) | "
            "RMSE count vs bounded |", "|---|---|---|---|---|"]
    for name, label in names:
        if name not in med:
            out.append(f"| {label} | failed: {failed.get(name, '?')} | | | |")
            continue
        r = med[name]
        out.append(f"| {label} | {_secs(r)} | {_mib(r['peak_bytes'])} "
                   f"({_mib(r['max_peak_bytes'])}) | "
                   f"{rmse(r['count'], t['bounded_count']):,.1f} |")
    notes = [f"- {label}: {med[n]['note']}" for n, label in names
             if n in med and "note" in med[n]]
    out += ["", *notes]
    if "session-rows" in med:
        d = med["session-rows"]
        for name, goal in (("sql-duckdb-rows", 1.5), ("sql-duckdb-rows-ranked", 1.5),
                           ("opendp-polars", 1.0)):
            if name in med:
                ratio = d["cpu_seconds"] / med[name]["cpu_seconds"]
                out.append(f"- Session / {name}: **{ratio:.2f}x** CPU (goal <= {goal:g}x: "
                           f"{'met' if ratio <= goal else 'MISSED'}), "
                           f"{d['seconds'] / med[name]['seconds']:.2f}x wall.")
    out += ["", "Counts: the hand-written SQL's (no noise) must equal the exact bounded "
            "count (the count does not depend on which rows are kept); dpsieve's and "
            "OpenDP's RMSE is their noise (OpenDP's noise is for L0 + 1 groups). "
            + load() + " at the end.", ""]
    for name in ("sql-duckdb-rows", "sql-duckdb-rows-ranked"):
        if name in med and med[name]["count"] != t["bounded_count"]:
            raise AssertionError(f"{name} disagrees with the bounded count")


def _retry_limit() -> str:
    from dpsieve.queries.engines.duckdb import MEMORY_LIMIT_ENV, retry_memory_limit

    env = os.environ.get(MEMORY_LIMIT_ENV)
    return f"{MEMORY_LIMIT_ENV}={env}" if env else f"memory_limit {retry_memory_limit()}"


def part_spark(a: argparse.Namespace, out: list[str]) -> None:
    path = qd.ensure(a.data, a.mid)
    t = qd.truth(path)
    plan = measure("spark-plan", path)
    out += [f"### Spark local[2], {a.mid:,} rows, beside DuckDB and PipelineDP's Spark "
            "backend", "", f"Command: `{a.command}`. {load()} at the start.", ""]
    rows = []
    for name, label in (("dpsieve-spark", "dpsieve, Spark engine (DataFrame API)"),
                        ("pipelinedp-spark", "PipelineDP SparkRDDBackend"),
                        ("dpsieve-duckdb", "dpsieve, DuckDB engine")):
        try:
            rows.append((label, repeat(name, path, a.peer_repeats)))
        except RuntimeError as e:
            out.append(f"- {label}: failed ({e})")
    out += _table(rows, t, jvm=True)
    pdp = [r for label, r in rows if "shuffles" in r]
    out += ["", _RMSE_NOTE + " Peak memory: the largest resident set of the whole process "
            "tree (the Python driver, the one JVM that in local mode is both Spark's driver "
            "and its executors, and PySpark's Python workers); in parentheses the JVM's.",
            "", f"Exchanges on the privacy unit in the bounding: "
            f"**{plan['bounding_shuffles']}** in the plan before it runs; in the executed "
            f"(final adaptive) plan **{plan.get('final_unit_shuffles', '?')}** on the unit "
            f"of **{plan.get('final_shuffles', '?')}** shuffles in all (the others "
            "group the bounded cells by public group for the totals, after the bounding)."
            + (f" PipelineDP's RDD lineage has {pdp[0]['shuffles']} ShuffledRDDs."
               if pdp else "") + f" Plans as text: results/queries/spark-plan.txt. "
            f"{load()} at the end.", "", "Physical plan before running:", "", "```text",
            plan["plan"].rstrip(), "```", ""]
    _write_plans(a, plan, pdp[0]["lineage"] if pdp else None)


def part_plan(a: argparse.Namespace, out: list[str]) -> None:
    """The Spark plan alone (before and as executed), without the timed runs."""
    path = qd.ensure(a.data, a.mid)
    plan = measure("spark-plan", path)
    pdp = measure("pipelinedp-lineage", path)
    out += [f"### Spark local[2], {a.mid:,} rows: the plan of the bounding", "",
            f"Command: `{a.command}`. Exchanges on the privacy unit: "
            f"**{plan['bounding_shuffles']}** in dpsieve's plan before it runs; in the "
            f"executed (final adaptive) plan **{plan['final_unit_shuffles']}** on the unit "
            f"of **{plan['final_shuffles']}** shuffles in all (the others group the bounded "
            "cells by public group for the totals, after the bounding). PipelineDP's "
            f"SparkRDDBackend, same workload: **{pdp['shuffles']}** ShuffledRDDs in its "
            "result's lineage. Plans and lineage as text: results/queries/spark-plan.txt.",
            ""]
    _write_plans(a, plan, pdp["lineage"])


def _write_plans(a: argparse.Namespace, plan: dict[str, Any], lineage: str | None) -> None:
    if not (a.quick or a.no_write):
        text = ["# dpsieve's Spark engine, the issue-12 workload at "
                f"{a.mid:,} rows, local[2]", "", "## Physical plan (before running)", "",
                plan["plan"].rstrip(), "", "## Executed plan (final adaptive plan)", "",
                plan.get("final_plan", "").rstrip(), ""]
        if lineage is not None:
            text += ["## PipelineDP SparkRDDBackend: RDD lineage of its result", "",
                     lineage.rstrip(), ""]
        (HERE / "results" / "queries" / "spark-plan.txt").write_text("\n".join(text))


def part_scaling(a: argparse.Namespace, out: list[str]) -> None:
    runner = "dpsieve-spark-warm" if a.spark_warm else "dpsieve-spark"
    out += ["### Scaling on Spark local[2] (dpsieve's Spark engine"
            + (", warm: timed after one untimed run on 1M rows in the same session)"
               if a.spark_warm else ", cold: the first query of a fresh session)"), "",
            f"Command: `{a.command}`. {load()} at the start.", "",
            "| rows | wall s, median (runs) | CPU s | wall s per million rows | CPU s per "
            "million rows | peak MiB (JVM) | load (1 min) after |",
            "|---|---|---|---|---|---|---|"]
    notes: list[str] = []
    for rows_n in a.spark_sizes:
        p = qd.ensure(a.data, rows_n)
        qd.ensure(a.data, 1_000_000)  # the warm-up's data
        r = repeat(runner, p, a.peer_repeats)
        out.append(f"| {rows_n:,} | {_secs(r)} | {r['seconds'] / rows_n * 1e6:.2f} | "
                   f"{r['cpu_seconds'] / rows_n * 1e6:.2f} | "
                   f"{_mib(r['peak_bytes'])} ({_mib(r['jvm_peak_bytes'])}) | "
                   f"{os.getloadavg()[0]:.1f} |")
        if "note" in r:
            notes.append(f"- {rows_n:,} rows: {r['note']}")
    out += ["", *notes, "", load() + " at the end.", ""] if notes else [
        "", load() + " at the end.", ""]


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["child"]:
        child(argv[1], argv[2])
        return
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, one repeat")
    ap.add_argument("--only", nargs="*", choices=PARTS, default=list(PARTS))
    ap.add_argument("--data", type=Path, default=Path("/tmp/dpsieve-qbench"),
                    help="directory of the generated Parquet files (cached)")
    ap.add_argument("--rows", type=int, default=None, help="the large size (default 50M)")
    ap.add_argument("--mid", type=int, default=None,
                    help="rows of the side-by-side runs (peers, spark; default 10M)")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--peer-repeats", type=int, default=None,
                    help="repeats of the peers and Spark runs (default: --repeats)")
    ap.add_argument("--memory-sizes", type=int, nargs="*", default=None,
                    help="table sizes of the memory part (default 1M, 10M and --rows)")
    ap.add_argument("--spark-sizes", type=int, nargs="*", default=None,
                    help="row counts of the Spark scaling curve (default 1M 10M 50M)")
    ap.add_argument("--memory-before", default=None, metavar="LIMIT",
                    help="memory and duckdb parts: also run Session with "
                    "DPSIEVE_DUCKDB_MEMORY_LIMIT=LIMIT (e.g. the earlier default, 256MiB), "
                    "interleaved, same table")
    ap.add_argument("--engine-memory", action="store_true",
                    help="measure memory through prepare + DuckDBEngine (memory_limit "
                    "600MB) instead of Session (DuckDB's defaults)")
    ap.add_argument("--spark-warm", action="store_true",
                    help="scaling: time each query after an untimed 1M-row run in the same "
                    "Spark session (written to results/queries/scaling-warm.md)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--merge-only", action="store_true",
                    help="only join results/queries/*.md into results/queries.md")
    a = ap.parse_args(argv)
    env = os.environ.get("QBENCH_DUCKDB_MEMORY")
    a.command = ((f"QBENCH_DUCKDB_MEMORY={env} " if env else "")
                 + "python -m benchmarks.queries_engines " + " ".join(argv))
    if a.quick:
        a.big, a.mid, a.sizes = a.rows or 200_000, 100_000, [50_000, 100_000, 200_000]
        a.repeats = a.repeats or 1
    else:
        a.big, a.mid = a.rows or 50_000_000, a.mid or 10_000_000
        a.sizes = [1_000_000, 10_000_000, a.big]
        a.repeats = a.repeats or 3
    a.peer_repeats = a.peer_repeats or a.repeats
    a.spark_sizes = a.sizes if a.spark_sizes is None else a.spark_sizes
    a.sizes = a.sizes if a.memory_sizes is None else a.memory_sizes
    head = ["## Query layer engines (benchmarks/queries_engines.py)", "",
           "Workload (issue 12): Zipf-distributed privacy units (s = 1.1), each in at most "
           f"{qd.MAX_UNIT_GROUPS} of {qd.GROUPS:,} public groups, values in [0, 10); "
           f"contribution bounding L0 = {qd.L0} groups per unit, L-inf = {qd.LINF} rows per "
           f"(unit, group); noisy count of kept rows and noisy sum of per-(unit, group) "
           f"sums clipped to [0, {qd.UNIT_SUM_UPPER:g}] over the public groups; pure DP, "
           f"eps = {qd.EPS:g} in total, add/remove one unit. Data generated by "
           "benchmarks/_queries_data.py. Machine: 2 cores shared with other jobs; "
           "medians with every run's wall time in parentheses. CPU s: the CPU time of "
           "the query (all threads of the measuring process and its live children, e.g. "
           "Spark's JVM): steadier than wall time when the cores are shared; 2 cores give "
           "at best wall = CPU / 2.", ""]
    parts = HERE / "results" / "queries"
    order = ("notes", "duckdb", "memory", "memory-engine", "peers", "rows", "spark", "scaling",
             "scaling-warm", "plan")

    def merge() -> None:
        text = head + [(parts / f"{p}.md").read_text() for p in order
                       if (parts / f"{p}.md").is_file()]
        (HERE / "results" / "queries.md").write_text("\n".join(text))

    if a.merge_only:
        merge()
        return
    for part in a.only:
        print(f"== {part}", flush=True)
        out: list[str] = []
        {"duckdb": part_duckdb, "memory": part_memory, "peers": part_peers, "rows": part_rows,
         "spark": part_spark, "scaling": part_scaling, "plan": part_plan}[part](a, out)
        print("\n".join(out), flush=True)
        if not (a.quick or a.no_write):  # each part's section, then the merged file
            parts.mkdir(exist_ok=True)
            name = ("memory-engine" if part == "memory" and a.engine_memory
                    else "scaling-warm" if part == "scaling" and a.spark_warm else part)
            (parts / f"{name}.md").write_text("\n".join(out) + "\n")
            merge()


if __name__ == "__main__":
    main()
