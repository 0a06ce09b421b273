"""The ``"auto"`` bounds' privacy, checked exactly (docs/proofs/queries.md §7).

Each auto bound is one permute-and-flip choice. Here the output law of every choice is
computed *exactly* (independently of the sampler: the permutation formula of McKenna &
Sheldon's Alg. 1, enumerated over all permutations with mpmath for lattices of <= 6
candidates, by prefix/suffix elementary symmetric polynomials for the plans' lattices)
from the scores the code hands to permute-and-flip on a data set ``D`` and on each of its
neighbours ``D'`` (a unit added with various rows, each unit removed; a unit's rows
replaced under replace-one), the earlier choices held fixed (adaptive composition). The
largest log-ratio of the two laws must be at most the choice's ``eps_q``; the same
computation with twice the coefficient must exceed it somewhere (the check has teeth),
under add/remove and replace-one alike (a choice with a target is monotonic under both:
coefficient ``eps_q / Delta``, docs/proofs/queries.md §7);
stage 1 + stage 2 must be the plan's privacy exactly. The sampler's exact Bernoulli
trials are enumerated path by path against ``exp(-a/b)``.
"""

from __future__ import annotations

import itertools
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import pandas as pd
import pytest

from dpsieve import Session
from dpsieve.accounting.events import ZCDP, Neighbouring, PureDP
from dpsieve.mechanisms.pf_law import permute_and_flip_log_law
from dpsieve.queries.auto import _split, choose

AR = Neighbouring.ADD_REMOVE
RO = Neighbouring.REPLACE_ONE


def _gammas(scores: list[float], eps: float, sens: float, mono: bool, scale: int = 1
            ) -> list[Fraction]:
    """PF's exponents ``c (q* - q_i)``, ``c = eps / (h Delta)`` (h = 1 if monotonic)."""
    c = scale * Fraction(eps) / (Fraction(sens) * (1 if mono else 2))
    qs = [Fraction(float(x)) for x in scores]
    top = max(qs)
    return [c * (top - x) for x in qs]


def _pf_enumerated(gammas: list[Fraction]) -> list[mpmath.mpf]:
    """The exact law of one pass of permute-and-flip, over all ``n!`` orders (the
    maximiser accepts surely, so one pass returns)."""
    with mpmath.workdps(30):
        p = [mpmath.exp(-mpmath.mpf(g.numerator) / g.denominator) for g in gammas]
        out = [mpmath.mpf(0)] * len(p)
        perms = list(itertools.permutations(range(len(p))))
        for order in perms:
            reach = mpmath.mpf(1)
            for r in order:
                out[r] += reach * p[r]
                reach *= 1 - p[r]
        return [x / len(perms) for x in out]


def _pf_log_law(gammas: list[Fraction]) -> np.ndarray:
    """``log P[r]`` of permute-and-flip at gaps ``gammas``: the library's analysis function
    (:mod:`dpsieve.mechanisms.pf_law`, independent of the sampler), itself checked against
    the enumeration below."""
    return permute_and_flip_log_law([float(x) for x in gammas])


def test_the_law_formula_is_the_enumerated_law() -> None:
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(1, 7))
        gam = [Fraction(int(rng.integers(0, 40)), int(rng.integers(1, 9))) for _ in range(n)]
        gam[int(rng.integers(0, n))] = Fraction(0)
        exact = _pf_enumerated(gam)
        assert float(mpmath.fsum(exact)) == pytest.approx(1.0, abs=1e-40)
        got = np.exp(_pf_log_law(gam))
        for a, b in zip(exact, got.tolist(), strict=True):
            assert b == pytest.approx(float(a), rel=1e-12, abs=1e-300)


def _capture(monkeypatch: pytest.MonkeyPatch, pick: Any) -> list[tuple[Any, ...]]:
    import dpsieve.mechanisms.select as sel

    got: list[tuple[Any, ...]] = []

    def fake(scores: Any, eps: float, sensitivity: float, rng: Any, *, monotonic: bool
             ) -> int:
        got.append((list(map(float, scores)), eps, sensitivity, monotonic))
        return int(pick(len(got) - 1, len(scores)))
    monkeypatch.setattr(sel, "permute_and_flip", fake)
    return got


def _max_log_ratio(a: tuple[Any, ...], b: tuple[Any, ...], scale: int = 1) -> float:
    assert a[1:] == b[1:]  # eps, sensitivity and monotonic are public
    if len(a[0]) <= 6 and scale == 1:
        la = [float(mpmath.log(x)) for x in _pf_enumerated(_gammas(*a, scale=scale))]
        lb = [float(mpmath.log(x)) for x in _pf_enumerated(_gammas(*b, scale=scale))]
        return float(np.max(np.abs(np.asarray(la) - np.asarray(lb))))
    return float(np.max(np.abs(_pf_log_law(_gammas(*a, scale=scale))
                               - _pf_log_law(_gammas(*b, scale=scale)))))


# --- one choice, tiny lattices (<= 6 candidates), every neighbour, exact enumeration ---

@pytest.mark.parametrize("target", [None, 0.0, 1.0, 2.5])
@pytest.mark.parametrize("upper", [True, False])
@pytest.mark.parametrize("prior", [True, False])
def test_one_choice_exactly_within_its_eps_on_every_neighbour(
        monkeypatch: pytest.MonkeyPatch, target: float | None, upper: bool, prior: bool
) -> None:
    got = _capture(monkeypatch, lambda i, n: 0)
    cands = np.asarray([1.0, 2.0, 3.0, 5.0, 8.0])
    extras = [0.5, 2.0, 2.5, 8.0, 9.0]
    bases = [[], [2.0], [1.0, 3.0, 3.0], [5.0, 5.0, 9.0, 0.5], [2.0, 2.0, 2.0, 8.0, 1.0]]
    worst, teeth = {AR: 0.0, RO: 0.0}, {AR: 0.0, RO: 0.0}
    for eps in (0.5, 3.0):
        for base in bases:
            pairs: list[tuple[Neighbouring, list[float], list[float]]] = []
            pairs += [(AR, base, [*base, x]) for x in extras]
            pairs += [(AR, base, base[:i] + base[i + 1:]) for i in range(len(base))]
            pairs += [(RO, base, [*base[:i], x, *base[i + 1:]])
                      for i in range(len(base)) for x in extras]
            for nb, d0, d1 in pairs:
                got.clear()
                for d in (d0, d1):
                    choose(np.asarray(d), cands, target, eps, None, upper=upper, nb=nb,
                           prior=prior)
                # a target's choice is monotonic (h = 1) under replace-one too (§7)
                assert got[0][3] == (target is not None), (nb, got[0][1:])
                r = _max_log_ratio(got[0], got[1])
                assert r <= eps * (1 + 1e-12), (nb, d0, d1, eps, r)
                worst[nb] = max(worst[nb], r / eps)
                teeth[nb] = max(teeth[nb], _max_log_ratio(got[0], got[1], 2) / eps)
    for nb in (AR, RO):
        # twice the coefficient is caught under either neighbouring, and eps_q itself is
        # attained: the stated privacy is the choice's, with no slack (replace-one with a
        # target at h = 2 was 0.5 eps_q)
        assert teeth[nb] > 1.0, (nb, worst, teeth)
        assert worst[nb] > 0.99, (nb, worst, teeth)


# --- whole plans: every choice of stage 1 on D and its neighbours, through Session ---

def _frame(rows: list[tuple[int, int, int | None]]) -> pd.DataFrame:
    return pd.DataFrame({"pid": pd.array([r[0] for r in rows], dtype="Int64"),
                         "g": pd.array([r[1] for r in rows], dtype="Int64"),
                         "score": pd.array([r[2] for r in rows], dtype="Int64")})


BASE = [(1, 0, 10), (1, 0, 12), (1, 1, 50), (2, 1, 3), (3, 2, 90), (3, 2, 91),
        (3, 2, 95), (3, 0, 7), (4, 0, 40)]
#: Rows of a new unit 9: in several groups, many in one, extreme values, outside the
#: keys, NULL values.
ADDED = [
    [(9, 0, 5)],
    [(9, 0, 1000), (9, 1, -1000), (9, 2, 0)],
    [(9, 1, 60)] * 12,
    [(9, 7, 60)],  # outside the public keys: no unit of the plan
    [(9, 0, None), (9, 1, None)],
    [(9, 2, 2**62), (9, 2, -(2**62))],
]


def _plan(privacy: dict[str, Any], count: bool) -> dict[str, Any]:
    """``count``: a count and a sum (totals: targets); else a mean (contribution bounds at
    the median: not monotonic)."""
    aggs: list[dict[str, Any]] = [{"type": "sum" if count else "mean", "column": "score",
                                   "lower": "auto", "upper": "auto"}]
    if count:
        aggs.insert(0, {"type": "count"})
    return {"type": "query", "privacy": privacy, "aggregations": aggs, "group_by": ["g"],
            "keys": [[0], [1], [2]], "contribution": "auto", "auto_share": 0.5}


def _stage1(monkeypatch: pytest.MonkeyPatch, rows: list[tuple[int, int, int | None]],
            plan: dict[str, Any], budget: Any, pick: Any) -> tuple[list[Any], Session]:
    got = _capture(monkeypatch, pick)
    s = Session(_frame(rows), budget=budget, privacy_unit="pid",
                rng=np.random.default_rng(11),
                column_types={"pid": "integer", "g": "integer", "score": "integer"})
    before = s.remaining().to_dict()
    r = s.query(plan)
    after = s.remaining().to_dict()
    key = "eps" if "eps" in before else "rho"
    spent = Fraction(before[key]) - Fraction(after[key])
    want = Fraction(plan["privacy"][key])
    assert spent == want  # one charge: the plan's privacy, exactly
    assert r.answer.bounds is not None
    return list(got), s


@pytest.mark.parametrize("privacy", [{"type": "pure", "eps": 400.0},
                                     {"type": "zcdp", "rho": 1e4}])
@pytest.mark.parametrize("count", [True, False])
@pytest.mark.parametrize("nb", [AR, RO])
def test_every_choice_of_a_plan_within_its_eps_on_neighbours(
        monkeypatch: pytest.MonkeyPatch, privacy: dict[str, Any], count: bool,
        nb: Neighbouring) -> None:
    plan = _plan(privacy, count)
    # a large privacy: targets below one unit, so a handful of units moves the scores
    # (at eps 1 every target exceeds these data sets' units and the scores are the prior's)
    budget = (PureDP(1e4, nb) if privacy["type"] == "pure" else ZCDP(1e6, nb))
    neighbours: list[list[tuple[int, int, int | None]]] = []
    units = sorted({r[0] for r in BASE})
    if nb == AR:
        neighbours += [BASE + a for a in ADDED]
        neighbours += [[r for r in BASE if r[0] != u] for u in units]
    else:
        for u in units[:2]:
            rest = [r for r in BASE if r[0] != u]
            neighbours += [rest + [(u, *r[1:]) for r in a] for a in ADDED]
    picks = [lambda i, n: 0, lambda i, n: n // 3]
    n_checked, worst, teeth = 0, 0.0, 0.0
    worst_m, teeth_m, n_mono = 0.0, 0.0, 0  # the choices with a target (monotonic)
    for pick in picks:
        d0, _ = _stage1(monkeypatch, BASE, plan, budget, pick)
        k = len(d0)
        assert k == 4  # max_groups, max_rows, upper, lower: one choice each
        eps_q = d0[0][1]
        assert all(c[1] == eps_q for c in d0)
        total = PureDP(400.0, nb) if privacy["type"] == "pure" else ZCDP(1e4, nb)
        main, each = _split(total, 0.5, k, nb)
        assert each == eps_q  # the eps each choice is run at is the split's
        if isinstance(main, PureDP):  # stage 2 + stage 1 within the plan's, exactly
            assert Fraction(main.eps) + k * Fraction(each) <= Fraction(400.0)
        else:
            assert Fraction(main.rho) + k * Fraction(each) ** 2 / 2 <= Fraction(1e4)
        for rows in neighbours:
            d1, _ = _stage1(monkeypatch, rows, plan, budget, pick)
            assert len(d1) == k
            for a, b in zip(d0, d1, strict=True):
                r = _max_log_ratio(a, b)
                assert r <= eps_q * (1 + 1e-9), (rows, a[1:], r)
                t2 = _max_log_ratio(a, b, 2) / eps_q
                worst, teeth = max(worst, r / eps_q), max(teeth, t2)
                if a[3]:  # monotonic: h = 1, under either neighbouring
                    worst_m, teeth_m, n_mono = max(worst_m, r / eps_q), max(teeth_m, t2), \
                        n_mono + 1
                n_checked += 1
    assert n_checked >= 2 * 4 * 6
    assert teeth > 1.0, (worst, teeth)  # a coefficient too large would be caught
    # a plan of totals: every choice has a target, so h = 1 (replace-one included); a
    # plan of means: the column bounds have targets, the contribution bounds (the
    # median) not. Within eps_q at h = 1, and twice the coefficient caught, on those.
    assert n_mono == (n_checked if count else n_checked // 2), (n_mono, n_checked)
    assert teeth_m > 1.0, (worst_m, teeth_m)
    assert worst_m > 0.99, (worst_m, teeth_m)  # eps_q attained: no slack left


# --- the sampler: exact Bernoulli(exp(-a/b)) trials, path by path ---

class _BranchError(Exception):
    def __init__(self, n: int) -> None:
        self.n = n


class _Script:
    """A random source replaying a prefix of ``below_int`` results, then asking."""

    def __init__(self, prefix: list[int]) -> None:
        self.prefix, self.i = prefix, 0

    def below_int(self, n: int) -> int:
        if self.i == len(self.prefix):
            raise _BranchError(n)
        self.i += 1
        return self.prefix[self.i - 1]


def _law_of_bern_exp(a: int, b: int, depth: int) -> tuple[Fraction, Fraction]:
    """(P[true] over the paths of at most ``depth`` draws, the mass of longer paths)."""
    from dpsieve.mechanisms import _scalar

    hit, lost = Fraction(0), Fraction(0)
    stack: list[tuple[list[int], Fraction]] = [([], Fraction(1))]
    while stack:
        prefix, p = stack.pop()
        try:
            hit += p if _scalar.bern_exp(a, b, _Script(prefix)) else 0  # type: ignore[arg-type]
        except _BranchError as br:
            if len(prefix) == depth:
                lost += p
                continue
            stack.extend(([*prefix, v], p / br.n) for v in range(br.n))
    return hit, lost


@pytest.mark.parametrize(("a", "b"), [(0, 1), (1, 2), (1, 1), (2, 1), (3, 2), (7, 2),
                                      (2, 2)])
def test_the_samplers_trials_are_exactly_exp_minus_a_over_b(a: int, b: int) -> None:
    hit, lost = _law_of_bern_exp(a, b, 15)
    assert lost < Fraction(1, 10**3)  # the bracket below is exact; this keeps it sharp
    with mpmath.workdps(40):
        want = mpmath.exp(-mpmath.mpf(a) / b)
        assert mpmath.mpf(hit.numerator) / hit.denominator <= want
        assert want <= mpmath.mpf((hit + lost).numerator) / (hit + lost).denominator


@pytest.mark.slow
def test_permute_and_flip_draws_follow_the_exact_law_on_auto_scores() -> None:
    """The sampler itself on the integer scores ``choose`` builds (monotonic, prior):
    its frequencies against :func:`_pf_log_law` (chi-square)."""
    from scipy.stats import chisquare

    from dpsieve.mechanisms.select import permute_and_flip

    rng = np.random.default_rng(21)
    scores = [-(2**16) * 3 - 40000 * 0, -(2**16) * 1 - 40000, -40000 * 2, -40000 * 3,
              -(2**16) * 0 - 40000 * 4]
    eps, sens = 0.9, float(2**16)
    law = np.exp(_pf_log_law(_gammas(scores, eps, sens, True)))
    n = 20000
    draws = [permute_and_flip(scores, eps, sens, rng, monotonic=True) for _ in range(n)]
    freq = np.bincount(draws, minlength=len(scores))
    assert chisquare(freq, law * n).pvalue > 1e-4
