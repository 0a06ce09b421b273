"""The sparse vector child: exact laws on small cases against its declared privacy, its
state, its refusals and its parameters."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest
from svt_exact import (
    dgauss_pmf,
    dlap_pmf,
    law,
    random_tree,
    tail_ge,
)

from dpsieve.accounting.events import ApproxDP, PureDP
from dpsieve.errors import ValidationError
from dpsieve.interactive import (
    ChildExhaustedError,
    GaussianSVT,
    LaplaceSVT,
    SparseVector,
    child_from_state,
)
from dpsieve.interactive._svt_privacy import svt_epsilon, svt_rdp
from dpsieve.mechanisms.noise import sampled_sigma2


def _laplace_laws(spec: LaplaceSVT, tree, n: int):  # type: ignore[no-untyped-def]
    b1, b2, _ = spec.scales()
    width = int(60 * max(b1, b2)) + 20
    ge = tail_ge(lambda z: dlap_pmf(b2, z), width)
    args = (n, spec.positives, lambda z: dlap_pmf(b1, z), ge, width)
    return law(tree, 0, *args), law(tree, 1, *args)


@pytest.mark.parametrize(("eps", "c", "monotonic"),
                         [(0.5, 1, False), (1.0, 2, False), (2.0, 2, True), (1.5, 3, False)])
def test_laplace_svt_exact_ratio_below_eps(eps: float, c: int, monotonic: bool) -> None:
    """Adaptive analysts (random trees), every transcript: P_D / P_D2 <= e^eps, and the
    worst ratio found is not far below e^eps (the bound is not vacuous)."""
    spec = LaplaceSVT(eps, positives=c, monotonic=monotonic, granularity=1.0)
    assert spec.lattice() == (1.0, 1)
    rng = np.random.default_rng(7)
    worst = 0.0
    n = 4
    for _ in range(12):
        tree = random_tree(rng, n, 1)
        if monotonic:  # every question moves the same way between D and D2
            sign = 1 if rng.random() < 0.5 else -1
            tree = {p: (q, q + sign * int(rng.integers(0, 2)), t)
                    for p, (q, _, t) in tree.items()}
        a, b = _laplace_laws(spec, tree, n)
        assert math.isclose(sum(a.values()), 1.0, abs_tol=1e-9)
        for t in a:
            for x, y in ((a[t], b[t]), (b[t], a[t])):
                if y > 1e-12:
                    worst = max(worst, math.log(x / y))
    assert worst <= eps + 1e-9
    assert worst >= 0.25 * eps


def test_laplace_split_is_exact_and_scales_round_up() -> None:
    for eps, c, mono, share in [(1.0, 1, False, 0.0), (0.3, 5, True, 0.2), (7.0, 2, False, 0.5)]:
        spec = LaplaceSVT(eps, positives=c, monotonic=mono, numeric_share=share)
        e1, e2, e3 = spec.split()
        assert e1 + e2 + e3 == Fraction(eps)
        assert min(e1, e2) > 0
        _, k = spec.lattice()
        b1, b2, b3 = spec.scales()
        realised = Fraction(k) / Fraction(b1) + Fraction(k * c * (1 if mono else 2)) / Fraction(b2)
        if b3 is not None:
            realised += Fraction(k * c) / Fraction(b3)
        assert realised <= Fraction(eps)
        assert spec.declared() == PureDP(eps)


def _gauss_laws(spec: GaussianSVT, tree, n: int):  # type: ignore[no-untyped-def]
    g, _ = spec.lattice()
    s1 = sampled_sigma2(spec.sigma / g)
    s2 = sampled_sigma2((spec.question_sigma or 0.0) / g)
    width = int(14 * math.sqrt(float(max(s1, s2)))) + 10
    ge = tail_ge(lambda z: dgauss_pmf(s2, z), width)
    args = (n, spec.positives, lambda z: dgauss_pmf(s1, z), ge, width)
    return law(tree, 0, *args), law(tree, 1, *args)


@pytest.mark.parametrize(("c", "monotonic"), [(1, False), (2, False), (1, True)])
def test_gaussian_svt_exact_renyi_and_delta_below_bounds(c: int, monotonic: bool) -> None:
    """Exact transcript laws: the Renyi divergence at several orders is below svt_rdp, and
    the hockey-stick divergence at the declared eps is below the declared delta."""
    n = 4
    spec = GaussianSVT(1.5, n, delta=1e-2, positives=c, monotonic=monotonic,
                       question_sigma=2.0, granularity=1.0)
    _, k = spec.lattice()
    s1, s2 = spec.variances()
    rng = np.random.default_rng(3)
    eps = spec.epsilon()
    worst_delta = 0.0
    for _ in range(8):
        tree = random_tree(rng, n, k)
        if monotonic:
            sign = 1 if rng.random() < 0.5 else -1
            tree = {p: (q, q + sign * int(rng.integers(0, 2)), t)
                    for p, (q, _, t) in tree.items()}
        a, b = _gauss_laws(spec, tree, n)
        for alpha in (1.5, 2.0, 4.0, 8.0):
            bound = svt_rdp(alpha, k=k, s1_sq=s1, s2_sq=s2, questions=n, positives=c,
                            monotonic=monotonic)
            for x, y in ((a, b), (b, a)):
                moment = sum(x[t] ** alpha * y[t] ** (1 - alpha) for t in x if x[t] > 0)
                assert math.log(moment) / (alpha - 1) <= bound + 1e-9
        for x, y in ((a, b), (b, a)):
            d = sum(max(0.0, x[t] - math.exp(eps) * y[t]) for t in x)
            worst_delta = max(worst_delta, d)
    assert worst_delta <= spec.delta


def test_gaussian_epsilon_grows_with_questions_and_positives() -> None:
    base = {"k": 1024, "s1_sq": Fraction(1024 * 10) ** 2, "s2_sq": Fraction(1024 * 14) ** 2,
                "monotonic": False}
    e = [svt_epsilon(1e-6, questions=q, positives=1, **base) for q in (10, 1000, 100000)]
    assert e[0] < e[1] < e[2]
    assert svt_epsilon(1e-6, questions=1000, positives=3, **base) > e[1]
    spec = GaussianSVT.calibrate(1.0, 1e-6, 10_000)
    assert spec.epsilon() <= 1.0
    assert GaussianSVT(spec.sigma * (1 - 1e-4), 10_000).epsilon() > 1.0 - 1e-3
    assert isinstance(spec.declared(), ApproxDP)


def test_answers_until_positives_used_then_refuses() -> None:
    rng = np.random.default_rng(1)
    sv = SparseVector.open(LaplaceSVT(1.0, positives=2), rng=rng)
    answers = [sv.ask(100.0, 0.0) for _ in range(2)]
    assert [a.above for a in answers] == [True, True]
    assert answers[-1].positives_left == 0
    assert sv.exhausted
    before = sv.to_state()
    with pytest.raises(ChildExhaustedError):
        sv.ask(100.0, 0.0)
    assert sv.to_state() == before
    g = SparseVector.open(GaussianSVT(2.0, 3), rng=rng)
    for _ in range(3):
        g.ask(-100.0, 0.0)
    with pytest.raises(ChildExhaustedError):
        g.ask(-100.0, 0.0)


def test_numeric_sparse_releases_values_on_positives_only() -> None:
    rng = np.random.default_rng(2)
    sv = SparseVector.open(LaplaceSVT(2.0, positives=3, numeric_share=0.5), rng=rng)
    low = sv.ask(-1e6, 0.0)
    assert not low.above
    assert low.value is None
    high = sv.ask(1e6, 0.0)
    assert high.above
    assert high.value is not None
    assert abs(high.value - 1e6) < 1e3


def test_state_round_trip_keeps_the_secret_out_of_public() -> None:
    rng = np.random.default_rng(5)
    for spec in (LaplaceSVT(1.0, positives=3, numeric_share=0.25),
                 GaussianSVT(3.0, 50, positives=2, monotonic=True)):
        sv = SparseVector.open(spec, rng=rng)
        for v in (0.0, 1.0, -3.0):
            sv.ask(v, 10.0)
        state = json.loads(json.dumps(sv.to_state()))
        back = child_from_state(state, rng)
        assert isinstance(back, SparseVector)
        assert back.to_state() == sv.to_state()
        assert back.public() == sv.public()
        assert "threshold_noise" in state
        assert "threshold_noise" not in json.dumps(sv.public())
        assert back.declared() == spec.declared()


def test_bad_input_names_the_parameter() -> None:
    sv = SparseVector.open(LaplaceSVT(1.0), rng=np.random.default_rng(0))
    with pytest.raises(ValidationError, match="'threshold'"):
        sv.ask(1.0, math.nan)
    with pytest.raises(ValidationError, match="'value'") as e:
        sv.ask(math.inf, 1.0)
    assert "inf" not in str(e.value)  # the private value is withheld
    assert sv.questions == 0
    with pytest.raises(ValidationError, match="'eps'"):
        LaplaceSVT(0.0)
    with pytest.raises(ValidationError, match="'granularity'"):
        LaplaceSVT(1.0, granularity=0.3)
    with pytest.raises(ValidationError, match="'max_questions'"):
        GaussianSVT(1.0, 0)
    with pytest.raises(ValidationError, match="'kind'"):
        child_from_state({"version": 1, "kind": "nope"})
    with pytest.raises(ValidationError, match="'version'"):
        child_from_state({"version": 99, "kind": "sparse_vector"})


def test_gaussian_rdp_bound_is_not_vacuous() -> None:
    """One question moved by +k on D and -k on D2, thresholds into the far tail: the exact
    Renyi divergence stays below svt_rdp and comes within a factor 2.5 of it (the truth
    for one question is a (2k)^2/(2 (s1^2 + s2^2)); the bound charges the threshold and
    the question noise separately)."""
    from scipy.special import logsumexp

    s1, s2 = Fraction(3, 2) ** 2, Fraction(2) ** 2
    width = 80
    ge = tail_ge(lambda z: dgauss_pmf(s2, z), width)
    alpha = 16.0
    bound = svt_rdp(alpha, k=1, s1_sq=s1, s2_sq=s2, questions=1, positives=1,
                    monotonic=False)
    worst = 0.0
    for thr in range(0, 40, 3):
        tree = {(): (1, -1, thr)}
        args = (1, 1, lambda z: dgauss_pmf(s1, z), ge, width)
        a, b = law(tree, 0, *args), law(tree, 1, *args)
        exact = logsumexp([alpha * math.log(a[t]) + (1 - alpha) * math.log(b[t]) for t in a])
        worst = max(worst, exact / (alpha - 1))
    assert worst <= bound
    assert worst >= bound / 2.5
