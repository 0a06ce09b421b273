"""Every list of query kinds agrees with the one registry (dpsieve.queries.requests.KINDS):
the service's request models, the one-aggregation shapes the plan reader accepts, the
errors that name the kinds, the budget page's words for each, and the documentation."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest

from dpsieve.accounting.events import Neighbouring
from dpsieve.errors import ValidationError
from dpsieve.queries import plan as plan_module
from dpsieve.queries.requests import KINDS, REQUESTS, SHAPES, request_from_json
from dpsieve.service.schemas import PlanIn, QueryIn

ROOT = Path(__file__).resolve().parents[1]


def _literal(model: type, field: str) -> set[str]:
    ann = model.model_fields[field].annotation  # type: ignore[attr-defined]
    return set(typing.get_args(ann))


def test_the_registry_holds_each_kind_once_with_plans_shapes_release_and_robust() -> None:
    assert len(KINDS) == len(set(KINDS)) == len(REQUESTS)
    assert set(KINDS) == {"query", *SHAPES, "release", "robust_mean", "robust_median"}


def test_the_service_accepts_exactly_the_registered_kinds() -> None:
    assert _literal(QueryIn, "type") | _literal(PlanIn, "type") == set(KINDS)
    assert _literal(PlanIn, "type") == {"query"}


def test_every_shape_is_a_one_aggregation_plan_the_plan_reader_knows() -> None:
    assert set(SHAPES) <= set(plan_module.AGGREGATION_TYPES)


def test_the_error_for_an_unknown_kind_names_every_registered_one() -> None:
    with pytest.raises(ValidationError) as e:
        request_from_json({"type": "nope"}, Neighbouring.ADD_REMOVE)
    named = set(re.findall(r"[a-z_]+", str(e.value).split("must be", 1)[1]))
    assert set(KINDS) <= named


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_read_by_its_registered_reader(kind: str) -> None:
    spec = {"type": kind, "privacy": {"type": "pure", "eps": 1.0}}
    parameter: str | None = None
    try:
        assert request_from_json(spec, Neighbouring.ADD_REMOVE).kind == kind
    except ValidationError as e:  # a parameter of that kind is missing: named, not 'type'
        parameter = e.parameter
    assert parameter != "type"


@pytest.mark.parametrize("kind", KINDS)
def test_the_budget_page_describes_every_kind_in_words(kind: str) -> None:
    """The page and the CLI state a past query in words; a kind it does not know would
    read as its bare type name."""
    from dpsieve._budget_view import describe_request

    spec = {"type": kind, "column": "x", "lower": 0, "upper": 1, "categories": ["a"],
            "bound": 1.0, "columns": ["a"], "mechanism": "laplace",
            "aggregations": [{"type": "count"}]}
    words = describe_request(spec)
    assert words.strip()
    assert words != kind
    assert " of " in words or " over " in words, words


def test_the_documented_kinds_are_the_registered_ones() -> None:
    text = (ROOT / "docs" / "session.md").read_text()
    for kind in KINDS:
        assert f'"{kind}"' in text, kind
