"""The aggregation kinds' registry agrees with the plan types and cites proofs that exist:
each registered kind is the plan's aggregation type of its name, every plan aggregation
type is registered, and the section of docs/proofs/queries.md a kind names as the proof
of its contribution bound is a heading of that file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpsieve.queries.kinds import KINDS
from dpsieve.queries.plan import AGGREGATION_TYPES

ROOT = Path(__file__).resolve().parents[2]


def test_every_plan_aggregation_type_is_one_registered_kind() -> None:
    assert set(KINDS) == set(AGGREGATION_TYPES)
    for name, kind in KINDS.items():
        assert kind.name == name
        assert kind.plan_type is AGGREGATION_TYPES[name]


@pytest.mark.parametrize("name", sorted(KINDS))
def test_each_kind_cites_a_proof_section_that_exists(name: str) -> None:
    m = re.fullmatch(r"(docs/proofs/[a-z_]+\.md) (§[0-9.]+)", KINDS[name].proof)
    assert m, KINDS[name].proof
    text = (ROOT / m.group(1)).read_text(encoding="utf-8")
    assert re.search(rf"^#+ {re.escape(m.group(2))} ", text, re.M), KINDS[name].proof
