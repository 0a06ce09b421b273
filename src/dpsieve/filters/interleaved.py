"""Interleaved adversaries over interactive children: the exact worst case on small models.

A child is modelled as a finite hidden-state mechanism (:class:`HiddenChild`): when it is
opened it draws a hidden value ``h`` with law ``prior[w]`` (``w = 0`` on D1, ``1`` on D2);
each question ``q`` is answered ``a`` with law ``answers[w][q, h, a]``, independently given
``h``. (A sparse vector is such a child: ``h`` is its threshold noise.) Children draw
independently, so for a history in which child ``c`` was asked questions ``q_1..`` and gave
answers ``a_1..``, the probability of the whole transcript in world ``w`` is

    P_w = prod_c sum_h prior[w]_c(h) prod_j answers[w]_c[q_j, h, a_j].

An adversary is a tree: at every history it opens a child from a list of templates (the
filter admits the template's declared PLD or refuses: a public, deterministic outcome) or
asks an open child one of its questions, or stops. For a fixed adversary the view's
hockey-stick divergence is ``H_x = sum_leaves (P_1 - x P_2)_+``; the leaves below different
actions are disjoint, so the best adversary *for each x* is found by the max-sum recursion
``V(history) = max(stop, max_action sum_answers V(history + answer))``, elementwise over a
grid of ``x``. This is exact for the model and exhaustive over adaptive, interleaving
adversaries; its cost is exponential in ``steps`` (keep models and ``steps`` small).

:func:`audit_interleaved` compares that worst case with a budget's curve: by the concurrent
filter theorem (docs/proofs/interactive.md §5) it never exceeds it when every child's
declared PLD dominates the child; a child that under-declares is caught.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dpsieve._validation import check_int, fail
from dpsieve.accounting.pld import PLD
from dpsieve.filters.base import PrivacyFilter

__all__ = ["HiddenChild", "InterleavedAudit", "audit_interleaved", "worst_curve"]

F64 = npt.NDArray[np.float64]
#: Float margin of the comparison with the budget (sums of a few hundred products).
MARGIN = 1e-12


@dataclass(frozen=True)
class HiddenChild:
    """A finite interactive child: ``prior`` (two vectors over the hidden values),
    ``answers`` (two arrays ``[question, hidden, answer]``), the ``declared`` PLD charged
    when it is opened, and the most questions it answers."""

    prior: tuple[F64, F64]
    answers: tuple[F64, F64]
    declared: PLD | None = None
    max_questions: int = 1
    name: str = field(default="child")

    def __post_init__(self) -> None:
        owner = "HiddenChild"
        p = tuple(np.asarray(v, dtype=np.float64) for v in self.prior)
        a = tuple(np.asarray(v, dtype=np.float64) for v in self.answers)
        if len(p) != 2 or len(a) != 2 or p[0].shape != p[1].shape or p[0].ndim != 1:
            raise fail("prior", owner, "two probability vectors of one length", self.prior)
        if a[0].shape != a[1].shape or a[0].ndim != 3 or a[0].shape[1] != p[0].size:
            raise fail("answers", owner, "two arrays [question, hidden, answer]", "<shape>")
        for v in (*p, *a):
            if np.any(v < 0) or not np.all(np.isfinite(v)):
                raise fail("answers", owner, "probabilities", "<negative or not finite>")
        if not all(np.allclose(v.sum(), 1.0) for v in p) or \
                not all(np.allclose(v.sum(axis=2), 1.0) for v in a):
            raise fail("answers", owner, "laws that sum to 1", "<sums differ from 1>")
        check_int("max_questions", self.max_questions, owner, minimum=0)
        object.__setattr__(self, "prior", p)
        object.__setattr__(self, "answers", a)


_Open = tuple[int, F64, F64, int]  # template, likelihood vectors in both worlds, questions


def worst_curve(templates: Sequence[HiddenChild], xs: npt.ArrayLike, steps: int, *,
                make_filter: Callable[[], PrivacyFilter] | None = None,
                opened: Sequence[int] = ()) -> F64:
    """``sup`` over adversaries of ``H_x(view)`` at each ``x`` (module docstring).

    ``opened``: templates open from the start (no filter charge); the adversary may open
    more copies of any template when ``make_filter`` is given (each offered to the filter,
    from its initial state) and makes at most ``steps`` moves."""
    from dpsieve.filters import filter_from_json

    x = np.asarray(xs, dtype=np.float64)
    check_int("steps", steps, "worst_curve", minimum=0)

    def rec(kids: tuple[_Open, ...], state: str | None, left: int) -> F64:
        p1 = float(np.prod([w1.sum() for _, w1, _, _ in kids])) if kids else 1.0
        p2 = float(np.prod([w2.sum() for _, _, w2, _ in kids])) if kids else 1.0
        best: F64 = np.maximum(p1 - x * p2, 0.0)
        if left == 0:
            return best
        if state is not None:
            for j, t in enumerate(templates):
                f = filter_from_json(state)
                if t.declared is None or not f.try_spend(t.declared).admitted:
                    continue
                new = (*kids, (j, t.prior[0].copy(), t.prior[1].copy(), 0))
                best = np.maximum(best, rec(new, f.to_json(), left - 1))
        for i, (j, w1, w2, n) in enumerate(kids):
            t = templates[j]
            if n >= t.max_questions:
                continue
            a1, a2 = t.answers
            for q in range(a1.shape[0]):
                total = np.zeros_like(x)
                for a in range(a1.shape[2]):
                    kid = (j, w1 * a1[q, :, a], w2 * a2[q, :, a], n + 1)
                    total += rec((*kids[:i], kid, *kids[i + 1:]), state, left - 1)
                best = np.maximum(best, total)
        return best

    start = tuple((j, templates[j].prior[0].copy(), templates[j].prior[1].copy(), 0)
                  for j in opened)
    return rec(start, make_filter().to_json() if make_filter is not None else None, steps)


@dataclass(frozen=True)
class InterleavedAudit:
    """The worst curve found, the budget's curve at the same ``x``, and the largest excess."""

    xs: F64
    worst: F64
    budget: F64
    gap: float

    @property
    def within(self) -> bool:
        """True when no adversary's view exceeds the budget (beyond the float margin)."""
        return self.gap <= MARGIN


def audit_interleaved(templates: Sequence[HiddenChild], budget: PLD | Callable[[F64], F64],
                      make_filter: Callable[[], PrivacyFilter], steps: int,
                      xs: npt.ArrayLike | None = None) -> InterleavedAudit:
    """Every adversary that opens children under a fresh ``make_filter()`` and interleaves
    their questions for ``steps`` moves, against ``budget``: the filter's budget as a PLD
    (its curve, pessimistic for a PLD built with the default) or as an exact function
    ``x -> h_B(x)`` (a lower bound of the budget's curve makes the verdict strict)."""
    x = np.geomspace(1e-2, 1e3, 121) if xs is None else np.asarray(xs, dtype=np.float64)
    worst = worst_curve(templates, x, steps, make_filter=make_filter)
    hb = np.asarray(budget.hockey_stick(x) if isinstance(budget, PLD) else budget(x),
                    dtype=np.float64)
    return InterleavedAudit(x, worst, hb, float(np.max(worst - hb)))
