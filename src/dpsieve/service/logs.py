"""Structured request logs: one JSON line per request on the ``dpsieve.service.access``
logger -- method, path, status, latency and the principal's name. Never a key (headers
are not read), a query string (it may hold a ``like`` parameter), a body or a data value.
"""

from __future__ import annotations

import json
import logging
import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RequestLog", "verify_ledger"]

log = logging.getLogger("dpsieve.service.access")


class RequestLog:
    """ASGI middleware writing the access log (see module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 0

        async def watch(msg: Message) -> None:
            nonlocal status
            if msg["type"] == "http.response.start":
                status = int(msg["status"])
            await send(msg)

        try:
            await self.app(scope, receive, watch)
        finally:
            state = scope.get("state") or {}
            log.info(json.dumps({
                "method": scope.get("method"), "path": scope.get("path"),
                "status": status or 500,
                "ms": round((time.perf_counter() - start) * 1000, 2),
                "principal": state.get("principal_name"),
            }))


def verify_ledger(store: object) -> list[str]:
    """Replay and check every budget of ``store`` (its ``verify``, if it has one) before
    the service answers anything; log each budget found altered (the store refuses it
    from then on). Returns those lines."""
    check = getattr(store, "verify", None)
    if not callable(check):
        return []
    lines = [f"budget {c.budget_id!r} fails verification and will not be served: "
             + "; ".join(c.problems) for c in check() if not c.ok]
    for line in lines:
        logging.getLogger("dpsieve.service").error(line)
    return lines
