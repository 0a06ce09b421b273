"""Interactive children: mechanisms an analyst keeps open under one budget (docs/interactive.md).

Each child declares its whole privacy when it is opened (charged once to the budget's
filter) and then answers from its own state, one question or step at a time:

* :class:`SparseVector` -- above/below threshold questions (:class:`LaplaceSVT`,
  :class:`GaussianSVT`; NumericSparse with ``numeric_share``);
* :class:`ContinualCounter` -- running counts over data appended in time steps, one
  Gaussian mechanism over the whole stream (BLT factorization, memory independent of T);
* :class:`AnswerCache` -- private multiplicative weights over a declared domain: linear
  queries answered from its state, paid for only by updates.

States are JSON (``to_state``, :func:`child_from_state`); ``public()`` never holds a secret.
"""

from __future__ import annotations

from dpsieve.interactive.base import (
    STATE_VERSION,
    Child,
    ChildExhaustedError,
    child_from_state,
    register_child,
)
from dpsieve.interactive.blt import BLT, DEFAULT_BLT, fit_blt
from dpsieve.interactive.cache import AnswerCache, CacheAnswer, CacheSpec
from dpsieve.interactive.counter import ContinualCounter, CounterSpec
from dpsieve.interactive.sparse_vector import Answer, GaussianSVT, LaplaceSVT, SparseVector

__all__ = [
    "BLT",
    "DEFAULT_BLT",
    "STATE_VERSION",
    "Answer",
    "AnswerCache",
    "CacheAnswer",
    "CacheSpec",
    "Child",
    "ChildExhaustedError",
    "ContinualCounter",
    "CounterSpec",
    "GaussianSVT",
    "LaplaceSVT",
    "SparseVector",
    "child_from_state",
    "fit_blt",
    "register_child",
]
