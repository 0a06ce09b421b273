"""Plans asking for (eps, delta)-DP: Gaussian noise where it is less noisy than Laplace.

A plan whose privacy is ``ApproxDP(eps, delta)`` (JSON ``{"type": "approx", "eps": e,
"delta": d}``) is prepared twice from public values (docs/proofs/queries.md §8):

* **Laplace** at pure ``eps`` (the ``PureDP(eps)`` plan, exactly as a pure plan);
* **Gaussian** at ``rho = zcdp_rho_for(eps, delta)``, the largest float rho that this
  library certifies rho-zCDP => (eps, delta)-DP for (the better of Canonne, Kamath &
  Steinke 2020's conversion and Bun & Steinke 2016's, rounded *down*: the implied
  (eps, delta) never exceeds the request), calibrated exactly as a ``ZCDP(rho)`` plan.

**The rule** (:data:`RULE`): Gaussian when the mean over the plan's released parts of
(Gaussian std / Laplace std)^2 is below 1, else Laplace (ties: Laplace, which charges no
delta). Each ratio is unit-free, computed from the two calibrations, which depend on the
plan, the public schema and the request only: the choice reads no data, so it costs
nothing and the preview states the same choice the run makes.

**The charge.** Laplace: what the pure plan is charged (``PureDP(eps)``, with DP key
selection ``ApproxDP(eps, delta_sel)``). Gaussian: ``ApproxDP(eps, delta)``, with key
selection ``ApproxDP(eps, delta + delta_sel)`` (rounded up): the releases are rho-zCDP,
hence (eps, delta)-DP, and the selection adds its delta (Lemma 5 of §5).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from dpsieve._rounding import round_up
from dpsieve._validation import fail
from dpsieve.accounting.events import ZCDP, ApproxDP, Neighbouring, PrivacyDescription, PureDP
from dpsieve.errors import ValidationError
from dpsieve.filters.additive import zcdp_rho_for
from dpsieve.queries.calibrate import Calibrated

if TYPE_CHECKING:
    from dpsieve.queries.plan import Query
    from dpsieve.queries.prepare import Prepared
    from dpsieve.queries.schema import Schema

__all__ = ["RULE", "ApproxChoice", "check_approx", "gaussian_charge", "gaussian_rho",
           "prefer_gaussian", "prepare_approx", "variance_ratio"]

#: The rule choosing the noise of an (eps, delta) plan, as previews and answers state it.
RULE = ("gaussian at the largest rho whose zCDP implies the requested (eps, delta) when "
        "the mean over the released parts of (gaussian std / laplace std)^2 is below 1, "
        "else laplace at pure eps (ties: laplace); from public values only")


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
    variance ratio; None when one candidate was refused: the other is used), ``refused``
    (the refused candidate's reason). :meth:`to_dict` states a ratio past the float range
    (a Laplace std of 0.0 under a Gaussian one's: Laplace) as None too, as the service
    already did: strict JSON everywhere (the CLI printed ``Infinity``)."""

    requested: PrivacyDescription
    mechanism: str
    rho: float
    ratio: float | None
    refused: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"requested": self.requested.to_dict(), "mechanism": self.mechanism,
                "rho": self.rho, "rule": RULE,
                "variance_ratio": (self.ratio if self.ratio is not None
                                   and math.isfinite(self.ratio) else None),
                **({} if self.refused is None else {"other_refused": self.refused})}


def prepare_approx(query: Query, schema: Schema, nb: Neighbouring) -> Prepared:
    """An ``ApproxDP(eps, delta)`` plan: Laplace at pure eps or Gaussian at the largest
    certified rho, whichever the rule of this module prefers, decided
    from the two calibrations (public values only; docs/proofs/queries.md §8). A
    candidate refused for its privacy (noise out of the samplers' range) leaves the other;
    both refused: the Laplace refusal."""
    from dpsieve.queries.prepare import prepare

    assert isinstance(query.privacy, ApproxDP)
    p = check_approx(query.privacy, nb)
    lap: Prepared | None = None
    gauss: Prepared | None = None
    lap_err: ValidationError | None = None
    gauss_err: ValidationError | None = None
    try:
        lap = prepare(replace(query, privacy=PureDP(p.eps, nb)), schema, nb)
    except ValidationError as e:
        if e.parameter != "privacy":
            raise
        lap_err = e
    rho = gaussian_rho(p)
    if rho > 0:
        try:
            gauss = prepare(replace(query, privacy=ZCDP(rho, nb)), schema, nb)
        except ValidationError as e:
            if e.parameter != "privacy":
                raise
            gauss_err = e
    if lap is None and gauss is None:
        assert lap_err is not None
        raise lap_err
    ratio = None if lap is None or gauss is None else variance_ratio(lap.charge.parts,
                                                                     gauss.charge.parts)
    use_gauss = lap is None or (ratio is not None and prefer_gaussian(ratio))
    if use_gauss:
        assert gauss is not None
        chosen = gauss
        sel = query.selection
        desc: PrivacyDescription = gaussian_charge(p, None if sel is None else sel.delta)
        refused = None if lap_err is None else str(lap_err)
    else:
        assert lap is not None
        chosen = lap
        desc = chosen.charge.description
        refused = None if gauss_err is None else str(gauss_err)
    choice = ApproxChoice(p, "gaussian" if use_gauss else "laplace", rho, ratio, refused)
    return replace(chosen, query=query, charge=replace(chosen.charge, description=desc),
                   calibration=choice.to_dict())
