"""A query mapped from its JSON once: :class:`Request`, what :meth:`Session.execute` runs.

JSON becomes typed values at the edges only: the service's request models
(:mod:`dpsieve.service.schemas`, whose ``request()`` builds the privacy from the validated
fields), the CLI, and ``Session.run``'s dict, each through :func:`request_from_spec`.
Below, the session handles typed values: the privacy is a description, a plan or a
one-aggregation shape is a :class:`~dpsieve.queries.plan.Query`; release and robust queries
keep their (non-privacy) parameters as the JSON they were given.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
)
from dpsieve.queries.plan import Query, from_spec, parse_privacy, query_to_dict

__all__ = ["LEGACY", "QUERY_TYPES", "ROBUST_TYPES", "Request", "request_from_spec"]

QUERY_TYPES = (
    "count", "histogram", "linear", "mean", "release", "robust_mean", "robust_median", "sum",
)
#: The one-aggregation shapes of earlier versions: run as one-aggregation plans.
LEGACY = ("count", "sum", "mean", "histogram", "linear")
ROBUST_TYPES = ("robust_mean", "robust_median")
_DESCRIPTIONS = (PureDP, ApproxDP, ZCDP, ApproxZCDP, GDP, RDP)


@dataclass(frozen=True, slots=True)
class Request:
    """One query, typed: ``kind`` (``"query"``, a one-aggregation shape, ``"release"``,
    ``"robust_mean"``, ``"robust_median"``), its ``privacy`` (a description), ``plan``
    (plans and one-aggregation shapes), ``params`` (release and robust queries: their
    parameters as given, the privacy excluded) and ``public``: the request the ledger
    records, whose fingerprint binds an idempotency key (the same JSON as before typed
    requests, so a replay across versions is still a replay)."""

    kind: str
    privacy: PrivacyDescription
    public: dict[str, Any]
    plan: Query | None = None
    params: Mapping[str, Any] = field(default_factory=dict)


def request_from_spec(spec: Any, neighbouring: Neighbouring) -> Request:
    """The one mapping of a query's JSON (a dict; a typed :class:`Query` is taken as it is)
    to a :class:`Request`; the privacy defaults to ``neighbouring``. A privacy already typed
    (the service's models build it) is kept. Every failure is a ValidationError naming the
    parameter; nothing is charged."""
    if isinstance(spec, Query):
        return Request("query", spec.privacy, query_to_dict(spec), plan=spec)
    if not isinstance(spec, Mapping) or (t := spec.get("type")) not in (*QUERY_TYPES, "query"):
        raise fail("type", "query", f"'query' or one of {', '.join(QUERY_TYPES)}",
                   spec.get("type") if isinstance(spec, Mapping) else spec)
    if t == "query" or t in LEGACY:
        q = from_spec(spec, neighbouring.value)
        public = query_to_dict(q) if t == "query" else {**spec, "privacy": q.privacy.to_dict()}
        return Request(t, q.privacy, public, plan=q)
    p = spec.get("privacy")
    if isinstance(p, Mapping):
        p = parse_privacy(p, neighbouring.value)
    elif not isinstance(p, _DESCRIPTIONS):
        raise fail("privacy", f"{t} query", "a privacy description such as "
                   "{'type': 'pure', 'eps': 0.1}", p)
    params = {k: v for k, v in spec.items() if k != "privacy"}
    return Request(t, p, {**spec, "privacy": p.to_dict()}, params=params)
