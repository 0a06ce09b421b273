"""What every route of the service shares: the :class:`ServiceState` one app holds (the
ledger, the settings, the kept engines and frames) and the dependencies that read it
(``principal`` -> :data:`Who`, ``owner`` -> :data:`Owner`, ``service_state`` ->
:data:`Svc`). The routers (:mod:`dpsieve.service.routes`) take these as FastAPI
dependencies; :func:`dpsieve.service.app.create_app` builds the state once per app and
puts it on ``app.state.service``.

A data set the key may not see answers 404 exactly like one that does not exist
(:meth:`ServiceState.visible`).
"""

# no "from __future__ import annotations": FastAPI must see the Annotated aliases

import hmac
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends, Header, HTTPException, Request
from fastapi import Path as PathParam

from dpsieve.ledger.base import BudgetNotFoundError, BudgetStore, Principal
from dpsieve.queries.release_sizing import ReleaseLimits
from dpsieve.service.auth import hash_key
from dpsieve.service.errors import Limited, redact_quoted
from dpsieve.service.gate import GATE_KEY_HASH, GATE_PRINCIPAL
from dpsieve.service.known_keys import KnownKeys
from dpsieve.service.limits import FailureLimiter, ReadyCache, TokenBuckets, WindowCounter
from dpsieve.service.settings import Settings
from dpsieve.session.data import FileEngines, Frames, file_columns

__all__ = ["DatasetName", "Owner", "ServiceState", "Svc", "Who", "owner",
           "principal", "service_state"]

#: A data-set name in a URL path: bounded, no control characters (a NUL byte reached
#: PostgreSQL, which refuses it with an error that became a 500).
DatasetName = Annotated[str, PathParam(min_length=1, max_length=256,
                                       pattern=r"^[^\x00-\x1f\x7f]+$")]


def _after_spend(settings: Settings) -> Callable[[str], None] | None:
    if not settings.spend_marker and settings.pause_after_spend <= 0:
        return None

    def hook(key: str) -> None:  # test only: lets a test kill us between spend and answer
        if settings.spend_marker:
            Path(settings.spend_marker).write_text(key)
        time.sleep(settings.pause_after_spend)
    return hook


class ServiceState:
    """One app's shared state: the ledger ``store``, the ``settings``, the owner key's
    hash (compared by hash, never written to the ledger, so a restart with another key
    revokes the old one), the failed-authentication limiter, the file engines and frames
    kept across queries, the release limits and the Spark session (opened on first use)."""

    def __init__(self, settings: Settings, store: BudgetStore) -> None:
        self.settings = settings
        self.store = store
        self.owner_hash = hash_key(settings.owner_key) if settings.owner_key else None
        self.frames = Frames()
        self.engines = FileEngines()
        self.after_spend = _after_spend(settings)
        self.failures = FailureLimiter(settings.auth_failures_per_minute, 60.0,
                                       settings.auth_table_size)
        self.quotas = TokenBuckets(settings.analyst_requests_per_second,
                                   settings.analyst_request_burst, settings.auth_table_size)
        self.refusals = WindowCounter(settings.refusals_per_window, settings.refusal_window,
                                      settings.auth_table_size)
        self.queued = WindowCounter(settings.queued_per_window, settings.refusal_window,
                                    settings.auth_table_size)
        self.ready = ReadyCache(store)
        self.keys = KnownKeys(store, settings.known_keys_seconds)
        self.limits = ReleaseLimits(settings.release_max_cost, settings.release_max_group_work)
        self._spark_lock = threading.Lock()
        self._spark: list[Any] = []

    def refusal_cap(self, who: str) -> None:
        """429 ``too_many_refusals`` if ``who`` is past the refusal cap: checked before a
        query (on the query route and on a data set's queue) touches the ledger, so the
        refusals one analyst may write to the append-only log are bounded."""
        wait = self.refusals.retry_after(who)
        if wait is not None:
            raise Limited("too_many_refusals", f"{self.refusals.limit} queries by {who!r} "
                          f"were refused in the last {self.refusals.window:g} s; queries "
                          "are refused without being run until the window ends (nothing "
                          "was written or spent).", wait)

    def queue_cap(self, who: str) -> None:
        """429 ``too_many_queued`` if ``who`` queued too many queries that were not
        admitted at once in the window (each stores its whole request until decided, and
        the decided ones stay: the queue's records are bounded like the refusals)."""
        self.refusal_cap(who)
        wait = self.queued.retry_after(who)
        if wait is not None:
            raise Limited("too_many_queued", f"{self.queued.limit} queries by {who!r} "
                          f"were queued without being admitted at once in the last "
                          f"{self.queued.window:g} s; queries are not queued until the "
                          "window ends (nothing was written or spent).", wait)

    def visible(self, p: Principal, name: str) -> dict[str, Any]:
        """The registry record of ``name`` if ``p`` may see it, else 404 (as if absent)."""
        src = self.store.dataset(name)
        if src is None or (p.role != "owner" and name not in self.store.grants(p.name)):
            raise HTTPException(404, f"No data set named {name!r} is visible to this key.")
        return src

    def budget_of(self, name: str) -> dict[str, Any]:
        """The budget left of ``name`` as JSON (``{}``: no budget)."""
        try:
            return self.store.load_filter(name).remaining().to_dict()  # JSON at the edge
        except BudgetNotFoundError:
            return {}

    def spark_engine(self, table: str) -> Any:
        """The Spark engine over a catalog table (the session opened once, on first use)."""
        from dpsieve.queries.engines.spark_connect import open_spark, spark_source

        if self.settings.spark_url is None:
            raise HTTPException(422, "'spark_table' needs a service started with a Spark URL "
                                     "(DPSIEVE_SPARK_URL); this one has none.")
        with self._spark_lock:
            if not self._spark:
                self._spark.append(open_spark(self.settings.spark_url))
        return spark_source(table, self._spark[0])

    def table_columns(self, src: dict[str, Any], types: Any = None) -> Any:
        """A registration's column types, from metadata and the declared ``types`` only
        (as at registration)."""
        if not src.get("path"):
            return self.spark_engine(str(src["spark_table"])).columns()
        try:
            return file_columns(src["path"], types)
        except Exception as e:  # a file gone or unreadable since its registration
            raise HTTPException(422, "the data set's file could not be read as a table: "
                                     f"{redact_quoted(str(e))}") from None


def service_state(request: Request) -> ServiceState:
    """The app's :class:`ServiceState`."""
    state: ServiceState = request.app.state.service
    return state


async def _service_state(request: Request) -> ServiceState:
    # the dependency: a coroutine, so FastAPI runs it on the event loop (a plain function
    # dependency is sent to the thread pool and back, a hop on every request)
    return service_state(request)


Svc = Annotated[ServiceState, Depends(_service_state)]


def principal(
    request: Request,
    authorization: Annotated[str | None, Header(max_length=512)] = None,
    x_api_key: Annotated[str | None, Header(max_length=512)] = None,
) -> Principal:
    """Who sends the request: the owner (``settings.owner_key``) or an analyst (a key in
    the ledger); 401 without a valid key. Failed attempts are limited per presented key
    hash and per connection address (429; a key hash past its limit is not looked up
    again), never a valid key (:mod:`dpsieve.service.limits`); an analyst past its
    request quota gets 429 before any work."""
    svc = service_state(request)
    key = x_api_key
    if authorization and authorization.lower().startswith("bearer "):
        key = authorization[7:].strip()
    hashed = getattr(request.state, GATE_KEY_HASH, None)  # the gate hashed it already
    h = (hashed[1] if hashed is not None and hashed[0] == key else hash_key(key)) if key \
        else None
    # the owner's hash is compared in constant time; analysts' hashes are looked up
    # by an index in the ledger (no secret is compared byte by byte in Python)
    if h is not None and svc.owner_hash is not None and hmac.compare_digest(h, svc.owner_hash):
        request.state.principal_name = "owner"
        return Principal("owner", "owner")
    blocked = svc.failures.key_blocked(h)  # failed too often: not looked up again
    seen = getattr(request.state, GATE_PRINCIPAL, None)  # the gate looked it up already
    p = None if blocked is not None or h is None else (
        seen[1] if seen is not None and seen[0] == h else svc.keys.principal_for_key(h))
    request.state.key_hash = h  # a wrong key: refused without a lookup (KnownKeys)
    if p is None or p.role == "owner":
        addr = request.client.host if request.client else "unknown"
        wait = svc.failures.failed(h, addr)
        if wait is not None:
            raise Limited("too_many_failed_authentications", "Too many failed "
                          "authentications with this key or from this address; retry in "
                          f"{math.ceil(wait)} s (a valid key is always admitted).", wait)
        raise HTTPException(401, "A valid API key is required (header 'Authorization: "
                                 "Bearer <key>' or 'X-API-Key').")
    request.state.principal_name = p.name
    wait = svc.quotas.take(p.name)
    if wait is not None:
        raise Limited("too_many_requests", f"{p.name!r} sent more than "
                      f"{svc.settings.analyst_request_burst} requests at once or "
                      f"{svc.settings.analyst_requests_per_second:g} a second; retry in "
                      f"{math.ceil(wait)} s.", wait)
    return p


Who = Annotated[Principal, Depends(principal)]


async def owner(p: Who) -> Principal:
    """The principal, if it is the data owner (403 otherwise)."""
    if p.role != "owner":
        raise HTTPException(403, "Only the data owner may do this.")
    return p


Owner = Annotated[Principal, Depends(owner)]
