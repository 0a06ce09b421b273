"""TEST DOUBLE: a minimal pure-DP additive filter used only by the ledger tests.

It exists so the ledger can be tested against the :class:`PrivacyFilter` protocol
independently of the real filters; it is never shipped in ``src/``. Exact arithmetic
(``Fraction`` of the binary float) makes "sum of admitted costs <= budget" checkable.
"""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

from dpsieve.accounting.events import PureDP
from dpsieve.errors import UnsupportedError
from dpsieve.filters.base import Decision

KIND = "test_fake_pure"


class FakePureFilter:
    def __init__(self, budget: Fraction, spent: Fraction = Fraction(0)) -> None:
        self.budget = budget
        self.spent = spent

    @property
    def kind(self) -> str:
        return KIND

    def _cost(self, query: Any) -> Fraction:
        if not isinstance(query, PureDP):
            raise UnsupportedError(f"the fake filter takes PureDP queries, got {query!r}")
        return Fraction(query.eps)

    def dry_run(self, query: Any) -> Decision:
        c = self._cost(query)
        ok = self.spent + c <= self.budget
        left = self.budget - self.spent - (c if ok else 0)
        return Decision.of(ok, "admitted" if ok else "refused: budget exceeded",
                           {"eps": str(left)}, {"eps": str(c)})

    def try_spend(self, query: Any) -> Decision:
        d = self.dry_run(query)
        if d.admitted:
            self.spent += self._cost(query)
        return d

    def remaining(self) -> dict[str, Any]:
        return {"eps": str(self.budget - self.spent)}

    def to_json(self) -> str:
        return json.dumps({"kind": KIND, "budget": str(self.budget), "spent": str(self.spent)})


def fake_loads(s: str) -> FakePureFilter:
    d = json.loads(s)
    if d.get("kind") != KIND:
        raise ValueError(f"not a fake filter: {s}")
    return FakePureFilter(Fraction(d["budget"]), Fraction(d["spent"]))
