"""Blocks and quotas after SIGKILL: two processes charge random sets of blocks and their
quotas, queue requests and run scheduling passes on one SQLite or PostgreSQL ledger, and
are killed mid-burst. Afterwards no block, gate or quota is overspent, every admitted
request a process reported is charged to every budget it names (durable before reported)
and no budget holds a spend of a request charged elsewhere only (all or nothing), the
chains verify, and retrying every key charges nothing twice."""

from __future__ import annotations

import json
import time
from fractions import Fraction
from typing import Any

from service_harness import kill_when, open_ledger, start_script

COST = Fraction(0.03)

SCRIPT = r"""
import random, sys
from dpsieve.accounting.events import PureDP
from dpsieve.ledger import open_store
url, schema, me = sys.argv[1], sys.argv[2], sys.argv[3]
s = open_store(url, schema=schema)
rng = random.Random(me)
blocks = [b.budget_id for b in s.blocks("d")]
quotas = s.quota_budgets("d", me)
i = 0
while True:
    key = f"{me}/{i}"
    chosen = sorted(rng.sample(blocks, rng.randint(1, 3)))
    if i % 5 == 4:
        s.enqueue("d", key, PureDP(0.03), [*chosen, *quotas], [0.03] * len(chosen)
                  + [0.0] * len(quotas), principal=me, wait=600)
        print("queued", key, flush=True)
        s.schedule_pass("d")
    else:
        out = s.spend_all("d", [*chosen, *quotas], PureDP(0.03), key=key, principal=me)
        if out.admitted:
            print("admitted", key, " ".join(out.budgets), flush=True)
    i += 1
"""


def _spent(s: Any, b: str) -> Fraction:
    init = Fraction(s.initial_filter(b).remaining().to_dict()["exact"])
    return init - Fraction(s.load_filter(b).remaining().to_dict()["exact"])


def test_blocks_and_quotas_survive_sigkill(ledger_url: tuple[str, str]) -> None:
    from dpsieve.accounting.events import PureDP
    from dpsieve.blocks import Unlock, unlock_from_dict
    from dpsieve.filters import PureDPFilter

    url, schema = ledger_url
    s = open_ledger(url, schema)
    s.declare_blocks("d", {"column": "day", "budget": {"type": "pure", "eps": 1.0}})
    for v in range(4):
        unlock = unlock_from_dict({"type": "arrivals", "n": 3, "by": "request"}) \
            if v == 0 else Unlock()
        s.add_block("d", v, PureDPFilter(1.0), unlock)
    for me in ("p", "q"):
        s.add_principal(me, "analyst", f"h-{me}")
        s.set_quota("d", "analyst", me, PureDPFilter(0.9))
    procs = {me: start_script(SCRIPT, url, schema, me) for me in ("p", "q")}
    reported: dict[str, list[str]] = {}
    queued: list[str] = []

    def admitted(me: str) -> int:
        return sum(1 for key in reported if key.startswith(f"{me}/"))

    def take(parts: list[str]) -> bool:  # a line of one process: enough of its admissions?
        if parts[0] == "admitted":
            reported[parts[1]] = parts[2:]
        else:
            queued.append(parts[1])
        return admitted(parts[1].split("/")[0]) == 12

    deadline = time.monotonic() + 120
    for me, proc in procs.items():  # read each until it has reported 12 admissions, then kill it
        stderr = kill_when(proc, take, deadline)
        assert admitted(me) == 12, stderr

    s2 = open_ledger(url, schema)
    budgets = [b.budget_id for b in s2.blocks("d")] + [q.budget_id for q in s2.quotas("d")]
    charged: dict[str, set[str]] = {}
    for b in budgets:
        hist = s2.history(b)
        spent = _spent(s2, b)
        assert spent == COST * len(hist)
        cap = Fraction(s2.initial_filter(b).remaining().to_dict()["exact"])
        assert spent <= cap, f"{b} overspent"
        for r in hist:
            charged.setdefault(r.key, set()).add(b)
    a = s2.blocks("d")[0]
    assert _spent(s2, a.budget_id) <= a.unlock.unlocked(0, a.arrivals)  # its gate
    for key, named in reported.items():  # durable before reported, in every budget
        assert charged[key] == set(named), key
    with s2._tx(write=False) as cur:
        txns = {str(k): set(json.loads(b)) for k, b in cur.run(
            "SELECT key, budgets FROM txns WHERE scope = 'd'").all()}
    assert charged == txns  # all or nothing, whichever way the kill fell
    assert [c.budget_id for c in s2.verify() if not c.ok] == []
    # retries: an admitted key replays (nothing charged again); the others are decided anew
    before = {b: _spent(s2, b) for b in budgets}
    for key, named in charged.items():
        out = s2.spend_all("d", sorted(named), PureDP(0.03), key=key, principal=key[0])
        assert out.replayed
        assert set(out.budgets) == named
    assert {b: _spent(s2, b) for b in budgets} == before
    s2.schedule_pass("d")  # the queue goes on where it stopped
    after: dict[str, set[str]] = {}
    for b in budgets:
        for r in s2.history(b):
            after.setdefault(r.key, set()).add(b)
    for key in queued:
        rec = s2.pending("d", key)
        assert rec is not None
        assert (rec.status == "admitted") == (key in after), rec
        if key in after:
            assert after[key] == set(rec.budgets)
