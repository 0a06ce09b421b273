"""Budgets in plain words: eps left at a delta, the fraction used, "about N more like this".

:func:`budget_summary` reads a filter's remaining budget (and its initial one) and states

* the eps left at a delta (the target's delta for an (eps, delta) budget; ``delta`` given
  otherwise), **rounded up**: the budget left is (eps_left, delta)-DP, never less private
  than stated;
* the fraction used, 1 - eps_left / eps_total at that delta;
* how many more queries like a given one the filter admits, counted exactly by the
  filter's own decisions (:func:`dpsieve.filters.capacity.count_admitted`).

:func:`fitting_types` says which kinds of query a filter can *ever* admit (the conversions
it uses exist for them), so a query of another kind gets its own error instead of "budget
exceeded". Conversions to eps: GDP by its closed form (rounded up); zCDP rho gives
rho + 2 sqrt(rho log(1/delta)) (Bun & Steinke 2016, Prop. 1.3); RDP at order a gives
r_a + log(1 - 1/a) - log(delta a)/(a - 1) (Canonne, Kamath, Steinke 2020, Prop. 12), the
least over the orders; approximate zCDP spends its delta first.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from dpsieve._memo import Memo
from dpsieve._rounding import round_up
from dpsieve.accounting.conversions import pure_eps_of, rdp_of, zcdp_of
from dpsieve.accounting.events import GDP, ZCDP, ApproxDP, ApproxZCDP, PureDP
from dpsieve.filters._queries import query_to_dict, symmetric_atoms
from dpsieve.filters.base import BudgetLeft, PrivacyFilter
from dpsieve.filters.capacity import DEFAULT_CAP, Capacity, count_admitted
from dpsieve.filters.charge import Charge, PrivacyCharge
from dpsieve.filters.mixed import MixedFilter

__all__ = [
    "DISPLAY_DELTA",
    "BudgetSummary",
    "budget_summary",
    "describe_query",
    "display_delta",
    "eps_of",
    "epsilon_left",
    "fitting_types",
    "knows_fits",
    "query_fits",
]

#: The delta at which budgets without one of their own (GDP, zCDP, RDP) are stated.
DISPLAY_DELTA = 1e-6
_WIDEN = 1.0 + 1e-12  # upward relative margin on a float eps that is reported


def _num(x: Any) -> float:
    return float(Fraction(x)) if isinstance(x, str) else float(x)


def _gdp_eps(mu: float, delta: float) -> float:
    from dpsieve.accounting.gdp import gdp_epsilon

    return 0.0 if mu <= 0 else gdp_epsilon(mu, delta)


def _zcdp_eps(rho: float, delta: float) -> float:
    if rho <= 0:
        return 0.0
    return (rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))) * _WIDEN


def _rdp_eps(orders: list[Any], values: list[Any], delta: float) -> float:
    best = math.inf
    for a, r in zip(orders, values, strict=True):
        a, r = float(a), max(0.0, _num(r))
        if a > 1:
            best = min(best, r + math.log1p(-1.0 / a) - math.log(delta * a) / (a - 1.0))
    return max(0.0, best) * _WIDEN


def _rdp_any_eps(orders: list[Any], values: list[Any], delta: float) -> float:
    """What an any-order RDP budget left represents at ``delta``: the largest over the
    orders still holding of left_a + log(n / delta) / (a - 1) (the inverse of
    AnyOrderRDPFilter.for_target), 0 when none holds."""
    n = len(orders)
    best = 0.0
    for a, r in zip(orders, values, strict=True):
        a, r = float(a), _num(r)
        if a > 1 and r > 0:
            best = max(best, r + (math.log(n) - math.log(delta)) / (a - 1.0))
    return best * _WIDEN


def _mixed_eps(rem: BudgetLeft, delta: float) -> float:
    from dpsieve.filters._mixed_math import epsilon_upper

    if rem.get("split") == "undecided":
        return float(rem["eps"])
    d = rem.get("delta_part") or 0.0
    if d:  # R_a (+) G_mu (+) R_{0,d} at delta: R_a (+) G_mu at (delta - d)/(1 - d)
        from dpsieve.filters.mixed import inner_delta

        din = inner_delta(delta, Fraction(d)) if d <= delta else 0.0
        if din <= 0:
            return math.inf if float(rem["mu"]) > 0 or d > delta else float(rem["pure_eps"])
        delta = din
    return epsilon_upper(Fraction(rem["pure_exact"]), float(rem["mu"]), delta)


def _approx_gdp_eps(rem: BudgetLeft, delta: float) -> float | None:
    d = float(rem["delta"])
    if d >= delta:
        return None  # the delta left alone is at or above the display delta
    return _gdp_eps(float(rem["mu"]), (delta - d) / (1.0 - d))


def _approx_zcdp_eps(rem: BudgetLeft, delta: float) -> float | None:
    d = float(rem["delta"])
    if d >= delta:
        return None
    return _zcdp_eps(max(0.0, float(rem["rho"])), delta - d)


_EPS: dict[str, Callable[[BudgetLeft, float], float | None]] = {
    "mixed": _mixed_eps,
    "gdp_residue": lambda r, d: _gdp_eps(float(r["mu"]), d),
    "gdp_naive": lambda r, d: _gdp_eps(float(r["mu"]), d),
    "pure_dp": lambda r, d: max(0.0, round_up(Fraction(r["exact"])) if "exact" in r
                                else float(r["eps"])),
    "zcdp": lambda r, d: _zcdp_eps(max(0.0, _num(r.get("exact", r["rho"]))), d),
    "approx_zcdp": _approx_zcdp_eps,
    "rdp": lambda r, d: _rdp_eps(list(r["orders"]), list(r["rdp"]), d),
    "rdp_any": lambda r, d: _rdp_any_eps(list(r["orders"]), list(r["rdp"]), d),
    "approx_gdp_residue": _approx_gdp_eps,
}


def _gdp_like(q: PrivacyCharge) -> bool:
    sa = symmetric_atoms(q)
    return sa is not None and sa[0].p_inf == 0.0


_FITS: dict[str, Callable[[Any], bool]] = {
    "mixed": lambda q: pure_eps_of(q) is not None or _gdp_like(q),
    "gdp_residue": _gdp_like,
    "gdp_naive": _gdp_like,
    "natural_gdp": lambda q: isinstance(q, GDP),
    "pure_dp": lambda q: pure_eps_of(q) is not None,
    "zcdp": lambda q: (z := zcdp_of(q)) is not None and z[1] == 0.0,
    "approx_zcdp": lambda q: zcdp_of(q) is not None,
    "approx_gdp_residue": lambda q: symmetric_atoms(q) is not None,
}

#: One example of each kind of privacy a query can state, for :func:`fitting_types`.
_KINDS: tuple[tuple[str, Any], ...] = (
    ("pure", PureDP(0.1)),
    ("gdp", GDP(0.1)),
    ("zcdp", ZCDP(0.01)),
    ("approx", ApproxDP(0.1, 1e-9)),
    ("approx_zcdp", ApproxZCDP(0.01, 1e-9)),
)


def query_fits(flt: PrivacyFilter, query: PrivacyCharge) -> bool:
    """Whether ``flt`` can ever admit a query of this kind (however small).

    False means no budget left of this filter's kind could pay for it: the conversion the
    filter charges by does not exist for the query (e.g. zCDP against a GDP budget). Unknown
    filter kinds answer True (the filter's own decision then speaks).
    """
    rule = _FITS.get(getattr(flt, "kind", ""))
    if isinstance(flt, MixedFilter) and isinstance(query, ApproxDP) and query.delta > 0:
        split = flt.split()  # a delta part pays it: undecided, or a split that has one
        return split is None or "dpart" in split
    if rule is not None:
        return bool(rule(query))
    if getattr(flt, "kind", "") == "rdp":
        orders = flt.remaining()["orders"]
        return all(rdp_of(query, float(a)) is not None for a in orders)
    return True


def knows_fits(flt: PrivacyFilter) -> bool:
    """Whether :func:`query_fits` knows ``flt``'s kind (else it answers True for every
    query and the filter's own decision speaks)."""
    return getattr(flt, "kind", "") in _FITS or getattr(flt, "kind", "") == "rdp"


def fitting_types(flt: PrivacyFilter) -> list[str]:
    """The kinds of privacy a query may state to be admitted by ``flt`` (see :func:`query_fits`)."""
    nb = getattr(flt, "neighbouring", None)
    out = []
    for name, example in _KINDS:
        q = example if nb is None else type(example)(*_args(example), nb)
        if query_fits(flt, q):
            out.append(name)
    return out


def _args(q: Any) -> tuple[Any, ...]:
    if isinstance(q, PureDP):
        return (q.eps,)
    if isinstance(q, GDP):
        return (q.mu,)
    if isinstance(q, ZCDP):
        return (q.rho,)
    if isinstance(q, ApproxDP):
        return (q.eps, q.delta)
    return (q.rho, q.delta)


def display_delta(kind: str, remaining: BudgetLeft, delta: float | None = None) -> float:
    """The delta a budget's eps is stated at: the given one, a mixed budget's target
    delta, 0 for a pure budget, else :data:`DISPLAY_DELTA`."""
    if kind == "pure_dp":
        return 0.0
    if delta is not None:
        return delta
    if kind == "mixed" and "delta" in remaining:
        return float(remaining["delta"])
    return DISPLAY_DELTA


def eps_of(kind: str, remaining: BudgetLeft, delta: float) -> float | None:
    """eps at ``delta`` (rounded up) of a budget given by its filter kind and the budget
    left (a filter's ``remaining()``, a decision's, or a stored one read at the ledger's
    edge), or None where no single eps states it."""
    fn = _EPS.get(kind)
    if fn is None:
        return None
    try:
        e = fn(remaining, delta if delta > 0 else DISPLAY_DELTA)
    except (KeyError, TypeError, ValueError, ZeroDivisionError):
        return None
    return None if e is None or not math.isfinite(e) else e


def epsilon_left(flt: PrivacyFilter, delta: float | None = None) -> tuple[float | None, float]:
    """(eps at delta of the budget left, rounded up, or None; the delta used)."""
    rem = flt.remaining()
    kind = str(getattr(flt, "kind", ""))
    d = display_delta(kind, rem, delta)
    return eps_of(kind, rem, d), d


#: eps at a delta of budgets as created, by their exact state (``to_json()``) and the delta:
#: the initial state never changes, and every summary states its total again.
_TOTALS: Memo[float | None] = Memo(256)


def _eps_total(initial: PrivacyFilter, delta: float | None) -> float | None:
    """``epsilon_left(initial, delta)[0]``, remembered by the state's text (a pure function
    of it: the filter is rebuilt from that text alone)."""
    to_json = getattr(initial, "to_json", None)
    text = to_json() if callable(to_json) else None
    if not isinstance(text, str) or len(text) > 65536:
        return epsilon_left(initial, delta)[0]
    return _TOTALS.get((text, delta), lambda: epsilon_left(initial, delta)[0])


def describe_query(q: Charge) -> str:
    """A query's privacy in a few words, e.g. "pure eps 0.5" or "GDP mu 0.3"."""
    d = query_to_dict(q)
    t = d.get("type")
    if t == "pure":
        return f"pure eps {d['eps']:.4g}"
    if t == "approx":
        return f"eps {d['eps']:.4g}, delta {d['delta']:.3g}"
    if t == "gdp":
        return f"GDP mu {d['mu']:.4g}"
    if t == "zcdp":
        return f"zCDP rho {d['rho']:.4g}"
    if t == "approx_zcdp":
        return f"zCDP rho {d['rho']:.4g}, delta {d['delta']:.3g}"
    if t == "rdp":
        return "an RDP curve"
    e = pure_eps_of(q)
    if e is not None:
        return f"pure eps {e:.4g}"
    sa = symmetric_atoms(q)
    if sa is not None and sa[0].p_inf == 0.0 and len(sa[0].z) == 1 and sa[0].z[0] == 0.0:
        return f"Gaussian noise, GDP mu {sa[1]:.4g}"  # a PLD that is exactly G_mu
    return "a composed query (PLD)"


@dataclass(frozen=True, slots=True)
class BudgetSummary:
    """What is left of a budget, in numbers and in words (see module docstring)."""

    kind: str
    delta: float
    eps_total: float | None
    eps_left: float | None
    fraction_used: float | None
    more: Capacity | None
    like: str | None
    text: str

    def __str__(self) -> str:
        return self.text  # print(session.budget()) reads as a sentence

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind, "delta": self.delta, "eps_total": self.eps_total,
            "eps_left": self.eps_left, "fraction_used": self.fraction_used,
            "more": None if self.more is None else self.more.to_dict(),
            "like": self.like, "text": self.text,
        }


def _held_as(flt: PrivacyFilter, delta: float) -> str | None:
    """For a mixed budget, in words first and parameters after: how what is left is held
    (a pure part paying pure-DP queries eps for eps, a Gaussian part paying the others, a
    delta part paying the delta of queries that have one); None for other budgets."""
    if getattr(flt, "kind", "") != "mixed":
        return None
    rem = flt.remaining()
    if rem.get("split") == "undecided":
        return ("how it is split between pure-DP queries and the others is chosen at the "
                "first query")
    mu = float(rem["mu"])
    at = f" at delta {delta:.3g}" if delta > 0 else ""
    worth = _gdp_eps(mu, delta) if mu > 0 and delta > 0 else 0.0
    gauss = (f"a Gaussian part for the others, worth eps "
             f"{f'{worth:.3g}' if worth >= 1e-3 else 'under 0.001'}{at} "
             f"(GDP mu {mu:.4g})" if mu > 0 and delta > 0 else
             f"a Gaussian part for the others (GDP mu {mu:.4g})")
    out = (f"held as eps {float(rem['pure_eps']):.4g} for pure-DP queries, paid eps for eps, "
           f"and {gauss}")
    part = rem.get("delta_part")
    if part is not None:
        out += (f", with delta {float(part):.3g} kept for the delta of queries that have one"
                if part > 0 else ", with no delta left for queries that have one")
        out += " (e.g. DP key selection)"
    return out


def _fmt_count(c: Capacity) -> str:
    return f"at least {c.count:,}" if c.at_least else f"{c.count:,}"


def budget_summary(
    current: PrivacyFilter,
    initial: PrivacyFilter | None = None,
    *,
    delta: float | None = None,
    like: PrivacyCharge | None = None,
    cap: int = DEFAULT_CAP,
) -> BudgetSummary:
    """The budget of ``current`` in plain words (see module docstring).

    ``initial`` is the filter as created (for the total and the fraction used); ``like`` a
    query for "about N more queries like this one" (None: no count).
    """
    left, d = epsilon_left(current, delta)
    total = _eps_total(initial, d if d > 0 else None) if initial is not None else None
    used = None
    if left is not None and total is not None and total > 0:
        used = min(1.0, max(0.0, 1.0 - left / total))
    more = None if like is None else count_admitted(current, like, cap=cap)
    like_s = None if like is None else describe_query(like)
    at = "" if d == 0 else f" at delta {d:.3g}"
    parts = []
    if left is None:
        parts.append("budget left: see 'remaining' (no single eps states it)")
    elif total is not None:
        parts.append(f"eps {left:.4g} of {total:.4g} left{at}, {100 * (used or 0):.0f}% used")
    else:
        parts.append(f"eps {left:.4g} left{at}")
    if more is not None and like_s is not None:
        n = _fmt_count(more)
        parts.append(f"about {n} more {'query' if more.count == 1 else 'queries'} "
                     f"like this one ({like_s})" if not more.at_least else
                     f"{n} more queries like this one ({like_s})")
    held = _held_as(current, d)
    if held is not None:
        parts.append(held)
    return BudgetSummary(getattr(current, "kind", ""), d, total, left, used, more, like_s,
                         "; ".join(parts))
