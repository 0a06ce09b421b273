"""The public sizing of a release request: its workload named as the CLI names it
(:func:`parse_workload`), the mechanism's run and the refusal of instances too large to
run (:func:`mechanism_runner`), all from public quantities (the domain, the workload, the
public row count ``n``, eps), before the spend."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsieve._validation import fail

__all__ = ["RELEASE_MAX_COST", "RELEASE_MAX_GROUP_WORK", "RELEASE_MAX_N", "RELEASE_MAX_ROUNDS",
           "RELEASE_MAX_UNIVERSE", "RELEASE_MECHANISMS", "RELEASE_OPTIONS",
           "ReleaseLimits", "Workload", "level_key", "mechanism_runner", "parse_workload",
           "plain"]

RELEASE_MECHANISMS = ("blr", "envelope", "laplace", "mwem", "pmw")
#: The options each mechanism takes.
RELEASE_OPTIONS = {"envelope": ("rounds", "eta", "gamma"), "pmw": ("rounds",),
                   "mwem": ("rounds",), "laplace": (), "blr": ()}
#: Public size bounds checked before any spend (a refused request spends nothing).
RELEASE_MAX_UNIVERSE = 4096
RELEASE_MAX_ENTRIES = 4_000_000
RELEASE_MAX_ROUNDS = 1000
#: Largest public row count (exact in float64, so every n-derived parameter is exact).
RELEASE_MAX_N = 2**53
#: Envelope enumeration limit in work units (about 16 s at SECONDS_PER_UNIT).
RELEASE_MAX_COST = 2.0e9
#: Grouping limit (DP states x (queries + 1), release.groups): refused from n and the
#: workload before any work when an exact prefix of the programme already exceeds it
#: (36 cells at n = 50 would run 240 s and take 4.9 GB before a refusal), else stopped
#: before the step that would cross it (at most about 1 s of work at 1e7).
RELEASE_MAX_GROUP_WORK = 1.0e7
#: A public dry run (on a synthetic data set of n rows) precedes the spend when the
#: exact envelope costs at most this many work units (every other mechanism: always).
RELEASE_DRY_RUN_COST = 1.0e7

_WANT = "marginals[:W], random[:K[:SEED]], range1d or range2d"


@dataclass(frozen=True, slots=True)
class ReleaseLimits:
    """Resource limits of ``release`` queries (service settings ``release_max_cost`` and
    ``release_max_group_work``): the exact envelope's enumeration cost and the grouping
    work, both costed from public parameters and refused before any spend."""

    max_cost: float = RELEASE_MAX_COST
    max_group_work: float = RELEASE_MAX_GROUP_WORK


def level_key(v: Any) -> str | None:
    """The matching key of a category: ``1``, ``1.0`` and ``"1"`` match; missing is None."""
    if v is None or (isinstance(v, float | np.floating) and math.isnan(v)):
        return None
    if isinstance(v, bool | np.bool_):
        return str(bool(v))
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    if isinstance(v, np.integer):
        return str(int(v))
    return str(v)


def plain(v: Any) -> Any:
    """JSON-ready copy (numpy scalars and arrays become Python values)."""
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple | np.ndarray):
        return [plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


@dataclass(frozen=True, slots=True)
class Workload:
    """A named workload (``text`` as given) over a domain of ``shape``: ``kind`` and its
    integer ``args``, ``k`` queries."""

    text: str
    kind: str
    args: tuple[int, ...]
    k: int

    def matrix(self, dom: Any) -> Any:
        """The workload's matrix over ``dom`` (a :class:`dpsieve.release.Domain`)."""
        from dpsieve import release as rel

        a, shape = self.args, dom.shape
        if self.kind == "marginals":
            return rel.marginals(dom, a[0] if a else 1)
        if self.kind == "random":
            return rel.random_counting(dom.size, self.k, seed=a[1] if len(a) > 1 else 0)
        return rel.range_1d(dom.size) if self.kind == "range1d" else rel.range_2d(
            (shape[0], shape[1]))


def parse_workload(spec: Any, shape: tuple[int, ...]) -> Workload:
    """The workload named as the CLI names it (``marginals[:W]``, ``random[:K[:SEED]]``,
    ``range1d``, ``range2d``) over a domain of ``shape``, refused past RELEASE_MAX_ENTRIES
    matrix entries."""
    from dpsieve import release as rel

    if not isinstance(spec, str) or len(spec) > 64:
        raise fail("workload", "release", _WANT, spec)
    kind, _, rest = spec.partition(":")
    try:
        args = [int(a) for a in rest.split(":") if a]
    except ValueError:
        raise fail("workload", "release", _WANT, spec) from None
    T = math.prod(shape)
    if kind == "marginals" and len(args) <= 1:
        way = args[0] if args else 1
        if not 1 <= way <= len(shape):
            raise fail("workload", "release", f"marginals:W with 1 <= W <= {len(shape)}", spec)
        k = sum(math.prod(c) for c in itertools.combinations(shape, way))
    elif kind == "random" and len(args) <= 2:
        k = args[0] if args else 10
        if not (1 <= k <= RELEASE_MAX_ENTRIES) or (len(args) > 1 and args[1] < 0):
            raise fail("workload", "release", "random:K:SEED with K >= 1 and SEED >= 0", spec)
    elif kind == "range1d" and not args:
        k = T * (T + 1) // 2
    elif kind == "range2d" and not args:
        if len(shape) != 2:
            raise fail("workload", "release", "range2d over exactly two columns", spec)
        k = (shape[0] * (shape[0] + 1) // 2) * (shape[1] * (shape[1] + 1) // 2)
    else:
        raise fail("workload", "release", _WANT, spec)
    if k * T > RELEASE_MAX_ENTRIES:
        raise rel.InstanceTooLargeError(
            f"the workload {spec!r} is a {k} x {T} matrix, over the limit of "
            f"{RELEASE_MAX_ENTRIES} entries", estimated_cost=float(k * T),
            limit=float(RELEASE_MAX_ENTRIES))
    return Workload(spec, kind, tuple(args), k)


def mechanism_runner(mech: str, n: int, rounds: int | None, eta: float | None,
                     gamma: float | None, eps: float, wl: Any,
                     rng: np.random.Generator | None, limits: ReleaseLimits | None = None,
                     ) -> tuple[Callable[..., Any], bool]:
    """Refuse instances too large for the mechanism ``mech`` (with its options ``rounds``,
    ``eta``, ``gamma``) at the public row count ``n``, from public quantities only
    (n is public under replace-one); returns ``(run(dataset, rng) -> Release, cheap)``,
    ``cheap`` when a dry run may precede the spend (:data:`RELEASE_DRY_RUN_COST`)."""
    from dpsieve import release as rel

    lim = limits or ReleaseLimits()
    if mech == "laplace":
        return (lambda ds, g=rng: rel.laplace_release(wl, ds, eps, rng=g)), True
    if mech == "mwem":
        return (lambda ds, g=rng: rel.mwem_release(wl, ds, eps, rounds=rounds or 4,
                                                   rng=g)), True
    if mech == "pmw":
        rel.pmw_parameters(wl.universe_size, n, eps, wl.query_range, rounds or 4)
        return (lambda ds, g=rng: rel.pmw_release(wl, ds, eps, rounds=rounds or 4,
                                                  rng=g)), True
    cw = rel.collapse(wl)
    if mech == "blr":
        from dpsieve.release.baselines import blr_rows

        m = blr_rows(cw.size, n, wl.k, eps, max(wl.query_range, 1e-300))
        cands = rel.histogram_count(m, cw.size)
        size = cands * (cw.size + wl.k)
        if cands > 2_000_000 or size > 5 * RELEASE_MAX_ENTRIES:
            raise rel.InstanceTooLargeError(
                f"BLR would enumerate {cands} synthetic histograms of {m} rows over "
                f"{cw.size} classes ({wl.k} queries): {size} matrix entries, over the limit "
                f"of {5 * RELEASE_MAX_ENTRIES}", estimated_cost=float(size),
                limit=float(5 * RELEASE_MAX_ENTRIES))
        return (lambda ds, g=rng: rel.blr_release(wl, ds, eps, rows=m, rng=g)), True
    # envelope: the group count depends on n only (any histogram of n rows gives it)
    probe = np.zeros(cw.size, dtype=np.int64)
    probe[0] = n
    groups = rel.group_histograms(cw, probe, max_work=lim.max_group_work).size
    J = rounds if rounds is not None else rel.auto_rounds(cw.signed_classes, groups,
                                                         rel.AUTO_ROUNDS_COST)
    params = rel.practical_parameters(wl.universe_size, n, eps, J)
    if eta is not None or gamma is not None:
        params = rel.PMWParams(J, params.eta if eta is None else eta,
                               params.gamma if gamma is None else gamma)
    cost = 0.0
    if not rel.is_trivial_regime(params, eps, n, wl.query_range, J - 1):
        cost = rel.enumeration_cost(cw.signed_classes, J - 1, groups)
        if cost > lim.max_cost or cw.signed_classes ** (J - 1) >= 2**62:
            raise rel.InstanceTooLargeError(
                f"the exact envelope needs about {cost:.3g} work units ({cw.signed_classes}^"
                f"{J - 1} transcripts x {groups} groups), over the limit "
                f"{lim.max_cost:.3g}; lower 'rounds'", estimated_cost=cost,
                limit=lim.max_cost)
    return (lambda ds, g=rng: rel.envelope_release(wl, ds, eps, params, rng=g,
                                                 max_cost=lim.max_cost)), \
        cost <= RELEASE_DRY_RUN_COST
