"""Exact output laws of the lattice sparse vector on small cases (a test oracle).

An analyst is a tree: for every prefix of answers (a tuple of bools) it asks a question
whose value is ``q`` on D and ``q2`` on the neighbour (``|q - q2| <= k``) against an
integer threshold. The law of the transcript (the tuple of answers) is a sum over the
threshold noise ``r`` of products of the question noise's tail probabilities, computed
in floats with the threshold sum truncated where the dropped mass is below 1e-18.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from fractions import Fraction

import numpy as np

Prefix = tuple[bool, ...]
Tree = dict[Prefix, tuple[int, int, int]]  # prefix -> (q on D, q on D2, threshold)


def dlap_pmf(scale: float, support: np.ndarray) -> np.ndarray:
    q = math.exp(-1.0 / scale)
    return (1 - q) / (1 + q) * np.power(q, np.abs(support))


def dgauss_pmf(s2: Fraction, support: np.ndarray) -> np.ndarray:
    wide = np.arange(-int(40 * math.sqrt(float(s2))) - 5, int(40 * math.sqrt(float(s2))) + 6)
    norm = float(np.sum(np.exp(-(wide.astype(float) ** 2) / (2 * float(s2)))))
    return np.exp(-(support.astype(float) ** 2) / (2 * float(s2))) / norm


def tail_ge(pmf: Callable[[np.ndarray], np.ndarray], width: int) -> Callable[[int], float]:
    """P[nu >= a] for a symmetric pmf on Z (supported within +-width)."""
    zs = np.arange(-width, width + 1)
    p = pmf(zs)
    suffix = np.cumsum(p[::-1])[::-1]

    def ge(a: int) -> float:
        if a <= -width:
            return 1.0
        if a > width:
            return 0.0
        return float(suffix[a + width])

    return ge


def transcripts(n: int, c: int) -> Iterator[Prefix]:
    """Every complete transcript of at most n questions that stops at the c-th positive."""
    def rec(prefix: Prefix) -> Iterator[Prefix]:
        if sum(prefix) == c or len(prefix) == n:
            yield prefix
            return
        yield from rec((*prefix, False))
        yield from rec((*prefix, True))
    yield from rec(())


def law(tree: Tree, side: int, n: int, c: int, rho_pmf: Callable[[np.ndarray], np.ndarray],
        nu_ge: Callable[[int], float], width: int) -> dict[Prefix, float]:
    """P[transcript] on D (side 0) or D2 (side 1)."""
    rs = np.arange(-width, width + 1)
    pr = rho_pmf(rs)
    out: dict[Prefix, float] = {}
    for t in transcripts(n, c):
        total = 0.0
        for r, p in zip(rs.tolist(), pr.tolist(), strict=True):
            if p == 0.0:
                continue
            prod = p
            for i, ans in enumerate(t):
                q = tree[t[:i]][side]
                thr = tree[t[:i]][2]
                up = nu_ge(thr + r - q)
                prod *= up if ans else 1.0 - up
            total += prod
        out[t] = total
    return out


def random_tree(rng: np.random.Generator, n: int, k: int, span: int = 4) -> Tree:
    """A random adaptive analyst: each prefix gets its own question and neighbour shift."""
    tree: Tree = {}

    def rec(prefix: Prefix) -> None:
        if len(prefix) == n:
            return
        q = int(rng.integers(-span, span + 1))
        tree[prefix] = (q, q + int(rng.integers(-k, k + 1)), int(rng.integers(-2, 3)))
        rec((*prefix, False))
        rec((*prefix, True))

    rec(())
    return tree
