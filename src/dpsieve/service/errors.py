"""Errors as clean JSON 4xx responses (never a stack trace) and a request-size limit."""

from __future__ import annotations

import json
import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from dpsieve.errors import (
    BudgetExceededError,
    ConcurrencyError,
    DPError,
    IncompatiblePrivacyError,
    LedgerError,
    NeighbourRelationError,
    QueryFailedError,
    UnsupportedError,
    ValidationError,
)
from dpsieve.ledger.base import (
    BudgetNotFoundError,
    IdempotencyKeyReuseError,
    KeyRevokedError,
    LedgerIntegrityError,
    LedgerUnavailableError,
)
from dpsieve.ledger.redact import redact
from dpsieve.release.errors import InstanceTooLargeError

__all__ = ["BodyLimit", "Limited", "QueryLedgerError", "install_error_handlers",
           "redact_quoted"]

log = logging.getLogger("dpsieve.service")


def redact_quoted(message: str, limit: int = 300) -> str:
    """A third-party message (DuckDB, pandas) with every quoted part withheld: such
    messages quote the cell they could not parse, a data value. The first line only."""
    import re

    first = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"'[^']*'|\"[^\"]*\"", "'<withheld>'", first)[:limit]


def _error(status: int, code: str, message: str, *, headers: dict[str, str] | None = None,
           **extra: Any) -> JSONResponse:
    return JSONResponse({"error": code, "message": message, **extra}, status_code=status,
                        headers=headers)


def _plain(v: Any) -> Any:
    """A typed value an error carries (a ``BudgetLeft``, the privacy requested) as its
    JSON (``to_dict()``), made here, at the edge; ``None`` as it is."""
    to_dict = getattr(v, "to_dict", None)
    return to_dict() if callable(to_dict) else v


class Limited(Exception):  # noqa: N818 - an answer (429), not a fault
    """429 ``code``: a limit of :mod:`dpsieve.service.limits` was reached; nothing was
    done. ``retry_after``: seconds until it may succeed."""

    def __init__(self, code: str, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.code, self.message, self.retry_after = code, message, retry_after


class QueryLedgerError(Exception):
    """A query's ledger failed (503) after the server assigned it ``key``. ``charged``
    says what is known: ``"no"`` (before any commit), ``"unknown"`` (the commit's outcome
    was lost) or ``"yes"`` (the spend committed; its answer was not stored or sent). In
    every case a retry with ``Idempotency-Key: key`` is charged at most once."""

    def __init__(self, cause: Exception, key: str, charged: str) -> None:
        super().__init__(str(cause))
        self.cause, self.key, self.charged = cause, key, charged


_CHARGED = {
    "no": "nothing was spent or released",
    "unknown": ("the ledger failed while committing the charge, which may or may not have "
                "been recorded"),
    "yes": ("the query was charged, but its answer could not be stored or sent (retrying "
            "with the key releases it without a second charge)"),
}


def _stale(request: Request) -> None:
    """A ledger fault was seen: the readiness probe asks the ledger again."""
    svc = getattr(request.app.state, "service", None)
    if svc is not None:
        svc.ready.invalidate()


def _query_fault(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, QueryLedgerError)
    _stale(request)
    cause = exc.cause
    if isinstance(cause, LedgerUnavailableError):
        log.warning("ledger unavailable: %s", redact(str(cause)))
        code, what = "ledger_unavailable", ("The ledger cannot write (read-only or full "
                                            "storage)" if cause.cannot_write
                                            else "The ledger is unavailable")
    else:
        code, what = "busy", "The ledger could not be locked in time"
    return _error(503, code, f"{what}; {_CHARGED[exc.charged]}. Retry with the header "
                  f"'Idempotency-Key: {exc.key}': it is charged at most once.",
                  headers={"Retry-After": "5", "Idempotency-Key": exc.key},
                  idempotency_key=exc.key, charged=exc.charged)


def _limited(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Limited)
    from dpsieve.service.limits import retry_after_header

    return _error(429, exc.code, exc.message, headers=retry_after_header(exc.retry_after),
                  retry_after=max(1, math.ceil(exc.retry_after)))


def _dp_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, BudgetExceededError):
        return _error(409, "budget_exceeded", str(exc), remaining=_plain(exc.remaining),
                      requested=_plain(exc.requested), summary=exc.summary)
    if isinstance(exc, IncompatiblePrivacyError):  # more budget would not help: 422
        return _error(422, "incompatible_privacy", str(exc), fits=exc.fits,
                      requested=_plain(exc.requested))
    if isinstance(exc, BudgetNotFoundError):
        return _error(404, "not_found", str(exc))
    if isinstance(exc, IdempotencyKeyReuseError):
        return _error(409, "idempotency_key_reused", str(exc))
    if isinstance(exc, KeyRevokedError):
        return _error(401, "unauthorized", str(exc))
    if isinstance(exc, LedgerUnavailableError):  # no detail: it would name the database
        _stale(request)
        log.warning("ledger unavailable: %s", redact(str(exc)))
        message = ("The ledger cannot write (read-only or full storage)" if exc.cannot_write
                   else "The ledger is unavailable")
        return _error(503, "ledger_unavailable", message + "; nothing was spent or released. "
                      "Retrying later is safe.", headers={"Retry-After": "5"})
    if isinstance(exc, LedgerIntegrityError):  # altered storage: not the client's doing
        log.error("ledger integrity: %s", exc)
        return _error(503, "ledger_integrity", str(exc), dataset=exc.budget_id)
    if isinstance(exc, ConcurrencyError):
        return _error(503, "busy", str(exc) + " Retrying is safe.")
    if isinstance(exc, LedgerError):
        return _error(409, "ledger_conflict", str(exc))
    if isinstance(exc, InstanceTooLargeError):  # refused before any spend
        return _error(422, "instance_too_large", str(exc), estimated_cost=exc.estimated_cost,
                      limit=exc.limit)
    if isinstance(exc, QueryFailedError):  # one text for every failure after a charge
        return _error(422, "query_failed", str(exc))
    if isinstance(exc, ValidationError):
        return _error(422, "invalid_parameter", str(exc), parameter=exc.parameter)
    if isinstance(exc, UnsupportedError | NeighbourRelationError):
        return _error(422, "unsupported", str(exc))
    return _error(400, "bad_request", str(exc))


def _validation(_: Request, exc: Exception) -> JSONResponse:
    errs = exc.errors() if isinstance(exc, RequestValidationError) else []
    if any(e.get("type") == "json_invalid" for e in errs):
        return _error(400, "malformed_json", "The request body is not valid JSON.")
    parts = []
    for e in errs[:10]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body")
        parts.append(f"'{loc}': {e.get('msg', 'invalid')}")
    # the first error's innermost field name, as ValidationError's 'parameter' (a body
    # type error such as "eps": true names 'eps'; the message has every location)
    loc0 = list(errs[0].get("loc", ())) if errs else []
    if loc0 and loc0[0] in ("body", "query", "path", "header", "cookie"):
        loc0 = loc0[1:]  # where the value came from, not its name
    names = [x for x in loc0 if isinstance(x, str)]
    extra: dict[str, Any] = {"parameter": names[-1]} if names else {}
    # one code for every invalid parameter, whichever layer found it: the request models
    # here, or the query layer below (ValidationError above)
    return _error(422, "invalid_parameter", "Invalid request: " + "; ".join(parts) + ".",
                  **extra)


def _http(_: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, StarletteHTTPException):
        return _error(500, "internal_error", "Internal error.")
    codes = {401: "unauthorized", 403: "forbidden", 404: "not_found", 405: "method_not_allowed",
             409: "ledger_conflict", 429: "too_many_failed_authentications"}
    return _error(exc.status_code, codes.get(exc.status_code, "http_error"), str(exc.detail),
                  headers=getattr(exc, "headers", None),
                  ) if exc.status_code >= 400 else JSONResponse({}, exc.status_code)


def _internal(_: Request, exc: Exception) -> JSONResponse:
    import traceback

    log.error("unhandled error: %s", redact("".join(traceback.format_exception(exc))))
    return _error(500, "internal_error", "Internal error; nothing was released.")


def install_error_handlers(app: FastAPI) -> None:
    """Map the dpsieve exception tree and request errors to JSON responses."""
    app.add_exception_handler(DPError, _dp_error)
    app.add_exception_handler(QueryLedgerError, _query_fault)
    app.add_exception_handler(Limited, _limited)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _internal)


class BodyLimit:
    """ASGI middleware: 413 for bodies above ``limit`` bytes (declared or streamed)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    too_big = int(value) > self.limit
                except ValueError:
                    too_big = True
                if too_big:
                    await self._reject(send)
                    return
        seen = 0
        responded = False

        async def guarded_send(msg: Message) -> None:
            if not responded:  # after a 413, whatever the app says is dropped
                await send(msg)

        async def limited() -> Message:
            nonlocal seen, responded
            if responded:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > self.limit:
                    await self._reject(send)
                    responded = True
                    return {"type": "http.disconnect"}
            return msg

        try:
            await self.app(scope, limited, guarded_send)
        except Exception:
            if not responded:
                raise

    async def _reject(self, send: Send) -> None:
        body = json.dumps({"error": "payload_too_large",
                           "message": f"The request body exceeds {self.limit} bytes."}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
