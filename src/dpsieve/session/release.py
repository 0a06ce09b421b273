"""Query release inside a session.

A ``release`` query runs a :mod:`dpsieve.release` mechanism over a **public** categorical
domain and is charged ``PureDP(eps, replace-one)`` before any data are read
(:func:`release_plan`). Instances too large to run are refused from public quantities
(the domain, the workload, the public row count ``n``) before the spend. Values outside a
column's public levels are counted as that column's first level: a row-wise map, so
neighbouring data sets stay neighbours and ``n`` stays fixed (docs/session.md).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsieve._validation import check_finite, check_int, check_positive, fail
from dpsieve.accounting.events import (
    Neighbouring,
    PrivacyDescription,
    PureDP,
)

__all__ = ["RELEASE_MAX_COST", "RELEASE_MAX_GROUP_WORK", "ReleaseLimits", "release_plan",
           "release_privacy"]

Frame = Any  # a pandas DataFrame (pandas is imported lazily)


RELEASE_MECHANISMS = ("blr", "envelope", "laplace", "mwem", "pmw")
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
#: (issue 11 defect 6: 36 cells at n = 50 ran 240 s and 4.9 GB before its refusal), else
#: stopped before the step that would cross it (at most about 1 s of work at 1e7).
RELEASE_MAX_GROUP_WORK = 1.0e7


@dataclass(frozen=True, slots=True)
class ReleaseLimits:
    """Resource limits of ``release`` queries (service settings ``release_max_cost`` and
    ``release_max_group_work``): the exact envelope's enumeration cost and the grouping
    work, both costed from public parameters and refused before any spend."""

    max_cost: float = RELEASE_MAX_COST
    max_group_work: float = RELEASE_MAX_GROUP_WORK

_RELEASE_OPTIONS = {"envelope": ("rounds", "eta", "gamma"), "pmw": ("rounds",),
                    "mwem": ("rounds",), "laplace": (), "blr": ()}


def release_privacy(p: PrivacyDescription, nb: Neighbouring) -> PrivacyDescription:
    """A release query's privacy: PureDP(eps > 0) under replace-one, which must be the
    budget's relation (the mechanisms are pure eps-DP under replace-one only)."""
    if nb != Neighbouring.REPLACE_ONE:
        raise fail("privacy", "release query", "spent under replace-one neighbours: the "
                   "release mechanisms are pure eps-DP under replace-one only, which does "
                   "not imply eps-DP under add/remove (no conversion is offered); open "
                   "the session with a replace-one budget", p)
    if not isinstance(p, PureDP) or p.neighbouring != nb:
        raise fail("privacy", "release query", "PureDP(eps) under replace-one", p)
    check_positive("eps", p.eps, "release query")
    return p


def _level_key(v: Any) -> str | None:
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


def _release_workload(spec: Any, dom: Any) -> Any:
    """The workload named as the CLI names it (``marginals[:W]``, ``random[:K[:SEED]]``,
    ``range1d``, ``range2d``), refused past RELEASE_MAX_ENTRIES matrix entries."""
    import itertools

    from dpsieve import release as rel

    want = "marginals[:W], random[:K[:SEED]], range1d or range2d"
    if not isinstance(spec, str) or len(spec) > 64:
        raise fail("workload", "release", want, spec)
    kind, _, rest = spec.partition(":")
    try:
        args = [int(a) for a in rest.split(":") if a]
    except ValueError:
        raise fail("workload", "release", want, spec) from None
    T, shape = dom.size, dom.shape
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
        raise fail("workload", "release", want, spec)
    if k * T > RELEASE_MAX_ENTRIES:
        raise rel.InstanceTooLargeError(
            f"the workload {spec!r} is a {k} x {T} matrix, over the limit of "
            f"{RELEASE_MAX_ENTRIES} entries", estimated_cost=float(k * T),
            limit=float(RELEASE_MAX_ENTRIES))
    if kind == "marginals":
        return rel.marginals(dom, args[0] if args else 1)
    if kind == "random":
        return rel.random_counting(T, k, seed=args[1] if len(args) > 1 else 0)
    return rel.range_1d(T) if kind == "range1d" else rel.range_2d((shape[0], shape[1]))


def _release_domain(spec: dict[str, Any], schema: Sequence[str]) -> tuple[
        Any, list[str], list[dict[str | None, int]]]:
    """(Domain, columns, per-column level lookup) from the spec's public domain."""
    from dpsieve.release import Domain

    cols, domain = spec.get("columns"), spec.get("domain")
    if (not isinstance(cols, list) or not 1 <= len(cols) <= 16
            or not all(isinstance(c, str) and c for c in cols) or len(set(cols)) != len(cols)):
        raise fail("columns", "release", "a list of 1 to 16 distinct column names", cols)
    for c in cols:
        if c not in schema:
            raise fail("columns", "release", "columns of the data set", c)
    if not isinstance(domain, dict) or set(domain) != set(cols):
        raise fail("domain", "release", f"an object giving the public levels of exactly the "
                   f"columns {cols} (never derived from the data)", domain)
    lookups: list[dict[str | None, int]] = []
    for c in cols:
        lv = domain[c]
        if (not isinstance(lv, list) or not 1 <= len(lv) <= RELEASE_MAX_UNIVERSE
                or not all(isinstance(v, str | int | float) and _level_key(v) is not None
                           for v in lv)):
            raise fail("domain", "release", f"for {c!r} a non-empty list of at most "
                       f"{RELEASE_MAX_UNIVERSE} strings or numbers", lv)
        look = {_level_key(v): i for i, v in enumerate(lv)}
        if len(look) != len(lv):
            raise fail("domain", "release", f"for {c!r} levels distinct as categories "
                       "(1, 1.0 and '1' are the same level)", lv)
        lookups.append(look)
    size = math.prod(len(domain[c]) for c in cols)
    if size > RELEASE_MAX_UNIVERSE:
        raise fail("domain", "release", f"a universe of at most {RELEASE_MAX_UNIVERSE} "
                   f"elements (the product of the level counts is {size})", domain)
    dom = Domain(tuple(cols), tuple(tuple(str(v) for v in domain[c]) for c in cols))
    return dom, cols, lookups


#: A public dry run (on a synthetic data set of n rows) precedes the spend when the
#: exact envelope costs at most this many work units (every other mechanism: always).
RELEASE_DRY_RUN_COST = 1.0e7


def _release_mechanism(spec: dict[str, Any], eps: float, n: int, wl: Any,
                       rng: np.random.Generator | None, limits: ReleaseLimits | None = None,
                       ) -> tuple[Callable[..., Any], bool]:
    """Check a mechanism's public parameters and refuse instances too large for it, from
    public quantities only (n is public under replace-one); returns
    ``(run(dataset, rng) -> Release, cheap)``, ``cheap`` when a dry run may precede the
    spend (:data:`RELEASE_DRY_RUN_COST`)."""
    from dpsieve import release as rel

    lim = limits or ReleaseLimits()
    mech = spec.get("mechanism")
    if mech not in RELEASE_MECHANISMS:
        raise fail("mechanism", "release", f"one of {', '.join(RELEASE_MECHANISMS)}", mech)
    for opt in ("rounds", "eta", "gamma"):
        if spec.get(opt) is not None and opt not in _RELEASE_OPTIONS[mech]:
            raise fail(opt, "release", f"absent for mechanism {mech!r} (it takes "
                       f"{list(_RELEASE_OPTIONS[mech]) or 'no options'})", spec[opt])
    rounds = spec.get("rounds")
    if rounds is not None:
        check_int("rounds", rounds, "release", minimum=2 if mech == "pmw" else 1)
        if rounds > RELEASE_MAX_ROUNDS:
            raise fail("rounds", "release", f"an int <= {RELEASE_MAX_ROUNDS}", rounds)
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
    eta, gamma = spec.get("eta"), spec.get("gamma")
    if eta is not None or gamma is not None:
        params = rel.PMWParams(J, params.eta if eta is None else check_positive("eta", eta),
                             params.gamma if gamma is None else check_finite("gamma", gamma))
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


def _plain(v: Any) -> Any:
    """JSON-ready copy (numpy scalars and arrays become Python values)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, list | tuple | np.ndarray):
        return [_plain(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return v


def release_plan(spec: dict[str, Any], p: PrivacyDescription, schema: Sequence[str],
                  rng: np.random.Generator | None, row_count: Callable[[], int],
                  limits: ReleaseLimits | None = None,
                  ) -> tuple[Any, Callable[[Frame], tuple[Any, dict[str, Any]]]]:
    """A :mod:`dpsieve.release` mechanism over a public categorical domain, charged
    PureDP(eps, REPLACE_ONE) up front (each mechanism is pure eps-DP under replace-one:
    Fitzsimons 2026 Prop. 4.1 for the envelope; Laplace, PMW, MWEM and BLR as stated in
    :mod:`dpsieve.release.baselines`). Only the exact envelope sampler is offered (the
    rejection sampler costs (eps, delta)).

    Everything that decides the cost or a refusal is public: the domain, the workload,
    the mechanism's parameters and the row count ``n``, which replace-one neighbours
    share. Every check that can fail runs before the spend (issue 10, defect 6): the
    data set's row count is compared with ``n`` (``row_count``: public under replace-one,
    so the refusal is a function of public values), and the mechanism is run once on a
    synthetic data set of ``n`` rows (a public dry run, its output discarded) whenever it
    is cheap, so parameter failures (a Laplace scale past the sampler's range at a tiny
    eps, ...) refuse instead of failing after the charge. The data are read after the
    spend. A value outside its column's public levels (missing values
    included) is counted as that column's first level: ``Dataset.from_table`` raises
    naming the value instead, which after the spend would release a private value outside
    the guarantee; the per-row map keeps n fixed and maps replace-one neighbours to
    replace-one neighbours (or equal data), so the guarantee holds for the raw rows.
    The answer is withheld (NumericalError) if the mechanism states more than the charge.
    """
    from dpsieve import release as rel
    from dpsieve.errors import NumericalError

    assert isinstance(p, PureDP)
    dom, cols, lookups = _release_domain(spec, schema)
    n = check_int("n", spec.get("n"), "release", minimum=1)
    if n > RELEASE_MAX_N:
        raise fail("n", "release", f"an int <= {RELEASE_MAX_N}", n)
    wl = _release_workload(spec.get("workload", "marginals:1"), dom)
    go, cheap = _release_mechanism(spec, p.eps, n, wl, rng, limits)
    if row_count() != n:
        raise fail("n", "release", "the data set's row count (public under replace-one)",
                   n)
    if cheap:  # the public dry run: n synthetic rows, a throwaway generator
        probe = np.zeros(dom.size, dtype=np.int64)
        probe[0] = n
        go(rel.Dataset(probe), np.random.default_rng(0))

    def run(df: Frame) -> tuple[Any, dict[str, Any]]:
        if len(df) != n:
            raise fail("n", "release", "the data set's row count (public under replace-one)",
                       n)
        codes = [df[c].map(lambda v, look=look: look.get(_level_key(v), 0))
                 .to_numpy(dtype=np.int64) for c, look in zip(cols, lookups, strict=True)]
        ds = rel.Dataset.from_rows(np.ravel_multi_index(tuple(codes), dom.shape), dom.size)
        out = go(ds)
        stated = out.privacy
        if not (isinstance(stated, PureDP) and stated.eps <= p.eps
                and stated.neighbouring == Neighbouring.REPLACE_ONE):
            raise NumericalError(f"release stated {stated!r}, above the charge {p!r}; the "
                                 "answer is withheld.")
        details = out.public_details()  # an allow-list: diagnostics never reach analysts
        value = {"mechanism": out.mechanism, "queries": list(wl.names),
                 "answers": [float(a) for a in out.answers], "privacy": stated.to_dict()}
        noise = {"mechanism": f"release_{out.mechanism}", "privacy": stated.to_dict(),
                 "universe_size": dom.size, "query_count": wl.k, **_plain(details)}
        return value, noise
    return PureDP(p.eps, Neighbouring.REPLACE_ONE), run
