"""The fast envelope equals brute force over all T^n databases (to 1e-12)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpsieve.release.data import Dataset, Domain, Workload
from dpsieve.release.envelope import enumerate_envelope
from dpsieve.release.groups import group_histograms
from dpsieve.release.mechanism import center_only_groups
from dpsieve.release.transcript import PMWParams, collapse, decode
from dpsieve.release.workloads import marginals, random_counting

from ._brute import brute_envelope, class_of_signed, full_transcript_logp

CASES = [
    # (workload, x rows, eta, gamma, eps, rounds, variant-selections)
    (marginals(Domain.from_sizes([2, 2]), 1), (0, 3, 1), 2.0, 0.5, 1.0, 3, 2),
    (marginals(Domain.from_sizes([2, 2]), 1), (0, 2), 7.0, 1.0, 0.5, 3, 3),
    (marginals(Domain.from_sizes([3]), 1), (0, 2, 2), 4.0, 0.7, 2.0, 3, 2),
    (random_counting(5, 2, seed=3), (4, 1), 3.0, 0.9, 1.0, 3, 2),
    (Workload(np.array([[0.5, -1.0, 0.25], [1.0, 0.0, -0.5]])), (2, 0, 1), 5.0, 0.4, 1.5, 2, 2),
    (marginals(Domain.from_sizes([2, 2]), 1), (1, 2), 400.0, 0.3, 1.0, 3, 2),  # logsumexp path
]


@pytest.mark.parametrize(("wl", "x", "eta", "gamma", "eps", "rounds", "sel"), CASES)
@pytest.mark.parametrize("prune", [False, True])
def test_fast_envelope_equals_brute_force(wl: Workload, x: tuple[int, ...], eta: float,
                                          gamma: float, eps: float, rounds: int, sel: int,
                                          prune: bool) -> None:
    cw = collapse(wl)
    data = Dataset.from_rows(x, wl.universe_size)
    groups = group_histograms(cw, cw.counts(data))
    p = PMWParams(rounds, eta, gamma)
    res = enumerate_envelope(cw, groups, p, eps, selections=sel, f_x=wl.answers(data),
                             keep_all=True, prune=prune, rng=np.random.default_rng(0))
    classes = class_of_signed(wl.matrix, cw.signed[:, cw.classes])
    brute = brute_envelope(wl.matrix, x, eta, gamma, eps, sel, classes, cw.signed_classes)
    assert res.log_masses is not None
    np.testing.assert_allclose(res.log_masses, brute, rtol=0, atol=1e-12)
    # Z >= 1 (the maximum includes y = x) and the exact expected error matches a direct sum
    assert res.log_z >= -1e-12
    f = wl.answers(data)
    Kc = cw.signed_classes
    direct = 0.0
    for code, lm in enumerate(res.log_masses):
        digits = [(code // Kc**i) % Kc for i in range(sel)][::-1]
        ans = decode(cw, np.array(digits, dtype=np.int64), rounds, gamma)
        direct += math.exp(lm) * float(np.abs(ans - f).max())
    assert res.expected_error == pytest.approx(direct, rel=1e-12, abs=1e-14)


def test_center_only_is_plain_pmw_law() -> None:
    wl = marginals(Domain.from_sizes([2, 2]), 1)
    data = Dataset.from_rows([0, 3, 3], 4)
    cw = collapse(wl)
    p = PMWParams(3, 3.0, 0.6)
    res = enumerate_envelope(cw, center_only_groups(cw, data), p, 1.0, selections=2,
                             keep_all=True, sample=False)
    assert res.log_z == pytest.approx(0.0, abs=1e-13)
    classes = class_of_signed(wl.matrix, cw.signed[:, cw.classes])
    # aggregate the full-transcript law by class and compare
    import itertools
    agg = np.zeros(cw.signed_classes**2)
    for w in itertools.product(range(2 * wl.k), repeat=2):
        agg[classes[w[0]] * cw.signed_classes + classes[w[1]]] += math.exp(
            full_transcript_logp(wl.matrix, (0, 3, 3), w, 3.0, 0.6))
    assert res.log_masses is not None
    np.testing.assert_allclose(np.exp(res.log_masses), agg, rtol=1e-12, atol=0)


def test_groups_least_distance_matches_databases() -> None:
    import itertools
    wl = marginals(Domain.from_sizes([2, 3]), 1)
    cw = collapse(wl)
    x = (0, 4, 5, 5)
    data = Dataset.from_rows(x, 6)
    g = group_histograms(cw, cw.counts(data))
    best: dict[tuple[float, ...], int] = {}
    for y in itertools.product(range(6), repeat=4):
        F = tuple(np.round(wl.answers(Dataset.from_rows(y, 6)), 12))
        d = sum(a != b for a, b in zip(x, y, strict=True))
        best[F] = min(best.get(F, 99), d)
    assert g.size == len(best)
    got = {tuple(np.round(F, 12)): int(d) for F, d in zip(g.answers, g.distance, strict=True)}
    assert got == best
    assert g.distance[g.center] == 0
