"""Blocks and quotas under 50 concurrent clients, on every backend (PostgreSQL when it
answers): no block, no unlocking gate and no quota is ever overspent, every admitted
transaction is charged to every budget it names (and nothing else is), and the queue's
passes race with direct spends without breaking either. Each client sends two requests
and queues one; the heavy variant (``-m slow``) sends twenty and queues one.

The clients: 50 analysts, each with its own ledger connections; the first 25 form a group
with a quota of eps 0.6, each analyst has a quota of eps 0.5. Blocks: ``a`` (eps 1, 3/4
unlocked for the whole run), ``b`` ``c`` ``d`` (eps 5), ``e`` (eps 10). Each client
alternates a request on ``e`` alone and one on ``a`` plus one of ``b`` ``c`` ``d``, each
eps 0.03 (not a binary fraction: sums are checked exactly), and queues one request on
``a`` then runs a scheduling pass. Demand is far above what fits: the group quota and
block ``a``'s gate are filled to within one request, never past.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import pytest
from service_harness import race

from dpsieve.accounting.events import PureDP
from dpsieve.blocks import Unlock, unlock_from_dict
from dpsieve.filters import PureDPFilter

N_CLIENTS = 50
COST = Fraction(0.03)
BLOCKS = {"a": 1, "b": 5, "c": 5, "d": 5, "e": 10}
GATE = Fraction(3, 4)


def _setup(s: Any) -> dict[str, str]:
    s.declare_blocks("d", {"column": "day", "budget": {"type": "pure", "eps": 1.0},
                           "scheduler": "dpf"})
    ids = {}
    for v, eps in BLOCKS.items():
        unlock = unlock_from_dict({"type": "periodic", "fraction": "3/4", "period": 1e9}) \
            if v == "a" else Unlock()
        ids[v] = s.add_block("d", v, PureDPFilter(float(eps)), unlock).budget_id
    for i in range(N_CLIENTS):
        s.add_principal(f"c{i}", "analyst", f"h{i}")
        ids[f"q{i}"] = s.set_quota("d", "analyst", f"c{i}", PureDPFilter(0.5)).budget_id
    ids["g"] = s.set_quota("d", "group", "g", PureDPFilter(0.6)).budget_id
    s.set_group("g", [f"c{i}" for i in range(N_CLIENTS // 2)])
    return ids


def _spent(s: Any, b: str) -> Fraction:
    init = Fraction(s.initial_filter(b).remaining().to_dict()["exact"])
    return init - Fraction(s.load_filter(b).remaining().to_dict()["exact"])


def _race(make_store: Any, per_client: int) -> None:
    s0 = make_store()
    ids = _setup(s0)
    stores = [make_store() for _ in range(N_CLIENTS)]
    admitted: dict[str, tuple[str, ...]] = {}
    queued: list[str] = []
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        st, me = stores[i], f"c{i}"
        quotas = st.quota_budgets("d", me)
        start()
        for j in range(per_client):
            blocks = [ids["e"]] if j % 2 == 0 else [ids["a"], ids["bcd"[(i + j) % 3]]]
            key = f"{me}/{j}"
            out = st.spend_all("d", [*blocks, *quotas], PureDP(float(COST)), key=key,
                               principal=me)
            if out.admitted:
                with lock:
                    admitted[key] = out.budgets
        key = f"{me}/queued"
        st.enqueue("d", key, PureDP(float(COST)), [ids["a"], *quotas],
                   [float(COST / GATE)] + [0.0] * len(quotas), principal=me, wait=600)
        with lock:
            queued.append(key)
        st.schedule_pass("d")

    race(client, N_CLIENTS)
    s0.schedule_pass("d")
    for key in queued:  # admitted by a pass: charged like a direct spend
        rec = s0.pending("d", key)
        # refused: a quota's filter refused it when its turn came (the group's is full)
        assert rec.status in ("admitted", "waiting", "refused"), rec
        if rec.status == "refused":
            assert "quota" in rec.reason or "eps" in rec.reason, rec.reason
        if rec.status == "admitted":
            admitted[key] = rec.budgets
    charged: dict[str, set[str]] = {}
    for name, b in ids.items():
        hist = s0.history(b)
        spent = _spent(s0, b)
        assert spent == COST * len(hist), name  # every spend is one request's, exactly
        cap = GATE if name == "a" else Fraction(s0.initial_filter(b).remaining().to_dict()[
            "exact"])
        assert spent <= cap, f"{name} overspent: {spent} > {cap}"
        for r in hist:
            charged.setdefault(r.key, set()).add(b)
    # all or nothing: every admitted request is in every budget it names, and no
    # budget holds a spend of a request that was not admitted
    assert {k: set(v) for k, v in admitted.items()} == charged
    # the race was real: the group quota and block a's gate are full to one request
    assert _spent(s0, ids["g"]) > Fraction(6, 10) - COST
    assert _spent(s0, ids["a"]) > GATE - COST
    if hasattr(s0, "verify"):
        bad = [(c.budget_id, c.problems) for c in s0.verify() if not c.ok]
        assert bad == []


def test_blocks_and_quotas_are_never_overspent_by_50_clients(make_store: Any) -> None:
    t = time.monotonic()
    _race(make_store, 2)
    assert time.monotonic() - t < 600


@pytest.mark.slow
def test_blocks_and_quotas_are_never_overspent_by_50_clients_heavy(make_store: Any) -> None:
    _race(make_store, 20)
