"""Suite-wide hooks: the slow suite's order and CI's time budget for it.

CI (``.ci/run``) has a hard limit of 90 minutes on a 2-core machine whose speed varies about
twofold between days. ``.ci/run`` exports ``DPSIEVE_SLOW_DEADLINE`` (epoch seconds: its start
plus 80 minutes); once that time has passed, every ``slow`` test not yet started is skipped with
a reason naming the budget (a test marked with a timeout of 30 min or more: from 15 min before
it), so a slow day gives a green run with listed skips instead of a run killed without a
report. Without the variable (``make test-slow`` on a developer machine)
nothing is skipped.

The slow suite runs its privacy audits and neighbour differentials first, then the other
soundness checks (samplers' statistical tests, accounting, filters), then the audits' own
power measurement, then the rest (utility, system, packaging), so what the budget cuts on
a slow day is the least important. Files are moved
whole (their order inside is kept), which keeps module-scoped fixtures built once.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import pytest

pytest_plugins = ["pytester"]  # tests/test_conftest_budget.py runs these hooks in a sandbox

DEADLINE_ENV = "DPSIEVE_SLOW_DEADLINE"
_DEADLINE = pytest.StashKey[float | None]()

#: The slow suite's order: (rank, fnmatch patterns on a test's file path -- its node id
#: before ``::``, relative to the root directory); the first entry a file matches gives its
#: rank, lowest first; a file matching none runs last (rank ``LAST``).
SLOW_TIERS: tuple[tuple[int, tuple[str, ...]], ...] = (
    # the audits' own power (detection rates of re-introduced defects: minutes each) after
    # the audits and soundness checks themselves
    (2, ("*privacy_edges/test_edges_audit_power.py",)),
    # privacy audits and neighbour differentials: a failure here is a privacy bug
    (0, ("*privacy_edges/*", "*audit*", "*differential*")),
    # the other soundness checks: samplers' distributions, accounting, filters, release, robust
    (1, ("*mechanisms/*", "*accounting/*", "*filters/*", "*release/*", "*robust/*")),
)
LAST = 3


def slow_deadline(environ: Mapping[str, str]) -> float | None:
    """The CI deadline for starting a slow test (epoch seconds), or None when not set."""
    raw = environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise pytest.UsageError(
            f"{DEADLINE_ENV} must be epoch seconds (a number), got {raw!r}") from None


#: A slow test whose ``timeout`` marker allows this many seconds or more (the fresh-wheel
#: test: 938 s at load 7 on 2 cores) does not start in the last ``LONG_MARGIN`` seconds
#: before the deadline: started at the deadline, it would end past CI's limit.
LONG_TIMEOUT = 1800
LONG_MARGIN = 900


def budget_skip_reason(now: float, deadline: float | None, timeout: float = 0.0) -> str | None:
    """Why a slow test starting at ``now`` (with its ``timeout`` marker's seconds, 0 for
    none) is skipped, or None when it runs. One text a run for each of the two cases (``-ra``
    lists them as one line with their count)."""
    if deadline is None:
        return None
    at = datetime.fromtimestamp(deadline, UTC).strftime("%H:%M:%S UTC")
    if now > deadline:
        return (f"CI time budget of .ci/run exhausted: no slow test starts after "
                f"{DEADLINE_ENV} ({at}) (run `make test-slow` to run it)")
    if timeout >= LONG_TIMEOUT and now > deadline - LONG_MARGIN:
        return (f"CI time budget of .ci/run exhausted: no slow test with a timeout of "
                f"{LONG_TIMEOUT // 60} min or more starts in the last {LONG_MARGIN // 60} min "
                f"before {DEADLINE_ENV} ({at}) (run `make test-slow` to run it)")
    return None


def marked_timeout(item: pytest.Item) -> float:
    """The seconds of a test's ``timeout`` marker (pytest-timeout), 0 without one."""
    mark = item.get_closest_marker("timeout")
    if mark is None:
        return 0.0
    value = mark.args[0] if mark.args else mark.kwargs.get("timeout")
    try:
        return float(value) if value is not None else 0.0
    except (TypeError, ValueError):
        return 0.0


def slow_tier(nodeid: str, tiers: Sequence[tuple[int, Sequence[str]]] = SLOW_TIERS) -> int:
    """The rank of a test's file in the slow suite (0 first; ``LAST`` for a file in none)."""
    path = nodeid.split("::", 1)[0]
    for rank, patterns in tiers:
        if any(fnmatch.fnmatchcase(path, p) for p in patterns):
            return rank
    return LAST


def pytest_configure(config: pytest.Config) -> None:
    """Read the deadline once (a malformed one stops the run before any test)."""
    config.stash[_DEADLINE] = slow_deadline(os.environ)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Slow tests in tier order (a stable sort: files stay whole, in their order)."""
    def key(item: pytest.Item) -> int:
        return slow_tier(item.nodeid) if item.get_closest_marker("slow") else LAST

    items.sort(key=key)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip a slow test past CI's deadline (before its fixtures are built)."""
    if item.get_closest_marker("slow") is None:
        return
    reason = budget_skip_reason(time.time(), item.config.stash.get(_DEADLINE, None),
                                marked_timeout(item))
    if reason is not None:
        pytest.skip(reason)
