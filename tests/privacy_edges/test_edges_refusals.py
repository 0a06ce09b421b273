"""Defect 6 of issue 10: no request is refused after its spend is written.

Five kinds of ``release`` request got a 422 after the charge (eps 1e-300, eps 5e-324, a
wrong ``n``, ...): a check that failed while the mechanism ran. Every check now runs
before the ledger is touched -- public parameters, the public row count ``n``, and a
public dry run of the mechanism on ``n`` synthetic rows -- and the robust estimators
build their public plan (every parameter check, the stated privacy) before the spend.
A request either answers or is refused with nothing written, on every entry point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from edges_harness import ENTRIES, entry

DOMAIN = {"a": ["p", "q"], "b": ["u", "v"]}
N = 40


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    return pd.DataFrame({"a": rng.choice(["p", "q"], N), "b": rng.choice(["u", "v"], N),
                         "x": rng.normal(5.0, 1.0, N)})


def _release(mech: str, eps: float = 1.0, **kw: Any) -> dict[str, Any]:
    extra = {"rounds": 3} if mech in ("envelope", "pmw", "mwem") else {}
    return {"type": "release", "mechanism": mech, "columns": ["a", "b"], "domain": DOMAIN,
            "n": N, "privacy": {"type": "pure", "eps": eps}, **extra, **kw}


MECHS = ("envelope", "pmw", "mwem", "laplace", "blr")
REQUESTS: list[tuple[str, dict[str, Any]]] = [
    *[(f"{m}-eps-1e-300", _release(m, 1e-300)) for m in MECHS],
    *[(f"{m}-eps-5e-324", _release(m, 5e-324)) for m in MECHS],
    *[(f"{m}-eps-1e-30", _release(m, 1e-30)) for m in MECHS],
    *[(f"{m}-wrong-n", _release(m, n=N + 1)) for m in MECHS],
    *[(f"{m}-n-1e30", _release(m, n=10**30)) for m in MECHS],
    ("random-huge-seed", _release("laplace", workload="random:3:" + "9" * 50)),
    ("robust-mean-tiny-eps", {"type": "robust_mean", "column": "x", "bound": 10.0,
                              "privacy": {"type": "approx", "eps": 1e-7, "delta": 1e-6}}),
    ("robust-median-few-rows", {"type": "robust_median", "column": "x", "bound": 10.0,
                                "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}}),
]


@pytest.mark.parametrize("where", ENTRIES)
def test_every_release_request_answers_or_is_refused_uncharged(where: str,
                                                                tmp_path: Path) -> None:
    with entry(where, _frame(), tmp_path, neighbouring="replace_one") as e:
        for label, spec in REQUESTS:
            before = e.spends()
            out = e.run(spec)
            assert out.kind in ("ok", "refused"), (label, out)
            if out.kind == "refused":
                assert e.spends() == before, (label, "refused after charging", out.message)
            else:
                assert e.spends() == before + 1, label


@pytest.mark.parametrize("where", ENTRIES)
def test_the_wrong_n_is_refused_naming_n(where: str, tmp_path: Path) -> None:
    with entry(where, _frame(), tmp_path, neighbouring="replace_one") as e:
        out = e.run(_release("laplace", n=N + 1))
        assert out.kind == "refused"
        assert "'n'" in out.message
        assert e.spends() == 0


@pytest.mark.parametrize("path", ["missing.csv", "data.json"])
def test_an_unloadable_file_is_refused_before_the_spend(tmp_path: Path, path: str) -> None:
    """A Session over a path that is no existing CSV/Parquet file was charged for a count,
    then failed to load the rows: refused now from public facts, the ledger untouched."""
    from dpsieve import Session
    from dpsieve.accounting.events import PureDP
    from dpsieve.errors import ValidationError

    if path.endswith(".json"):
        (tmp_path / path).write_text("{}")
    s = Session(str(tmp_path / path), budget=PureDP(1.0))
    with pytest.raises(ValidationError) as ei:
        s.run({"type": "count", "privacy": {"type": "pure", "eps": 0.5}})
    assert ei.value.parameter == "data"
    assert s.store.history(s.budget_id) == []
