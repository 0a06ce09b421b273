"""The charge audit on DP key selection: every construction releases no more than charged.

The neighbour adds one whole unit with 12 extreme rows in city 'a' (a group only it creates)
and 12 in city 'b' (a group that exists), bounded to L0 = 2, L-inf = 3: the most one unit
can move a selection. The outcome is, per city, the released count (or a sentinel when the
group is not released), so the audit sees both the existing group's shift and the chance
that the new group appears -- the delta part -- at a large delta (0.05) where a few hundred
runs can bound it. Each construction is forced with ``select.by`` and a budget type
(charge_audit.audit; false alarms at most ALPHA per audit). A threshold sized for a row
count as if it were a unit count is caught.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from charge_audit import Sample, audit

from dpsieve.accounting.events import Neighbouring
from dpsieve.queries.engines.frames import PandasEngine
from dpsieve.queries.plan import from_spec
from dpsieve.queries.prepare import Prepared, prepare
from dpsieve.queries.schema import Schema
from dpsieve.queries.selection import NoisyThreshold

CITIES = ("a", "b", "c")
SENTINEL = -50.0


def _pair() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(20261207)
    n = 60
    d = pd.DataFrame({"pid": np.arange(n) // 2, "city": rng.choice(["b", "c"], n),
                      "x": np.round(rng.uniform(0, 5, n), 2)})
    extra = pd.DataFrame([{"pid": 999, "city": c, "x": 10.0} for c in "ab"
                          for _ in range(12)])
    return d, pd.concat([d, extra], ignore_index=True)


def _prepared(privacy: dict[str, Any], by: str, per: str) -> Prepared:
    spec = {"type": "query", "privacy": privacy,
            "aggregations": [{"type": "count", "per": per}], "group_by": ["city"],
            "select": {"delta": 0.05, "by": by},
            "contribution": {"max_groups": 2, "max_rows": 3}}
    schema = Schema.of([("pid", "integer"), ("city", "string"), ("x", "float")], "pid")
    return prepare(from_spec(spec), schema, Neighbouring.ADD_REMOVE)


#: "city c is released" for each city: a group's appearance, rated on the pilot.
EVENTS = [(f"{c} released", lambda r, i=i: r is not None and r[i] != SENTINEL)
          for i, c in enumerate(CITIES)]


def _sampler(p: Prepared, frame: pd.DataFrame) -> Any:
    engine = PandasEngine(frame)
    cost = p.charge.description.to_dict()

    def run(k: int) -> Sample:
        rows: list[list[float] | None] = []
        for _ in range(k):
            ans = p.run(engine)
            got = {g.key[0]: float(g.estimates[0].value) for g in ans.groups}  # type: ignore[arg-type]
            rows.append([got.get(c, SENTINEL) for c in CITIES])
        return Sample(rows, [cost] * k)
    return run


CASES = [
    ({"type": "pure", "eps": 1.0}, "count", "row"),
    ({"type": "pure", "eps": 1.0}, "count", "unit"),
    ({"type": "pure", "eps": 1.0}, "units", "row"),
    ({"type": "zcdp", "rho": 0.5}, "count", "row"),
    ({"type": "zcdp", "rho": 0.5}, "units", "unit"),
    # (eps, delta) plans the rule calibrates with Gaussian noise and Gaussian thresholds
    # (variance ratios 0.75 and 0.33), charged ApproxDP(1, 0.05 + 0.05)
    ({"type": "approx", "eps": 1.0, "delta": 0.05}, "count", "row"),
    ({"type": "approx", "eps": 1.0, "delta": 0.05}, "units", "unit"),
]


@pytest.mark.parametrize(("privacy", "by", "per"), CASES,
                         ids=[f"{p['type']}-{b}-{r}" for p, b, r in CASES])
def test_selections_spread_at_least_as_charged(privacy: dict[str, Any], by: str,
                                               per: str) -> None:
    p = _prepared(privacy, by, per)
    if privacy["type"] == "approx":  # the Gaussian path, not the pure plan
        assert p.calibration is not None
        assert p.calibration["mechanism"] == "gaussian"
    d, d2 = _pair()
    v = audit(_sampler(p, d2), _sampler(p, d), samples=400, pilot=150, events=EVENTS)
    assert v.passed, str(v)


def test_the_audit_catches_a_threshold_sized_for_a_unit_count() -> None:
    """The defect: a row count (noise scale L0 L-inf / eps) thresholded as a unit count
    would be (1 + the tail bar of noise L0 / eps). The group only the added unit creates
    (3 rows) then appears far more often than delta allows."""
    from dpsieve.queries._selection_math import least_threshold

    p = _prepared({"type": "pure", "eps": 1.0}, "count", "row")
    sel = p.charge.selection
    assert isinstance(sel, NoisyThreshold)
    assert sel.statistic == "rows"
    assert sel.rows == 3
    wrong = 1 + least_threshold("laplace", 2.0, 2, sel.delta)
    bad = Prepared(p.query, p.spec, type(p.charge)(
        p.charge.description, p.charge.parts,
        NoisyThreshold(sel.mechanism, wrong, sel.delta, sel.tail_delta, sel.charge,
                       sel.statistic, sel.rows, sel.part)), p.plans, p.labels)
    d, d2 = _pair()
    v = audit(_sampler(bad, d2), _sampler(bad, d), samples=400, pilot=150, events=EVENTS)
    assert not v.passed, str(v)
