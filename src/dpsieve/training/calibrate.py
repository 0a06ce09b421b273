"""Calibration for DP-SGD: the noise for a target, the number of steps for a budget.

Both searches bracket the answer and return the end of the bracket that was *evaluated*
and met the target with the certified accountant (:mod:`dpsieve.training.accountant`), so
the returned sigma never misses (eps, delta) and the returned step count never exceeds it,
whatever the floating-point behaviour of the bound in between.
"""

from __future__ import annotations

from dpsieve._validation import check_in_open, check_int, check_positive, fail
from dpsieve.errors import NumericalError
from dpsieve.training.accountant import DPSGDAccountant

__all__ = ["dpsgd_sigma_for", "dpsgd_steps_for"]


def _eps(
    sigma: float, rate: float, steps: int, delta: float, grid: float | None
) -> float:
    acc = DPSGDAccountant(grid=grid)
    acc.step(sigma, rate, count=steps, sampling="full_batch" if rate == 1.0 else "poisson")
    return acc.epsilon(delta)


def dpsgd_sigma_for(
    eps: float,
    delta: float,
    steps: int,
    rate: float,
    *,
    rtol: float = 1e-3,
    grid: float | None = None,
) -> float:
    """The smallest noise multiplier (to relative ``rtol``) meeting (eps, delta) at ``steps``.

    Bisection on a bracket [lo, hi] with eps(lo) > target >= eps(hi); returns ``hi``, whose
    certified eps was computed and is <= ``eps``.
    """
    o = "dpsgd_sigma_for"
    eps = check_positive("eps", eps, o)
    delta = check_in_open("delta", delta, 0.0, 1.0, o)
    steps = check_int("steps", steps, o, minimum=1)
    rate = check_in_open("rate", rate, 0.0, 1.0 + 1e-300, o) if rate != 1.0 else 1.0
    rtol = check_in_open("rtol", rtol, 0.0, 1.0, o)

    def ok(s: float) -> bool:
        return _eps(s, rate, steps, delta, grid) <= eps

    hi = 1.0
    for _ in range(40):
        if ok(hi):
            break
        hi *= 2.0
    else:
        raise NumericalError(f"{o}: no sigma up to 2^40 meets eps={eps!r}, delta={delta!r}.")
    lo = hi / 2.0
    for _ in range(60):
        if lo < 1e-3 or not ok(lo):
            break
        hi, lo = lo, lo / 2.0
    if lo < 1e-3:
        raise fail("eps", o, "a target that needs a noise multiplier >= 0.001", eps)
    while hi - lo > rtol * hi:
        mid = 0.5 * (lo + hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def dpsgd_steps_for(
    sigma: float, rate: float, eps: float, delta: float, *, grid: float | None = None
) -> int:
    """The largest number of steps whose certified eps at ``delta`` is <= ``eps`` (0 if none).

    Exponential then binary search; every count returned was evaluated and met the target.
    """
    o = "dpsgd_steps_for"
    sigma = check_positive("sigma", sigma, o)
    eps = check_positive("eps", eps, o)
    delta = check_in_open("delta", delta, 0.0, 1.0, o)

    def ok(k: int) -> bool:
        return _eps(sigma, rate, k, delta, grid) <= eps

    if not ok(1):
        return 0
    lo, hi = 1, 2
    while ok(hi):
        lo, hi = hi, hi * 2
        if hi > 1 << 30:
            raise NumericalError(f"{o}: more than 2^30 steps fit the budget.")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return lo
