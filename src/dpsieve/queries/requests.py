"""Every kind of query a session runs, registered once: a typed request, read from JSON
once (:func:`request_from_json`), prepared against a data set to a (charge, run) pair
(:class:`~dpsieve.queries.source.Ready`).

=================================  =====================================================
kind                               request
=================================  =====================================================
``query``                          :class:`PlanRequest` (a plan, docs/queries.md)
``count`` ``sum`` ``mean``         :class:`PlanRequest` of a one-aggregation plan,
``histogram`` ``linear``           answered in the shapes' earlier form
``release``                        :class:`~dpsieve.queries.request_release.ReleaseRequest`
``robust_mean`` ``robust_median``  :class:`~dpsieve.queries.request_robust.RobustRequest`
=================================  =====================================================

:data:`KINDS` lists them; every other list of query kinds (the service's request model,
docs) is checked against it (``tests/test_query_kinds.py``). A request holds ``kind``,
its ``privacy`` (a description) and ``public``: the JSON the ledger records, whose
fingerprint binds an idempotency key (the request as it was given, the privacy as its
description states it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeAlias

from dpsieve._validation import fail
from dpsieve.accounting.events import (
    GDP,
    RDP,
    ZCDP,
    ApproxDP,
    ApproxZCDP,
    Neighbouring,
    PrivacyDescription,
    PureDP,
    description_from_json,
)
from dpsieve.queries.plan import (
    Query,
    aggregation_from_dict,
    from_spec,
    query_to_dict,
)
from dpsieve.queries.prepare import Prepared
from dpsieve.queries.request_release import ReleaseRequest
from dpsieve.queries.request_robust import ROBUST_KINDS, RobustRequest
from dpsieve.queries.result import Answer
from dpsieve.queries.source import SHAPES, Ready, Source

__all__ = ["KINDS", "REQUESTS", "SHAPES", "PlanRequest", "Request", "privacy_of",
           "request_from_json", "shape_answer"]

_DESCRIPTIONS = (PureDP, ApproxDP, ZCDP, ApproxZCDP, GDP, RDP)


@dataclass(frozen=True, slots=True)
class PlanRequest:
    """A query plan (``kind`` ``"query"``) or a one-aggregation shape (``kind`` one of
    :data:`SHAPES`, answered in its earlier form: :func:`shape_answer`)."""

    kind: str
    plan: Query
    public: dict[str, Any]

    @property
    def privacy(self) -> PrivacyDescription:
        return self.plan.privacy

    @classmethod
    def of(cls, plan: Query) -> PlanRequest:
        """A typed plan as a request (its recorded JSON made from it)."""
        return cls("query", plan, query_to_dict(plan))

    @classmethod
    def shape(cls, kind: str, privacy: Any, neighbouring: Neighbouring, **fields: Any
              ) -> PlanRequest:
        """A one-aggregation shape from its fields (the privacy a description, or its JSON
        under ``neighbouring`` unless it names its relation), as its JSON would read."""
        p = description_from_json(privacy, neighbouring.value)
        agg = aggregation_from_dict({"type": kind, **fields})
        return cls(kind, Query((agg,), p), {"type": kind, **fields, "privacy": p.to_dict()})

    @classmethod
    def from_json(cls, spec: Mapping[str, Any], neighbouring: Neighbouring) -> PlanRequest:
        """A plan or a shape from its JSON (:func:`~dpsieve.queries.plan.from_spec`)."""
        q = from_spec(spec, neighbouring.value)
        t = str(spec["type"])
        public = query_to_dict(q) if t == "query" else {**spec, "privacy": q.privacy.to_dict()}
        return cls(t, q, public)

    def prepare(self, source: Source) -> Ready:
        """Every check (the plan against the public schema) and the charge, from public
        values; ``run`` aggregates on the data set's engine (only per-group aggregates
        leave it), adds the noise and finishes."""
        from dpsieve.queries.prepare import prepare

        if self.plan.auto_fields():
            return self._prepare_auto(source)
        budget = source.budget_kind() if isinstance(self.plan.privacy, ApproxDP) else None
        prepared = prepare(self.plan, source.schema(), source.neighbouring, budget)
        source.check_engine()
        shape = self.kind if self.kind != "query" else None
        rng = source.rng

        def run() -> dict[str, Any]:
            answer = prepared.run(source.engine(), rng)
            if shape is not None:
                return shape_answer(shape, prepared, answer)
            d = answer.to_dict()
            return {"value": {k: v for k, v in d.items() if k != "noise"},
                    "noise": d["noise"], "details": answer.details}
        def figures() -> dict[str, Any]:
            from dpsieve.queries.preview import preview

            return preview(prepared)
        return Ready(prepared.charge.description, self.plan.privacy, run, figures)


    def _prepare_auto(self, source: Source) -> Ready:
        """A plan with ``"auto"`` bounds (:mod:`dpsieve.queries.auto`): one charge, the
        plan's privacy, fixed here; ``run`` releases the bounds, then runs the plan at them
        and states them in ``value["bounds"]``."""
        from dpsieve.queries.auto import plan_auto

        if self.kind != "query":
            raise fail("lower", self.kind, "a number ('auto' bounds are for query plans: "
                       "{'type': 'query', ...})", self.plan.auto_fields())
        schema, nb = source.schema(), source.neighbouring
        auto = plan_auto(self.plan, schema, nb)
        source.check_engine()
        rng = source.rng

        def run() -> dict[str, Any]:
            engine = source.engine()
            released = auto.release(engine, rng)
            prepared, used, fell_back = auto.main(released, schema, nb)
            answer = replace(prepared.run(engine, rng),
                             bounds=auto.stated(released, used, fell_back))
            d = answer.to_dict()
            return {"value": {k: v for k, v in d.items() if k != "noise"},
                    "noise": d["noise"], "details": answer.details}
        return Ready(auto.charge, self.plan.privacy, run, auto.figures)


#: A typed request of any registered kind.
Request: TypeAlias = PlanRequest | ReleaseRequest | RobustRequest


def _plan(spec: Mapping[str, Any], nb: Neighbouring) -> Request:
    return PlanRequest.from_json(spec, nb)


def privacy_of(spec: Mapping[str, Any], nb: Neighbouring) -> PrivacyDescription:
    """The privacy of a release or robust request: its JSON mapped under ``nb`` (unless it
    names its relation), or a description given typed."""
    p = spec.get("privacy")
    if isinstance(p, Mapping):
        return description_from_json(p, nb.value)
    if not isinstance(p, _DESCRIPTIONS):
        raise fail("privacy", f"{spec['type']} query", "a privacy description such as "
                   "{'type': 'pure', 'eps': 0.1}", p)
    return p


def _release(spec: Mapping[str, Any], nb: Neighbouring) -> Request:
    return ReleaseRequest.from_json(spec, privacy_of(spec, nb))


def _robust(spec: Mapping[str, Any], nb: Neighbouring) -> Request:
    return RobustRequest.from_json(spec, privacy_of(spec, nb))


#: The registry: each kind and the one function that reads its JSON.
REQUESTS: Mapping[str, Callable[[Mapping[str, Any], Neighbouring], Request]] = {
    "query": _plan, **dict.fromkeys(SHAPES, _plan), "release": _release,
    **dict.fromkeys(ROBUST_KINDS, _robust)}
#: Every kind of query, in a stable order.
KINDS: tuple[str, ...] = tuple(REQUESTS)


def request_from_json(spec: Any, neighbouring: Neighbouring) -> Request:
    """The one mapping of a query's JSON (a dict; a typed :class:`Query` is taken as it is)
    to a typed request; the privacy defaults to ``neighbouring``. A privacy already typed
    (the service's models build it) is kept. Every failure is a ValidationError naming the
    parameter; nothing is charged."""
    if isinstance(spec, Query):
        return PlanRequest.of(spec)
    kinds = [k for k in KINDS if k != "query"]
    if not isinstance(spec, Mapping) or spec.get("type") not in REQUESTS:
        raise fail("type", "query", f"'query' or one of {', '.join(sorted(kinds))}",
                   spec.get("type") if isinstance(spec, Mapping) else spec)
    return REQUESTS[spec["type"]](spec, neighbouring)


def shape_answer(kind: str, prepared: Prepared, answer: Answer) -> dict[str, Any]:
    """The stored answer of a one-aggregation shape in its earlier form: ``value`` (a
    number; ``{"categories", "counts"}``; ``{"answers"}``), ``noise`` in user terms
    (mechanism, scale, std, ci95; a mean's ``sum`` and ``count``), ``interval`` (95 %),
    ``details`` (lattice internals)."""
    est = answer.groups[0].estimates[0]
    label = answer.labels[0]
    parts = answer.noise[label]
    short = {name: name.split(".", 1)[1] for name in parts}
    value: Any = est.value
    if kind == "histogram":
        m = prepared.spec.measures[0]
        cats = list(getattr(m, "categories", None) or [])
        value = {"categories": cats, "counts": est.value}
    elif kind == "linear":
        value = {"answers": est.value}
    if len(parts) == 1:
        (name, noise), = parts.items()
        noise_d: dict[str, Any] = noise.to_dict()
        details: dict[str, Any] = dict(answer.details[name])
    else:
        noise_d = {short[n]: v.to_dict() for n, v in parts.items()}
        details = {short[n]: answer.details[n] for n in parts}
    iv: Any = est.interval
    iv = list(iv) if isinstance(iv, tuple) else [list(x) for x in iv] if iv else None
    return {"value": value, "noise": noise_d, "interval": iv, "details": details}
