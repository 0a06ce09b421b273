"""Interactive children of a session's budget, questioned with the session's data.

``session.children`` (:class:`Children`) opens children under the session's budget and
asks them questions whose private values the session computes from its data set, on the
query engine, so an analyst never holds the data:

* a **sparse vector** (``kind="sparse_vector"``) is asked a query plan whose answer is one
  number (one ``count`` or ``sum``, no ``group_by``) and a public threshold; the plan's
  sensitivity under the budget's relation, from public values only, must be at most the
  child's declared ``sensitivity`` (a ``monotonic`` child takes counts and sums of values
  >= 0 under add/remove only);
* a **continual counter** (``kind="counter"``) is stepped either by the steward's count
  of new events (``count=``: the library user, or the service's owner key) or, when it
  was opened with a ``time_column`` (and optional ``where``), by ``until=``: the step
  counts the rows with ``previous until <= time < until`` (the first step: ``time <
  until``), so the windows are disjoint and each row is counted in one step at most
  (event level; refused for a data set with a privacy unit, whose rows could fall in many
  windows);
* an **answer cache** (``kind="cache"``) is bound to one column and its public categories
  (its domain); a question is one weight in [0, 1] per category, its true answer
  ``sum_c weight_c * rows in c`` (for a data set with a privacy unit, one row of each unit,
  so the sensitivity is 1 under both relations), computed in exact rationals and put on
  the cache's lattice before it is compared.

Everything a refusal depends on is public (the kind, the plan against the schema, the
child's counters, the previous ``until``), and is checked before the data is read. The
charge is the child's declared privacy, spent once when it is opened, in the ledger
transaction that creates it (:mod:`dpsieve.ledger.children`); a question is answered
inside the ledger's transaction on the child's row, and its answer, the child's new state
and an audit row are stored before it is returned. The binding of a child to the data
(its time column, where, last ``until``, or its column and categories) is public and is
kept with its state (``binding``).

A failure to evaluate a question on the data after the public checks is one fixed
refusal (:class:`~dpsieve.errors.QueryFailedError`), nothing asked.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpsieve import _budget_view
from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring, PureDP
from dpsieve.errors import DPError, QueryFailedError, UnsupportedError
from dpsieve.interactive.base import Child, ChildExhaustedError, child_from_state
from dpsieve.interactive.cache import AnswerCache, CacheSpec
from dpsieve.interactive.counter import ContinualCounter, CounterSpec
from dpsieve.interactive.sparse_vector import GaussianSVT, LaplaceSVT, SparseVector
from dpsieve.interactive.store import as_child_store

if TYPE_CHECKING:
    from dpsieve.ledger.children import ChildRecord
    from dpsieve.queries.plan import Query
    from dpsieve.queries.prepare import Prepared
    from dpsieve.session.core import Session

__all__ = ["KINDS", "Children", "child_spec"]

#: The kinds of child a session opens.
KINDS = ("sparse_vector", "counter", "cache")
#: The lattice of the values given to an answer cache (its own: 2^-10).
_CACHE_G = Fraction(1, 1024)
_FAILED = ("The question could not be evaluated on the data set; nothing was asked and "
           "the child is unchanged.")


def _relation(spec: Mapping[str, Any], nb: Neighbouring, owner: str) -> None:
    given = spec.get("neighbouring")
    if given is not None and given != nb.value:
        raise fail("neighbouring", owner, f"the budget's relation {nb.value!r} (or absent)",
                   given)


def _build(cls: Any, body: dict[str, Any], owner: str) -> Any:
    try:
        return cls(**body)
    except TypeError:
        raise fail("spec", owner, f"the fields of {cls.__name__}", sorted(body)) from None


def _sparse_vector(spec: Mapping[str, Any], nb: Neighbouring) -> SparseVector:
    owner = "sparse_vector spec"
    body = {k: v for k, v in spec.items() if k != "neighbouring"}
    noise = body.pop("noise", "laplace")
    body["neighbouring"] = nb
    if noise == "laplace":
        return SparseVector.open(_build(LaplaceSVT, body, owner))
    if noise != "gaussian":
        raise fail("noise", owner, "'laplace' or 'gaussian'", noise)
    if "eps" in body:  # calibrated: the smallest sigma whose eps is at most the one asked
        eps = body.pop("eps")
        for name in ("delta", "max_questions"):
            if name not in body:
                raise fail(name, owner, "given with 'eps' for a Gaussian sparse vector",
                           None)
        try:
            g = GaussianSVT.calibrate(eps, body.pop("delta"), body.pop("max_questions"),
                                      **body)
        except TypeError:
            raise fail("spec", owner, "the fields of GaussianSVT", sorted(spec)) from None
        return SparseVector.open(g)
    return SparseVector.open(_build(GaussianSVT, body, owner))


def _counter(spec: Mapping[str, Any], nb: Neighbouring) -> ContinualCounter:
    owner = "counter spec"
    body = {k: v for k, v in spec.items()
            if k not in ("neighbouring", "time_column", "where", "mu")}
    body["neighbouring"] = nb
    mu = spec.get("mu")
    if (mu is None) == ("sigma" not in body):
        raise fail("mu", owner, "given, or 'sigma' instead (exactly one of them)", mu)
    if mu is not None:
        if isinstance(mu, bool) or not isinstance(mu, int | float):
            raise fail("mu", owner, "a number > 0", mu)
        try:
            cs = CounterSpec.for_mu(float(mu), **body)
        except TypeError:
            raise fail("spec", owner, "the fields of CounterSpec and 'mu'",
                       sorted(spec)) from None
    else:
        cs = _build(CounterSpec, body, owner)
    return ContinualCounter(cs)


def _cache(spec: Mapping[str, Any], nb: Neighbouring, size: int) -> AnswerCache:
    body = {k: v for k, v in spec.items() if k not in ("neighbouring", "column", "categories")}
    body["neighbouring"] = nb
    body["domain_size"] = size
    return AnswerCache.open(_build(CacheSpec, body, "cache spec"))


def child_spec(kind: str, spec: Mapping[str, Any], nb: Neighbouring, *,
               domain_size: int = 1) -> Child:
    """A fresh child of ``kind`` from its spec's JSON, under the budget's relation ``nb``
    (a spec naming another relation is refused: the filter is charged under ``nb``).
    Secure noise source. ``domain_size``: an answer cache's number of categories."""
    if not isinstance(spec, Mapping):
        raise fail("spec", "child", "a JSON object of the child's parameters", spec)
    _relation(spec, nb, f"{kind} spec")
    if kind == "sparse_vector":
        return _sparse_vector(spec, nb)
    if kind == "counter":
        return _counter(spec, nb)
    if kind == "cache":
        return _cache(spec, nb, domain_size)
    raise fail("kind", "child", f"one of {list(KINDS)}", kind)


class Children:
    """The children of one session's budget (module docstring). Every method acts as the
    session's ``principal``: it owns the children it opens; it may question those it owns
    or was granted (``""``, library use without authentication, may question any)."""

    def __init__(self, session: Session) -> None:
        self._s = session
        self._store = as_child_store(session.store)

    # -- opening ---------------------------------------------------------------------
    def open(self, child: str, kind: str, spec: Mapping[str, Any], *,
             key: str | None = None) -> dict[str, Any]:
        """Open a child named ``child`` of ``kind`` (:data:`KINDS`) with ``spec`` (its
        parameters as JSON; a counter may add ``time_column`` and ``where``, a cache
        names its ``column`` and, unless the schema declares them, its ``categories``).
        Everything is checked from public values, then the declared privacy is charged
        and the child stored in one transaction; refused (budget): nothing exists,
        :class:`~dpsieve.errors.BudgetExceededError` names what is left."""
        _name(child)
        if kind not in KINDS:
            raise fail("kind", "child", f"one of {list(KINDS)}", kind)
        if not isinstance(spec, Mapping):
            raise fail("spec", "child", "a JSON object of the child's parameters", spec)
        binding = self._binding(kind, spec)
        size = len(binding.get("categories", ())) or 1
        c = child_spec(kind, spec, self._s.neighbouring, domain_size=size)
        declared = c.declared()
        key = key or uuid.uuid4().hex
        request = {"open_child": child, "kind": kind, "declared": declared.to_dict(),
                   "binding": binding}
        out = self._store.open_child(
            self._s.budget_id, child, declared, {**c.to_state(), "binding": binding},
            {**c.public(), "binding": binding}, key=key, principal=self._s.principal,
            request=request)
        d = out.decision
        left = d.remaining.under(self._s.neighbouring)
        if not d.admitted:
            raise _budget_view.refused(self._s.store, self._s.budget_id, declared, declared,
                                       left)
        return {"child": child, "kind": kind, "owner": self._s.principal,
                "declared": declared.to_dict(), "public": {**c.public(), "binding": binding},
                "cost": d.cost.to_dict(), "remaining": left.to_dict(), "key": key,
                "replayed": out.replayed}

    def _binding(self, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The child's public binding to the data, checked against the schema."""
        if kind == "counter":
            col = spec.get("time_column")
            where = spec.get("where", [])
            if col is None:
                if where:
                    raise fail("where", "counter spec", "given only with 'time_column'",
                               where)
                return {}
            if not isinstance(col, str):
                raise fail("time_column", "counter spec", "a column name", col)
            if not isinstance(where, list):
                raise fail("where", "counter spec", "a list of predicates", where)
            if self._s.schema().privacy_unit is not None:
                raise UnsupportedError(
                    "A counter stepped by 'until' counts rows, and a privacy unit's rows "
                    "may fall in many steps: on a data set with a privacy unit a counter "
                    "is stepped by the steward's counts only (open it without "
                    "'time_column').")
            t = self._s.schema().column(col, "time_column", "counter spec")
            if t.type.value not in ("integer", "float"):
                raise fail("time_column", "counter spec", "an integer or float column",
                           col)
            self._window(col, where, 0.0, 1.0)  # the predicates checked on the schema
            return {"time_column": col, "where": where, "until": None}
        if kind == "cache":
            col = spec.get("column")
            if not isinstance(col, str):
                raise fail("column", "cache spec", "the name of the column whose "
                           "categories are the cache's domain", col)
            plan: dict[str, Any] = {"type": "histogram", "column": col}
            if "categories" in spec:
                plan["categories"] = spec["categories"]
            prepared = self._prepare(self._one_row_a_unit(plan))
            cats = prepared.spec.measures[0]
            categories = list(getattr(cats, "categories", None) or ())
            return {"column": col, "categories": categories}
        return {}

    # -- questions -------------------------------------------------------------------
    def ask(self, child: str, question: Query | Mapping[str, Any], *, threshold: float,
            key: str | None = None) -> dict[str, Any]:
        """Ask a sparse vector child whether the answer of ``question`` (a plan with one
        ``count`` or ``sum`` and no ``group_by``; its ``privacy`` is not used) is above
        ``threshold``: ``{"above", "value", "question", "positives_left"}``."""
        from dpsieve.queries.plan import Query, query_to_dict

        if isinstance(question, Query):
            plan: dict[str, Any] = query_to_dict(question)
        elif isinstance(question, Mapping):
            plan = {k: v for k, v in question.items() if k != "privacy"}
        else:
            raise fail("question", "ask", "a query plan (a Query or its JSON)", question)
        if isinstance(threshold, bool) or not isinstance(threshold, int | float) \
                or not math.isfinite(threshold):
            raise fail("threshold", "ask", "a finite number", threshold)
        plan.pop("privacy", None)
        request = {"op": "ask", "question": plan, "threshold": float(threshold)}

        def run(c: Child, binding: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(c, SparseVector):
                raise _wrong(c, "a question with a threshold")
            _not_exhausted(c)
            prepared, part = self._one_number(plan, c)
            value = self._value(lambda: self._plan_value(prepared, part))
            a = c.ask(value, float(threshold))
            return {"above": a.above, "value": a.value, "question": a.question,
                    "positives_left": a.positives_left}

        return self._act(child, request, run, key)

    def step(self, child: str, *, until: float | None = None, count: int | None = None,
             key: str | None = None) -> dict[str, Any]:
        """One step of a continual counter: the steward's ``count`` of new events (never
        stored apart from the running count), or the rows up to ``until`` (a counter
        opened with a ``time_column``; ``until`` above the previous step's). Returns
        ``{"step", "value", "until"}``, the noisy running count."""
        if (until is None) == (count is None):
            raise fail("until", "step", "given, or 'count' instead (exactly one of them)",
                       until)
        if until is not None and (isinstance(until, bool) or not isinstance(
                until, int | float) or not math.isfinite(until)):
            raise fail("until", "step", "a finite number", until)
        if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                                  or count < 0):
            raise fail("count", "step", "an int >= 0", "<withheld>")
        request: dict[str, Any] = ({"op": "step", "until": float(until)} if until is not None
                                   else {"op": "step", "by": "count"})

        def run(c: Child, binding: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(c, ContinualCounter):
                raise _wrong(c, "a step")
            events = count
            if until is not None:
                col = binding.get("time_column")
                if col is None:
                    raise fail("until", "step", "given only to a counter opened with a "
                               "'time_column' (this one is stepped by counts)", until)
                prev = binding.get("until")
                if prev is not None and not float(until) > prev:
                    raise fail("until", "step", f"above the previous step's {prev!r}",
                               until)
                plan = self._window(col, binding.get("where", []), prev, float(until))
                got = self._value(lambda: self._count(plan))
                events = got
                binding["until"] = float(until)
            assert events is not None
            v = c.step(int(events))
            return {"step": c.steps, "value": v, "until": binding.get("until")}

        return self._act(child, request, run, key)

    def query(self, child: str, weights: Sequence[float], *, key: str | None = None
              ) -> dict[str, Any]:
        """A linear counting query to an answer cache: one weight in [0, 1] per category
        of its column. ``{"value", "updated", "updates_left"}``: an estimate from the
        cache's state (free) or, when it is off by more than the tolerance, an update."""
        if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
            raise fail("weights", "query", "a list of numbers in [0, 1]", weights)
        w = list(weights)
        if not all(not isinstance(x, bool) and isinstance(x, int | float)
                   and 0.0 <= x <= 1.0 for x in w):
            raise fail("weights", "query", "numbers in [0, 1]", w[:20])
        request = {"op": "ask", "weights": [float(x) for x in w]}

        def run(c: Child, binding: dict[str, Any]) -> dict[str, Any]:
            if not isinstance(c, AnswerCache):
                raise _wrong(c, "a query's weights")
            cats = binding.get("categories", [])
            if len(w) != len(cats):
                raise fail("weights", "query", f"{len(cats)} numbers (one per category of "
                           f"{binding.get('column')!r})", len(w))
            if c.exhausted:
                raise ChildExhaustedError(f"this answer cache has used its "
                                          f"{c.spec.updates} updates")
            value = self._value(lambda: self._weighted(binding, w))
            a = c.ask(w, value)
            return {"value": a.value, "updated": a.updated, "updates_left": a.updates_left}

        return self._act(child, request, run, key)

    # -- views -----------------------------------------------------------------------
    def visible(self) -> list[ChildRecord]:
        """The children the principal may question, public views only."""
        return self._store.children(self._s.budget_id, self._s.principal)

    def get(self, child: str) -> ChildRecord:
        """One child's public record (absent or not granted: not found)."""
        from dpsieve.ledger.base import BudgetNotFoundError

        for r in self.visible():
            if r.child_id == child:
                return r
        raise BudgetNotFoundError(f"No child named {child!r} on {self._s.budget_id!r} is "
                                  "visible to this principal.")

    def grant(self, child: str, analyst: str) -> None:
        """Let ``analyst`` question ``child`` (its owner only; ``""`` may grant any)."""
        _name(analyst, "analyst")
        self._store.grant_child(self._s.budget_id, child, analyst, by=self._s.principal)

    # -- inside ----------------------------------------------------------------------
    def _act(self, child: str, request: dict[str, Any], run: Any, key: str | None
             ) -> dict[str, Any]:
        rng = self._s._source.rng

        def act(state: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any],
                                                dict[str, Any]]:
            binding = dict(state.pop("binding", None) or {})
            c = child_from_state(state, rng)
            answer = {"child": child, **run(c, binding)}
            return ({**c.to_state(), "binding": binding}, {**c.public(), "binding": binding},
                    answer)

        return self._store.child_act(self._s.budget_id, child, act,
                                     key=key or uuid.uuid4().hex,
                                     principal=self._s.principal, request=request)

    def _prepare(self, plan: Mapping[str, Any]) -> Prepared:
        """A plan checked against the schema; the privacy only picks a sum's lattice (the
        child was charged when opened)."""
        from dpsieve.queries.plan import from_spec
        from dpsieve.queries.prepare import prepare

        nb = self._s.neighbouring
        q = from_spec({**plan, "privacy": PureDP(1.0, nb).to_dict()}, nb.value)
        return prepare(q, self._s.schema(), nb)

    def _one_number(self, plan: Mapping[str, Any], c: SparseVector) -> tuple[Prepared, Any]:
        from dpsieve.queries.calibrate import sensitivity

        owner = "ask"
        prepared = self._prepare(plan)
        q = prepared.query
        aggs = q.aggregations
        if len(aggs) != 1 or type(aggs[0]).__name__ not in ("Count", "Sum") or q.group_by:
            raise fail("question", owner, "a plan with one 'count' or 'sum' and no "
                       "group_by (its answer is one number)",
                       [type(a).__name__.lower() for a in aggs])
        part = prepared.plans[0].parts[0]
        rel = part.release
        s = sensitivity(rel.contrib, q.contribution.max_groups, 1, self._s.neighbouring)
        sens = Fraction(s.l1) * Fraction(rel.unit)
        if sens > Fraction(c.spec.sensitivity):
            raise fail("question", owner, f"of sensitivity at most the child's "
                       f"{c.spec.sensitivity!r} (this plan's is {float(sens)!r} under "
                       f"{self._s.neighbouring.value!r})", type(aggs[0]).__name__.lower())
        if c.spec.monotonic:
            lower = getattr(aggs[0], "lower", 0.0)
            if self._s.neighbouring != Neighbouring.ADD_REMOVE or (lower is None or lower < 0):
                raise fail("question", owner, "a count, or a sum with lower >= 0, under "
                           "add/remove (the child is monotonic)",
                           type(aggs[0]).__name__.lower())
        return prepared, part

    def _plan_value(self, prepared: Prepared, part: Any) -> float:
        aggs = self._s._source.engine().aggregate(replace(prepared.spec, seed=0))
        got = part.exact(aggs)
        n = int(got[0][0]) if len(got) else 0
        return float(Fraction(n) * Fraction(part.release.unit))

    def _window(self, col: str, where: list[Any], prev: float | None, until: float
                ) -> Prepared:
        preds = [*where, {"column": col, "op": "<", "value": until}]
        if prev is not None:
            preds.append({"column": col, "op": ">=", "value": prev})
        return self._prepare({"type": "count", "where": preds})

    def _count(self, prepared: Prepared) -> int:
        aggs = self._s._source.engine().aggregate(replace(prepared.spec, seed=0))
        got = prepared.plans[0].parts[0].exact(aggs)
        return int(got[0][0]) if len(got) else 0

    def _weighted(self, binding: dict[str, Any], w: list[float]) -> float:
        prepared = self._prepare(self._one_row_a_unit({
            "type": "histogram", "column": binding["column"],
            "categories": binding["categories"]}))
        aggs = self._s._source.engine().aggregate(replace(prepared.spec, seed=0))
        name = prepared.spec.measures[0].name
        counts = aggs.values[name]
        row = [int(x) for x in counts[0]] if len(counts) else [0] * len(w)
        exact = sum((Fraction(x) * n for x, n in zip(w, row, strict=True)), Fraction(0))
        return float(math.floor(exact / _CACHE_G + Fraction(1, 2)) * _CACHE_G)

    def _one_row_a_unit(self, plan: dict[str, Any]) -> dict[str, Any]:
        """A cache's histogram keeps one row of each privacy unit (sensitivity 1)."""
        if self._s.schema().privacy_unit is not None:
            return {**plan, "contribution": {"max_rows": 1}}
        return plan

    @staticmethod
    def _value(compute: Any) -> Any:
        try:
            return compute()
        except DPError:
            raise
        except Exception:  # the engine's message may quote a value: one fixed text
            raise QueryFailedError(_FAILED) from None


def _name(v: Any, name: str = "child") -> str:
    if not isinstance(v, str) or not 1 <= len(v) <= 200 or any(
            ord(ch) < 32 or ord(ch) == 127 for ch in v):
        raise fail(name, "child", "a name of 1 to 200 printable characters", v)
    return v


#: What each kind of child is asked (the other operations are refused, nothing asked).
_OPERATIONS = {"sparse_vector": "a question with a threshold", "counter": "a step (until "
               "or count)", "cache": "a query's weights"}


def _wrong(c: Child, what: str) -> DPError:
    return fail("op", "child", f"{_OPERATIONS.get(c.kind, c.kind)} for a {c.kind} child",
                what)


def _not_exhausted(c: SparseVector) -> None:
    if c.exhausted:
        raise ChildExhaustedError(
            f"this sparse vector child is exhausted ({c.positives_used} of "
            f"{c.spec.positives} positives, {c.questions} questions answered)")
