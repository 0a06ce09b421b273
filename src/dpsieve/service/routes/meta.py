"""Liveness, readiness and the budget page (``/ui``: one self-contained file)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from dpsieve.service.deps import Svc

__all__ = ["PAGE_HEADERS", "router"]

router = APIRouter()

#: The budget page is one self-contained file (inline style and script, data fetched from
#: this origin): nothing else may load, it may not be framed, types are not sniffed.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
        "connect-src 'self'; img-src 'self' data:; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@router.get("/healthz", tags=["meta"])
def healthz() -> dict[str, str]:
    """Liveness: the process answers (the ledger is not consulted)."""
    return {"status": "ok"}


@router.get("/readyz", tags=["meta"])
def readyz(svc: Svc) -> dict[str, str]:
    """Readiness, without writing: the ledger answers and would take a write (503
    ledger_unavailable if not); asked at most once a second, whatever the probe rate."""
    svc.ready.check()
    return {"status": "ready"}


@router.get("/ui", response_class=HTMLResponse, include_in_schema=False)
def page() -> HTMLResponse:
    html = resources.files("dpsieve.service").joinpath("static/index.html").read_text()
    return HTMLResponse(html, headers=PAGE_HEADERS)
