"""The gate: an ASGI middleware that answers, on the event loop and before any route,
what needs no route -- so a flood of health probes or wrong keys costs the service little
and leaves its workers to valid queries.

* ``GET /healthz``: ``{"status": "ok"}`` (it never consults the ledger).
* ``GET /readyz`` while the readiness cache holds a fresh "ready": ``{"status":
  "ready"}``; otherwise the route probes the ledger (reads only).
* A presented key whose hash is past its failure limit: 429
  ``too_many_failed_authentications`` (it is not looked up again).
* From an address past its failure limit: the key is looked up here (in a worker
  thread: a PostgreSQL round trip never holds the event loop); a wrong one is counted
  and answered 429, a valid one (analyst or owner) goes on to the routes with the
  principal found, so the routes do not look it up a second time. A valid key is never
  refused here.

Everything else passes through unchanged; the routes' own authentication
(:func:`dpsieve.service.deps.principal`) applies the same rules, so the gate changes who
does the work, never the answer.
"""

from __future__ import annotations

import hmac
import json
import math
from typing import Any

import anyio.to_thread
from starlette.types import ASGIApp, Receive, Scope, Send

from dpsieve.service.auth import hash_key

__all__ = ["GATE_KEY_HASH", "GATE_PRINCIPAL", "Gate"]


class Gate:
    """ASGI middleware (see module docstring); ``app.state.service`` is read per request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        svc = getattr(scope["app"].state, "service", None) if "app" in scope else None
        path, method = scope.get("path"), scope.get("method")
        if svc is not None and method == "GET" and path == "/healthz":
            await _json(send, 200, {"status": "ok"})
            return
        if svc is not None and method == "GET" and path == "/readyz" and svc.ready.fresh():
            await _json(send, 200, {"status": "ready"})
            return
        wait = None if svc is None else await _refused_key(svc, scope)
        if wait is not None:
            await _json(send, 429, {
                "error": "too_many_failed_authentications",
                "message": "Too many failed authentications with this key or from this "
                           f"address; retry in {math.ceil(wait)} s (a valid key is always "
                           "admitted).", "retry_after": max(1, math.ceil(wait))},
                [(b"retry-after", str(max(1, math.ceil(wait))).encode())])
            return
        await self.app(scope, receive, send)


def _key(scope: Scope) -> str | None:
    key = None
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return value[7:].decode("latin-1").strip() or None
        if name == b"x-api-key":
            key = value.decode("latin-1")
    return key or None


#: Where the gate leaves a valid key's principal for the routes (``request.state``):
#: ``(key hash, principal)``, read by :func:`dpsieve.service.deps.principal`.
GATE_PRINCIPAL = "gate_principal"
#: Where the gate leaves the presented key and its hash (``request.state``).
GATE_KEY_HASH = "gate_key_hash"


async def _refused_key(svc: Any, scope: Scope) -> float | None:
    """Seconds to wait if this request's key is to be refused here, else None."""
    key = _key(scope)
    if key is None or len(key) > 512:
        return None  # the routes answer: 401, or 422 for an oversized header
    h = hash_key(key)
    scope.setdefault("state", {})[GATE_KEY_HASH] = (key, h)  # not hashed again by the routes
    blocked = svc.failures.key_blocked(h)  # never the owner's: it does not fail
    if blocked is not None:  # failed too often: not looked up again
        svc.failures.failed(h, _addr(scope))
        return float(blocked)
    addr = _addr(scope)
    if svc.failures.by_addr.retry_after(addr) is None:
        return None  # the routes look the key up and answer
    if svc.owner_hash is not None and hmac.compare_digest(h, svc.owner_hash):
        return None
    try:  # known to be no key: no lookup, no thread
        p = None if svc.keys.absent(h) else await anyio.to_thread.run_sync(
            svc.keys.principal_for_key, h)
    except Exception:  # the ledger's fault: the routes answer it (503)
        return None
    if p is not None and p.role != "owner":  # a valid key from a busy address: admitted
        scope.setdefault("state", {})[GATE_PRINCIPAL] = (h, p)
        return None
    wait = svc.failures.failed(h, addr)
    return None if wait is None else float(wait)


def _addr(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "unknown"


async def _json(send: Send, status: int, body: dict[str, Any],
                headers: list[tuple[bytes, bytes]] | None = None) -> None:
    data = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(data)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": data})
