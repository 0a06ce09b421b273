"""Children from their JSON: the kinds a session opens, each spec mapped to a fresh child
under the budget's relation (:func:`child_spec`), and the public refusals of the
operations on them (:mod:`dpsieve.session.children` opens and questions them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpsieve._validation import fail
from dpsieve.accounting.events import Neighbouring
from dpsieve.errors import DPError
from dpsieve.interactive.base import Child, ChildExhaustedError
from dpsieve.interactive.cache import AnswerCache, CacheSpec
from dpsieve.interactive.counter import ContinualCounter, CounterSpec
from dpsieve.interactive.sparse_vector import GaussianSVT, LaplaceSVT, SparseVector

__all__ = ["KINDS", "LIMITS", "child_name", "child_spec", "not_exhausted", "wrong_operation"]

#: The kinds of child a session opens.
KINDS = ("sparse_vector", "counter", "cache")


#: Bounds on what a child opened through a session (the service, an analyst) may declare:
#: a Gaussian sparse vector's privacy is computed by a sum over its positives for each
#: Renyi order (calibrated by bisection), so its size bounds the work of one request
#: (16 positives and 10^7 questions: under a second); the others are O(1) to open.
LIMITS = {("sparse_vector", "gaussian", "positives"): 16,
          ("sparse_vector", "gaussian", "max_questions"): 10**7,
          ("sparse_vector", "laplace", "positives"): 10**6,
          ("cache", "", "updates"): 10**5}


def _bounded(kind: str, noise: str, spec: Mapping[str, Any]) -> None:
    for (k, n, name), top in LIMITS.items():
        v = spec.get(name)
        if k == kind and n == noise and isinstance(v, int) and not isinstance(v, bool) \
                and v > top:
            raise fail(name, f"{kind} spec", f"an int <= {top} for a child opened through "
                       "a session or the service", v)


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
    _bounded("sparse_vector", str(noise), spec)
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
    _bounded("cache", "", spec)
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


def child_name(v: Any, name: str = "child") -> str:
    """``v`` if it is a name of 1 to 200 printable characters (a child's, an analyst's)."""
    if not isinstance(v, str) or not 1 <= len(v) <= 200 or any(
            ord(ch) < 32 or ord(ch) == 127 for ch in v):
        raise fail(name, "child", "a name of 1 to 200 printable characters", v)
    return v


#: What each kind of child is asked (the other operations are refused, nothing asked).
_OPERATIONS = {"sparse_vector": "a question with a threshold", "counter": "a step (until "
               "or count)", "cache": "a query's weights"}


def wrong_operation(c: Child, what: str) -> DPError:
    """The refusal of an operation ``c``'s kind does not answer (nothing asked)."""
    return fail("op", "child", f"{_OPERATIONS.get(c.kind, c.kind)} for a {c.kind} child",
                what)


def not_exhausted(c: SparseVector) -> None:
    """Refuse a question to an exhausted sparse vector (nothing asked)."""
    if c.exhausted:
        raise ChildExhaustedError(
            f"this sparse vector child is exhausted ({c.positives_used} of "
            f"{c.spec.positives} positives, {c.questions} questions answered)")
