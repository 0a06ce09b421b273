"""Curves past the float range of e^z: eps(delta) and delta(eps) at losses above ~709.

References are independent of the code under test: exact binomial sums in mpmath (60
digits) for compositions of randomized response, and mpmath sums for the scaled tail sums.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpsieve.accounting import PLD, _curves


@pytest.fixture(autouse=True)
def _precision() -> Iterator[None]:
    """60 digits inside this module only (a global setting would leak into other modules)."""
    with mp.workdps(60):
        yield


def _rr_delta(eps: float, k: int, eps_prime: float) -> mp.mpf:
    """Exact delta(eps') of RR(eps)^{(+)k}: Z = (2j - k) eps, j ~ Bin(k, e^eps / (1 + e^eps))."""
    e = mp.mpf(eps)
    p = mp.e**e / (1 + mp.e**e)
    total = mp.mpf(0)
    for j in range(k, -1, -1):
        z = (2 * j - k) * e
        if z <= eps_prime:
            break
        w = mp.binomial(k, j) * p**j * (1 - p) ** (k - j)
        total += w * (1 - mp.e ** (mp.mpf(eps_prime) - z))
    return total


def test_rr_composition_eps_beyond_float_range_is_tight() -> None:
    # RR(1) x 2000: the mean loss is 924, so eps(1e-6) sits above e^709. The curve used to be
    # uncertifiable there and eps collapsed to the largest loss (2000).
    pld = PLD.randomized_response(1.0).self_compose(2000)
    eps = float(pld.epsilon(1e-6))
    assert eps > 709.0
    assert _rr_delta(1.0, 2000, eps) <= mp.mpf("1e-6")  # an upper bound on eps ...
    assert _rr_delta(1.0, 2000, eps * (1 - 1e-6)) > mp.mpf("1e-6")  # ... within 1e-6 relative


@pytest.mark.parametrize("eps_prime", [750.0, 1000.0, 1100.0])
def test_rr_composition_delta_beyond_float_range_brackets_exact(eps_prime: float) -> None:
    pld = PLD.randomized_response(1.0).self_compose(2000)
    ours = mp.mpf(float(pld.delta(eps_prime)))
    exact = _rr_delta(1.0, 2000, eps_prime)
    assert exact <= ours <= exact * (1 + mp.mpf("1e-9")) + mp.mpf("1e-300")


@pytest.mark.parametrize("grid", [1e-3, 0.37, 40.0])
def test_scaled_tail_sums_match_mpmath(grid: float) -> None:
    rng = np.random.default_rng(7)
    n = 3000 if grid < 1 else 200
    offset = -n // 3
    p = rng.random(n) ** 8
    p[rng.random(n) < 0.2] = 0.0
    p /= p.sum()
    z = _curves.knots(offset, n, grid)
    a, d, rel, m = _curves.scaled_tail_sums(z, p)
    # exact D_k = sum_{i >= k} p_i e^{z_k - z_i} at a sample of k (the knots' float values)
    for k in [0, 1, n // 2, n - 2, n - 1, *rng.integers(0, n, 20).tolist()]:
        exact = mp.fsum(
            mp.mpf(float(p[i])) * mp.e ** (mp.mpf(float(z[k])) - mp.mpf(float(z[i])))
            for i in range(k, n)
            if p[i] > 0
        )
        err = abs(mp.mpf(float(d[k])) - exact)
        assert err <= rel * exact + n * _curves._UNDER
        exact_a = mp.fsum(mp.mpf(float(v)) for v in p[k:])
        assert abs(mp.mpf(float(a[k])) - exact_a) <= m * 2.0**-53 * exact_a


def test_hockey_stick_certified_at_huge_losses() -> None:
    # atoms at 0 and 1500 on a grid: h(e^t) for t near 1500 is computed without e^{-z}
    pld = PLD(1.0, 0, np.array([0.5, *([0.0] * 1499), 0.5 * (1 - 1e-9)]), 0.5e-9, 0.0)
    for t in (1499.5, 1499.99, 1000.0):
        exact = mp.mpf(0.5) * (1 - 1e-9) * (1 - mp.e ** (mp.mpf(t) - 1500)) + mp.mpf(0.5e-9)
        got = mp.mpf(float(pld.delta(t)))
        assert exact <= got <= exact + mp.mpf("1e-11")  # the margin is ~ u |t| of the terms
    assert math.isclose(float(pld.epsilon(0.25)), 1500 + math.log(0.5 - 0.5e-9 - 0.25 + 0.5e-9)
                        - math.log(0.5 * (1 - 1e-9)), rel_tol=1e-12)


def test_laplace_top_atom_on_a_knot_is_tight_at_tiny_delta() -> None:
    # Laplace(scale 3) x 40: the largest loss is 40/3 (every run's atom at +1/3, mass 2^-40),
    # so the exact eps(1e-20) lies in [40/3 + log(1 - 1e-20 * 2^40), 40/3] (h(e^t) >=
    # 2^-40 (1 - e^{t - 40/3}) from that atom alone, and 0 above 40/3). With a grid that
    # divides 1/3 ours falls in that bracket; on the default grid it is 13.3359 (the atom
    # straddles two knots: docs/accounting.md, remaining loose bounds)
    eps = float(PLD.laplace(3.0, grid=(1 / 3) / 3333).self_compose(40).epsilon(1e-20))
    top = mp.mpf(40) / 3
    assert top + mp.log(1 - mp.mpf("1e-20") * mp.mpf(2) ** 40) <= eps <= top + mp.mpf("1e-12")


@pytest.mark.parametrize(("eps", "rel"), [(1.0, 1e-8), (10.0, 1e-8), (30.0, 1e-2)])
def test_smallest_gdp_mu_of_randomized_response(eps: float, rel: float) -> None:
    # exact: RR(eps) <= G_mu iff mu >= 2 Phi^-1(e^eps / (1 + e^eps)) (h at x = 1 decides);
    # the error bounds of sums count non-zero terms only (RR(30) on the grid 1e-4 has 3 among
    # 600,001), so RR(30) is no longer inf. Near x = 1 both curves are 1 - 1.9e-13 and the
    # 1e-14 relative margin of Phi leaves 0.8 % (docs/accounting.md, remaining loose bounds)
    from dpsieve.accounting import smallest_gdp_mu

    exact = 2 * mp.sqrt(2) * mp.erfinv(mp.tanh(mp.mpf(eps) / 2))
    got = smallest_gdp_mu(PLD.randomized_response(eps))
    assert exact <= got <= exact * (1 + rel)
