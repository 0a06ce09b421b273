"""Every figure quoted for query release and robust statistics is reproducible (issue 16).

(1) Each claim's text is the figure of the full run's JSON, formatted as printed, and appears
in every file that quotes it, which also names the command. (2) The quick version of the
command re-measures it within its stated uncertainty: a few claims in the default suite, all
of them in the slow suite. See benchmarks/claims.py.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks import claims as C  # noqa: E402, N812

ALL = C.all_claims()


def test_every_quoted_figure_is_the_measured_one_and_names_its_command() -> None:
    assert len(ALL) > 60
    missing = []
    for c in ALL:
        for f in c.files:
            text = (ROOT / f).read_text()
            if c.text not in text:
                missing.append(f"{c.id}: {c.text!r} not in {f}")
    assert not missing, "\n".join(missing[:20])
    for f in {f for c in ALL for f in c.files}:
        text = (ROOT / f).read_text()
        cmd = C.ROBUST_CMD if any(f in c.files for c in ALL if c.command == C.ROBUST_CMD) \
            else C.RELEASE_CMD
        assert cmd.split(" --")[0].replace("dpsieve ", "") in text, f"{f} does not name {cmd}"


def test_every_quoted_estimator_can_be_re_measured_here() -> None:
    """Peers quoted in the docs (OpenDP) are installed by the test extra, so the quick runs
    re-measure every quoted figure instead of failing (or skipping) on a missing import."""
    from benchmarks import robust_utility as ru

    quoted = {c.locator[2] for c in ALL if c.locator[0] == "means"}
    have = set(ru.estimators(100)) | set(ru.estimators(100, 10.0))
    assert quoted <= have, f"not importable here: {sorted(quoted - have)}"


def test_the_goals_are_stated_as_measured() -> None:
    data = C._robust()
    g = data["goals"]
    text = (ROOT / "docs" / "robust.md").read_text()
    t = g["small_500_tail"]
    assert f"{int(t['count'])} of {int(t['released'])}" in text


def _check_robust(scenario: str, estimators: list[str], reps: int) -> None:
    by_id = {c.id: c for c in ALL}
    got = C.quick_robust(scenario, estimators, reps)
    for est, r in got.items():
        c = by_id[f"robust/{scenario}/{est}"]
        assert C.within(c, r["rmse"], r["rmse_se"]), (c.id, c.text, r["rmse"], r["rmse_se"])


def test_quick_robust_clean_and_contaminated() -> None:
    """Default suite: the two figures behind the first two goals (30 runs each)."""
    ests = ["PFR (default: row-wise)", "median/MAD clip + Laplace (baseline)"]
    _check_robust("clean_1000", ests, 30)
    _check_robust("contam_1000", ests, 30)


def test_quick_release_one_cell() -> None:
    """Default suite: 1-way marginals at eps = 1: the exact figures recomputed exactly, the
    identity mechanism from the first 300 runs of each database's stream."""
    by_id = {c.id: c for c in ALL}
    got = C.quick_release(0, 1.0, ["laplace", "blr", "identity", "pmw"], runs=300, mc=60)
    for m, (v, se) in got.items():
        c = by_id[f"release/w0/eps1.0/{m}"]
        assert C.within(c, v, se), (c.id, c.text, v, se)


ROBUST_GROUPS: dict[str, list[str]] = defaultdict(list)
for _c in ALL:
    if _c.locator[0] == "means":
        ROBUST_GROUPS[_c.locator[1]].append(_c.locator[2])


@pytest.mark.slow
@pytest.mark.parametrize("scenario", sorted(ROBUST_GROUPS))
def test_quick_robust_every_cell(scenario: str) -> None:
    reps = 300 if scenario == "small_500" else 40
    _check_robust(scenario, ROBUST_GROUPS[scenario], reps)


@pytest.mark.slow
@pytest.mark.parametrize(("w", "eps"), [(0, 1.0), (1, 1.0), (2, 1.0), (3, 1.0), (2, 0.5),
                                        (1, 0.5), (0, 4.0)])
def test_quick_release_quoted_cells(w: int, eps: float) -> None:
    by_id = {c.id: c for c in ALL}
    mechs = [c.locator[3] for c in ALL if c.locator[:3] == ("eps", w, eps)
             and c.locator[3] != "mwem_oracle"]
    got = C.quick_release(w, eps, mechs, runs=300, mc=60)
    for m, (v, se) in got.items():
        c = by_id[f"release/w{w}/eps{eps}/{m}"]
        assert C.within(c, v, se), (c.id, c.text, v, se)
