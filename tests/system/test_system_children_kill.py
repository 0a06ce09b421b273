"""Children after SIGKILL: a process opens children and questions them on a SQLite or
PostgreSQL ledger and is killed mid-burst. Afterwards every answer it released is stored,
each child's state counts exactly the answers stored for it (state and answer commit
together), no child answered more positives than it declared, the budget is not
overspent, the audit chain verifies, and retrying the unconfirmed keys answers each once."""

from __future__ import annotations

import json
import time
from fractions import Fraction

from service_harness import kill_when, open_ledger, start_script

SCRIPT = r"""
import sys, numpy as np
from dpsieve.accounting.events import PureDP
from dpsieve.ledger import open_store
from dpsieve.interactive import LaplaceSVT, SparseVector, ChildExhaustedError
from dpsieve.interactive.store import open_child, ask_child
url, schema = sys.argv[1], sys.argv[2]
s = open_store(url, schema=schema)
i = 0
while True:
    c = f"sv{i % 8}"
    open_child(s, "b", c, SparseVector.open(LaplaceSVT(0.1, positives=3)), key=f"open-{c}")
    try:
        a = ask_child(s, "b", c, {"op": "ask", "threshold": 0.0}, 1e9 if i % 3 else -1e9,
                      key=f"q{i}")
        print("released", f"q{i}", c, a["above"], flush=True)
    except ChildExhaustedError:
        print("exhausted", f"q{i}", c, flush=True)
    s.spend("b", PureDP(0.01), key=f"p{i}")
    i += 1
"""


def test_children_survive_sigkill(ledger_url: tuple[str, str]) -> None:
    from dpsieve.filters import PureDPFilter
    from dpsieve.interactive import ChildExhaustedError
    from dpsieve.interactive.store import ask_child

    url, schema = ledger_url
    s = open_ledger(url, schema)
    s.create_budget("b", PureDPFilter(2.0))
    proc = start_script(SCRIPT, url, schema)
    released: list[tuple[str, str, bool]] = []

    def take(parts: list[str]) -> bool:
        if parts[0] == "released":
            released.append((parts[1], parts[2], parts[3] == "True"))
        return len(released) >= 25

    stderr = kill_when(proc, take, time.monotonic() + 120)
    assert len(released) >= 25, stderr

    s2 = open_ledger(url, schema)
    try:
        with s2._tx(write=False) as cur:
            stored = {str(r[0]): (str(r[1]), json.loads(r[2])) for r in cur.run(
                "SELECT key, child_id, answer FROM child_answers WHERE budget_id = 'b'").all()}
        for key, child, above in released:  # durable before released
            assert stored[key][0] == child
            assert stored[key][1]["above"] is above
        for rec in s2.children("b"):
            state = s2.child_state("b", rec.child_id)
            n = sum(1 for c, _ in stored.values() if c == rec.child_id)
            assert state["questions"] == n  # state and answer committed together
            assert state["positives_used"] <= 3
            ups = sum(1 for c, a in stored.values() if c == rec.child_id and a["above"])
            assert ups == state["positives_used"]
        total = sum(Fraction(r.cost["eps"]) for r in s2.history("b"))
        assert total <= 2
        assert all(not c.problems for c in s2.verify("b"))
        # retries of every key up to the kill: the stored ones replay, none counts twice
        last = max(int(k[1:]) for k in stored)
        for i in range(last + 2):
            key, child = f"q{i}", f"sv{i % 8}"
            if child not in {r.child_id for r in s2.children("b")}:
                continue
            try:
                a = ask_child(s2, "b", child, {"op": "ask", "threshold": 0.0},
                              1e9 if i % 3 else -1e9, key=key)
            except ChildExhaustedError:  # exhausted children refuse publicly
                continue
            if key in stored:
                assert a == stored[key][1]
        for rec in s2.children("b"):
            assert s2.child_state("b", rec.child_id)["positives_used"] <= 3
    finally:
        s2.close()
        s.close()
