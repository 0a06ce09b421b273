"""``service_harness.race``, the concurrency tests' scaffold: every client passes its start
together (and ``during`` with them), every client's error is surfaced, and a client that
fails before its start breaks the barrier instead of leaving the others waiting."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from service_harness import race


def test_during_runs_once_every_client_is_at_its_start() -> None:
    ready: list[int] = []
    seen: list[int] = []
    lock = threading.Lock()

    def client(i: int, start: Callable[[], object]) -> None:
        with lock:
            ready.append(i)
        start()

    race(client, 8, during=lambda: seen.append(len(ready)))
    assert sorted(ready) == list(range(8))
    assert seen == [8]


def test_every_clients_error_is_surfaced() -> None:
    def client(i: int, start: Callable[[], object]) -> None:
        start()
        if i == 3:
            raise ValueError("client 3 failed")

    with pytest.raises(AssertionError, match="client 3 failed"):
        race(client, 6)


@pytest.mark.parametrize("during", [None, lambda: None])
def test_a_client_failing_before_its_start_breaks_the_barrier(
        during: Callable[[], object] | None) -> None:
    def client(i: int, start: Callable[[], object]) -> None:
        if i == 0:
            raise RuntimeError("no connection")
        start()  # the others get BrokenBarrierError rather than wait for client 0

    with pytest.raises(AssertionError, match="no connection"):
        race(client, 5, during)
