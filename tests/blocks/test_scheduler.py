"""Scheduling passes (dpsieve.blocks.scheduler): the orders of DPF, DPack and FCFS, and a
greedy admission that never exceeds what is available."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpsieve.blocks import Pending, schedule
from dpsieve.blocks.scheduler import dominant_share, efficiency
from dpsieve.errors import ValidationError


def _p(dims: list[int], dem: list[float], t: float = 0.0, w: float = 1.0) -> Pending:
    return Pending(np.array(dims), np.array(dem), t, w)


def test_dpf_orders_by_dominant_share_and_admits_greedily() -> None:
    reqs = [_p([0, 1], [0.5, 0.1], 0), _p([0], [0.2], 1), _p([1], [0.3], 2),
            _p([0], [0.6], 3)]
    s = schedule("dpf", reqs, np.array([0.7, 0.35]))
    assert s.order == [1, 2, 0, 3]
    assert s.admitted == [1, 2]
    assert s.position == {0: 1, 3: 2}
    assert s.blocked_on == {0: 1, 3: 0}  # 0 fits block 0, not block 1
    assert [dominant_share(r) for r in reqs] == [0.5, 0.2, 0.3, 0.6]


def test_dpack_prefers_requests_that_use_little_of_what_is_left() -> None:
    # one request over 10 blocks against ten one-block requests of the same size:
    # DPF sees equal dominant shares and goes by arrival; DPack takes the ten
    wide = _p(list(range(10)), [0.6] * 10, 0)
    narrow = [_p([j], [0.6], 1 + j) for j in range(10)]
    avail = np.ones(10)
    dpf = schedule("dpf", [wide, *narrow], avail)
    dpack = schedule("dpack", [wide, *narrow], avail)
    assert dpf.admitted == [0]
    assert sorted(dpack.admitted) == list(range(1, 11))
    assert efficiency(wide, avail) == pytest.approx(1 / 6)
    assert efficiency(narrow[0], np.zeros(10)) == 0.0


def test_fcfs_goes_by_arrival_and_ties_by_index() -> None:
    reqs = [_p([0], [0.4], 2), _p([0], [0.4], 1), _p([0], [0.4], 1)]
    assert schedule("fcfs", reqs, np.array([0.8])).admitted == [1, 2]


def test_pending_is_validated() -> None:
    with pytest.raises(ValidationError):
        _p([0, 1], [0.1])
    with pytest.raises(ValidationError):
        _p([0], [float("nan")])
    with pytest.raises(ValidationError):
        _p([0, 0], [0.1, 0.1])
    with pytest.raises(ValidationError):
        _p([0], [0.1], w=0)
    with pytest.raises(ValueError, match="lottery"):
        schedule("lottery", [], np.zeros(1))


_req = st.tuples(st.lists(st.integers(0, 5), min_size=1, max_size=4, unique=True),
                 st.floats(0, 0.6), st.floats(0, 100), st.floats(0.1, 3))


@settings(max_examples=200, deadline=None)
@given(st.lists(_req, max_size=12), st.lists(st.floats(0, 1), min_size=6, max_size=6),
       st.sampled_from(["dpf", "dpack", "fcfs"]))
def test_a_pass_never_exceeds_what_is_available_and_is_maximal(
        reqs: list[tuple[list[int], float, float, float]], avail: list[float],
        policy: str) -> None:
    pend = [_p(d, [x * (1 + k) / 3 for k in range(len(d))], t, w) for d, x, t, w in reqs]
    a = np.array(avail)
    s = schedule(policy, pend, a)
    used = np.zeros(6)
    for i in s.admitted:
        used[pend[i].dims] += pend[i].demand
    assert np.all(used <= a + 1e-9)
    assert sorted(s.admitted + list(s.position)) == list(range(len(pend)))
    assert sorted(s.position.values()) == list(range(1, len(s.position) + 1))
    left = a - used
    for i, j in s.blocked_on.items():  # nothing left waiting would fit what is left
        assert j in pend[i].dims
        assert np.any(pend[i].demand > left[pend[i].dims] + 1e-12)
    assert np.array_equal(a, np.array(avail))  # not modified
