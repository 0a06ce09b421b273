"""The slow suite's CI time budget and order (tests/conftest.py), run in a pytester sandbox."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")
# Loaded by path: the module name ``conftest`` is also tests/system/conftest.py's.
_spec = importlib.util.spec_from_file_location("dpsieve_tests_conftest", CONFTEST)
assert _spec is not None
assert _spec.loader is not None
_hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hooks)
DEADLINE_ENV = _hooks.DEADLINE_ENV
LAST = _hooks.LAST
budget_skip_reason = _hooks.budget_skip_reason
LONG_MARGIN = _hooks.LONG_MARGIN
LONG_TIMEOUT = _hooks.LONG_TIMEOUT
slow_deadline = _hooks.slow_deadline
slow_tier = _hooks.slow_tier


def test_the_skip_decision() -> None:
    assert budget_skip_reason(1000.0, None) is None
    assert budget_skip_reason(1000.0, 1000.0) is None
    assert budget_skip_reason(999.0, 1000.0) is None
    reason = budget_skip_reason(1061.0, 1000.0)
    assert reason == ("CI time budget of .ci/run exhausted: no slow test starts after "
                      "DPSIEVE_SLOW_DEADLINE (00:16:40 UTC) (run `make test-slow` to run it)")
    assert budget_skip_reason(5000.0, 1000.0) == reason  # one text a run: -ra counts them
    assert budget_skip_reason(5000.0, 1000.0, 3600) == reason


def test_a_long_test_does_not_start_near_the_deadline() -> None:
    deadline = 10_000.0
    near = deadline - LONG_MARGIN + 1
    assert budget_skip_reason(near, deadline, LONG_TIMEOUT - 1) is None  # a short test runs
    assert budget_skip_reason(near - 2, deadline, LONG_TIMEOUT) is None  # before the margin
    reason = budget_skip_reason(near, deadline, LONG_TIMEOUT)
    assert reason == ("CI time budget of .ci/run exhausted: no slow test with a timeout of 30 "
                      "min or more starts in the last 15 min before DPSIEVE_SLOW_DEADLINE "
                      "(02:46:40 UTC) (run `make test-slow` to run it)")
    assert budget_skip_reason(near, None, LONG_TIMEOUT) is None  # no deadline: it runs


def test_the_deadline_variable() -> None:
    assert slow_deadline({}) is None
    assert slow_deadline({DEADLINE_ENV: ""}) is None
    assert slow_deadline({DEADLINE_ENV: "1765000000"}) == 1765000000.0
    with pytest.raises(pytest.UsageError, match=r"DPSIEVE_SLOW_DEADLINE must be epoch seconds"
                                                r" \(a number\), got 'soon'"):
        slow_deadline({DEADLINE_ENV: "soon"})


def test_the_tiers_of_the_slow_suite() -> None:
    assert slow_tier("tests/privacy_edges/test_edges_charge_audit.py::test_x[a]") == 0
    assert slow_tier("tests/privacy_edges/test_edges_differential.py::test_x") == 0
    assert slow_tier("tests/privacy_edges/test_edges_audit_power.py::test_x[a]") == 2
    assert slow_tier("tests/interactive/test_children_audit.py::test_x") == 0
    assert slow_tier("tests/mechanisms/test_samplers_slow.py::test_x") == 1
    assert slow_tier("tests/accounting/test_coarsen.py::test_x") == 1
    assert slow_tier("tests/test_docs_examples.py::test_examples_and_reproductions") == LAST
    assert slow_tier("tests/training/test_tuning.py::test_x") == LAST


_SANDBOX_TESTS = """
import pytest

pytestmark = pytest.mark.slow

def test_one():
    pass

@pytest.mark.timeout(3600)
def test_long():
    pass

def test_two():
    pass
"""


def _sandbox(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    # names no module of tests/ has (the full suite has imported tests/queries/test_utility)
    pytester.makepyfile(test_sandbox_utility=_SANDBOX_TESTS,
                        test_sandbox_edges_audit=_SANDBOX_TESTS,
                        test_sandbox_fast="def test_fast():\n    pass\n")


def test_past_the_deadline_slow_tests_skip_with_the_reason(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _sandbox(pytester)
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() - 5))
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=6)  # test_fast is not slow: it runs
    result.stdout.fnmatch_lines(["SKIPPED [[]6[]] *CI time budget of .ci/run exhausted: no slow "
                                 "test starts after DPSIEVE_SLOW_DEADLINE (*) (run `make "
                                 "test-slow` to run it)"])


def test_before_the_deadline_or_without_it_everything_runs(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    _sandbox(pytester)
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() + 3600))
    pytester.runpytest().assert_outcomes(passed=7)
    monkeypatch.delenv(DEADLINE_ENV)
    pytester.runpytest().assert_outcomes(passed=7)


def test_near_the_deadline_only_long_slow_tests_skip(pytester: pytest.Pytester,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    _sandbox(pytester)
    monkeypatch.setenv(DEADLINE_ENV, str(time.time() + 600))
    result = pytester.runpytest("-rs")
    result.assert_outcomes(passed=5, skipped=2)  # test_long in both files
    result.stdout.fnmatch_lines(["SKIPPED [[]2[]] *no slow test with a timeout of 30 min or "
                                 "more starts in the last 15 min before*"])


def test_a_bad_deadline_is_a_usage_error(pytester: pytest.Pytester,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    _sandbox(pytester)
    monkeypatch.setenv(DEADLINE_ENV, "in an hour")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*DPSIEVE_SLOW_DEADLINE must be epoch seconds*'in an hour'*"])


def test_audits_run_first_and_files_stay_whole(pytester: pytest.Pytester,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    _sandbox(pytester)
    monkeypatch.delenv(DEADLINE_ENV, raising=False)
    result = pytester.runpytest("--collect-only", "-q")
    ids = [line for line in result.stdout.lines if "::" in line]
    assert ids == ["test_sandbox_edges_audit.py::test_one",
                   "test_sandbox_edges_audit.py::test_long",
                   "test_sandbox_edges_audit.py::test_two", "test_sandbox_fast.py::test_fast",
                   "test_sandbox_utility.py::test_one", "test_sandbox_utility.py::test_long",
                   "test_sandbox_utility.py::test_two"]
