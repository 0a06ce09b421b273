"""Statistical audits of each child's released transcript against its declared privacy (slow).

Run a child many times on a data set and on a neighbour with a fixed adversary, and bound
from below (Clopper-Pearson, confidence 1 - 1e-6 per event and side, Bonferroni) the eps
that any (eps, delta) guarantee must have for the events tried. It must stay below the
declared eps (at the declared or chosen delta), and the audit must have power: the lower
bound reaches a stated fraction of the true eps of this adversary's view (from the exact
law where we have it), so it can fail.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pytest
from scipy import stats
from svt_exact import dlap_pmf, law, tail_ge

from dpsieve.accounting.pld import PLD
from dpsieve.interactive import (
    AnswerCache,
    CacheSpec,
    ContinualCounter,
    CounterSpec,
    GaussianSVT,
    LaplaceSVT,
    SparseVector,
)

ALPHA = 1e-6

pytestmark = pytest.mark.slow


def eps_lower_bound(a: np.ndarray, b: np.ndarray,
                    events: Sequence[Callable[[np.ndarray], np.ndarray]], delta: float) -> float:
    """Max over events (and both orders) of the Clopper-Pearson eps lower bound."""
    conf = ALPHA / (2 * len(events))
    best = 0.0
    for ev in events:
        for x, y in ((a, b), (b, a)):
            k1, k2 = int(np.sum(ev(x))), int(np.sum(ev(y)))
            lo = stats.beta.ppf(conf, k1, len(x) - k1 + 1) if k1 > 0 else 0.0
            hi = stats.beta.ppf(1 - conf, k2 + 1, len(y) - k2) if k2 < len(y) else 1.0
            if lo - delta > 0 and hi > 0:
                best = max(best, math.log((lo - delta) / hi))
    return best


def _svt_runs(spec: LaplaceSVT | GaussianSVT, values: Sequence[float], n: int,
              rng: np.random.Generator) -> np.ndarray:
    """Index of the first 'above' (len(values) if none), n runs."""
    out = np.empty(n, dtype=np.int64)
    for r in range(n):
        sv = SparseVector.open(spec, rng)
        out[r] = len(values)
        for i, v in enumerate(values):
            if sv.ask(v, 0.0).above:
                out[r] = i
                break
    return out


def test_laplace_sparse_vector_transcript() -> None:
    """Values (0, 0, 1) against the neighbour's (1, 1, 0) on the lattice g = 1: the event
    'above at the third question' has an exact log-ratio near eps."""
    spec = LaplaceSVT(1.0, granularity=1.0)
    d1, d2 = (0.0, 0.0, 1.0), (1.0, 1.0, 0.0)
    b1, b2, _ = spec.scales()
    width = 200
    tree = {(): (0, 1, 0), (False,): (0, 1, 0), (False, False): (1, 0, 0)}
    args = (3, 1, lambda z: dlap_pmf(b1, z), tail_ge(lambda z: dlap_pmf(b2, z), width), width)
    p, q = law(tree, 0, *args), law(tree, 1, *args)
    exact = max(abs(math.log(p[t] / q[t])) for t in p)
    rng = np.random.default_rng(11)
    a, b = _svt_runs(spec, d1, 60_000, rng), _svt_runs(spec, d2, 60_000, rng)
    lb = eps_lower_bound(a, b, [lambda x, i=i: x == i for i in range(4)], 0.0)
    assert lb <= spec.eps
    assert lb >= 0.5 * exact


def test_gaussian_sparse_vector_transcript() -> None:
    spec = GaussianSVT.calibrate(2.0, 1e-3, 4, granularity=1.0)
    rng = np.random.default_rng(12)
    d1, d2 = (-1.0, -1.0, -1.0, 1.0), (0.0, 0.0, 0.0, 0.0)
    a, b = _svt_runs(spec, d1, 40_000, rng), _svt_runs(spec, d2, 40_000, rng)
    lb = eps_lower_bound(a, b, [lambda x, i=i: x == i for i in range(5)], spec.delta)
    assert lb <= spec.epsilon()
    assert lb >= 0.1 * spec.epsilon()


def test_counter_transcript() -> None:
    """Eight steps, one event at step 0 on the neighbour. The optimal statistic is the
    likelihood ratio: W = B^{-1} Y = C x + z, s = <C e_0, W> / ||C e_0||."""
    n_steps, runs = 8, 40_000
    spec = CounterSpec.for_mu(1.0, granularity=2.0**-20)
    c = spec.blt.coefficients(n_steps)
    col = c / np.linalg.norm(c)
    cm = np.array([[c[i - j] if i >= j else 0.0 for j in range(n_steps)]
                   for i in range(n_steps)])
    binv = cm @ np.linalg.inv(np.tril(np.ones((n_steps, n_steps))))  # B^{-1} = C A^{-1}
    rng = np.random.default_rng(13)

    def run(first: int) -> np.ndarray:
        out = np.empty(runs)
        for r in range(runs):
            counter = ContinualCounter(spec, rng)
            y = np.array([counter.step(first if t == 0 else 0) for t in range(n_steps)])
            out[r] = col @ (binv @ y)
        return out

    a, b = run(1), run(0)
    delta = 1e-3
    declared = float(spec.pld().epsilon(delta))
    true_mu = float(np.linalg.norm(c)) / spec.sigma
    true = float(PLD.gdp(true_mu).epsilon(delta))
    thresholds = np.quantile(b, [0.9, 0.99, 0.999])
    lb = eps_lower_bound(a, b, [lambda x, t=t: x > t for t in thresholds], delta)
    assert lb <= declared
    assert lb >= 0.5 * true


def test_answer_cache_transcript() -> None:
    """One query over a two-element domain whose count is 20 on D and 21 on the neighbour;
    the transcript is (updated?, released value)."""
    spec = CacheSpec(1.0, 2, 1, tolerance=0.5, expected_rows=20.0)
    q = np.array([1.0, 0.0])
    rng = np.random.default_rng(14)

    def run(count: float) -> np.ndarray:
        out = np.empty(30_000)
        for r in range(out.size):
            cache = AnswerCache.open(spec, rng)
            a = cache.ask(q, count)
            out[r] = a.value if a.updated else -1e9
        return out

    a, b = run(21.0), run(20.0)
    events = [lambda x, t=t: x > t for t in (20.5, 21.5, 22.5, 24.0)]
    lb = eps_lower_bound(a, b, events, 0.0)
    assert lb <= spec.eps
    assert lb >= 0.1 * spec.eps
