"""Package-level promises: explicit sorted __all__, no import side effects, error tree."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import dpsieve
from dpsieve import errors
from dpsieve._validation import check_positive, check_probability_vector

PUBLIC_MODULES = [
    "dpsieve",
    "dpsieve.errors",
    "dpsieve.accounting",
    "dpsieve.accounting.directed",
    "dpsieve.accounting.events",
    "dpsieve.accounting.families",
    "dpsieve.accounting.gdp",
    "dpsieve.accounting.order",
    "dpsieve.accounting.pld",
    "dpsieve.accounting.tradeoff",
    "dpsieve.filters.base",
    "dpsieve.filters",
    "dpsieve.filters.additive",
    "dpsieve.filters.auditor",
    "dpsieve.filters.capacity",
    "dpsieve.filters.gdp",
    "dpsieve.filters.interleaved",
    "dpsieve.filters.mixed",
    "dpsieve.filters.natural",
    "dpsieve.filters.per_record",
    "dpsieve.filters.profile",
    "dpsieve.filters.residue",
    "dpsieve.filters.summary",
    "dpsieve.filters.theorem9",
    "dpsieve.filters.training",
    "dpsieve.interactive",
    "dpsieve.interactive.base",
    "dpsieve.interactive.blt",
    "dpsieve.interactive.cache",
    "dpsieve.interactive.counter",
    "dpsieve.interactive.store",
    "dpsieve.interactive.sparse_vector",
    "dpsieve.mechanisms",
    "dpsieve.mechanisms.additive",
    "dpsieve.mechanisms.base",
    "dpsieve.mechanisms.calibrate",
    "dpsieve.mechanisms.discrete",
    "dpsieve.mechanisms.noise",
    "dpsieve.mechanisms.select",
    "dpsieve.mechanisms.selection",
    "dpsieve.mechanisms.subsampled",
    "dpsieve.training",
    "dpsieve.training.accountant",
    "dpsieve.training.calibrate",
    "dpsieve.ledger",
    "dpsieve.ledger.base",
    "dpsieve.queries",
    "dpsieve.queries.engine",
    "dpsieve.queries.engines",
    "dpsieve.queries.schema",
    "dpsieve.release",
    "dpsieve.release.baselines",
    "dpsieve.release.data",
    "dpsieve.release.envelope",
    "dpsieve.release.errors",
    "dpsieve.release.groups",
    "dpsieve.release.mechanism",
    "dpsieve.release.params",
    "dpsieve.release.rejection",
    "dpsieve.release.result",
    "dpsieve.release.transcript",
    "dpsieve.release.workloads",
    "dpsieve.robust",
    "dpsieve.robust.audit",
    "dpsieve.robust.baselines",
    "dpsieve.robust.friendly",
    "dpsieve.robust.kl",
    "dpsieve.robust.mean",
    "dpsieve.robust.median",
    "dpsieve.robust.pca",
    "dpsieve.robust.pipeline",
    "dpsieve.robust.policy",
    "dpsieve.robust.propose",
    "dpsieve.robust.resistance",
    "dpsieve.robust.results",
    "dpsieve.robust.variant_b",
    "dpsieve.service",
    "dpsieve.session",
]


def _isort_key(s: str) -> tuple[int, str]:
    """isort-style order, as ruff's RUF022 wants: CONSTANTS, then Classes, then functions."""
    return (0 if s.isupper() else 1 if s[0].isupper() else 2, s)


@pytest.mark.parametrize("name", PUBLIC_MODULES)
def test_all_is_sorted_and_resolves(name: str) -> None:
    mod = importlib.import_module(name)
    names = list(mod.__all__)
    assert names == sorted(names, key=_isort_key), f"{name}.__all__ is not sorted"
    for n in names:
        assert hasattr(mod, n), f"{name}.{n} is in __all__ but missing"


def test_import_has_no_side_effects() -> None:
    code = "import sys, dpsieve; print(sorted(m for m in sys.modules if m.startswith('dpsieve')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "dpsieve.service" not in out.stdout
    assert "dpsieve.ledger" not in out.stdout


def test_error_tree() -> None:
    assert issubclass(errors.ValidationError, ValueError)
    assert issubclass(errors.ValidationError, errors.DPError)
    assert issubclass(errors.NumericalError, ArithmeticError)
    assert issubclass(errors.ConcurrencyError, errors.LedgerError)
    assert dpsieve.DPError is errors.DPError


@pytest.mark.parametrize("bad", [-1.0, 0.0, float("nan"), float("inf"), "1", True, None])
def test_positive_check_names_parameter_constraint_value(bad: object) -> None:
    with pytest.raises(errors.ValidationError) as ei:
        check_positive("sigma", bad, "gaussian")
    msg = str(ei.value)
    assert "'sigma'" in msg
    assert "gaussian()" in msg
    assert "> 0" in msg
    assert repr(bad) in msg
    assert ei.value.parameter == "sigma"


@pytest.mark.parametrize("bad", [[0.5, 0.6], [-0.1, 1.1], [float("nan"), 1.0], [], [[0.5, 0.5]]])
def test_probability_vector_rejects(bad: object) -> None:
    with pytest.raises(errors.ValidationError, match="'p'"):
        check_probability_vector("p", bad, "from_distributions")
