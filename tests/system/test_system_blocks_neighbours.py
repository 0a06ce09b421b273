"""Outcomes of a data set with blocks on neighbouring data sets (docs/proofs/blocks.md §2,
§5): the same requests, by two analysts with quotas, direct and queued, under unlocking
per arriving analyst, give the same decisions, refusal texts, queue positions, reasons and
statuses, and leave every block and quota in the same state, whether the data sets differ
in a row of a declared block or in a row no declared block holds; in the second case the
answers are identical too (that row is never read: same noise seed, same answer)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpsieve.errors import DPError
from dpsieve.ledger import MemoryStore
from dpsieve.ledger.blockset import PendingRecord
from dpsieve.session.blocks import BlockSession

SPEC = {"column": "day", "budget": {"type": "pure", "eps": 1.0},
        "unlock": {"type": "arrivals", "n": 3, "by": "analyst"}, "scheduler": "dpack"}


def _frame(extra: dict[str, Any] | None) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"day": rng.choice([1, 2, 3], 300).astype("int64"),
                       "x": rng.integers(0, 100, 300).astype("int64")})
    if extra is not None:
        df = pd.concat([df, pd.DataFrame([extra])], ignore_index=True)
    return df


def _count(eps: float, where: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"type": "query", "privacy": {"type": "pure", "eps": eps},
            "aggregations": [{"type": "count"}, {"type": "sum", "column": "x", "lower": 0,
                                                 "upper": 100}],
            "where": where or []}


def _transcript(df: pd.DataFrame) -> tuple[list[Any], list[Any], dict[str, str]]:
    store = MemoryStore()
    store.add_principal("ana", "analyst", "h1")
    store.add_principal("bob", "analyst", "h2")
    kw = {"column_types": {"day": "integer", "x": "integer"}}
    owner = BlockSession(df, dataset="d", store=store, blocks=SPEC, **kw)
    for day in (1, 2, 3):
        owner.add_block(day)
    owner.set_quota("analyst", "ana", {"type": "pure", "eps": 0.8})
    s = {who: BlockSession(df, dataset="d", store=store, principal=who,
                           rng=np.random.default_rng(11 if who == "ana" else 12), **kw)
         for who in ("ana", "bob")}
    steps: list[tuple[str, str, Any]] = [
        ("ana", "run", _count(0.3, [{"column": "day", "op": "<=", "value": 2}])),
        ("ana", "run", _count(0.3)),  # locked: ana alone unlocked a third
        ("bob", "run", _count(0.2, [{"column": "x", "op": ">", "value": 50}])),
        ("ana", "submit", _count(0.4, [{"column": "day", "op": "==", "value": 3}])),
        ("bob", "submit", _count(0.3, [{"column": "day", "op": "in", "value": [1, 2]}])),
        ("bob", "run", _count(0.1, [{"column": "day", "op": "==", "value": 3}])),  # locked
        ("ana", "status", None), ("bob", "status", None),
        ("ana", "run", _count(0.5)),  # the quota
    ]
    public, answers = [], []
    keys: dict[str, str] = {}
    for i, (who, what, spec) in enumerate(steps):
        key = f"{who}/{i}"
        try:
            if what == "run":
                r = s[who].query(spec, key=key)
                public.append(("admitted", r.cost.to_dict(), r.budget))
                answers.append(r.value)
            elif what == "submit":
                keys[who] = key
                out = s[who].submit(spec, wait=3600, key=key)
                public.append(_pending(out))
                answers.append(None if isinstance(out, PendingRecord) else out.value)
            else:
                out = s[who].status(keys[who])
                public.append(_pending(out))
                answers.append(None if isinstance(out, PendingRecord) else out.value)
        except DPError as e:
            public.append(("refused", type(e).__name__, str(e)))
            answers.append(None)
    states = {b: store.load_filter(b).to_json() for b in store.budget_ids()}
    return public, answers, states


def _pending(out: Any) -> Any:
    if isinstance(out, PendingRecord):
        return ("pending", out.status, out.position, out.reason)
    return ("admitted", out.cost.to_dict(), out.budget)


@pytest.mark.parametrize(("extra", "same_answers"), [
    ({"day": 2, "x": 99}, False),  # a row of a declared block
    ({"day": 4, "x": 99}, True),   # a row of a block never declared: never read
])
def test_outcomes_do_not_depend_on_one_row(extra: dict[str, Any], same_answers: bool) -> None:
    pub, ans, states = _transcript(_frame(None))
    pub2, ans2, states2 = _transcript(_frame(extra))
    assert pub == pub2
    assert states == states2
    kinds = [p[0] for p in pub]
    assert kinds.count("admitted") >= 3, pub
    assert kinds.count("refused") >= 2, pub
    assert any(p[0] == "pending" and p[1] == "waiting" for p in pub), pub
    assert (ans == ans2) is same_answers
