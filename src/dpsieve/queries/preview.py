"""What a prepared query will cost and how noisy it will be, before anything is spent.

:func:`preview` reads only the :class:`~dpsieve.queries.prepare.Prepared` plan -- computed
by :func:`~dpsieve.queries.prepare.prepare` from the plan and the public schema -- so it
is free: no data is read, nothing is charged or logged. It states the charge, each
released number's noise in the answer's units (standard deviation and the half-width of
a 95 % interval: the same figures the answer will carry in ``answer.noise``), what each
interval will hold, and for DP key selection its construction, threshold and the units a
group needs to be released with probability 1/2 and 95 %.
"""

from __future__ import annotations

from typing import Any

from dpsieve.queries.prepare import Prepared

__all__ = ["preview"]


def preview(prepared: Prepared) -> dict[str, Any]:
    """The public figures of a prepared plan (module docstring), JSON-ready."""
    parts = iter(prepared.charge.parts)
    noise: dict[str, dict[str, Any]] = {}
    for label, plan in zip(prepared.labels, prepared.plans, strict=True):
        noise[label] = {}
        for part in plan.parts:
            c = next(parts)
            n = c.noise().to_dict()
            noise[label][part.release.name] = {**n, "ci95_halfwidth": n["ci95"],
                                               "privacy": c.charge.to_dict()}
    sel = prepared.charge.selection
    return {
        "charge": prepared.charge.description.to_dict(),
        "labels": list(prepared.labels),
        "noise": noise,
        "intervals": {lab: k.covers for lab, k in zip(prepared.labels, prepared.plans,
                                                        strict=True)},
        "selection": None if sel is None else {**sel.info(),
                                               "privacy": sel.charge.to_dict()},
        **({} if prepared.calibration is None else {"calibration": prepared.calibration}),
    }
