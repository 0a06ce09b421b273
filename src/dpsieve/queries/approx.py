"""Plans asking for (eps, delta)-DP: Gaussian noise where it is less noisy than Laplace.

A plan whose privacy is ``ApproxDP(eps, delta)`` (JSON ``{"type": "approx", "eps": e,
"delta": d}``) is prepared twice from public values (docs/proofs/queries.md §8):

* **Gaussian** at ``rho = zcdp_rho_for(eps, delta)``, the largest float rho that this
  library certifies rho-zCDP => (eps, delta)-DP for (the better of Canonne, Kamath &
  Steinke 2020's conversion and Bun & Steinke 2016's, rounded *down*: the implied
  (eps, delta) never exceeds the request), calibrated exactly as a ``ZCDP(rho)`` plan;
* **Laplace** at a pure ``eps_L`` (the ``PureDP(eps_L)`` plan, exactly as a pure plan):
  ``eps_L = eps``, except on a budget whose currency is zCDP or RDP (zCDP, approximate
  zCDP, RDP; :func:`equal_charge`) with rho > 0, where the two are compared at equal
  charge: ``eps_L`` is the largest float with ``eps_L <= eps`` and ``eps_L^2 / 2 <= rho``
  exactly (:func:`laplace_eps_for`, rounded down). A pure eps_L-DP plan is
  (eps_L^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4; what the library charges it on those
  budgets: exactly eps_L^2/2, on an RDP budget at most ``alpha * eps_L^2 / 2`` per order),
  so either candidate costs at most rho there, and eps_L <= eps keeps Laplace
  (eps, delta)-DP. Comparing noise at pure eps would pick Laplace costing eps^2/2 (0.5 at
  eps 1) against the Gaussian's rho (0.024 at delta 1e-6): 20x the budget for a little
  less noise.

**The rule** (:data:`RULE`): Gaussian when the mean over the plan's released parts of
(Gaussian std / Laplace std)^2 is below 1, else Laplace (ties: Laplace, which charges no
delta). Each ratio is unit-free, computed from the two calibrations, which depend on the
plan, the public schema, the request and the budget's kind only: the choice reads no
data, so it costs nothing and the preview states the same choice the run makes.

**The charge, per budget kind** (:class:`~dpsieve.queries.source.BudgetKind`, public:
the filter's kind and declared parameters). Laplace: what the pure plan is charged
(``PureDP(eps_L)``, with DP key selection ``ApproxDP(eps_L, delta_sel)``). Gaussian: in
the budget's own currency where it can take it, the ZCDP(rho) plan's own charge
(``ZCDP(rho)``, with key selection ``ApproxZCDP(rho, delta_sel)``: exact, its releases
compose to rho-zCDP; a zCDP budget, an RDP budget through the curve ``alpha * rho``, an
approximate zCDP budget), else ``ApproxDP(eps, delta)``, with key selection
``ApproxDP(eps, delta + delta_sel)`` (rounded up): the releases are rho-zCDP, hence
(eps, delta)-DP, and the selection adds its delta (Lemma 5 of §5) -- the (eps, delta)
budget's (mixed filter's) currency. A candidate whose every charge the budget cannot take
is not considered (a pure or GDP budget: Laplace only; the discrete Gaussian is not known
to be mu-GDP); no candidate fits: refused before the spend naming ``privacy`` and the
budget. The rule then chooses among those left; the budget's kind is public, so the
choice still reads no data. Without a budget kind (a plan prepared outside a session)
every charge is taken as fitting, Laplace is at pure eps and the Gaussian is charged
``ApproxDP``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpsieve._rounding import next_down, next_up, round_up
from dpsieve._validation import fail
from dpsieve.accounting.events import ZCDP, ApproxDP, Neighbouring, PrivacyDescription, PureDP
from dpsieve.errors import ValidationError
from dpsieve.filters.additive import zcdp_rho_for
from dpsieve.queries.calibrate import Calibrated

if TYPE_CHECKING:
    from dpsieve.queries.plan import Query
    from dpsieve.queries.prepare import Prepared
    from dpsieve.queries.schema import Schema
    from dpsieve.queries.source import BudgetKind

__all__ = ["EQUAL_CHARGE_KINDS", "RULE", "ApproxChoice", "check_approx", "equal_charge",
           "gaussian_charge", "gaussian_rho", "laplace_eps_for", "prefer_gaussian",
           "prepare_approx", "variance_ratio"]

#: The rule choosing the noise of an (eps, delta) plan, as previews and answers state it.
RULE = ("among the candidates whose charge the budget's kind can take: gaussian at the "
        "largest rho whose zCDP implies the requested (eps, delta) when the mean over the "
        "released parts of (gaussian std / laplace std)^2 is below 1, else laplace at pure "
        "laplace_eps (ties: laplace); laplace_eps is eps, except on a zCDP, approximate zCDP "
        "or RDP budget: the largest eps_L <= eps with eps_L^2/2 <= rho, so both cost at "
        "most rho there (compared at equal charge); from public values only")

#: The budget kinds (filters' kinds) whose currency is zCDP or RDP: an (eps, delta) plan's
#: candidates are compared there at equal charge (:func:`equal_charge`).
EQUAL_CHARGE_KINDS = frozenset({"zcdp", "approx_zcdp", "rdp"})


def check_approx(p: ApproxDP, neighbouring: Neighbouring) -> ApproxDP:
    """The request checked: eps a finite float > 0, delta in [0, 1), the budget's relation.
    Every refusal names the parameter; nothing is spent."""
    if not (0 < p.eps < math.inf):
        raise fail("eps", "query", "a finite float > 0", p.eps)
    if not (0 <= p.delta < 1):
        raise fail("delta", "query", "a float in [0, 1)", p.delta)
    if p.neighbouring != neighbouring:
        raise fail("privacy", "query", f"under the budget's relation {neighbouring.value!r}",
                   p)
    return p


def gaussian_rho(p: ApproxDP) -> float:
    """The largest float rho with rho-zCDP => (eps, delta)-DP certified (rounded down;
    :func:`dpsieve.filters.additive.zcdp_rho_for`); 0.0 when delta is 0 or no rho > 0
    is certified."""
    if not p.delta > 0:
        return 0.0
    return zcdp_rho_for(p.eps, p.delta)


def equal_charge(budget: BudgetKind | None) -> bool:
    """Whether the budget's currency is zCDP or RDP: every filter it is made of (a
    session's one; a block query's blocks and quotas, joined by ``+`` in ``kind``) is of
    a kind in :data:`EQUAL_CHARGE_KINDS`. A function of the budget's kind (public)."""
    if budget is None:
        return False
    return all(k in EQUAL_CHARGE_KINDS for k in budget.kind.split("+"))


def laplace_eps_for(eps: float, rho: float) -> float:
    """The largest float ``eps_L`` with ``eps_L <= eps`` and ``eps_L^2 / 2 <= rho``, both
    checked exactly in rationals (rounded *down*: a pure eps_L-DP plan is then
    (eps_L^2/2)-zCDP, Bun & Steinke 2016 Prop. 1.4, so it costs at most rho); ``eps``
    itself when ``eps^2 / 2 <= rho``; 0.0 when rho is not > 0. ``eps`` a finite float > 0,
    ``rho`` a finite float: the square root is a float start within a few ulps, then
    stepped to the exact answer."""
    if not rho > 0:
        return 0.0
    two_rho = 2 * Fraction(rho)
    if Fraction(eps) ** 2 <= two_rho:
        return eps
    x = math.sqrt(rho) * math.sqrt(2.0)  # no overflow: rho is finite; x < eps up to ulps
    while x > 0.0 and Fraction(x) ** 2 > two_rho:
        x = next_down(x)
    while (y := next_up(x)) < eps and Fraction(y) ** 2 <= two_rho:
        x = y
    return x


def variance_ratio(lap: tuple[Calibrated, ...], gauss: tuple[Calibrated, ...]) -> float:
    """The mean over released parts of (Gaussian std / Laplace std)^2, each std in the
    answer's units (the figures the answer and the preview state; a Gaussian's is the
    upper bound sqrt(s^2))."""
    if len(lap) != len(gauss) or not lap:
        raise ValueError("the two calibrations must list the same parts")
    ratios = [_ratio(g.noise().std, a.noise().std) for a, g in zip(lap, gauss, strict=True)]
    return math.fsum(ratios) / len(ratios)


def _ratio(g: float, a: float) -> float:
    """``(g / a)^2``, total: a std below the float range (a huge eps or rho: 0.0) gives
    1.0 for 0 / 0 (a tie: Laplace) and inf for g / 0; a quotient past the float range inf
    (``x * x`` overflows to inf where ``x ** 2`` raises)."""
    if a == 0.0:
        return 1.0 if g == 0.0 else math.inf
    x = g / a
    return x * x


def prefer_gaussian(ratio: float) -> bool:
    """:data:`RULE`: Gaussian iff the mean variance ratio is below 1."""
    return ratio < 1.0


def gaussian_charge(p: ApproxDP, selection_delta: float | None) -> ApproxDP:
    """What a Gaussian-calibrated (eps, delta) plan is charged: ``ApproxDP(eps, delta)``,
    with key selection at ``selection_delta`` ``ApproxDP(eps, delta + selection_delta)``
    (the sum rounded up, at most 1)."""
    d = p.delta if selection_delta is None else min(
        1.0, round_up(Fraction(p.delta) + Fraction(selection_delta)))
    return ApproxDP(p.eps, d, p.neighbouring)


@dataclass(frozen=True, slots=True)
class ApproxChoice:
    """The noise chosen for an (eps, delta) plan and why: ``mechanism`` ("gaussian" or
    "laplace"), ``rho`` (the Gaussian candidate's, 0.0 if none), ``ratio`` (the mean
    variance ratio; None when one candidate was refused or does not fit the budget: the
    other is used), ``refused`` (the other candidate's reason), ``budget`` (the budget's
    kind, None where unknown), ``charged`` (what the chosen candidate is charged, and
    why: the budget's currency) and ``laplace_eps`` (the Laplace candidate's pure eps:
    the request's eps, or eps_L at equal charge; None if the dataclass was built without
    it). :meth:`to_dict` states a ratio past the float range (a
    Laplace std of 0.0 under a Gaussian one's: Laplace) as None too, as the service
    already did: strict JSON everywhere (the CLI printed ``Infinity``)."""

    requested: PrivacyDescription
    mechanism: str
    rho: float
    ratio: float | None
    refused: str | None = None
    budget: str | None = None
    charged: str | None = None
    laplace_eps: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested.to_dict(), "mechanism": self.mechanism,
                "rho": self.rho, "laplace_eps": self.laplace_eps, "rule": RULE,
                "variance_ratio": (self.ratio if self.ratio is not None
                                   and math.isfinite(self.ratio) else None),
                "budget": self.budget, "charged": self.charged,
                **({} if self.refused is None else {"other_refused": self.refused})}


def _attempt(query: Query, schema: Schema, nb: Neighbouring, privacy: PureDP | ZCDP
             ) -> tuple[Prepared | None, ValidationError | None]:
    """The plan at ``privacy``, or its refusal for its privacy (noise out of the samplers'
    range: a public fact); any other refusal is raised."""
    from dpsieve.queries.prepare import prepare

    try:
        return prepare(replace(query, privacy=privacy), schema, nb), None
    except ValidationError as e:
        if e.parameter != "privacy":
            raise
        return None, e


def _gaussian_charges(p: ApproxDP, gauss: Prepared, selection_delta: float | None
                      ) -> tuple[tuple[PrivacyDescription, str], ...]:
    """The Gaussian candidate's charges, tightest first, each with why it is sound: the
    ZCDP(rho) plan's own (its releases compose to rho-zCDP, the selection adds its delta
    as approximate zCDP: §5 Lemma 5), then ``ApproxDP`` (the conversion, §8)."""
    return ((gauss.charge.description, "the zCDP plan's own charge: its releases compose to "
             "rho-zCDP (with key selection delta-approximately)"),
            (gaussian_charge(p, selection_delta), "(eps, delta)-DP by the zCDP conversion "
             "(with key selection its delta added)"))


def prepare_approx(query: Query, schema: Schema, nb: Neighbouring,
                   budget: BudgetKind | None = None) -> Prepared:
    """An ``ApproxDP(eps, delta)`` plan: Laplace at pure eps (at eps_L, of equal charge,
    on a zCDP, approximate zCDP or RDP budget: :func:`laplace_eps_for`) or Gaussian at the
    largest certified rho, whichever the rule of this module prefers among the candidates
    whose charge ``budget`` can take, decided from the two calibrations and the budget's
    kind (public values only; docs/proofs/queries.md §8). A candidate refused for its privacy
    (noise out of the samplers' range) leaves the other; both refused: the Laplace
    refusal; no candidate's charge fits the budget: refused naming ``privacy`` and the
    budget. Nothing is spent either way."""
    assert isinstance(query.privacy, ApproxDP)
    p = check_approx(query.privacy, nb)
    rho = gaussian_rho(p)
    # at equal charge where the budget's currency is zCDP or RDP (rho > 0: a Gaussian to
    # compare with); eps_L > 0 then (rho > 0 gives sqrt(2 rho) > 0 in floats)
    equal = rho > 0 and equal_charge(budget)
    lap_eps = laplace_eps_for(p.eps, rho) if equal else p.eps
    lap, lap_err = _attempt(query, schema, nb, PureDP(lap_eps, nb))
    gauss, gauss_err = (_attempt(query, schema, nb, ZCDP(rho, nb)) if rho > 0
                        else (None, None))
    if lap is None and gauss is None:
        assert lap_err is not None
        raise lap_err
    sel = query.selection
    sel_delta = None if sel is None else sel.delta
    fits = (lambda _: True) if budget is None else budget.fits
    where = "" if budget is None else f" by this budget ({budget.name})"
    lap_charge: tuple[PrivacyDescription, str] | None = None
    if lap is not None and fits(lap.charge.description):
        lap_charge = (lap.charge.description, "the pure plan's own charge" + (
            " at eps_L <= eps with eps_L^2/2 <= rho (pure eps_L-DP is (eps_L^2/2)-zCDP): "
            "at most the gaussian's rho, compared at equal charge" if equal else ""))
    gauss_charge: tuple[PrivacyDescription, str] | None = None
    if gauss is not None:
        options = _gaussian_charges(p, gauss, sel_delta)
        if budget is None:  # no kind known: the (eps, delta) charge, as any budget states
            options = options[1:]
        gauss_charge = next((o for o in options if fits(o[0])), None)
    if lap_charge is None and gauss_charge is None:
        assert budget is not None
        raise _no_fit(p, budget, lap, gauss, sel_delta)
    ratio = None
    if (lap is not None and gauss is not None and lap_charge is not None
            and gauss_charge is not None):
        ratio = variance_ratio(lap.charge.parts, gauss.charge.parts)
    use_gauss = lap_charge is None or (ratio is not None and prefer_gaussian(ratio))
    refused: str | None
    if use_gauss:
        assert gauss is not None
        assert gauss_charge is not None
        chosen, (desc, why) = gauss, gauss_charge
        refused = str(lap_err) if lap_err is not None else None
        if lap is not None and lap_charge is None:
            refused = (f"laplace: its charge {lap.charge.description.to_dict()} cannot be "
                       f"admitted{where}")
    else:
        assert lap is not None
        assert lap_charge is not None
        chosen, (desc, why) = lap, lap_charge
        refused = str(gauss_err) if gauss_err is not None else None
        if gauss is not None and gauss_charge is None:
            refused = (f"gaussian: neither {gauss.charge.description.to_dict()} nor "
                       f"{gaussian_charge(p, sel_delta).to_dict()} can be admitted{where}")
    choice = ApproxChoice(p, "gaussian" if use_gauss else "laplace", rho, ratio, refused,
                          None if budget is None else budget.kind, why, lap_eps)
    return replace(chosen, query=query, charge=replace(chosen.charge, description=desc),
                   calibration=choice.to_dict())


def _no_fit(p: ApproxDP, budget: BudgetKind, lap: Prepared | None, gauss: Prepared | None,
            sel_delta: float | None) -> ValidationError:
    """The refusal of an (eps, delta) plan none of whose candidates' charges ``budget`` can
    take (before any spend), naming ``privacy``, the budget and the charges tried."""
    tried = [c.charge.description for c in (lap, gauss) if c is not None]
    if gauss is not None:
        tried.append(gaussian_charge(p, sel_delta))
    names = ", ".join(str(d.to_dict()) for d in tried)
    what = "an (eps, delta) plan" + ("" if sel_delta is None else " with DP key selection")
    return fail("privacy", "query", f"a privacy whose charge this budget ({budget.name}) "
                f"can admit: {what} would be charged one of {names}, none of which it "
                "admits however small (a delta > 0, e.g. from DP key selection, needs an "
                "(eps, delta) budget with a delta part or an approximate zCDP budget); "
                "nothing was spent", p.to_dict())
