"""Session.preview for every registered kind of query: free (nothing spent, logged or
read), the charge the query is then charged, the budget after it, and the noise the answer
then carries (where the kind states it before running)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ApproxDP, Neighbouring, PureDP
from dpsieve.queries.requests import KINDS

RO = Neighbouring.REPLACE_ONE


def _units() -> Session:
    rng = np.random.default_rng(3)
    n = 1500
    df = pd.DataFrame({"pid": rng.integers(0, 200, n), "city": rng.choice(list("abc"), n),
                       "x": rng.uniform(0, 10, n)})
    return Session(df, budget=PureDP(3.0), privacy_unit="pid")


def _rows(budget: Any) -> Callable[[], Session]:
    def make() -> Session:
        rng = np.random.default_rng(4)
        n = 400
        df = pd.DataFrame({"a": rng.choice(["u", "v"], n), "b": rng.choice(["p", "q"], n),
                           "x": rng.normal(5.0, 1.0, n)})
        return Session(df, budget=budget)
    return make


PURE = {"type": "pure", "eps": 0.5}
C = {"max_groups": 1, "max_rows": 4}
#: One example of every kind (a kind missing here fails the coverage test below).
EXAMPLES: dict[str, tuple[Callable[[], Session], dict[str, Any]]] = {
    "query": (_units, {"type": "query", "privacy": PURE, "aggregations": [
        {"type": "count"}, {"type": "mean", "column": "x", "lower": 0, "upper": 10}],
        "group_by": ["city"], "keys": [["a"], ["b"], ["c"]],
        "contribution": {"max_groups": 2, "max_rows": 3}}),
    "count": (_units, {"type": "count", "privacy": PURE, "contribution": C}),
    "sum": (_units, {"type": "sum", "column": "x", "lower": 0, "upper": 10,
                     "privacy": PURE, "contribution": C}),
    "mean": (_units, {"type": "mean", "column": "x", "lower": 0, "upper": 10,
                      "privacy": PURE, "contribution": C}),
    "histogram": (_units, {"type": "histogram", "column": "city", "categories": ["a", "b"],
                           "privacy": PURE, "contribution": C}),
    "linear": (_units, {"type": "linear", "column": "city", "categories": ["a", "b"],
                        "workload": [[1, 1], [1, -1]], "privacy": PURE, "contribution": C}),
    "release": (_rows(PureDP(3.0, RO)), {
        "type": "release", "mechanism": "laplace", "columns": ["a", "b"],
        "domain": {"a": ["u", "v"], "b": ["p", "q"]}, "n": 400, "privacy": PURE}),
    "robust_mean": (_rows(ApproxDP(3.0, 1e-5, RO)), {
        "type": "robust_mean", "column": "x", "bound": 100.0,
        "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}}),
    "robust_median": (_rows(ApproxDP(3.0, 1e-5, RO)), {
        "type": "robust_median", "column": "x", "bound": 100.0,
        "privacy": {"type": "approx", "eps": 1.0, "delta": 1e-6}}),
}


def test_every_registered_kind_has_an_example() -> None:
    assert set(EXAMPLES) == set(KINDS)


def _stds(noise: Any) -> list[float]:
    """Every ``std`` in a (nested) noise statement."""
    if isinstance(noise, dict):
        own = [float(noise["std"])] if "std" in noise else []
        return own + [s for k, v in noise.items() if k != "std" for s in _stds(v)]
    return []


@pytest.mark.parametrize("kind", KINDS)
def test_preview_is_free_and_states_what_the_query_then_costs(kind: str) -> None:
    make, spec = EXAMPLES[kind]
    s = make()
    before = s.remaining().to_dict()
    p = s.preview(spec)
    assert s.preview(spec) == p
    assert s.remaining().to_dict() == before  # nothing spent
    assert s.store.history(s.budget_id) == []  # nothing logged
    if kind not in ("release", "robust_mean", "robust_median"):  # these read the row
        assert s._source._frame is None  # count, public under replace-one; plans nothing
    assert p["kind"] == kind
    assert p["admitted"] is True
    assert p["budget"] == before
    r = s.run(spec)
    assert r.cost.to_dict()["query"] == p["charge"]
    assert s.remaining().to_dict() == p["budget_after"]
    assert p["eps_left_after"] is None or p["eps_left_after"] <= p["eps_left"]
    predicted = sorted(_stds(p["noise"]))
    if kind in ("release",):  # the answer states the mechanism's scale: the same one
        assert p["noise"]["release"]["answers"]["scale"] == r.noise["scale"]
    elif kind.startswith("robust"):
        assert p["noise"] is None
        assert p["noise_note"]
    else:
        assert predicted
        assert predicted == sorted(_stds(r.noise))


def test_a_preview_the_budget_would_refuse_says_so_and_spends_nothing() -> None:
    s = _units()
    spec = {**EXAMPLES["count"][1], "privacy": {"type": "pure", "eps": 10.0}}
    p = s.preview(spec)
    assert p["admitted"] is False
    assert p["budget_after"] is None
    assert p["eps_left_after"] is None
    assert s.store.history(s.budget_id) == []


def test_a_preview_of_a_bad_request_is_refused_naming_the_parameter() -> None:
    from dpsieve.errors import ValidationError

    s = _units()
    with pytest.raises(ValidationError) as e:
        s.preview({**EXAMPLES["sum"][1], "column": "nope"})
    assert "column" in str(e.value)
