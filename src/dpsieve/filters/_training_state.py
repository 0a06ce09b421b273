"""Validation of stored training-filter states (private).

Local invariants (types, ranges, kinds dominated by the reference) and then the budget
itself: the certified envelope ``cert`` (the units and reserve at creation or at the last
exchange) must lie inside the stored target (the constructor's test, one certified
composition, :func:`._training_bounds.budget_misfit`), and the current units and reserve
inside the envelope, so B(S) <= B(cert) <= (eps, delta). A violation names the field.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

from dpsieve._validation import fail
from dpsieve.errors import ValidationError
from dpsieve.filters._common import frac_from_json
from dpsieve.filters._training_bounds import budget_misfit
from dpsieve.mechanisms.subsampled import DPSGDStep

__all__: list[str] = []

#: Names the discretization the budget is made of; a stored state with another is refused.
VERSION = "sgm-ctd-1"
#: Largest sigma of a kind: a step with more noise is charged as this one (at most 1e-6
#: of GDP per step; on the default grid its PLD is already the single cell [0, grid]), so
#: the step PLDs are never built where their construction overflows.
SIGMA_CAP = 1e6
#: Rate 1 is refused: a full-batch step is the Gaussian G_{1/sigma}, whose PLD has an
#: analytic part that the grid compositions of :mod:`._sgm_powers` cannot carry (a rate-1
#: reference pool's lower bound would lose it and exchanges give the budget away).
FULL_BATCH = (
    "a Poisson rate < 1 (a rate-1 step is the full-batch Gaussian: use a GDP filter, "
    "exact for it, e.g. GDPResidueFilter or PerRecordGDPFilter)"
)
_FIELDS = ("version", "eps", "delta", "grid", "reference", "n0", "reserve0", "reserve",
           "units", "steps", "exchanges", "exchange_steps")


def validated(state: Any) -> dict[str, Any]:
    """Every invariant of a stored state, the budget's certificate last; a violation names
    the field."""

    def bad(field: str, constraint: str, value: Any) -> ValidationError:
        return fail(field, "TrainingFilter state", constraint, value)

    if not isinstance(state, dict):
        raise bad("state", "a dict", state)
    need = _FIELDS
    for f in need:
        if f not in state:
            raise bad(f, "present", None)
    if state["version"] != VERSION:
        raise bad("version", f"{VERSION!r} (the discretization the budget was made of)",
                  state["version"])
    for f in ("eps", "grid"):
        v = state[f]
        if not (isinstance(v, float | int) and not isinstance(v, bool) and math.isfinite(v)
                and v > 0):
            raise bad(f, "a finite float > 0", v)
    d = state["delta"]
    if not (isinstance(d, float) and 0.0 < d < 1.0):
        raise bad("delta", "a float in (0, 1)", d)
    for f in ("n0", "steps", "exchanges", "exchange_steps"):
        v = state[f]
        if not (isinstance(v, int) and not isinstance(v, bool) and v >= 0):
            raise bad(f, "an int >= 0", v)
    r0 = frac_from_json(state["reserve0"], "reserve0")
    r = frac_from_json(state["reserve"], "reserve")
    if not (0 <= r0 < Fraction(d)):
        raise bad("reserve0", "0 <= reserve0 < delta", state["reserve0"])
    if not (0 <= r <= r0):
        raise bad("reserve", "0 <= reserve <= reserve0", state["reserve"])
    ref = state["reference"]
    if not (isinstance(ref, list) and len(ref) == 2):
        raise bad("reference", "[sigma, rate]", ref)
    try:
        DPSGDStep(ref[0], ref[1])  # validates sigma, rate
    except ValidationError:
        raise bad("reference", "[sigma > 0, rate in (0, 1)]", ref) from None
    if ref[1] == 1.0:
        raise bad("reference", "[sigma > 0, rate in (0, 1)]: " + FULL_BATCH, ref)
    if ref[0] > SIGMA_CAP:
        raise bad("reference", f"[sigma <= {SIGMA_CAP:g}, rate] (a kind)", ref)
    units = _units(state["units"], ref, "units", bad)
    ref_units = sum(u[2] for u in units if [u[0], u[1]] == ref)
    if ref_units > state["n0"]:
        raise bad("units", f"at most n0 = {state['n0']} reference units", ref_units)
    opt = ("keep", "mixed", "cert")  # all or none: a state stored before they existed
    if any(f in state for f in opt) and not all(f in state for f in opt):  # has none
        missing = next(f for f in opt if f not in state)
        raise bad(missing, "present with 'keep', 'mixed' and 'cert' (all or none)", None)
    keep = state.get("keep", 0)  # optional, with "mixed": states stored before they existed
    if not (isinstance(keep, int) and not isinstance(keep, bool) and 0 <= keep <= state["n0"]):
        raise bad("keep", "an int in [0, n0]", keep)
    mixed = state.get("mixed", False)
    if not isinstance(mixed, bool):
        raise bad("mixed", "a bool", mixed)
    out = {**{k: state[k] for k in need}, "keep": keep, "mixed": mixed}
    out["cert"] = _envelope(state, units, r, r0, ref, bad)
    return out


def _units(units: Any, ref: list[Any], field: str, bad: Any) -> list[list[Any]]:
    """A list of [sigma, rate, count] entries, one per kind, dominated by the reference."""
    if not isinstance(units, list):
        raise bad(field, "a list of [sigma, rate, count]", units)
    seen = set()
    for u in units:
        if not (isinstance(u, list) and len(u) == 3):
            raise bad(field, "a list of [sigma, rate, count]", u)
        try:
            DPSGDStep(u[0], u[1])
        except ValidationError:
            raise bad(field, "[sigma > 0, rate in (0, 1], count]", u) from None
        if not (isinstance(u[2], int) and not isinstance(u[2], bool) and u[2] > 0):
            raise bad(field, "counts that are ints > 0", u)
        if (u[0], u[1]) in seen:
            raise bad(field, "one entry per kind", u)
        seen.add((u[0], u[1]))
        if not (u[0] >= ref[0] and u[1] <= ref[1]):
            raise bad(field, "kinds dominated by the reference", u)
        if not (u[0] <= SIGMA_CAP and u[1] < 1.0):
            raise bad(field, f"kinds with sigma <= {SIGMA_CAP:g} and rate < 1", u)
    return units


def _envelope(state: dict[str, Any], units: list[list[Any]], r: Fraction, r0: Fraction,
              ref: list[Any], bad: Any) -> dict[str, Any]:
    """The certified envelope: present (``cert``) or, for states stored before it existed,
    the current units and reserve; certified inside the target, the state inside it."""
    cert = state.get("cert")
    if cert is None:
        cert = {"units": [list(u) for u in units], "reserve": state["reserve"]}
    if not (isinstance(cert, dict) and set(cert) == {"units", "reserve"}):
        raise bad("cert", "{'units': [[sigma, rate, count], ...], 'reserve': fraction}", cert)
    c_units = _units(cert["units"], ref, "cert", bad)
    c_r = frac_from_json(cert["reserve"], "cert")
    if not (r <= c_r <= r0):
        raise bad("cert", "reserve <= cert reserve <= reserve0", cert["reserve"])
    have = {(u[0], u[1]): u[2] for u in c_units}
    for u in units:
        if u[2] > have.get((u[0], u[1]), 0):
            raise bad("units", "at most the certified envelope's count of each kind", u)
    miss = budget_misfit(state["eps"], state["delta"], state["grid"], c_units, c_r)
    if miss is not None:
        field = "cert" if "cert" in state else miss
        value = cert if field == "cert" else cert[field]
        raise bad(field, "a budget certified inside the target (eps, delta) = "
                  f"({state['eps']!r}, {state['delta']!r}): the units composed with the "
                  "reserve as R_{0, reserve}", value)
    return {"units": [list(u) for u in c_units], "reserve": cert["reserve"]}
