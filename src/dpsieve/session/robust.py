"""Propose-Filter-Release mean and median (:mod:`dpsieve.robust`) inside a session: the
privacy they are spent as and their plan, charged up front (:func:`robust_plan`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpsieve._validation import check_positive, fail
from dpsieve.accounting.events import ApproxDP, Neighbouring, PrivacyDescription
from dpsieve.errors import UnsupportedError

__all__ = ["ROBUST_EPS_MARGIN", "robust_plan", "robust_privacy"]

#: A pandas DataFrame (pandas is imported lazily).
Frame = Any
#: Upward relative margin on a robust estimator's eps, covering its own ulp rounding.
ROBUST_EPS_MARGIN = 1e-12


def robust_privacy(p: PrivacyDescription, nb: Neighbouring) -> PrivacyDescription:
    """A robust query's privacy: ApproxDP(eps > 0, 0 < delta < 1) under replace-one, the
    estimators' relation, which must be the budget's."""
    if not isinstance(p, ApproxDP) or not (p.eps > 0) or not (0 < p.delta < 1):
        raise fail("privacy", "robust query", "ApproxDP(eps > 0, 0 < delta < 1)", p)
    if nb != Neighbouring.REPLACE_ONE or p.neighbouring != nb:
        raise fail("privacy", "robust query", "under replace-one neighbours (the robust "
                   "estimators' relation); open the session with a replace-one budget", p)
    return p


def robust_plan(spec: dict[str, Any], p: PrivacyDescription, col: str,
                row_count: Callable[[], int], rng: np.random.Generator | None
                ) -> tuple[Any, Callable[[Frame], tuple[Any, dict[str, Any]]]]:
    """Propose-Filter-Release mean/median (:mod:`dpsieve.robust`), charged up front.

    The charge is ApproxDP(eps (1 + ROBUST_EPS_MARGIN), delta) under replace-one, at
    least what the estimator states for any run (a refusal included). Before the
    spend, the estimator's public plan is built from the row count ``n`` (public under
    replace-one; :func:`dpsieve.robust.mean_plan`, :func:`~dpsieve.robust.median.
    median_plan`): every parameter check runs there, a public refusal (too few rows)
    is refused uncharged, and a plan stating more than the charge is refused. The
    released value is still withheld (NumericalError) if a run ever states more.
    Missing values become 0 so the row count never changes.
    """
    from dpsieve.errors import NumericalError
    from dpsieve.robust.mean import mean_plan
    from dpsieve.robust.median import median_plan
    from dpsieve.robust.results import Refusal

    if not isinstance(p, ApproxDP):
        raise UnsupportedError(f"robust statistics are charged ApproxDP, not {p!r}")
    t = spec["type"]
    bound = check_positive("bound", spec.get("bound"), t)
    eps_charged = p.eps * (1 + ROBUST_EPS_MARGIN)
    if not math.isfinite(eps_charged):
        raise fail("eps", t, "a finite float after the charge's margin (1 + 1e-12)", p.eps)
    charged = ApproxDP(eps_charged, p.delta, Neighbouring.REPLACE_ONE)
    n = row_count()
    planned: Any = mean_plan(n, p.eps, p.delta, bound=bound) if t == "robust_mean" \
        else median_plan(n, p.eps, p.delta, bound=bound)
    if isinstance(planned, Refusal):
        raise fail("n", t, f"enough rows for the estimator ({planned.reason}; decided "
                   "from public values, nothing charged)", n)
    stated = planned[0].privacy if isinstance(planned, tuple) else planned
    if not (stated.eps <= charged.eps and stated.delta <= charged.delta):
        raise NumericalError(f"{t} would state {stated!r}, above the charge "
                             f"{charged!r}; refused before any spend.")

    def run(df: Frame) -> tuple[Any, dict[str, Any]]:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        from dpsieve import robust

        v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
        v = np.where(np.isnan(v), 0.0, v)
        est = robust.pfr_mean if t == "robust_mean" else robust.pfr_median
        out = est(v, p.eps, p.delta, bound=bound, rng=rng)
        stated = out.privacy
        s_delta = stated.delta if isinstance(stated, ApproxDP) else 0.0
        if not (stated.eps <= charged.eps and s_delta <= charged.delta):
            raise NumericalError(f"{t} stated {stated!r}, above the charge {charged!r}; "
                                 "the answer is withheld.")
        d = out.to_dict()
        value = None if d["refused"] else d["value"]
        return value, {"mechanism": f"pfr_{t[7:]}", **{k: v for k, v in d.items()
                                                        if k != "value"}}
    return charged, run
