"""Any-order RDP blocks (kind ``rdp_any``) under 24 concurrent clients on every backend:
each admitted charge is in both blocks it names or in neither (all or nothing), each
block's stored spent at every order is exactly the sum of its admitted charges' RDP, at
one order at least within its budget, and the blocks are filled to within one request
(the race was real). Charges alternate between two RDP curves so that orders drop out."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from service_harness import race

from dpsieve.accounting.events import RDP
from dpsieve.blocks import Unlock
from dpsieve.filters import AnyOrderRDPFilter, filter_from_json

N_CLIENTS = 24
ORDERS = (8.0, 16.0, 32.0)  # budgets at (3, 1e-6): 0.87, 2.01, 2.52
CURVES = (RDP(ORDERS, (0.02, 0.2, 0.3)), RDP(ORDERS, (0.15, 0.05, 0.02)))


def _state(s: Any, b: str) -> dict[str, Any]:
    return dict(json.loads(s.load_filter(b).to_json())["state"])


def _frac(x: Any) -> Fraction:
    return Fraction(x["num"], x["den"]) if isinstance(x, dict) else Fraction(x)


def test_rdp_any_blocks_are_never_overspent_and_charges_are_all_or_nothing(
        make_store: Any) -> None:
    s0 = make_store()
    s0.declare_blocks("d", {"column": "day", "budget": {"type": "pure", "eps": 1.0},
                            "scheduler": "dpf"})
    ids = {v: s0.add_block("d", v, AnyOrderRDPFilter.for_target(3.0, 1e-6, ORDERS),
                           Unlock()).budget_id for v in ("x", "y", "z")}
    stores = [make_store() for _ in range(N_CLIENTS)]
    admitted: dict[str, tuple[tuple[str, ...], int]] = {}
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        start()
        for j in range(6):
            blocks = [ids["x"], ids["yz"[(i + j) % 2]]]
            key, c = f"c{i}/{j}", (i + j) % 2
            out = stores[i].spend_all("d", blocks, CURVES[c], key=key, principal=f"c{i}")
            if out.admitted:
                with lock:
                    admitted[key] = (tuple(blocks), c)

    race(client, N_CLIENTS)
    charged: dict[str, set[str]] = {}
    for name, b in ids.items():
        st = _state(s0, b)
        want = [Fraction(0)] * len(ORDERS)
        for blocks, c in admitted.values():
            if b in blocks:
                want = [w + Fraction(v) for w, v in zip(want, CURVES[c].values, strict=True)]
        spent = [_frac(x) for x in st["spent"]]
        assert spent == want, name  # exactly the admitted charges' RDP, at every order
        assert st["orders"] == list(ORDERS)
        budgets = [_frac(x) for x in st["budgets"]]
        assert any(sp <= bu for sp, bu in zip(spent, budgets, strict=True)), name
        for r in s0.history(b):
            charged.setdefault(r.key, set()).add(b)
    assert {k: set(v[0]) for k, v in admitted.items()} == charged  # all or nothing
    # the race was real: block x refuses the cheaper of the two curves now
    text = s0.load_filter(ids["x"]).to_json()
    assert not any(filter_from_json(text).try_spend(c).admitted for c in CURVES)
