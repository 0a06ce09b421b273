"""How much of a budget is used, and how much a charge would use: the scheduler's currency.

A block's (or a quota's) budget is a privacy filter; what the scheduler and the unlocking
gate compare is a **fraction of the budget as created**, in [0, 1], computed from the
filter's stored state and its initial state only (both public: functions of the charges
admitted, never of the data):

=====================  =============================================================
filter kind            fraction used
=====================  =============================================================
``pure_dp``, ``zcdp``  spent / budget (exact: eps, rho add up)
``gdp_naive``          spent mu^2 / mu^2
``gdp_residue``        1 - mu'^2 / mu^2 (mu' the residue's; Gaussian charges add in mu^2)
``approx_zcdp``        the larger of spent rho / rho and spent delta / delta
``rdp``                the largest spent / budget over the orders
``rdp_any``            the smallest spent / budget over the orders (capped at 1): the
                       block is spent when every order is
any other              1 - eps_left / eps_total at the budget's delta
                       (:func:`dpsieve.filters.summary.epsilon_left`)
=====================  =============================================================

The first five rows are exact fractions and additive for the charges those filters take
exactly (pure eps on ``pure_dp``, rho on ``zcdp``, GDP on the GDP filters); ``rdp_any``'s
is exact but a one-number summary of a budget with one fraction per order (the
scheduler can take those per order: :mod:`dpsieve.blocks.scheduler`, rule ``"any"``).
The last is a monotone summary of budgets that have no additive currency (mixed
(eps, delta) budgets).
None of this decides privacy: the filter alone admits or refuses a charge; the fraction
only ever refuses *more* (unlocking) or orders requests (scheduling).

:func:`demand` is a charge's cost as a fraction of a fresh budget, measured by the
filter's own decision on a copy of the initial budget (exact for the additive kinds;
for the others what the charge costs a full budget, which the scheduler uses only to
order and to pre-select requests -- the ledger admits by the real filter).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from fractions import Fraction
from typing import Any

from dpsieve._memo import Memo
from dpsieve.filters.base import PrivacyFilter
from dpsieve.filters.charge import Charge

__all__ = ["demand", "used_fraction", "used_fraction_of_states"]

_ONE = Fraction(1)
_ZERO = Fraction(0)


def _clamp(x: Fraction) -> Fraction:
    return _ZERO if x < 0 else _ONE if x > 1 else x


def _ratio(num: Any, den: Any) -> Fraction:
    d = Fraction(den)
    return _ONE if d <= 0 else _clamp(Fraction(num) / d)


def _state(text: str) -> tuple[str, dict[str, Any]]:
    d = json.loads(text)
    return str(d.get("kind", "")), dict(d.get("state") or {})


def used_fraction_of_states(state: str, initial: str,
                            loads: Callable[[str], PrivacyFilter] | None = None) -> Fraction:
    """The fraction of the budget used (module docstring) from the stored ``state`` and
    ``initial`` texts (``to_json()``); ``loads`` rebuilds a filter for the kinds measured
    by eps (default :func:`dpsieve.filters.filter_from_json`)."""
    kind, s = _state(state)
    if kind in ("pure_dp", "zcdp"):
        return _ratio(s["spent"], s["budget"])
    if kind == "gdp_naive":
        return _ratio(s["spent2"], s["mu2"])
    if kind == "gdp_residue":
        _, s0 = _state(initial)
        return _clamp(_ONE - _ratio(s["mu2"], s0["mu2"]))
    if kind == "approx_zcdp":
        return max(_ratio(s["spent_rho"], s["rho"]), _ratio(s["spent_delta"], s["delta"]))
    if kind == "rdp":
        return max((_ratio(a, b) for a, b in zip(s["spent"], s["budgets"], strict=True)),
                   default=_ZERO)
    if kind == "rdp_any":
        return min((_ratio(a, b) for a, b in zip(s["spent"], s["budgets"], strict=True)),
                   default=_ONE)
    if loads is None:
        from dpsieve.filters import filter_from_json

        loads = filter_from_json
    load = loads
    return _by_eps(load(state), _INITIALS.get(initial, lambda: load(initial)))


#: eps at a delta of budgets as created, by their exact text and the delta
_TOTALS: Memo[float | None] = Memo(256)
#: initial filters read by the eps measure (read only), by their exact text
_INITIALS: Memo[PrivacyFilter] = Memo(64)


def _by_eps(current: PrivacyFilter, initial: PrivacyFilter) -> Fraction:
    from dpsieve.filters.summary import epsilon_left

    left, delta = epsilon_left(current)
    total = _TOTALS.get((initial.to_json(), delta),
                        lambda: epsilon_left(initial, delta)[0])
    if left is None or total is None or not total > 0:
        return _ZERO
    return _clamp(_ONE - Fraction(left) / Fraction(total))


def used_fraction(current: PrivacyFilter, initial: PrivacyFilter) -> Fraction:
    """The fraction of the budget ``initial`` that ``current`` (the same budget after
    its admitted charges) has used, in [0, 1] (module docstring)."""
    state = current.to_json()
    if _state(state)[0] in _ADDITIVE:
        return used_fraction_of_states(state, initial.to_json())
    return _by_eps(current, initial)


#: the kinds measured exactly (module docstring); the others by eps
_ADDITIVE = ("pure_dp", "zcdp", "gdp_naive", "gdp_residue", "approx_zcdp", "rdp", "rdp_any")


_DEMANDS: Memo[Fraction | None] = Memo(4096)


def demand(charge: Charge, initial: PrivacyFilter, *, key: str | None = None
           ) -> Fraction | None:
    """The fraction of the fresh budget ``initial`` that ``charge`` uses (None: a fresh
    budget refuses it: it can never run), by the filter's own decision on a copy.
    ``key`` (a canonical text of the charge) memoises the answer per budget text."""
    text = initial.to_json()

    def compute() -> Fraction | None:
        from dpsieve.filters import filter_from_json

        flt = filter_from_json(text)
        if not flt.try_spend(charge).admitted:
            return None
        return used_fraction_of_states(flt.to_json(), text)
    if key is None:
        return compute()
    return _DEMANDS.get((key, text), compute)
