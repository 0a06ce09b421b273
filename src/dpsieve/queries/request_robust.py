"""Propose-Filter-Release mean and median (:mod:`dpsieve.robust`) as a request of the
query layer: :class:`RobustRequest`, spent as ApproxDP under replace-one and charged up
front."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsieve._validation import check_positive, fail
from dpsieve.accounting.events import ApproxDP, Neighbouring, PrivacyDescription
from dpsieve.queries.schema import ColumnType
from dpsieve.queries.source import Ready, Source, row_level

__all__ = ["ROBUST_EPS_MARGIN", "ROBUST_KINDS", "RobustRequest", "robust_privacy"]

#: Upward relative margin on a robust estimator's eps, covering its own ulp rounding.
ROBUST_EPS_MARGIN = 1e-12
ROBUST_KINDS = ("robust_mean", "robust_median")
#: Column types a robust estimator reads (booleans as 0/1).
_NUMERIC = tuple(c.value for c in ColumnType if c.numeric)


def robust_privacy(p: PrivacyDescription, nb: Neighbouring) -> ApproxDP:
    """A robust query's privacy: ApproxDP(eps > 0, 0 < delta < 1) under replace-one, the
    estimators' relation, which must be the budget's."""
    if not isinstance(p, ApproxDP) or not (p.eps > 0) or not (0 < p.delta < 1):
        raise fail("privacy", "robust query", "ApproxDP(eps > 0, 0 < delta < 1)", p)
    if nb != Neighbouring.REPLACE_ONE or p.neighbouring != nb:
        raise fail("privacy", "robust query", "under replace-one neighbours (the robust "
                   "estimators' relation); open the session with a replace-one budget", p)
    return p


@dataclass(frozen=True, slots=True)
class RobustRequest:
    """The PFR mean or median (``kind``) of ``column``, values clipped to [-bound, bound],
    for ``privacy``; ``public`` is the request the ledger records (as it was given)."""

    kind: str
    privacy: PrivacyDescription
    column: str
    bound: float
    public: dict[str, Any]

    @classmethod
    def from_json(cls, spec: Mapping[str, Any], privacy: PrivacyDescription
                  ) -> RobustRequest:
        """The request from its JSON (``spec``; its privacy already mapped: ``privacy``)."""
        t = str(spec["type"])
        col = spec.get("column")
        if not isinstance(col, str) or not col:
            raise fail("column", t, "a column name", col)
        bound = check_positive("bound", spec.get("bound"), t)
        return cls(t, privacy, col, bound, {**spec, "privacy": privacy.to_dict()})

    def prepare(self, source: Source) -> Ready:
        """Charged ApproxDP(eps (1 + ROBUST_EPS_MARGIN), delta) under replace-one up front,
        at least what the estimator states for any run (a refusal included). Before the
        spend, the estimator's public plan is built from the row count ``n`` (public under
        replace-one; :func:`dpsieve.robust.mean_plan`, :func:`~dpsieve.robust.median.
        median_plan`): every parameter check runs there, a public refusal (too few rows)
        is refused uncharged, and a plan stating more than the charge is refused. The
        released value is still withheld (NumericalError) if a run ever states more.
        Missing values become 0 so the row count never changes."""
        from dpsieve.errors import NumericalError
        from dpsieve.robust.mean import mean_plan
        from dpsieve.robust.median import median_plan
        from dpsieve.robust.results import Refusal

        t, col = self.kind, self.column
        row_level(source, t)
        p = robust_privacy(self.privacy, source.neighbouring)
        if col not in source.columns():
            raise fail("column", t, "a column of the data set", col)
        kind = source.column_kind(col)
        if kind not in _NUMERIC:
            raise fail("column", t, f"a column of kind {' or '.join(_NUMERIC)} (the public "
                       f"schema says {col!r} is {kind})", col)
        eps_charged = p.eps * (1 + ROBUST_EPS_MARGIN)
        if not math.isfinite(eps_charged):
            raise fail("eps", t, "a finite float after the charge's margin (1 + 1e-12)", p.eps)
        charged = ApproxDP(eps_charged, p.delta, Neighbouring.REPLACE_ONE)
        n = source.row_count()
        planned: Any = mean_plan(n, p.eps, p.delta, bound=self.bound) if t == "robust_mean" \
            else median_plan(n, p.eps, p.delta, bound=self.bound)
        if isinstance(planned, Refusal):
            raise fail("n", t, f"enough rows for the estimator ({planned.reason}; decided "
                       "from public values, nothing charged)", n)
        stated = planned[0].privacy if isinstance(planned, tuple) else planned
        if not (stated.eps <= charged.eps and stated.delta <= charged.delta):
            raise NumericalError(f"{t} would state {stated!r}, above the charge "
                                 f"{charged!r}; refused before any spend.")
        rng = source.rng

        def run() -> dict[str, Any]:
            return self._answer(source.frame(), p, charged, rng)
        def figures() -> dict[str, Any]:
            return {"noise": None, "noise_note": (
                f"{t}'s noise is scaled to a private estimate of the data's spread (the "
                "propose-test-release steps), so no figure is stated before it runs; the "
                "answer carries its noise")}
        return Ready(charged, p, run, figures)

    def _answer(self, df: Any, p: ApproxDP, charged: ApproxDP,
                rng: np.random.Generator | None) -> dict[str, Any]:
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        from dpsieve import robust
        from dpsieve.errors import NumericalError

        t = self.kind
        v = pd.to_numeric(df[self.column], errors="coerce").to_numpy(dtype=np.float64)
        v = np.where(np.isnan(v), 0.0, v)
        est = robust.pfr_mean if t == "robust_mean" else robust.pfr_median
        out = est(v, p.eps, p.delta, bound=self.bound, rng=rng)
        stated = out.privacy
        s_delta = stated.delta if isinstance(stated, ApproxDP) else 0.0
        if not (stated.eps <= charged.eps and s_delta <= charged.delta):
            raise NumericalError(f"{t} stated {stated!r}, above the charge {charged!r}; "
                                 "the answer is withheld.")
        d = out.to_dict()
        value = None if d["refused"] else d["value"]
        return {"value": value, "noise": {"mechanism": f"pfr_{t[7:]}", **{
            k: v for k, v in d.items() if k != "value"}}}
