"""The pieces of a block session that need no session: a block declaration's budget and
filter, a block's value from its budget id, and a queued request read back from its
record (:mod:`dpsieve.session.blocks`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription, description_from_json
from dpsieve.blocks.spec import BlockSpec
from dpsieve.queries.requests import PlanRequest, Request, request_from_json
from dpsieve.session.budgets import filter_for_budget

if TYPE_CHECKING:
    from dpsieve.filters.base import PrivacyFilter

__all__ = ["CHILDREN_ON_BLOCKS", "block_budget_filter", "budget_of_spec", "parse_block_value",
           "rebuilt", "used_of"]

#: Why a data set with blocks opens no interactive child (docs/proofs/blocks.md §6): the
#: service's 422, the library's and the CLI's refusal, decided from public metadata only.
CHILDREN_ON_BLOCKS = (
    "Interactive children (sparse vector, continual counter, answer cache) are not offered "
    "on a data set with blocks: a child is charged once, when it is opened, and keeps "
    "answering from the data afterwards, so it would read blocks that arrive later, whose "
    "fresh budgets never paid for it (docs/proofs/blocks.md §6). Ask the blocks query "
    "plans (each charged to every block it may read), or open the child on a data set "
    "with a budget of its own. Nothing was written or spent.")


def budget_of_spec(spec: BlockSpec) -> tuple[PrivacyDescription, list[PrivacyDescription] | None]:
    """A block declaration's budget as a description and its typical queries (``typical``
    in the budget's JSON, as for a data set's budget); a ValidationError names ``budget``."""
    d = dict(spec.budget)
    typ = d.pop("typical", None)
    desc = description_from_json(d, None, name="budget")
    nb = desc.neighbouring.value
    if typ is None:
        return desc, None
    items = typ if isinstance(typ, list) else [typ]
    return desc, [description_from_json(t, nb, name="typical") for t in items]


def block_budget_filter(spec: BlockSpec) -> PrivacyFilter:
    """A fresh filter for one block of ``spec`` (a ValidationError naming ``budget`` for a
    budget whose remaining privacy cannot be stated)."""
    desc, typ = budget_of_spec(spec)
    flt = filter_for_budget(desc, typical=typ)
    try:
        flt.remaining()
        flt.to_json()
    except (ArithmeticError, ValueError):
        raise fail("budget", "blocks", "a budget whose remaining privacy can be stated in "
                   "floating point (its parameters are too large)", spec.budget) from None
    return flt


def parse_block_value(budget_id: str) -> Any:
    """A block's value from its budget id (``<data set>/block:<value as JSON>``)."""
    return json.loads(budget_id.rsplit("/block:", 1)[1])


def rebuilt(public: dict[str, Any], nb: Neighbouring) -> Request:
    """The typed request a queued one recorded (``public``: its recorded JSON), checked to
    record the same JSON again (the spend's fingerprint binds it)."""
    from dpsieve.queries.plan import query_to_dict

    spec = dict(public)
    if spec.get("type") == "query":  # a recorded plan names each aggregation's kind twice
        spec["aggregations"] = [{k: v for k, v in a.items() if k != "kind"}
                                for a in spec.get("aggregations", [])]
    req = request_from_json(spec, nb)
    again = query_to_dict(req.plan) if isinstance(req, PlanRequest) and \
        req.kind == "query" else req.public
    if again != public:
        raise fail("key", "queue", "a queued request whose record reads back as itself",
                   "a record that does not")
    return req


def used_of(store: Any, budget_id: str) -> float:
    """The fraction of a block's or quota's budget used (a float: it only names the
    binding budget of an answer)."""
    from dpsieve.blocks.currency import used_fraction

    return float(used_fraction(store.load_filter(budget_id), store.initial_filter(budget_id)))
