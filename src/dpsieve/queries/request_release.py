"""Query release as a request of the query layer: :class:`ReleaseRequest`.

A ``release`` request runs a :mod:`dpsieve.release` mechanism over a **public**
categorical domain and is charged ``PureDP(eps, replace-one)`` before any data are read.
Its parameters are read from JSON once (:meth:`ReleaseRequest.from_json`: each checked
alone, naming it); :meth:`ReleaseRequest.prepare` checks them against the data set
(columns, the public row count ``n``) and refuses instances too large to run from public
quantities (the domain, the workload, ``n``; :mod:`dpsieve.queries.release_sizing`),
before the spend. Values outside a column's public levels are counted as that column's
first level: a row-wise map, so neighbouring data sets stay neighbours and ``n`` stays
fixed (docs/session.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dpsieve._validation import check_finite, check_int, check_positive, fail
from dpsieve.accounting.events import Neighbouring, PrivacyDescription, PureDP
from dpsieve.queries.release_sizing import (
    RELEASE_MAX_N,
    RELEASE_MAX_ROUNDS,
    RELEASE_MAX_UNIVERSE,
    RELEASE_MECHANISMS,
    RELEASE_OPTIONS,
    ReleaseLimits,
    Workload,
    level_key,
    mechanism_runner,
    parse_workload,
    plain,
)
from dpsieve.queries.source import Ready, Source, row_level

__all__ = ["ReleaseLimits", "ReleaseRequest", "release_privacy"]

Level = str | int | float


def release_privacy(p: PrivacyDescription, nb: Neighbouring) -> PureDP:
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


def release_figures(mechanism: str, wl: Any, n: int, eps: float) -> dict[str, Any]:
    """A release's public preview figures: for ``laplace`` each answer's noise
    (``noise["release"]["answers"]``: the
    discrete Laplace of :func:`dpsieve.release.baselines.laplace_release`, from the
    workload's replace-one sensitivity at the public ``n``; the answer is then clipped to
    its query's range, which holds the truth, so its error is at most this noise); for
    the data-adaptive mechanisms none (their error depends on the data)."""
    if mechanism != "laplace":
        return {"noise": None, "noise_note": (
            f"the {mechanism} mechanism adapts to the data, so its error is not stated "
            "before it runs; the answer carries its expected error")}
    from dpsieve.queries.result import dlap_noise
    from dpsieve.release.baselines import laplace_mechanism

    mech = laplace_mechanism(wl, n, eps)
    noise = dlap_noise(mech.lattice_scale, mech.step).to_dict()
    return {"noise": {"release": {"answers": {
        **noise, "ci95_halfwidth": noise["ci95"], "privacy": PureDP(
            eps, Neighbouring.REPLACE_ONE).to_dict(), "queries": wl.k,
        "clipped_to_range": True}}}}


def _columns(cols: Any) -> tuple[str, ...]:
    if (not isinstance(cols, list) or not 1 <= len(cols) <= 16
            or not all(isinstance(c, str) and c for c in cols) or len(set(cols)) != len(cols)):
        raise fail("columns", "release", "a list of 1 to 16 distinct column names", cols)
    return tuple(cols)


def _levels(cols: tuple[str, ...], domain: Any) -> tuple[tuple[Level, ...], ...]:
    if not isinstance(domain, dict) or set(domain) != set(cols):
        raise fail("domain", "release", f"an object giving the public levels of exactly the "
                   f"columns {list(cols)} (never derived from the data)", domain)
    out = []
    for c in cols:
        lv = domain[c]
        if (not isinstance(lv, list) or not 1 <= len(lv) <= RELEASE_MAX_UNIVERSE
                or not all(isinstance(v, str | int | float) and level_key(v) is not None
                           for v in lv)):
            raise fail("domain", "release", f"for {c!r} a non-empty list of at most "
                       f"{RELEASE_MAX_UNIVERSE} strings or numbers", lv)
        if len({level_key(v) for v in lv}) != len(lv):
            raise fail("domain", "release", f"for {c!r} levels distinct as categories "
                       "(1, 1.0 and '1' are the same level)", lv)
        out.append(tuple(lv))
    size = math.prod(len(v) for v in out)
    if size > RELEASE_MAX_UNIVERSE:
        raise fail("domain", "release", f"a universe of at most {RELEASE_MAX_UNIVERSE} "
                   f"elements (the product of the level counts is {size})", domain)
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ReleaseRequest:
    """A workload of counting queries over the public domain of ``columns`` (``levels``:
    each column's public levels), released by ``mechanism`` (envelope, pmw, mwem, laplace,
    blr) for ``privacy`` (PureDP under replace-one); ``n`` is the public row count.
    ``public`` is the request the ledger records (as it was given)."""

    privacy: PrivacyDescription
    mechanism: str
    columns: tuple[str, ...]
    levels: tuple[tuple[Level, ...], ...]
    n: int
    workload: Workload
    public: dict[str, Any]
    rounds: int | None = None
    eta: float | None = None
    gamma: float | None = None
    kind: str = "release"

    @classmethod
    def from_json(cls, spec: Mapping[str, Any], privacy: PrivacyDescription
                  ) -> ReleaseRequest:
        """The request from its JSON (``spec``; its privacy already mapped: ``privacy``),
        each parameter checked alone, naming it: nothing that needs the data set is
        decided here."""
        cols = _columns(spec.get("columns"))
        levels = _levels(cols, spec.get("domain"))
        n = check_int("n", spec.get("n"), "release", minimum=1)
        if n > RELEASE_MAX_N:
            raise fail("n", "release", f"an int <= {RELEASE_MAX_N}", n)
        wl = parse_workload(spec.get("workload", "marginals:1"),
                            tuple(len(v) for v in levels))
        mech = spec.get("mechanism")
        if mech not in RELEASE_MECHANISMS:
            raise fail("mechanism", "release", f"one of {', '.join(RELEASE_MECHANISMS)}",
                       mech)
        for opt in ("rounds", "eta", "gamma"):
            if spec.get(opt) is not None and opt not in RELEASE_OPTIONS[mech]:
                raise fail(opt, "release", f"absent for mechanism {mech!r} (it takes "
                           f"{list(RELEASE_OPTIONS[mech]) or 'no options'})", spec[opt])
        rounds = spec.get("rounds")
        if rounds is not None:
            check_int("rounds", rounds, "release", minimum=2 if mech == "pmw" else 1)
            if rounds > RELEASE_MAX_ROUNDS:
                raise fail("rounds", "release", f"an int <= {RELEASE_MAX_ROUNDS}", rounds)
        eta, gamma = spec.get("eta"), spec.get("gamma")
        return cls(privacy, str(mech), cols, levels, n, wl,
                   {**spec, "privacy": privacy.to_dict()}, rounds,
                   None if eta is None else check_positive("eta", eta),
                   None if gamma is None else check_finite("gamma", gamma))

    def prepare(self, source: Source) -> Ready:
        """Checked against the data set and charged PureDP(eps, REPLACE_ONE) up front (each
        mechanism is pure eps-DP under replace-one: Fitzsimons 2026 Prop. 4.1 for the
        envelope; Laplace, PMW, MWEM and BLR as stated in :mod:`dpsieve.release.baselines`).
        Only the exact envelope sampler is offered (the rejection sampler costs
        (eps, delta)).

        Everything that decides the cost or a refusal is public: the domain, the
        workload, the mechanism's parameters and the row count ``n``, which replace-one
        neighbours share. Every check that can fail runs before the spend: the data set's
        row count is compared with ``n`` (public under replace-one, so the refusal is a
        function of public values), and the mechanism is run once on a synthetic data set
        of ``n`` rows (a public dry run, its output discarded) whenever it is cheap, so
        parameter failures (a Laplace scale past the sampler's range at a tiny eps, ...)
        refuse instead of failing after the charge. The data are read after the spend. A
        value outside its column's public levels (missing values included) is counted as
        that column's first level: ``Dataset.from_table`` raises naming the value instead,
        which after the spend would release a private value outside the guarantee; the
        per-row map keeps n fixed and maps replace-one neighbours to replace-one neighbours
        (or equal data), so the guarantee holds for the raw rows. The answer is withheld
        (NumericalError) if the mechanism states more than the charge."""
        from dpsieve import release as rel

        row_level(source, self.kind)
        p = release_privacy(self.privacy, source.neighbouring)
        names = source.columns()
        for c in self.columns:
            if c not in names:
                raise fail("columns", "release", "columns of the data set", c)
        dom = rel.Domain(self.columns, tuple(tuple(str(v) for v in lv) for lv in self.levels))
        wl = self.workload.matrix(dom)
        go, cheap = mechanism_runner(self.mechanism, self.n, self.rounds, self.eta, self.gamma,
                                     p.eps, wl, source.rng, source.release_limits)
        n = self.n
        if source.row_count() != n:
            raise fail("n", "release", "the data set's row count (public under replace-one)",
                       n)
        if cheap:  # the public dry run: n synthetic rows, a throwaway generator
            probe = np.zeros(dom.size, dtype=np.int64)
            probe[0] = n
            go(rel.Dataset(probe), np.random.default_rng(0))

        def run() -> dict[str, Any]:
            return self._answer(source.frame(), dom, wl, go, p)
        def figures() -> dict[str, Any]:
            return release_figures(self.mechanism, wl, n, p.eps)
        return Ready(PureDP(p.eps, Neighbouring.REPLACE_ONE), p, run, figures)

    def _answer(self, df: Any, dom: Any, wl: Any, go: Any, p: PureDP) -> dict[str, Any]:
        from dpsieve import release as rel
        from dpsieve.errors import NumericalError

        if len(df) != self.n:
            raise fail("n", "release", "the data set's row count (public under replace-one)",
                       self.n)
        looks: Sequence[dict[str | None, int]] = [
            {level_key(v): i for i, v in enumerate(lv)} for lv in self.levels]
        codes = [df[c].map(lambda v, look=look: look.get(level_key(v), 0))
                 .to_numpy(dtype=np.int64) for c, look in zip(self.columns, looks, strict=True)]
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
                 "universe_size": dom.size, "query_count": wl.k, **plain(details)}
        return {"value": value, "noise": noise}
